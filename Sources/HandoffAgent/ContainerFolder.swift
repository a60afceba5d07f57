import Foundation
import HandoffCore
import HandoffWire

/// A folder kept the same on several devices by a sync tool (Syncthing, Nextcloud, …), named
/// by an identifier that is the same on every device while the folder's path may differ.
package struct ContainerFolder: Sendable, Hashable, CustomStringConvertible {
    package var identifier: String
    package var folder: URL

    package init(identifier: String, folder: URL) {
        self.identifier = identifier
        self.folder = folder.standardizedFileURL
    }

    /// Reads `ID=PATH`: an identifier of letters, digits, '.', '-' and '_' (at most 64), and an
    /// absolute path to a folder that exists.
    package init(parsing text: String) throws(ConfigurationError) {
        guard let equals = text.firstIndex(of: "=") else {
            throw ConfigurationError("'\(text)' is not ID=PATH, e.g. documents=/home/me/Sync/Documents")
        }
        let identifier = String(text[..<equals])
        let path = String(text[text.index(after: equals)...])
        guard identifier.range(of: #"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$"#, options: .regularExpression) != nil else {
            throw ConfigurationError("'\(identifier)' is not a container identifier: 1 to 64 letters, digits, '.', '-' or '_'; the same on every device")
        }
        guard path.hasPrefix("/") else {
            throw ConfigurationError("the folder of container '\(identifier)' must be an absolute path, not '\(path)'")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else {
            throw ConfigurationError("the folder of container '\(identifier)', \(path), does not exist or is not a folder")
        }
        self.init(identifier: identifier, folder: URL(fileURLWithPath: path, isDirectory: true).resolvingSymlinksInPath())
    }

    /// The path of `url` inside this container, relative and without `.` or `..`; nil when
    /// the file is not inside it.
    package func relativePath(of url: URL) -> String? {
        guard url.isFileURL else { return nil }
        let base = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
        // The folder's path is resolved; so is the file's, for a path through a link to it.
        let path = url.standardizedFileURL.resolvingSymlinksInPath().path
        guard path.hasPrefix(base), path.count > base.count else { return nil }
        return String(path.dropFirst(base.count))
    }

    /// The file at `relativePath` in this container on this device; nil when the path would
    /// lead out of the container (`..`, an absolute path), which a peer's bytes must never do.
    package func file(at relativePath: String) -> URL? {
        let components = relativePath.split(separator: "/", omittingEmptySubsequences: false)
        guard !relativePath.isEmpty, !relativePath.hasPrefix("/"), !relativePath.contains("\0"),
            !components.contains(where: { $0 == ".." || $0 == "." || $0.isEmpty })
        else { return nil }
        let file = folder.appendingPathComponent(relativePath)
        // A link inside the folder must not lead the app to a file outside it.
        let base = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
        guard file.resolvingSymlinksInPath().path.hasPrefix(base) else { return nil }
        return file
    }

    package var description: String { "\(identifier)=\(folder.path)" }
}
