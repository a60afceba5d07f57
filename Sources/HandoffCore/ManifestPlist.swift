import Foundation

// MARK: - ManifestError

/// A manifest file that cannot be used, with the file and key at fault and what is wrong,
/// for example `Info.plist: key 'CFBundleIdentifier': expected a string, found a number`.
public struct ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file name or path given when reading.
    public var file: String
    /// The key at fault, with an index for array items (`CFBundleDocumentTypes[1].LSItemContentTypes`),
    /// or `nil` when the whole file is at fault.
    public var key: String?
    /// What is wrong and, where it helps, what to write instead.
    public var problem: String

    public init(file: String, key: String?, problem: String) {
        self.file = file
        self.key = key
        self.problem = problem
    }

    public var description: String {
        if let key {
            return "\(file): key '\(key)': \(problem)"
        }
        return "\(file): \(problem)"
    }
}

/// A key of a manifest file that was malformed and ignored, as Apple platforms ignore it,
/// while the rest of the file was read: `Info.plist: key 'NSUserActivityTypes': expected an
/// array of strings, found a dictionary; ignored`.
public struct ManifestWarning: Sendable, Hashable, CustomStringConvertible {
    /// The file name or path given when reading.
    public var file: String
    /// The key ignored, with an index for one array item.
    public var key: String
    /// What is wrong with it.
    public var problem: String

    public init(file: String, key: String, problem: String) {
        self.file = file
        self.key = key
        self.problem = problem
    }

    public var description: String { "\(file): key '\(key)': \(problem); ignored" }
}

// MARK: - Typed access to a decoded plist

/// The warnings of one reading, shared by the dictionaries nested in it.
final class ManifestWarnings {
    var list: [ManifestWarning] = []
}

/// A decoded plist dictionary that reads values of the expected type, expanding build
/// settings in every string (`$(PRODUCT_BUNDLE_IDENTIFIER)`).
///
/// Two kinds of reads: `required…` ones throw a `ManifestError` naming the file and full key
/// path, for what an app cannot run without; the others note a `ManifestWarning` and give
/// `nil` (or skip the one bad item of an array), as Apple platforms ignore a malformed key.
/// A reference to a build setting without a value always throws: a hole in an identifier
/// would route activities to the wrong app.
///
/// Not `Sendable`: it holds the `Any` values Foundation decodes and never leaves the
/// initializer that reads it.
struct PlistDictionary {
    let values: [String: Any]
    let file: String
    /// Prefix for keys of nested dictionaries, such as `CFBundleDocumentTypes[0].`.
    let keyPath: String
    let settings: BuildSettings
    let warnings: ManifestWarnings

    init(reading data: Data, file: String, settings: BuildSettings, warnings: ManifestWarnings) throws(ManifestError) {
        guard !data.isEmpty else {
            throw ManifestError(file: file, key: nil, problem: "the file is empty; expected an XML or binary property list")
        }
        if let problem = BinaryPlistCheck.problem(in: data) {
            throw ManifestError(file: file, key: nil, problem: "not a property list this reads: \(problem)")
        }
        let decoded: Any
        do {
            decoded = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw ManifestError(
                file: file,
                key: nil,
                problem: "not a property list; expected XML or binary plist" + (detail.map { " (\($0))" } ?? "")
            )
        }
        guard let values = decoded as? [String: Any] else {
            throw ManifestError(file: file, key: nil, problem: "expected a dictionary at the top level, found \(describeKind(of: decoded))")
        }
        self.init(values: values, file: file, keyPath: "", settings: settings, warnings: warnings)
    }

    private init(values: [String: Any], file: String, keyPath: String, settings: BuildSettings, warnings: ManifestWarnings) {
        self.values = values
        self.file = file
        self.keyPath = keyPath
        self.settings = settings
        self.warnings = warnings
    }

    func error(key: String, _ problem: String) -> ManifestError {
        ManifestError(file: file, key: keyPath + key, problem: problem)
    }

    func warn(key: String, _ problem: String) {
        warnings.list.append(ManifestWarning(file: file, key: keyPath + key, problem: problem))
    }

    /// `text` with its build settings expanded; an unset one refuses the file.
    func expand(_ text: String, key: String) throws(ManifestError) -> String {
        do {
            return try settings.expand(text)
        } catch {
            switch error {
            case .unset(let name):
                throw self.error(
                    key: key,
                    "'\(text)' uses build setting \(name), which has no value: \(BuildSettings.hint(for: name)), with 'handoff apps sign --setting \(name)=VALUE' or in an .xcconfig file ('--xcconfig FILE'); see docs/porting.md"
                )
            case .invalid(let problem):
                throw self.error(key: key, problem)
            }
        }
    }

    /// A string an app cannot run without: a wrong type refuses the file.
    func requiredString(_ key: String) throws(ManifestError) -> String? {
        guard let value = values[key] else { return nil }
        guard let string = value as? String else {
            throw error(key: key, "expected a string, found \(describeKind(of: value))")
        }
        return try expand(string, key: key)
    }

    /// A string, or `nil` with a warning when it is of another type (or blank, with `nonEmpty`).
    func string(_ key: String, nonEmpty: Bool = false, example: String? = nil) throws(ManifestError) -> String? {
        guard let value = values[key] else { return nil }
        guard let string = value as? String else {
            warn(key: key, "expected a string, found \(describeKind(of: value))")
            return nil
        }
        let expanded = try expand(string, key: key)
        if nonEmpty, expanded.isBlank {
            warn(key: key, "is empty" + (example.map { "; expected \($0)" } ?? ""))
            return nil
        }
        return expanded
    }

    /// An array of strings; a wrong type gives `nil` with a warning, and each item that is
    /// not a string (or is blank, with `nonEmpty`) is skipped with a warning.
    func strings(_ key: String, nonEmpty: Bool = false) throws(ManifestError) -> [String]? {
        guard let items = array(key, of: "strings") else { return nil }
        var strings: [String] = []
        for (index, item) in items.enumerated() {
            let itemKey = "\(key)[\(index)]"
            guard let string = item as? String else {
                warn(key: itemKey, "expected a\(nonEmpty ? " non-empty" : "") string, found \(describeKind(of: item))")
                continue
            }
            let expanded = try expand(string, key: itemKey)
            if nonEmpty, expanded.isBlank {
                warn(key: itemKey, "expected a non-empty string, found an empty string")
                continue
            }
            strings.append(expanded)
        }
        return strings
    }

    /// A nested dictionary, or `nil` with a warning when the value is of another type.
    func dictionary(_ key: String) -> PlistDictionary? {
        guard let value = values[key] else { return nil }
        guard let nested = value as? [String: Any] else {
            warn(key: key, "expected a dictionary, found \(describeKind(of: value))")
            return nil
        }
        return PlistDictionary(values: nested, file: file, keyPath: keyPath + key + ".", settings: settings, warnings: warnings)
    }

    /// A boolean, or `nil` with a warning when the value is of another type.
    func bool(_ key: String) -> Bool? {
        guard let value = values[key] else { return nil }
        guard let number = value as? NSNumber, String(cString: number.objCType) == "c" else {
            warn(key: key, "expected a boolean, found \(describeKind(of: value))")
            return nil
        }
        return number.boolValue
    }

    /// An array of dictionaries; a wrong type gives `nil`, an item that is not a dictionary
    /// is skipped, each with a warning.
    func dictionaries(_ key: String) -> [PlistDictionary]? {
        guard let items = array(key, of: "dictionaries") else { return nil }
        var dictionaries: [PlistDictionary] = []
        for (index, item) in items.enumerated() {
            let itemKey = "\(key)[\(index)]"
            guard let values = item as? [String: Any] else {
                warn(key: itemKey, "expected a dictionary, found \(describeKind(of: item))")
                continue
            }
            dictionaries.append(PlistDictionary(values: values, file: file, keyPath: keyPath + itemKey + ".", settings: settings, warnings: warnings))
        }
        return dictionaries
    }

    private func array(_ key: String, of elements: String) -> [Any]? {
        guard let value = values[key] else { return nil }
        guard let items = value as? [Any] else {
            warn(key: key, "expected an array of \(elements), found \(describeKind(of: value))")
            return nil
        }
        return items
    }
}

/// Names the kind of a decoded plist value for error messages: "a string", "an array"…
private func describeKind(of value: Any) -> String {
    switch value {
    case let string as String:
        return string.isBlank ? "an empty string" : "a string"
    case is [Any]:
        return "an array"
    case is [AnyHashable: Any]:
        return "a dictionary"
    case is Data:
        return "data"
    case is Date:
        return "a date"
    case let number as NSNumber:
        // Foundation decodes <true/> and <false/> as numbers of Objective-C type "c".
        return String(cString: number.objCType) == "c" ? "a boolean" : "a number"
    default:
        return "a value of type \(type(of: value))"
    }
}

extension StringProtocol {
    /// Empty or only whitespace: a value a person left blank.
    var isBlank: Bool {
        allSatisfy(\.isWhitespace)
    }
}

/// Looks over a binary property list's object table before Foundation reads it: the Linux
/// Foundation crashes on some kinds of object (a set, found by fuzzing), which no manifest
/// needs. Only the kinds a manifest can hold pass: booleans, integers, reals, dates, data,
/// strings, arrays and dictionaries. Anything that is not a binary plist passes unchanged.
enum BinaryPlistCheck {
    static func problem(in data: Data) -> String? {
        let bytes = [UInt8](data)
        guard bytes.starts(with: Array("bplist0".utf8)) else { return nil }
        guard bytes.count >= 8 + 32 else { return "a binary plist too short to hold its trailer" }
        let trailer = bytes.count - 32
        let offsetSize = Int(bytes[trailer + 6])
        guard (1...8).contains(offsetSize), (1...8).contains(Int(bytes[trailer + 7])) else {
            return "a binary plist whose trailer gives impossible sizes"
        }
        func integer(at start: Int, size: Int) -> Int? {
            guard start >= 0, size <= 8, start + size <= bytes.count else { return nil }
            var value: UInt64 = 0
            for index in start..<(start + size) { value = value << 8 | UInt64(bytes[index]) }
            return value > UInt64(Int.max) ? nil : Int(value)
        }
        guard let count = integer(at: trailer + 8, size: 8), let tableStart = integer(at: trailer + 24, size: 8),
            count <= bytes.count, tableStart >= 8, tableStart <= trailer,
            count.multipliedReportingOverflow(by: offsetSize).partialValue <= trailer - tableStart
        else { return "a binary plist whose object table does not fit in it" }
        for index in 0..<count {
            guard let offset = integer(at: tableStart + index * offsetSize, size: offsetSize), offset >= 8, offset < tableStart else {
                return "a binary plist object \(index) lies outside the objects"
            }
            let marker = bytes[offset]
            switch marker >> 4 {
            case 0x0 where marker == 0x00 || marker == 0x08 || marker == 0x09:
                continue  // null, false, true
            case 0x1, 0x2, 0x4, 0x5, 0x6, 0xA, 0xD:
                continue  // integer, real, data, ASCII and UTF-16 strings, array, dictionary
            case 0x3 where marker == 0x33:
                continue  // date
            default:
                return "a binary plist holds an object of kind 0x\(String(marker, radix: 16)), which no manifest uses"
            }
        }
        return nil
    }
}
