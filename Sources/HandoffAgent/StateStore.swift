import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the agent's state could not be read or written; every message names the file.
package enum StateError: Error, Sendable, Hashable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case corrupt(path: String, reason: String)
    case unwritable(path: String, reason: String)
    /// The state folder is not safe to keep keys in: someone else owns it or may write in it.
    case unsafe(path: String, reason: String)
    /// A newer Handoff wrote the state folder in a format this one does not read.
    case newerFormat(path: String, found: Int, supported: Int)
    /// An older state folder could not be upgraded; it was left as it was.
    case upgradeFailed(path: String, from: Int, to: Int, reason: String)

    package var description: String {
        switch self {
        case .unsafe(let path, let reason):
            return "refusing to use the state folder \(path): \(reason)"
        case .unreadable(let path, let reason):
            return "cannot read the state file \(path): \(reason)"
        case .corrupt(let path, let reason):
            return "the state file \(path) is damaged (\(reason)); move it aside to start this device afresh, or restore it from a backup"
        case .unwritable(let path, let reason):
            return "cannot write the state file \(path): \(reason); check the permissions and free space of its folder"
        case .newerFormat(let path, let found, let supported):
            return "the state folder \(path) was written by a newer Handoff (state format \(found); this handoffd \(handoffVersion) reads formats up to \(supported)); run the newer handoffd, or give another folder with --state-dir. The folder was not changed"
        case .upgradeFailed(let path, let from, let to, let reason):
            return "cannot upgrade the state folder \(path) from format \(from) to \(to): \(reason)"
        }
    }
}

/// The agent's state directory. Every write is atomic: the new contents go to a temporary file
/// in the same directory, are flushed to disk, and replace the old file by rename, and the
/// directory is flushed too. A crash at any point leaves the old file or the new one, never a
/// mix. Files are readable by their owner only: they hold keys.
package struct StateStore: Sendable {
    package let directory: URL

    /// Opens (and creates, owner-only) the state directory.
    package init(directory: URL) throws(StateError) {
        self.directory = directory.standardizedFileURL
        do {
            try FileManager.default.createDirectory(at: self.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .unwritable(path: self.directory.path, reason: "\(error.localizedDescription)")
        }
        try Self.checkOwnership(self.directory.path)
    }

    /// As ssh does with its own folder: the state folder must be a folder, this user's, and
    /// writable by no one else, or another user could replace the account or the keys in it.
    static func checkOwnership(_ path: String) throws(StateError) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw .unreadable(path: path, reason: String(cString: strerror(errno)))
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .unsafe(path: path, reason: "it is not a folder (a link?); give a folder with --state-dir")
        }
        guard info.st_uid == getuid() else {
            throw .unsafe(path: path, reason: "it belongs to another user (uid \(info.st_uid)); give a folder of your own with --state-dir")
        }
        let mode = info.st_mode & 0o7777
        guard mode & 0o022 == 0 else {
            throw .unsafe(
                path: path,
                reason: "its mode is \(String(format: "%04o", mode)), so other users may write in it and replace the account or the keys; make it yours alone: chmod 700 \(path)")
        }
    }

    package func url(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// The file's bytes, or nil if it does not exist.
    package func read(_ name: String) throws(StateError) -> Data? {
        let path = url(name).path
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            return try Data(contentsOf: url(name))
        } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
    }

    /// Replaces the file atomically with `data`.
    package func write(_ name: String, _ data: Data) throws(StateError) {
        let target = url(name).path
        let temporary = directory.appendingPathComponent(".\(name).\(UUID().uuidString).tmp").path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .unwritable(path: target, reason: String(cString: strerror(errno))) }
        var failure: String?
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let written = systemWrite(fd, raw.baseAddress! + offset, raw.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = String(cString: strerror(errno))
                    return
                }
                offset += written
            }
        }
        if failure == nil && fsync(fd) != 0 { failure = String(cString: strerror(errno)) }
        close(fd)
        if failure == nil && rename(temporary, target) != 0 { failure = String(cString: strerror(errno)) }
        if let failure {
            unlink(temporary)
            throw .unwritable(path: target, reason: failure)
        }
        // Make the rename itself durable.
        let directoryFD = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// Removes temporary files a crash left behind.
    package func sweep() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            unlink(url(name).path)
        }
    }

    /// Reads a JSON file into `T`; a file that is not valid is reported as damaged, by name.
    package func load<T: Decodable>(_ type: T.Type, from name: String) throws(StateError) -> T? {
        guard let data = try read(name) else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw .corrupt(path: url(name).path, reason: Self.describe(error))
        } catch {
            throw .corrupt(path: url(name).path, reason: "\(error)")
        }
    }

    /// Writes `value` as JSON, atomically.
    package func save<T: Encodable>(_ value: T, to name: String) throws(StateError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(value)
        } catch {
            throw .unwritable(path: url(name).path, reason: "\(error)")
        }
        try write(name, data)
    }

    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty ? "not valid JSON" : "bad value at \(path(context.codingPath))"
        case .keyNotFound(let key, let context):
            return "missing '\(path(context.codingPath + [key]))'"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "wrong type at '\(path(context.codingPath))'"
        @unknown default:
            return "\(error)"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
    }
}

/// The C library's write(2), named apart from `StateStore.write`.
private func systemWrite(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, bytes, count)
}
