import Foundation

/// Xcode's build settings, as an app's `Info.plist` and entitlements refer to them:
/// `$(PRODUCT_BUNDLE_IDENTIFIER)`, `${EXECUTABLE_NAME}`, `$(PRODUCT_NAME:rfc1034identifier)`.
///
/// Xcode expands these when it builds an app; an app ported from Apple platforms brings its
/// files unexpanded, so Handoff expands them from the values a developer gives: `NAME=VALUE`
/// pairs and `.xcconfig` files (with `#include` and `$(inherited)`). See docs/porting.md.
///
/// A few settings Xcode always defines have the same defaults here (`EXECUTABLE_NAME` from
/// `PRODUCT_NAME`, `AppIdentifierPrefix` from `DEVELOPMENT_TEAM`, …); any other variable
/// without a value is an error naming it, never an empty string as Xcode would make it,
/// because an identifier with a hole in it would route activities to the wrong app.
public struct BuildSettings: Sendable, Hashable {
    /// Each setting's value as written, with `$(inherited)` already replaced and other
    /// references left to `expand(_:)`.
    public private(set) var values: [String: String]

    /// No settings.
    public init() {
        values = [:]
    }

    /// The given settings, as if each were a line `NAME = VALUE`. Names must be build
    /// setting names (letters, digits, `_`, not starting with a digit).
    public init(_ values: [String: String]) throws(BuildSettingsError) {
        self.values = [:]
        for (name, value) in values.sorted(by: { $0.key < $1.key }) {
            try set(name, value, source: "setting \(name)")
        }
    }

    /// The value of `name` as written, or `nil` when it is not set (defaults not included).
    public subscript(name: String) -> String? {
        values[name]
    }

    /// Sets `name` to `value`. `$(inherited)` in the value stands for its value so far.
    public mutating func set(_ name: String, _ value: String) throws(BuildSettingsError) {
        try set(name, value, source: "setting \(name)")
    }

    /// Applies one `NAME=VALUE` as given on a command line (`--setting NAME=VALUE`).
    public mutating func assign(_ text: String) throws(BuildSettingsError) {
        guard let equals = text.firstIndex(of: "=") else {
            throw BuildSettingsError(source: "--setting \(text)", problem: "expected NAME=VALUE, such as PRODUCT_BUNDLE_IDENTIFIER=com.example.editor")
        }
        let name = text[..<equals].trimmingCharacters(in: .whitespaces)
        let value = text[text.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        try set(name, value, source: "--setting \(text)")
    }

    /// Reads an `.xcconfig` file over these settings, as Xcode layers a configuration file
    /// over the project's: later assignments win, `$(inherited)` is the value before,
    /// `#include "other.xcconfig"` reads a file relative to this one (`#include?` one that
    /// may be missing), `//` starts a comment, and `NAME[sdk=…][arch=…][config=…] = VALUE`
    /// applies when its conditions match (see `conditionMatches`).
    ///
    /// With `confinedTo`, every included file must lie inside that folder (an installed app's
    /// settings never read a file outside the app).
    public mutating func read(xcconfig url: URL, confinedTo folder: URL? = nil) throws(BuildSettingsError) {
        var state = ReadState()
        let confinement = folder.map { $0.standardizedFileURL.path + "/" }
        try read(xcconfig: url.standardizedFileURL, including: [], confinement: confinement, state: &state)
    }

    /// Reads `.xcconfig` text; `file` names it in errors, and `#include` paths are relative to
    /// `directory`.
    public mutating func read(xcconfig text: String, file: String, directory: URL) throws(BuildSettingsError) {
        var state = ReadState()
        try read(text: text, file: file, directory: directory, including: [], confinement: nil, state: &state)
    }

    /// These settings as `.xcconfig` text that reads back as the same values, sorted by name.
    /// What reading would change is guarded with `$()`, which expands to nothing: `//` inside a
    /// value is written `/$()/` (else a comment), and white space at either end, or a `;` at
    /// the end, gets a `$()` beside it (else trimmed). (The fuzzer found the white space: a
    /// `$(inherited) -x` over nothing is ` -x`.)
    public func xcconfigText(header: String? = nil) -> String {
        var text = header.map { $0.split(separator: "\n", omittingEmptySubsequences: false).map { "// \($0)\n" }.joined() } ?? ""
        for (name, value) in values.sorted(by: { $0.key < $1.key }) {
            var written = ""
            for character in value {
                if character == "/", written.last == "/" { written += "$()" }
                written.append(character)
            }
            if written.first == " " || written.first == "\t" { written = "$()" + written }
            if written.last == " " || written.last == "\t" || written.last == ";" { written += "$()" }
            text += "\(name) = \(written)\n"
        }
        return text
    }

    // MARK: Expanding

    /// Replaces every `$(NAME)` and `${NAME}` in `text` with the setting's expanded value,
    /// applying modifiers such as `:rfc1034identifier`; `$()` is empty. Text without a
    /// reference is returned unchanged.
    ///
    /// Throws `.unset` naming the first variable without a value, `.invalid` for a reference
    /// that cannot be read (an unknown modifier, a setting that refers to itself).
    public func expand(_ text: String) throws(BuildSettingExpansionError) -> String {
        guard text.contains("$") else { return text }
        var state = ExpansionState()
        return try expand(Substring(text), state: &state)
    }

    /// The value `name` expands to: set, or one of the defaults Xcode defines; `nil` when neither.
    public func value(of name: String) throws(BuildSettingExpansionError) -> String? {
        var state = ExpansionState()
        return try lookup(name, state: &state)
    }

    /// Whether a conditional assignment's conditions all hold: `sdk` against `SDK_NAME` (never,
    /// when it is not set, unless the pattern is `*`), `arch` against `CURRENT_ARCH` (this
    /// machine's, as Apple spells it: `arm64`, `x86_64`), `config` against `CONFIGURATION`
    /// (`Release` unless set). Patterns are shell globs, as in Xcode. Other keys never hold.
    public func conditionMatches(_ conditions: [(key: String, pattern: String)]) -> Bool {
        conditions.allSatisfy { condition in
            let subject: String?
            switch condition.key {
            case "sdk": subject = try? value(of: "SDK_NAME")
            case "arch": subject = try? value(of: "CURRENT_ARCH")
            case "config": subject = try? value(of: "CONFIGURATION")
            default: return false
            }
            guard let subject else { return condition.pattern == "*" }
            return fnmatch(condition.pattern, subject, 0) == 0
        }
    }

    /// What a person is told to do about an unset variable: which setting to give.
    public static func hint(for name: String) -> String {
        switch name {
        case "EXECUTABLE_NAME": return "give EXECUTABLE_NAME, or PRODUCT_NAME, from which Xcode makes it"
        case "PRODUCT_NAME": return "give PRODUCT_NAME, or TARGET_NAME, from which Xcode makes it"
        case "AppIdentifierPrefix", "TeamIdentifierPrefix": return "give DEVELOPMENT_TEAM (your team identifier), from which Xcode makes \(name)"
        case "CFBundleIdentifier": return "it is the Info.plist's CFBundleIdentifier, which must not be empty"
        default: return "give \(name) a value"
        }
    }

    private static let limit = 32
    /// The longest value a setting may have, or expand to: an identifier or a list of flags is
    /// far shorter, and the bound keeps a hostile file from growing values without end
    /// (`A = $(inherited)$(inherited)` line after line, or `A1 = $(A0)$(A0)` …).
    public static let maximumValueLength = 65_536

    /// Where one expansion is: the settings being resolved (a loop is an error) and how deep
    /// references nest.
    private struct ExpansionState {
        var resolving: [String] = []
        var depth = 0
    }

    private func expand(_ text: Substring, state: inout ExpansionState) throws(BuildSettingExpansionError) -> String {
        state.depth += 1
        defer { state.depth -= 1 }
        guard state.depth <= Self.limit else {
            throw .invalid("references nest more than \(Self.limit) deep")
        }
        var output = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            let next = text.index(after: index)
            guard character == "$", next < text.endIndex, text[next] == "(" || text[next] == "{" else {
                output.append(character)
                index = next
                continue
            }
            let close: Character = text[next] == "(" ? ")" : "}"
            // The matching close, past references nested inside: $(A_$(B)).
            var depth = 0
            var cursor = text.index(after: next)
            var end: Substring.Index?
            while cursor < text.endIndex {
                let c = text[cursor]
                if c == "(" || c == "{" {
                    depth += 1
                } else if c == ")" || c == "}" {
                    if depth == 0 {
                        if c == close { end = cursor }
                        break
                    }
                    depth -= 1
                }
                cursor = text.index(after: cursor)
            }
            guard let end else {
                throw .invalid("'\(text)' opens a reference with '$\(text[next])' that is never closed")
            }
            let inner = try expand(text[text.index(after: next)..<end], state: &state)
            output += try resolve(reference: inner, state: &state)
            guard output.utf8.count <= Self.maximumValueLength else {
                throw .invalid("'\(text.prefix(80))' expands to more than \(Self.maximumValueLength) characters")
            }
            index = text.index(after: end)
        }
        return output
    }

    /// One reference's content, `NAME` or `NAME:modifier:…`, already expanded inside.
    private func resolve(reference: String, state: inout ExpansionState) throws(BuildSettingExpansionError) -> String {
        guard !reference.isEmpty else { return "" }
        var parts = reference.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts.removeFirst())
        guard Self.isName(name) else {
            throw .invalid("'$(\(reference))' does not name a build setting (letters, digits and '_')")
        }
        var modifiers: [Substring] = []
        if let rest = parts.first {
            // `default=` takes the rest as its value, colons included.
            var remaining = rest
            while !remaining.isEmpty {
                if remaining.hasPrefix("default=") {
                    modifiers.append(remaining)
                    break
                }
                let colon = remaining.firstIndex(of: ":") ?? remaining.endIndex
                modifiers.append(remaining[..<colon])
                remaining = colon < remaining.endIndex ? remaining[remaining.index(after: colon)...] : ""
            }
        }
        let defaultValue = modifiers.first { $0.hasPrefix("default=") }.map { String($0.dropFirst("default=".count)) }
        var value: String
        if let found = try lookup(name, state: &state), !found.isEmpty || defaultValue == nil {
            value = found
        } else if let defaultValue {
            value = defaultValue
        } else {
            throw .unset(name)
        }
        for modifier in modifiers where !modifier.hasPrefix("default=") {
            value = try Self.apply(modifier, to: value, in: reference)
        }
        return value
    }

    private func lookup(_ name: String, state: inout ExpansionState) throws(BuildSettingExpansionError) -> String? {
        if name == "inherited" { return "" }
        guard let raw = values[name] ?? defaultValue(of: name) else { return nil }
        guard !state.resolving.contains(name) else {
            throw .invalid("build setting \(name) refers to itself (\((state.resolving + [name]).joined(separator: " → ")))")
        }
        guard state.resolving.count < Self.limit else {
            throw .invalid("build setting \(name) is nested more than \(Self.limit) references deep")
        }
        state.resolving.append(name)
        defer { state.resolving.removeLast() }
        return try expand(Substring(raw), state: &state)
    }

    /// The settings Xcode defines for every app target, made the way Xcode makes them; `nil`
    /// when the setting they come from is not set either.
    private func defaultValue(of name: String) -> String? {
        switch name {
        case "EXECUTABLE_NAME":
            guard values["PRODUCT_NAME"] != nil || values["TARGET_NAME"] != nil else { return nil }
            return "$(EXECUTABLE_PREFIX:default=)$(PRODUCT_NAME)$(EXECUTABLE_SUFFIX:default=)"
        case "PRODUCT_NAME":
            return values["TARGET_NAME"] != nil ? "$(TARGET_NAME)" : nil
        case "PRODUCT_MODULE_NAME":
            return values["PRODUCT_NAME"] != nil || values["TARGET_NAME"] != nil ? "$(PRODUCT_NAME:c99extidentifier)" : nil
        case "AppIdentifierPrefix", "TeamIdentifierPrefix":
            return values["DEVELOPMENT_TEAM"] != nil ? "$(DEVELOPMENT_TEAM)." : nil
        case "CONFIGURATION": return "Release"
        case "CURRENT_ARCH", "NATIVE_ARCH": return Self.machineArchitecture
        case "DEVELOPMENT_LANGUAGE": return "en"
        case "PRODUCT_BUNDLE_PACKAGE_TYPE": return "APPL"
        default: return nil
        }
    }

    /// This machine's architecture as Apple names it.
    static let machineArchitecture: String = {
        var name = utsname()
        uname(&name)
        let machine = withUnsafeBytes(of: &name.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return machine == "aarch64" ? "arm64" : machine
    }()

    private static func apply(_ modifier: Substring, to value: String, in reference: String) throws(BuildSettingExpansionError) -> String {
        func replacing(_ keep: (Character) -> Bool, with replacement: Character) -> String {
            String(value.map { keep($0) ? $0 : replacement })
        }
        func isASCIIAlphanumeric(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber) }
        switch modifier {
        case "lower": return value.lowercased()
        case "upper": return value.uppercased()
        case "identifier":
            let made = replacing({ isASCIIAlphanumeric($0) || $0 == "_" }, with: "_")
            return made.first?.isNumber == true ? "_" + made : made
        case "c99extidentifier":
            let made = replacing({ isASCIIAlphanumeric($0) || $0 == "_" || (!$0.isASCII && ($0.isLetter || $0.isNumber)) }, with: "_")
            return made.first?.isNumber == true ? "_" + made : made
        case "rfc1034identifier":
            return replacing({ isASCIIAlphanumeric($0) || $0 == "-" || $0 == "." }, with: "-")
        case "quote":
            var quoted = ""
            for c in value {
                if c == " " || c == "\\" || c == "\"" || c == "'" || c == "\t" { quoted.append("\\") }
                quoted.append(c)
            }
            return quoted
        case "standardizepath": return (value as NSString).standardizingPath
        case "base": return ((value as NSString).lastPathComponent as NSString).deletingPathExtension
        case "dir":
            let directory = (value as NSString).deletingLastPathComponent
            return directory.isEmpty ? "./" : directory + "/"
        case "file": return (value as NSString).lastPathComponent
        case "suffix":
            let suffix = (value as NSString).pathExtension
            return suffix.isEmpty ? "" : "." + suffix
        default:
            throw .invalid("'$(\(reference))' uses modifier '\(modifier)', which Xcode does not have (lower, upper, identifier, c99extidentifier, rfc1034identifier, quote, standardizepath, base, dir, file, suffix, default=)")
        }
    }

    static func isName(_ text: some StringProtocol) -> Bool {
        guard let first = text.first, !first.isNumber else { return false }
        return text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }

    // MARK: Reading .xcconfig files

    private static let maximumIncludeDepth = 16
    private static let maximumFileSize = 1 << 20
    /// At most this many files are read for one `read(xcconfig:)`, includes included.
    private static let maximumFiles = 64

    /// What one read has done so far: conditional settings that apply (a plain line does not
    /// override them), and how many files it read.
    private struct ReadState {
        var conditioned: Set<String> = []
        var files = 0
    }

    private mutating func set(_ name: String, _ value: String, source: String) throws(BuildSettingsError) {
        guard Self.isName(name) else {
            throw BuildSettingsError(source: source, problem: "'\(name)' is not a build setting name (letters, digits and '_', not starting with a digit)")
        }
        guard !value.contains(where: \.isNewline) else {
            throw BuildSettingsError(source: source, problem: "the value of \(name) holds a line break; a build setting is one line")
        }
        let before = values[name] ?? ""
        let made = value.replacingOccurrences(of: "$(inherited)", with: before).replacingOccurrences(of: "${inherited}", with: before)
        guard made.utf8.count <= Self.maximumValueLength else {
            throw BuildSettingsError(source: source, problem: "the value of \(name) is over \(Self.maximumValueLength) characters")
        }
        values[name] = made
    }

    private mutating func read(xcconfig url: URL, including: [String], confinement: String?, state: inout ReadState) throws(BuildSettingsError) {
        let path = url.path
        if let confinement, !path.hasPrefix(confinement) {
            throw BuildSettingsError(source: including.last ?? path, problem: "includes \(path), outside \(confinement.dropLast()); an app's settings stay inside the app")
        }
        guard !including.contains(path) else {
            throw BuildSettingsError(source: path, problem: "includes itself (\((including + [path]).joined(separator: " → ")))")
        }
        guard including.count < Self.maximumIncludeDepth else {
            throw BuildSettingsError(source: path, problem: "is included more than \(Self.maximumIncludeDepth) files deep")
        }
        state.files += 1
        guard state.files <= Self.maximumFiles else {
            throw BuildSettingsError(source: including.last ?? path, problem: "includes more than \(Self.maximumFiles) files in all")
        }
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: url)
            defer { try? handle.close() }
            data = try handle.read(upToCount: Self.maximumFileSize + 1) ?? Data()
        } catch {
            throw BuildSettingsError(source: path, problem: "cannot read the file: \(error.localizedDescription)")
        }
        guard data.count <= Self.maximumFileSize else {
            throw BuildSettingsError(source: path, problem: "is over \(Self.maximumFileSize) bytes; an .xcconfig file is a few lines of settings")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw BuildSettingsError(source: path, problem: "is not UTF-8 text")
        }
        try read(text: text, file: path, directory: url.deletingLastPathComponent(), including: including + [path], confinement: confinement, state: &state)
    }

    private mutating func read(
        text: String, file: String, directory: URL, including: [String], confinement: String?, state: inout ReadState
    ) throws(BuildSettingsError) {
        // "\r\n" is one Character: splitting on newlines splits files written on Windows too.
        for (offset, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let source = "\(file):\(offset + 1)"
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            if let comment = line.range(of: "//") { line = line[..<comment.lowerBound] }
            line = line.trimmingWhitespace()
            guard !line.isEmpty else { continue }

            if line.hasPrefix("#include") {
                var rest = line.dropFirst("#include".count)
                let optional = rest.hasPrefix("?")
                if optional { rest = rest.dropFirst() }
                rest = rest.trimmingWhitespace()
                guard rest.count >= 2, rest.first == "\"", rest.last == "\"" else {
                    throw BuildSettingsError(source: source, problem: "expected #include \"path/to/file.xcconfig\"")
                }
                let included = String(rest.dropFirst().dropLast())
                let target = included.hasPrefix("/") ? URL(fileURLWithPath: included) : directory.appendingPathComponent(included)
                if optional, !FileManager.default.fileExists(atPath: target.path) { continue }
                guard FileManager.default.fileExists(atPath: target.path) else {
                    throw BuildSettingsError(source: source, problem: "includes \"\(included)\", which does not exist (\(target.standardizedFileURL.path)); write #include? for a file that may be missing")
                }
                try read(xcconfig: target.standardizedFileURL, including: including, confinement: confinement, state: &state)
                continue
            }

            // The first '=' outside the conditions' brackets.
            var inBrackets = false
            let equals = line.indices.first { index in
                switch line[index] {
                case "[": inBrackets = true
                case "]": inBrackets = false
                case "=": return !inBrackets
                default: break
                }
                return false
            }
            guard let equals else {
                throw BuildSettingsError(source: source, problem: "expected NAME = VALUE or #include \"file\", found '\(line)'")
            }
            var left = line[..<equals].trimmingWhitespace()
            var value = line[line.index(after: equals)...].trimmingWhitespace()
            if value.hasSuffix(";") { value = value.dropLast().trimmingWhitespace() }

            var conditions: [(key: String, pattern: String)] = []
            while left.hasSuffix("]"), let open = left.lastIndex(of: "[") {
                let condition = left[left.index(after: open)..<left.index(before: left.endIndex)]
                guard let conditionEquals = condition.firstIndex(of: "=") else {
                    throw BuildSettingsError(source: source, problem: "condition '[\(condition)]' is not KEY=PATTERN, such as [sdk=iphoneos*] or [config=Debug]")
                }
                conditions.insert((String(condition[..<conditionEquals]), String(condition[condition.index(after: conditionEquals)...])), at: 0)
                left = left[..<open].trimmingWhitespace()
            }
            let name = String(left)
            guard Self.isName(name) else {
                throw BuildSettingsError(source: source, problem: "'\(name)' is not a build setting name (letters, digits and '_', not starting with a digit)")
            }
            if conditions.isEmpty {
                // A conditional value that applies is more specific than a plain one.
                if state.conditioned.contains(name) { continue }
            } else {
                guard conditionMatches(conditions) else { continue }
                state.conditioned.insert(name)
            }
            try set(name, String(value), source: source)
        }
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}

/// An `.xcconfig` file or `NAME=VALUE` that cannot be read: where (`file:line`, or the
/// argument) and what is wrong.
public struct BuildSettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `path:line` in a file, or the setting as given.
    public var source: String
    public var problem: String

    public init(source: String, problem: String) {
        self.source = source
        self.problem = problem
    }

    public var description: String { "\(source): \(problem)" }
}

/// Why a string with build setting references cannot be expanded.
public enum BuildSettingExpansionError: Error, Sendable, Hashable {
    /// The named variable has no value and no default.
    case unset(String)
    /// The reference cannot be read; the text says why.
    case invalid(String)
}
