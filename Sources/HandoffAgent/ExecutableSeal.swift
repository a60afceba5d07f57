import Crypto
import Foundation

/// What an installed app's executable was when the agent checked the app (at install, and as
/// it loads its apps): the SHA-256 of its bytes, and the file's identity and times. The agent
/// holds it against the file at each launch and each hello: a file whose identity and times
/// are unchanged is the same file, and is not read again; any other is read and hashed, so an
/// executable replaced after install (written over, renamed over, its modification time set
/// back) is not taken for the app it was.
package struct ExecutableSeal: Sendable, Hashable {
    /// The file's device, inode, size and modification and change times. The change time is
    /// set by the kernel at every write and every change of the other times, so no user can
    /// put it back.
    struct Stamp: Sendable, Hashable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: [Int]
        var changed: [Int]

        init?(_ path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modified = [info.st_mtim.tv_sec, info.st_mtim.tv_nsec]
            changed = [info.st_ctim.tv_sec, info.st_ctim.tv_nsec]
        }
    }

    let digest: [UInt8]
    let stamp: Stamp

    /// The seal of the file at `url` now; nil when it cannot be read.
    init?(of url: URL) {
        guard let stamp = Stamp(url.path), let digest = Self.digest(url.path) else { return nil }
        self.stamp = stamp
        self.digest = digest
    }

    /// Whether the file at `url` is still the one sealed.
    func holds(for url: URL) -> Bool {
        guard let now = Stamp(url.path) else { return false }
        if now == stamp { return true }
        return Self.digest(url.path) == digest
    }

    private static func digest(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var hash = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            hash.update(data: buffer[..<count])
        }
        return Array(hash.finalize())
    }
}
