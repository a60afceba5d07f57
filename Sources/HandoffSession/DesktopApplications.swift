import Foundation

/// The applications a desktop knows, found as the XDG specifications say: desktop entries under
/// `$XDG_DATA_HOME/applications` and each of `$XDG_DATA_DIRS`' (the first of an ID wins), and the
/// default application for a MIME type from the `mimeapps.list` files (Association between MIME
/// types and applications 1.0.1), as `xdg-mime query default` answers.
package struct DesktopApplications: Sendable {
    package let dataHome: URL
    package let dataDirs: [URL]
    package let configHome: URL
    package let configDirs: [URL]
    /// `$XDG_CURRENT_DESKTOP`, lowercased: `gnome`, `kde`; its `mimeapps.list` comes first.
    package let desktops: [String]

    package init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let home = URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory(), isDirectory: true)
        func folder(_ key: String, _ fallback: URL) -> URL {
            guard let value = environment[key], value.hasPrefix("/") else { return fallback }
            return URL(fileURLWithPath: value, isDirectory: true)
        }
        func folders(_ key: String, _ fallback: String) -> [URL] {
            let listed = (environment[key].flatMap { $0.isEmpty ? nil : $0 } ?? fallback).split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
            return listed.map { URL(fileURLWithPath: $0, isDirectory: true) }
        }
        dataHome = folder("XDG_DATA_HOME", home.appendingPathComponent(".local/share", isDirectory: true))
        dataDirs = folders("XDG_DATA_DIRS", "/usr/local/share:/usr/share")
        configHome = folder("XDG_CONFIG_HOME", home.appendingPathComponent(".config", isDirectory: true))
        configDirs = folders("XDG_CONFIG_DIRS", "/etc/xdg")
        desktops = (environment["XDG_CURRENT_DESKTOP"] ?? "").lowercased().split(separator: ":").map(String.init)
    }

    /// The folders desktop entries are found in, most important first.
    var applicationFolders: [URL] { ([dataHome] + dataDirs).map { $0.appendingPathComponent("applications", isDirectory: true) } }

    /// The desktop entry of `id` (`org.gnome.TextEditor.desktop`): the first found, unless it is
    /// hidden (a user's `Hidden=true` copy removes the system's) or not a valid application.
    /// An ID names a file inside an applications folder and nowhere else: one whose dashes would
    /// make `..` (`-..-..-Sync-x.desktop`, which another device may send) or a hidden or empty
    /// part is not an ID.
    package func entry(id: String) -> DesktopEntry? {
        let parts = id.split(separator: "-", omittingEmptySubsequences: false)
        guard id.hasSuffix(".desktop"), !id.contains("/"), parts.allSatisfy({ !$0.isEmpty && !$0.hasPrefix(".") }) else { return nil }
        for folder in applicationFolders {
            let inside = folder.standardizedFileURL.path + "/"
            // The ID's dashes may stand for subfolders (`kde-kate.desktop` is `kde/kate.desktop`).
            for candidate in Self.paths(for: id, in: folder) where candidate.standardizedFileURL.path.hasPrefix(inside) && FileManager.default.fileExists(atPath: candidate.path) {
                guard let text = try? String(contentsOf: candidate, encoding: .utf8), let keys = try? KeyFile(text: text) else { return nil }
                guard let entry = try? DesktopEntry(id: id, keyFile: keys, location: candidate.path), !entry.hidden else { return nil }
                return entry
            }
        }
        return nil
    }

    static func paths(for id: String, in folder: URL) -> [URL] {
        var paths = [folder.appendingPathComponent(id)]
        let parts = id.split(separator: "-")
        if parts.count > 1 {
            for split in 1..<parts.count {
                let sub = parts[..<split].joined(separator: "/") + "/" + parts[split...].joined(separator: "-")
                paths.append(folder.appendingPathComponent(sub))
            }
        }
        return paths
    }

    /// Every application's desktop entry, by ID (the first of each ID; hidden ones left out).
    package func allEntries() -> [DesktopEntry] {
        var seen: Set<String> = []
        var entries: [DesktopEntry] = []
        for folder in applicationFolders {
            guard let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { continue }
            var files: [URL] = []
            while files.count < 10_000, let file = enumerator.nextObject() as? URL {
                if file.pathExtension == "desktop" { files.append(file) }
            }
            for file in files.sorted(by: { $0.path < $1.path }) {
                let relative = String(file.standardizedFileURL.path.dropFirst(folder.standardizedFileURL.path.count)).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
                let id = relative.replacingOccurrences(of: "/", with: "-")
                guard seen.insert(id).inserted else { continue }
                if let entry = entry(id: id) { entries.append(entry) }
            }
        }
        return entries
    }

    /// The mimeapps.list files, most important first.
    var associationFiles: [URL] {
        var files: [URL] = []
        for folder in [configHome] + configDirs + applicationFolders {
            for desktop in desktops { files.append(folder.appendingPathComponent("\(desktop)-mimeapps.list")) }
            files.append(folder.appendingPathComponent("mimeapps.list"))
        }
        return files
    }

    /// The application that opens `mimeType` by default: the first installed one a
    /// `[Default Applications]` names, in the files' order; else the first an
    /// `[Added Associations]` names; else one whose entry lists the type (by ID), leaving out
    /// those a `[Removed Associations]` removes.
    package func defaultEntry(for mimeType: String) -> DesktopEntry? {
        var removed: Set<String> = []
        var added: [String] = []
        for file in associationFiles {
            guard let text = try? String(contentsOf: file, encoding: .utf8), let keys = try? KeyFile(text: text) else { continue }
            let ids = { (group: String) in (keys.value(mimeType, in: group) ?? "").split(separator: ";").map(String.init).filter { !$0.isEmpty } }
            for id in ids("Default Applications") where !removed.contains(id) {
                if let entry = entry(id: id) { return entry }
            }
            added += ids("Added Associations").filter { !removed.contains($0) }
            removed.formUnion(ids("Removed Associations"))
        }
        for id in added where !removed.contains(id) {
            if let entry = entry(id: id) { return entry }
        }
        return allEntries().first { $0.mimeTypes.contains(mimeType) && !removed.contains($0.id) }
    }

    /// The installed application the recently-used list names: by desktop file ID (KDE names
    /// one), by the program its command runs (GTK records it), else by its name.
    package func entry(for application: RecentApplication) -> DesktopEntry? {
        let name = application.name
        if !name.contains("/"), let entry = entry(id: name.hasSuffix(".desktop") ? name : name + ".desktop") { return entry }
        let entries = allEntries()
        if let program = application.program.map({ URL(fileURLWithPath: $0).lastPathComponent }),
            let entry = entries.first(where: { $0.program.map { URL(fileURLWithPath: $0).lastPathComponent } == program })
        {
            return entry
        }
        return entries.first { $0.name == name }
    }

    /// How this desktop opens `file`, a document the list named `application` used last: that
    /// application if it is installed here, else the default for `mimeType`. Nil when neither is.
    package func opener(for file: URL, mimeType: String?, application: RecentApplication?) -> DesktopEntry? {
        if let application, let entry = entry(for: application) { return entry }
        return mimeType.flatMap(defaultEntry(for:))
    }
}

extension DesktopApplications {
    /// The MIME type of a file named `name`, from its extension, as shared-mime-info's `globs2`
    /// files say (the highest weight wins, then the longest pattern); nil when none names it.
    /// Only `*.ext` patterns are used: the others name whole files (`Makefile`), not media.
    package func mimeType(forFileNamed name: String) -> String? {
        let lowered = name.lowercased()
        var best: (weight: Int, length: Int, type: String)?
        for folder in [dataHome] + dataDirs {
            guard let text = try? String(contentsOf: folder.appendingPathComponent("mime/globs2"), encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                let fields = line.split(separator: ":", maxSplits: 3, omittingEmptySubsequences: false)
                guard fields.count >= 3, let weight = Int(fields[0]), fields[2].hasPrefix("*."), !fields[2].dropFirst().contains("*") else { continue }
                let suffix = fields[2].dropFirst()
                let caseSensitive = fields.count > 3 && fields[3].split(separator: ",").contains("cs")
                guard caseSensitive ? name.hasSuffix(suffix) : lowered.hasSuffix(suffix.lowercased()) else { continue }
                if best == nil || (weight, suffix.count) > (best!.weight, best!.length) { best = (weight, suffix.count, String(fields[1])) }
            }
            // The first folder that knows the name decides, as the specification orders them.
            if best != nil { break }
        }
        return best?.type
    }
}
