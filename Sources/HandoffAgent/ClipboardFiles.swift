import Foundation

/// Copied files on the account's clipboard (docs/clipboard.md, Copied files). A copy of files is
/// a list of URIs (`text/uri-list`, or GNOME's `x-special/gnome-copied-files`), which names paths
/// of the copying device. A paste of it on another device asks the copying device for its
/// *manifest* instead: each file as its container and path inside it (when it lies in a synced
/// container) and as its name and size, and any other URI as it is. The pasting device then
/// names each file by its own path where its container holds it, and fetches the others, one
/// stream each, into a folder of its own; the list the app there gets names its own paths.
package enum ClipboardFiles {
    /// The clipboard types that list files.
    package static let uriList = "text/uri-list"
    package static let gnomeCopiedFiles = "x-special/gnome-copied-files"
    package static let listTypes: Set<String> = [uriList, gnomeCopiedFiles]

    /// The type a paste asks the copying device for to get the manifest of its files, and the
    /// type of one of the files (by its index in the manifest). Neither is ever offered.
    package static let manifestType = "x-handoff/files"
    package static func fileType(_ index: Int) -> String { "x-handoff/file;index=\(index)" }
    package static func fileIndex(_ type: String) -> Int? {
        let prefix = "x-handoff/file;index="
        guard type.hasPrefix(prefix), let index = Int(type.dropFirst(prefix.count)), index >= 0 else { return nil }
        return index
    }

    /// At most this many entries in a list; a manifest's JSON at most this many bytes.
    package static let maximumEntries = 1000
    package static let maximumManifestBytes = 1 << 20

    package struct Manifest: Codable, Sendable, Hashable {
        package var entries: [Entry]
        package init(entries: [Entry]) { self.entries = entries }
    }

    /// One entry of a copied list: a file (with its name and size, and its container and path
    /// inside it where it has one) or a folder inside a container, or a URI that is not a file.
    package struct Entry: Codable, Sendable, Hashable {
        package var uri: String?
        package var name: String?
        package var size: UInt64?
        package var container: String?
        package var path: String?

        package init(uri: String? = nil, name: String? = nil, size: UInt64? = nil, container: String? = nil, path: String? = nil) {
            self.uri = uri
            self.name = name
            self.size = size
            self.container = container
            self.path = path
        }

        /// Whether the pasting device may fetch it (a regular file: it has a size).
        package var transferable: Bool { name != nil && size != nil }
    }

    package struct ListError: Error, CustomStringConvertible, Equatable {
        package let description: String
        package init(_ description: String) { self.description = description }
    }

    // MARK: The copying device

    /// The URIs a list of type `type` holds: one per line (CR LF or LF), `#` comments skipped;
    /// GNOME's list first says `copy` or `cut` (a cut elsewhere is a copy: nothing is moved
    /// across devices).
    package static func uris(in bytes: [UInt8], type: String) throws(ListError) -> [String] {
        var lines = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).map {
            String($0).trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
        }
        if type == gnomeCopiedFiles {
            guard let first = lines.first, first == "copy" || first == "cut" else {
                throw ListError("a GNOME file list begins with 'copy' or 'cut'")
            }
            lines.removeFirst()
        }
        let uris = lines.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        guard uris.count <= maximumEntries else { throw ListError("the copy lists \(uris.count) files; at most \(maximumEntries) travel") }
        return uris
    }

    /// The manifest of a copied list, and the files it lets the pasting device fetch (by the
    /// entries' indexes; nil where an entry is not fetched). A folder outside every container
    /// refuses the list: folders travel only inside synced containers.
    package static func manifest(of uris: [String], containers: [ContainerFolder]) throws(ListError) -> (Manifest, [URL?]) {
        var entries: [Entry] = []
        var files: [URL?] = []
        for uri in uris {
            guard let url = URL(string: uri), url.isFileURL else {
                entries.append(Entry(uri: uri))
                files.append(nil)
                continue
            }
            var entry = Entry()
            for container in containers {
                if let path = container.relativePath(of: url) {
                    entry.container = container.identifier
                    entry.path = path
                    break
                }
            }
            let resolved = url.standardizedFileURL.resolvingSymlinksInPath()
            let attributes = try? FileManager.default.attributesOfItem(atPath: resolved.path)
            let kind = attributes?[.type] as? FileAttributeType
            if kind == .typeRegular, let size = (attributes?[.size] as? NSNumber)?.uint64Value {
                entry.name = resolved.lastPathComponent
                entry.size = size
                files.append(resolved)
            } else if entry.container != nil, kind == .typeDirectory {
                files.append(nil)
            } else if kind == nil {
                throw ListError("'\(url.path)' does not exist (any more)")
            } else if kind == .typeDirectory {
                throw ListError("'\(url.path)' is a folder outside every synced container: only files travel, and folders inside containers")
            } else {
                throw ListError("'\(url.path)' is not a regular file")
            }
            entries.append(entry)
        }
        return (Manifest(entries: entries), files)
    }

    // MARK: The pasting device

    /// Where an entry is on the pasting device.
    package enum Resolution: Equatable, Sendable {
        /// The same file in this device's own container.
        case local(URL)
        /// To fetch: entry `index`, named `name`, of `size` bytes.
        case fetch(index: Int, name: String, size: UInt64)
        /// A URI that is not a file, as it came.
        case uri(String)
    }

    /// Checks a manifest from another device: entry count, names that are one path component,
    /// container paths without `..`.
    package static func check(_ manifest: Manifest) throws(ListError) {
        guard manifest.entries.count <= maximumEntries else { throw ListError("the manifest lists \(manifest.entries.count) entries; at most \(maximumEntries)") }
        for entry in manifest.entries {
            if let name = entry.name {
                guard !name.isEmpty, name.utf8.count <= 255, !name.contains("/"), name != ".", name != "..", !name.contains("\0") else {
                    throw ListError("'\(name)' is not a file name")
                }
            }
            if let path = entry.path {
                let parts = path.split(separator: "/", omittingEmptySubsequences: false)
                guard !path.hasPrefix("/"), !parts.contains(".."), !path.contains("\0") else { throw ListError("'\(path)' is not a path inside a container") }
            }
            guard entry.uri != nil || entry.transferable || entry.container != nil else { throw ListError("an entry names neither a URI, a file nor a container's path") }
        }
    }

    /// Where each entry of `manifest` is here: in this device's container where it has it and
    /// the file is there with the same size (a folder: there at all), else fetched (a file), else
    /// refused (a folder in a container this device lacks).
    package static func resolve(_ manifest: Manifest, containers: [ContainerFolder]) throws(ListError) -> [Resolution] {
        try check(manifest)
        var resolutions: [Resolution] = []
        for (index, entry) in manifest.entries.enumerated() {
            if let uri = entry.uri {
                resolutions.append(.uri(uri))
                continue
            }
            if let identifier = entry.container, let path = entry.path, let container = containers.first(where: { $0.identifier == identifier }),
                let file = container.file(at: path)
            {
                let attributes = try? FileManager.default.attributesOfItem(atPath: file.path)
                let size = (attributes?[.size] as? NSNumber)?.uint64Value
                let isFolder = attributes?[.type] as? FileAttributeType == .typeDirectory
                if (entry.size == nil && isFolder) || (entry.size != nil && size == entry.size && !isFolder) {
                    resolutions.append(.local(file))
                    continue
                }
            }
            guard let name = entry.name, let size = entry.size else {
                throw ListError("the folder '\(entry.path ?? "")' of container '\(entry.container ?? "")' is not on this device")
            }
            resolutions.append(.fetch(index: index, name: name, size: size))
        }
        return resolutions
    }

    /// The list an app here gets, of type `type`, naming `uris`.
    package static func list(_ uris: [String], type: String) -> [UInt8] {
        if type == gnomeCopiedFiles { return Array((["copy"] + uris).joined(separator: "\n").utf8) }
        return Array(uris.map { $0 + "\r\n" }.joined().utf8)
    }
}
