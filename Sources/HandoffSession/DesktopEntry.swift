import Foundation

/// A freedesktop key file (the Desktop Entry Specification's format, version 1.5): groups of
/// `Key=Value` lines, `#` comments. Desktop entries (`*.desktop`) and KDE's recent-document links
/// are such files.
package struct KeyFile: Sendable, Hashable {
    /// Each group's keys and values as written (localized keys keep their `[locale]`).
    package var groups: [String: [String: String]]

    package struct ParseError: Error, CustomStringConvertible, Equatable {
        package let description: String
        package init(_ description: String) { self.description = description }
    }

    /// At most this many bytes: a desktop entry is a few kilobytes.
    package static let maximumBytes = 1 << 20

    package init(text: String) throws(ParseError) {
        guard text.utf8.count <= Self.maximumBytes else { throw ParseError("over \(Self.maximumBytes) bytes: not a desktop entry") }
        var groups: [String: [String: String]] = [:]
        var current: String?
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw[...]
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            if trimmed.hasPrefix("[") {
                guard trimmed.hasSuffix("]"), trimmed.count > 2 else { throw ParseError("line \(index + 1): a group header is [Name]") }
                let name = String(trimmed.dropFirst().dropLast())
                guard groups[name] == nil else { throw ParseError("line \(index + 1): group [\(name)] appears twice") }
                groups[name] = [:]
                current = name
                continue
            }
            guard let group = current else { throw ParseError("line \(index + 1): a key before any group") }
            guard let equals = line.firstIndex(of: "=") else { throw ParseError("line \(index + 1): not Key=Value") }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = String(line[line.index(after: equals)...].drop { $0 == " " || $0 == "\t" })
            guard !key.isEmpty else { throw ParseError("line \(index + 1): an empty key") }
            // The first of a key that appears twice counts, as GLib takes it.
            if groups[group]?[key] == nil { groups[group]?[key] = value }
        }
        self.groups = groups
    }

    package func value(_ key: String, in group: String = "Desktop Entry") -> String? { groups[group]?[key] }

    /// A value of type string, its escapes (`\s`, `\n`, `\t`, `\r`, `\\`) undone.
    package func string(_ key: String, in group: String = "Desktop Entry") -> String? {
        value(key, in: group).map(Self.unescape)
    }

    package func boolean(_ key: String, in group: String = "Desktop Entry") -> Bool { value(key, in: group) == "true" }

    static func unescape(_ value: String) -> String {
        var out = ""
        var escaped = false
        for character in value {
            if escaped {
                switch character {
                case "s": out.append(" ")
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                default: out.append(character)
                }
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                out.append(character)
            }
        }
        return out
    }
}

/// An application's desktop entry: what a desktop runs to open a file with it.
package struct DesktopEntry: Sendable, Hashable {
    /// The desktop file ID (`org.gnome.TextEditor.desktop`; a file in a subfolder `kde/kate.desktop`
    /// has the ID `kde-kate.desktop`).
    package var id: String
    package var name: String
    /// The `Exec` value, its string escapes undone (its quoting stays: see `command(opening:)`).
    package var exec: String?
    package var mimeTypes: [String]
    package var dbusActivatable: Bool
    package var hidden: Bool
    package var icon: String?
    /// Where the entry was read from (`%k`).
    package var location: String?

    package init(id: String, keyFile: KeyFile, location: String? = nil) throws(KeyFile.ParseError) {
        guard keyFile.groups["Desktop Entry"] != nil else { throw KeyFile.ParseError("no [Desktop Entry] group") }
        guard keyFile.value("Type") == "Application" else { throw KeyFile.ParseError("Type is '\(keyFile.value("Type") ?? "")', not Application") }
        guard let name = keyFile.string("Name"), !name.isEmpty else { throw KeyFile.ParseError("no Name") }
        self.id = id
        self.name = name
        exec = keyFile.string("Exec")
        mimeTypes = (keyFile.value("MimeType") ?? "").split(separator: ";").map(String.init).filter { !$0.isEmpty }
        dbusActivatable = keyFile.boolean("DBusActivatable")
        hidden = keyFile.boolean("Hidden")
        icon = keyFile.string("Icon")
        self.location = location
        guard exec != nil || dbusActivatable else { throw KeyFile.ParseError("neither Exec nor DBusActivatable") }
    }

    /// The program and arguments that open `files` (file URLs) with this application, as the
    /// specification expands `Exec`: `%f`/`%u` take one file (the command is for the first),
    /// `%F`/`%U` all of them, each its own argument, never through a shell, so no file name can
    /// become a command; `%i`, `%c`, `%k` and `%%` as the specification says, the deprecated codes
    /// dropped. An `Exec` with no file code gets the files after its arguments. A field code
    /// inside a quoted argument, an unknown one, or quoting that does not close is refused.
    package func command(opening files: [URL]) throws(KeyFile.ParseError) -> [String] {
        guard let exec else { throw KeyFile.ParseError("\(id) has no Exec (it is started over D-Bus)") }
        let tokens = try Self.split(exec)
        guard !tokens.isEmpty else { throw KeyFile.ParseError("\(id): Exec is empty") }
        var argv: [String] = []
        var usedFiles = false
        // `%f` and `%F` take local files: an app that takes no URLs cannot open a web address.
        func path(_ url: URL) throws(KeyFile.ParseError) -> String {
            guard url.isFileURL else { throw KeyFile.ParseError("\(id) opens files only, not \(url.scheme ?? "") addresses") }
            return url.path
        }
        for (index, token) in tokens.enumerated() {
            if token.quoted {
                // "%%" is allowed in a quoted argument (a literal %); a field code is not: inside
                // `sh -c "open %f"` a file name would be run as a command.
                if token.text.replacingOccurrences(of: "%%", with: "").contains("%") {
                    throw KeyFile.ParseError("\(id): a field code inside a quoted argument of Exec")
                }
                argv.append(token.text.replacingOccurrences(of: "%%", with: "%"))
                continue
            }
            if index == 0, token.text.contains("%") {
                throw KeyFile.ParseError("\(id): Exec's program is not a name (it holds a field code)")
            }
            // A code standing alone may become several arguments, or none.
            switch token.text {
            case "%F", "%U":
                for file in files { argv.append(token.text == "%F" ? try path(file) : file.absoluteString) }
                usedFiles = true
                continue
            case "%f", "%u":
                if let file = files.first { argv.append(token.text == "%f" ? try path(file) : file.absoluteString) }
                usedFiles = true
                continue
            case "%i":
                if let icon { argv += ["--icon", icon] }
                continue
            default: break
            }
            var out = ""
            var characters = token.text.makeIterator()
            while let character = characters.next() {
                guard character == "%" else {
                    out.append(character)
                    continue
                }
                guard let code = characters.next() else { throw KeyFile.ParseError("\(id): Exec ends in a lone %") }
                switch code {
                case "%": out.append("%")
                case "f", "u":
                    if let file = files.first { out += code == "f" ? try path(file) : file.absoluteString }
                    usedFiles = true
                case "c": out += name
                case "k": out += location ?? ""
                case "d", "D", "n", "N", "v", "m": break
                case "F", "U", "i": throw KeyFile.ParseError("\(id): %\(code) must stand alone in Exec")
                default: throw KeyFile.ParseError("\(id): Exec has an unknown field code %\(code)")
                }
            }
            if index == 0 || !out.isEmpty || token.text.isEmpty { argv.append(out) }
        }
        if !usedFiles {
            for file in files { argv.append(try path(file)) }
        }
        guard let program = argv.first, !program.isEmpty else { throw KeyFile.ParseError("\(id): Exec names no program") }
        return argv
    }

    /// The program `Exec` runs (its first argument), if it has one.
    package var program: String? {
        guard let exec, let first = try? Self.split(exec).first else { return nil }
        return first.text
    }

    struct Token: Equatable {
        var text: String
        var quoted: Bool
    }

    /// Splits an `Exec` value into arguments: spaces separate them; a double-quoted argument
    /// keeps its spaces, and inside it a backslash escapes `"`, `` ` ``, `$` and `\`.
    static func split(_ exec: String) throws(KeyFile.ParseError) -> [Token] {
        var tokens: [Token] = []
        var current = ""
        var inToken = false
        var quoted = false
        var inQuotes = false
        let characters = Array(exec)
        var index = 0
        while index < characters.count {
            let character = characters[index]
            if inQuotes {
                if character == "\\", index + 1 < characters.count, "\"`$\\".contains(characters[index + 1]) {
                    current.append(characters[index + 1])
                    index += 2
                    continue
                }
                if character == "\"" {
                    inQuotes = false
                } else {
                    current.append(character)
                }
            } else if character == " " || character == "\t" {
                if inToken { tokens.append(Token(text: current, quoted: quoted)) }
                current = ""
                inToken = false
                quoted = false
            } else if character == "\"" {
                inQuotes = true
                inToken = true
                quoted = true
            } else {
                // Reserved characters outside quotes (the specification asks for quoting them)
                // are taken as they are: no shell ever sees them.
                current.append(character)
                inToken = true
            }
            index += 1
        }
        guard !inQuotes else { throw KeyFile.ParseError("Exec has a quote that does not close") }
        if inToken { tokens.append(Token(text: current, quoted: quoted)) }
        return tokens
    }
}
