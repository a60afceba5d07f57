import Foundation

/// What an installed app tells Handoff about itself: who it is, which team signed it,
/// which activities it can continue and which web domains it claims.
///
/// A manifest comes from the app's `Info.plist` and, optionally, its entitlements, so that
/// an app written for Apple platforms can be described with the files it already has.
/// Routing an incoming activity to an app (see `ActivityRouter`) only needs this value.
public struct AppManifest: Sendable, Hashable {
    /// `CFBundleIdentifier`, for example `com.example.editor`.
    public var bundleIdentifier: String
    /// `CFBundleExecutable`: the program to launch, when the app names one.
    public var executable: String?
    /// The developer team that signed the app. Activities only continue between apps of the same team.
    public var teamIdentifier: String?
    /// `NSUserActivityTypes`, in the order the app lists them.
    public var activityTypes: [String]
    /// `CFBundleDocumentTypes`, in the order the app lists them.
    public var documentTypes: [DocumentType]
    /// Every entry of the `com.apple.developer.associated-domains` entitlement, whatever its service.
    public var associatedDomains: [AssociatedDomain]

    /// Describes an app directly, without reading any file.
    public init(
        bundleIdentifier: String,
        executable: String? = nil,
        teamIdentifier: String? = nil,
        activityTypes: [String] = [],
        documentTypes: [DocumentType] = [],
        associatedDomains: [AssociatedDomain] = []
    ) {
        self.bundleIdentifier = bundleIdentifier
        self.executable = executable
        self.teamIdentifier = teamIdentifier
        self.activityTypes = activityTypes
        self.documentTypes = documentTypes
        self.associatedDomains = associatedDomains
    }

    /// Reads a manifest from the bytes of an `Info.plist` (XML or binary) and, when the app
    /// has one, its entitlements plist.
    ///
    /// The names only appear in errors, so pass whatever helps a person find the file.
    /// Keys this type does not know are ignored.
    public init(
        infoPlist: Data,
        infoPlistName: String = "Info.plist",
        entitlements: Data? = nil,
        entitlementsName: String = "entitlements"
    ) throws(ManifestError) {
        let info = try PlistDictionary(reading: infoPlist, file: infoPlistName)

        guard let bundleIdentifier = try info.string(InfoKey.bundleIdentifier) else {
            throw info.error(
                key: InfoKey.bundleIdentifier,
                "missing; every app needs a bundle identifier such as 'com.example.editor'"
            )
        }
        guard !bundleIdentifier.isBlank else {
            throw info.error(
                key: InfoKey.bundleIdentifier,
                "is empty; every app needs a bundle identifier such as 'com.example.editor'"
            )
        }
        self.bundleIdentifier = bundleIdentifier
        self.executable = try info.string(InfoKey.executable)
        self.activityTypes = try info.nonEmptyStrings(InfoKey.activityTypes) ?? []

        var documentTypes: [DocumentType] = []
        for entry in try info.dictionaries(InfoKey.documentTypes) ?? [] {
            documentTypes.append(try DocumentType(entry))
        }
        self.documentTypes = documentTypes

        if let entitlements {
            let granted = try PlistDictionary(reading: entitlements, file: entitlementsName)
            self.teamIdentifier = try Self.teamIdentifier(in: granted)
            self.associatedDomains = try Self.associatedDomains(in: granted)
        } else {
            self.teamIdentifier = nil
            self.associatedDomains = []
        }
    }

    /// Reads `Info.plist` from an app directory, plus its entitlements when there are any:
    /// `Entitlements.plist` or the one file ending in `.entitlements`.
    ///
    /// An app without entitlements is fine: it has no team and claims no domains, so it can
    /// only be chosen as a default browser. Two entitlements files are an error, because
    /// picking one would silently ignore the other.
    public init(directory: URL) throws(ManifestError) {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ManifestError(file: directory.path, key: nil, problem: "no such directory; expected an app directory holding an Info.plist")
        }

        let infoURL = directory.appendingPathComponent("Info.plist")
        guard fileManager.fileExists(atPath: infoURL.path) else {
            throw ManifestError(file: infoURL.path, key: nil, problem: "no such file; every app directory needs an Info.plist")
        }
        let info = try Self.contents(of: infoURL)

        let names: [String]
        do {
            names = try fileManager.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw ManifestError(file: directory.path, key: nil, problem: "cannot list the directory: \(error.localizedDescription)")
        }
        // Hidden files such as "._App.entitlements" are copying leftovers, not entitlements.
        let candidates = names
            .filter { !$0.hasPrefix(".") && ($0 == "Entitlements.plist" || $0.hasSuffix(".entitlements")) }
            .sorted()
            .map { directory.appendingPathComponent($0) }
        if candidates.count > 1 {
            let listed = candidates.map { "'\($0.lastPathComponent)'" }.joined(separator: " and ")
            throw ManifestError(
                file: directory.path,
                key: nil,
                problem: "found \(listed); keep a single entitlements file so it is clear which one applies"
            )
        }

        var entitlements: Data?
        if let entitlementsURL = candidates.first {
            entitlements = try Self.contents(of: entitlementsURL)
        }
        try self.init(
            infoPlist: info,
            infoPlistName: infoURL.path,
            entitlements: entitlements,
            entitlementsName: candidates.first?.path ?? "entitlements"
        )
    }

    /// Every activity type this app can continue: `NSUserActivityTypes` plus the
    /// `NSUbiquitousDocumentUserActivityType` of each document type, which document-based
    /// apps need not repeat in `NSUserActivityTypes`.
    public var continuableActivityTypes: Set<String> {
        Set(activityTypes).union(documentTypes.compactMap(\.ubiquitousActivityType))
    }

    /// `TEAMID.bundle.identifier`, the form a site's `apple-app-site-association` file uses
    /// to approve an app; `nil` while the team is unknown.
    public var applicationIdentifier: String? {
        guard let teamIdentifier, !teamIdentifier.isBlank else { return nil }
        return "\(teamIdentifier).\(bundleIdentifier)"
    }

    /// The activity type this app's documents of the given kind hand off as, if any.
    ///
    /// `contentType` may be a uniform type identifier (`LSItemContentTypes`), a file name
    /// extension (`CFBundleTypeExtensions`, with or without the leading dot) or a document
    /// type's `CFBundleTypeName`, tried in that order across all document types.
    /// Identifiers and extensions compare case-insensitively, as on Apple platforms;
    /// names compare exactly.
    public func documentActivityType(forContentType contentType: String) -> String? {
        let handingOff = documentTypes.filter { $0.ubiquitousActivityType != nil }
        let lowered = contentType.lowercased()
        let asExtension = lowered.hasPrefix(".") ? String(lowered.dropFirst()) : lowered

        let match =
            handingOff.first { $0.contentTypes.contains { $0.lowercased() == lowered } }
            ?? handingOff.first { $0.extensions.contains { $0.lowercased() == asExtension } }
            ?? handingOff.first { $0.name == contentType }
        return match?.ubiquitousActivityType
    }
}

// MARK: - Reading the files

extension AppManifest {
    private static func contents(of url: URL) throws(ManifestError) -> Data {
        do {
            return try Data(contentsOf: url)
        } catch {
            throw ManifestError(file: url.path, key: nil, problem: "cannot read the file: \(error.localizedDescription)")
        }
    }

    /// The team comes from its own entitlement when present; otherwise it is the prefix of
    /// the application identifier (`TEAMID.bundle.identifier`).
    private static func teamIdentifier(in entitlements: PlistDictionary) throws(ManifestError) -> String? {
        if let team = try entitlements.string(EntitlementKey.teamIdentifier) {
            guard !team.isBlank else {
                throw entitlements.error(key: EntitlementKey.teamIdentifier, "is empty; expected a team identifier such as 'ABCDE12345'")
            }
            return team
        }
        for key in EntitlementKey.applicationIdentifiers {
            guard let applicationIdentifier = try entitlements.string(key) else { continue }
            guard let dot = applicationIdentifier.firstIndex(of: "."), dot != applicationIdentifier.startIndex else {
                throw entitlements.error(
                    key: key,
                    "'\(applicationIdentifier)' has no team prefix; expected 'TEAMID.bundle.identifier'"
                )
            }
            return String(applicationIdentifier[..<dot])
        }
        return nil
    }

    private static func associatedDomains(in entitlements: PlistDictionary) throws(ManifestError) -> [AssociatedDomain] {
        let key = EntitlementKey.associatedDomains
        var domains: [AssociatedDomain] = []
        for (index, entry) in (try entitlements.strings(key) ?? []).enumerated() {
            do throws(ManifestError) {
                domains.append(try AssociatedDomain(parsing: entry))
            } catch {
                throw entitlements.error(key: "\(key)[\(index)]", error.problem)
            }
        }
        return domains
    }
}

private enum InfoKey {
    static let bundleIdentifier = "CFBundleIdentifier"
    static let executable = "CFBundleExecutable"
    static let activityTypes = "NSUserActivityTypes"
    static let documentTypes = "CFBundleDocumentTypes"
    static let documentTypeName = "CFBundleTypeName"
    static let contentTypes = "LSItemContentTypes"
    static let extensions = "CFBundleTypeExtensions"
    static let role = "CFBundleTypeRole"
    static let ubiquitousActivityType = "NSUbiquitousDocumentUserActivityType"
}

private enum EntitlementKey {
    static let teamIdentifier = "com.apple.developer.team-identifier"
    /// iOS spells it without the prefix, macOS with it.
    static let applicationIdentifiers = ["application-identifier", "com.apple.application-identifier"]
    static let associatedDomains = "com.apple.developer.associated-domains"
}

// MARK: - DocumentType

/// One entry of `CFBundleDocumentTypes`: a kind of document the app opens and, for
/// document-based apps, the activity type its open documents hand off as.
public struct DocumentType: Sendable, Hashable {
    /// `CFBundleTypeName`, for example `Markdown Document`.
    public var name: String?
    /// `LSItemContentTypes`: uniform type identifiers such as `net.daringfireball.markdown`.
    public var contentTypes: [String]
    /// `CFBundleTypeExtensions`: file name extensions without the dot, such as `md`.
    public var extensions: [String]
    /// `CFBundleTypeRole`: `Editor`, `Viewer`, `Shell` or `None`.
    public var role: String?
    /// `NSUbiquitousDocumentUserActivityType`: the activity type of an open document of this kind.
    public var ubiquitousActivityType: String?

    /// Describes a document type directly, without reading any file.
    public init(
        name: String? = nil,
        contentTypes: [String] = [],
        extensions: [String] = [],
        role: String? = nil,
        ubiquitousActivityType: String? = nil
    ) {
        self.name = name
        self.contentTypes = contentTypes
        self.extensions = extensions
        self.role = role
        self.ubiquitousActivityType = ubiquitousActivityType
    }

    fileprivate init(_ entry: PlistDictionary) throws(ManifestError) {
        self.name = try entry.string(InfoKey.documentTypeName)
        self.contentTypes = try entry.nonEmptyStrings(InfoKey.contentTypes) ?? []
        self.extensions = try entry.nonEmptyStrings(InfoKey.extensions) ?? []
        self.role = try entry.string(InfoKey.role)
        let activityType = try entry.string(InfoKey.ubiquitousActivityType)
        if let activityType, activityType.isBlank {
            throw entry.error(key: InfoKey.ubiquitousActivityType, "is empty; expected an activity type such as 'com.example.editor.editing'")
        }
        self.ubiquitousActivityType = activityType
    }
}

// MARK: - AssociatedDomain

/// One entry of the `com.apple.developer.associated-domains` entitlement, such as
/// `activitycontinuation:example.com` or `applinks:*.example.com?mode=developer`.
///
/// Handoff from a web browser only considers entries whose service is `activitycontinuation`.
public struct AssociatedDomain: Sendable, Hashable {
    /// The service before the first colon: `activitycontinuation`, `applinks`, `webcredentials`…
    public var service: String
    /// The claimed host, lowercased, without a `*.` prefix, port, `?mode=` suffix or trailing dot.
    public var host: String
    /// The entry was `*.host`: it claims every subdomain of `host` but, as on Apple
    /// platforms, not `host` itself.
    public var includesSubdomains: Bool

    /// Parses an entitlement entry of the form `service:host`, where the host may start with
    /// `*.`, carry a port (`host:8443`, which is dropped) and end with `?mode=developer`
    /// or another mode (also dropped).
    ///
    /// Errors name the file `entitlements`; `AppManifest` replaces that with the file it
    /// read and the entry's index.
    public init(parsing entry: String) throws(ManifestError) {
        func invalid(_ problem: String) -> ManifestError {
            ManifestError(file: "entitlements", key: EntitlementKey.associatedDomains, problem: problem)
        }
        let example = "write it as 'service:host', for example 'activitycontinuation:example.com'"

        guard let colon = entry.firstIndex(of: ":") else {
            throw invalid("entry '\(entry)' has no service; \(example)")
        }
        let service = String(entry[..<colon])
        guard !service.isBlank else {
            throw invalid("entry '\(entry)' has an empty service; \(example)")
        }

        var rest = Substring(entry[entry.index(after: colon)...])
        if let question = rest.firstIndex(of: "?") {
            guard rest[question...].hasPrefix("?mode=") else {
                throw invalid("entry '\(entry)' ends with '\(rest[question...])'; the only suffix allowed is '?mode=…', such as '?mode=developer'")
            }
            rest = rest[..<question]
        }
        if let portColon = rest.lastIndex(of: ":") {
            let port = rest[rest.index(after: portColon)...]
            guard !port.isEmpty, port.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw invalid("entry '\(entry)' has port '\(port)'; a port must be a number, as in 'example.com:8443'")
            }
            rest = rest[..<portColon]
        }

        var includesSubdomains = false
        if rest.hasPrefix("*.") {
            includesSubdomains = true
            rest = rest.dropFirst(2)
        }
        let host = Self.normalize(host: rest)
        guard !host.isEmpty else {
            throw invalid("entry '\(entry)' has an empty host; \(example)")
        }
        if let bad = host.first(where: { $0.isWhitespace || "/*@#?".contains($0) }) {
            throw invalid("entry '\(entry)' has '\(bad)' in its host; expected a domain name such as 'example.com' or '*.example.com'")
        }

        self.service = service
        self.host = host
        self.includesSubdomains = includesSubdomains
    }

    /// Whether this entry claims `host`, compared case-insensitively and ignoring a trailing dot.
    /// A `*.example.com` entry matches `a.example.com` and `a.b.example.com` but not `example.com`.
    public func matches(host candidate: String) -> Bool {
        let candidate = Self.normalize(host: candidate)
        guard !candidate.isEmpty else { return false }
        if includesSubdomains {
            return candidate.hasSuffix("." + host)
        }
        return candidate == host
    }

    /// Lowercases a host name and drops one trailing dot, so `Example.COM.` and `example.com` compare equal.
    static func normalize(host: some StringProtocol) -> String {
        let lowered = host.lowercased()
        return lowered.hasSuffix(".") ? String(lowered.dropLast()) : lowered
    }
}


// MARK: - ManifestError

/// A manifest file that cannot be used, with the file and key at fault and what is wrong,
/// for example `Info.plist: key 'NSUserActivityTypes': expected an array of strings, found a string`.
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

// MARK: - Typed access to a decoded plist

/// A decoded plist dictionary that reads values of the expected type or throws a
/// `ManifestError` naming the file and the full key path.
///
/// Not `Sendable`: it holds the `Any` values Foundation decodes and never leaves the
/// initializer that reads it.
private struct PlistDictionary {
    let values: [String: Any]
    let file: String
    /// Prefix for keys of nested dictionaries, such as `CFBundleDocumentTypes[0].`.
    let keyPath: String

    init(reading data: Data, file: String) throws(ManifestError) {
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
        self.init(values: values, file: file, keyPath: "")
    }

    private init(values: [String: Any], file: String, keyPath: String) {
        self.values = values
        self.file = file
        self.keyPath = keyPath
    }

    func error(key: String, _ problem: String) -> ManifestError {
        ManifestError(file: file, key: keyPath + key, problem: problem)
    }

    func string(_ key: String) throws(ManifestError) -> String? {
        guard let value = values[key] else { return nil }
        guard let string = value as? String else {
            throw error(key: key, "expected a string, found \(describeKind(of: value))")
        }
        return string
    }

    func strings(_ key: String) throws(ManifestError) -> [String]? {
        guard let items = try array(key, of: "strings") else { return nil }
        var strings: [String] = []
        for (index, item) in items.enumerated() {
            guard let string = item as? String else {
                throw error(key: "\(key)[\(index)]", "expected a string, found \(describeKind(of: item))")
            }
            strings.append(string)
        }
        return strings
    }

    func nonEmptyStrings(_ key: String) throws(ManifestError) -> [String]? {
        guard let items = try array(key, of: "strings") else { return nil }
        var strings: [String] = []
        for (index, item) in items.enumerated() {
            guard let string = item as? String, !string.isBlank else {
                throw error(key: "\(key)[\(index)]", "expected a non-empty string, found \(describeKind(of: item))")
            }
            strings.append(string)
        }
        return strings
    }

    func dictionaries(_ key: String) throws(ManifestError) -> [PlistDictionary]? {
        guard let items = try array(key, of: "dictionaries") else { return nil }
        var dictionaries: [PlistDictionary] = []
        for (index, item) in items.enumerated() {
            let itemKey = "\(key)[\(index)]"
            guard let values = item as? [String: Any] else {
                throw error(key: itemKey, "expected a dictionary, found \(describeKind(of: item))")
            }
            dictionaries.append(PlistDictionary(values: values, file: file, keyPath: keyPath + itemKey + "."))
        }
        return dictionaries
    }

    private func array(_ key: String, of elements: String) throws(ManifestError) -> [Any]? {
        guard let value = values[key] else { return nil }
        guard let items = value as? [Any] else {
            throw error(key: key, "expected an array of \(elements), found \(describeKind(of: value))")
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
