import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

private func systemClose(_ fd: Int32) { _ = close(fd) }
private func systemRead(_ fd: Int32, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, bytes, count) }
private func systemShutdown(_ fd: Int32) { _ = shutdown(fd, Int32(SHUT_RDWR)) }

/// A connection to the agent that carries one pair of continuation streams: it opens with
/// `openStream` or `acceptStream`, and after the reply carries `LocalStreamFrame`s both ways.
///
/// Blocking, like `LocalClient`: one thread reads (`readFrame`), any thread writes.
public final class LocalStreamSocket: Sendable {
    public let path: String
    private let fd: Int32
    /// Held while writing or closing: a blocked write holds it, and the descriptor is released
    /// only once no write uses it.
    private let writing = Mutex(false)
    /// Whether the connection was shut down or closed; `shutdown` needs no lock, so that it can
    /// interrupt a write blocked on a full socket.
    private let ended = Mutex(false)
    private let buffer: Mutex<ReadBuffer>

    private struct ReadBuffer: ~Copyable {
        var bytes = [UInt8](repeating: 0, count: 256 * 1024)
        var start = 0
        var end = 0
    }

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
        buffer = Mutex(ReadBuffer())
    }

    /// Connects to the agent at `path` and sends `call` (`openStream` or `acceptStream`) as the
    /// first message. Returns once the agent answered yes; throws its refusal, or why the agent
    /// could not be asked. Waits at most `timeout` seconds for the answer.
    public static func open(path: String, call: LocalCall, timeout: Int = 60) throws(LocalError) -> LocalStreamSocket {
        try opened(path: path, call: call, timeout: timeout).socket
    }

    /// `open`, with the agent's reply (what a `paste` pastes).
    public static func opened(path: String, call: LocalCall, timeout: Int = 60) throws(LocalError) -> (socket: LocalStreamSocket, reply: LocalReply) {
        let fd = try LocalSocketIO.connect(path)
        let socket = LocalStreamSocket(path: path, fd: fd)
        do throws(LocalError) {
            try LocalSocketIO.checkServer(fd, path: path)
            LocalSocketIO.setReceiveTimeout(fd, seconds: timeout)
            try LocalSocketIO.write(fd, LocalMessage.call(request: 1, call).frame)
            // Read through the socket's own buffer: stream frames may follow the reply at once,
            // in the same read, and must stay for the stream's reader.
            guard let frame = try socket.readFrame() else {
                throw LocalError(.failed, "the agent at \(path) closed the stream connection before answering")
            }
            guard case .reply(1, let reply) = try LocalMessage(frame: frame) else {
                throw LocalError(.failed, "the agent at \(path) did not answer the stream request")
            }
            if let error = reply.error { throw error }
            LocalSocketIO.setReceiveTimeout(fd, seconds: 0)
            return (socket, reply)
        } catch {
            socket.close()
            throw error
        }
    }

    /// The next frame; nil at the end of the connection. Called by one thread only.
    public func readFrame() throws(LocalError) -> Frame? {
        guard let (kind, length) = try readHeader() else { return nil }
        return Frame(kind: kind, payload: try readPayload(length))
    }

    /// The `length` bytes of the frame whose header was just read.
    public func readPayload(_ length: Int) throws(LocalError) -> [UInt8] {
        var payload = [UInt8](repeating: 0, count: length)
        let result = payload.withUnsafeMutableBytes { target -> Result<Void, LocalError> in
            var filled = 0
            do throws(LocalError) {
                while filled < target.count {
                    filled += try readSome(into: UnsafeMutableRawBufferPointer(rebasing: target[filled...]))
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
        return payload
    }

    /// The next frame's kind and payload length; nil at the end of the connection. Exactly
    /// that many bytes must be read next (`readSome`) before the next header. Called by one
    /// thread only.
    public func readHeader() throws(LocalError) -> (kind: UInt8, length: Int)? {
        var header: (UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0)
        let complete = withUnsafeMutableBytes(of: &header) { target -> Result<Bool, LocalError> in
            var filled = 0
            do throws(LocalError) {
                while filled < target.count {
                    let count = try readSome(into: UnsafeMutableRawBufferPointer(rebasing: target[filled...]), atEnd: filled == 0)
                    if count == 0 { return .success(false) }
                    filled += count
                }
                return .success(true)
            } catch {
                return .failure(error)
            }
        }
        guard try complete.get() else { return nil }
        let bytes = withUnsafeBytes(of: header) { Array($0) }
        let length = bytes[0..<4].reduce(0) { $0 << 8 | Int($1) }
        guard length <= LocalMessage.maximumFrame else {
            throw LocalError(.failed, "the agent sent a stream frame of \(length) bytes, over the limit of \(LocalMessage.maximumFrame)")
        }
        return (bytes[4], length)
    }

    /// Reads at least one byte and at most `target.count` into `target`: what the socket's
    /// buffer holds first, then one read of the connection (straight into `target` when it is
    /// large). Throws when the connection ends or fails; returns 0 only when it ended and
    /// `atEnd` allows that (before a frame).
    public func readSome(into target: UnsafeMutableRawBufferPointer, atEnd: Bool = false) throws(LocalError) -> Int {
        guard target.count > 0 else { return 0 }
        while true {
            let copied = buffer.withLock { buffer -> Int in
                let count = min(buffer.end - buffer.start, target.count)
                guard count > 0 else { return 0 }
                buffer.bytes.withUnsafeBytes { source in
                    target.baseAddress!.copyMemory(from: source.baseAddress! + buffer.start, byteCount: count)
                }
                buffer.start += count
                return count
            }
            if copied > 0 { return copied }
            // Large payloads are read straight into their place; small reads go through the buffer.
            let count: Int
            if target.count >= 64 * 1024 {
                count = systemRead(fd, target.baseAddress!, target.count)
                if count > 0 { return count }
            } else {
                count = buffer.withLock { buffer in
                    buffer.start = 0
                    buffer.end = 0
                    let n = buffer.bytes.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress!, $0.count) }
                    if n > 0 { buffer.end = n }
                    return n
                }
                if count > 0 { continue }
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    throw LocalError(.failed, "the agent at \(path) did not answer the stream request in time")
                }
                throw LocalError(.failed, "reading the stream from the agent failed: \(String(cString: strerror(errno)))")
            }
            if atEnd { return 0 }
            throw LocalError(.failed, "the agent at \(path) closed the stream connection in the middle of a frame")
        }
    }

    /// Sends a frame of `kind` carrying `bytes`, without copying them; blocks while the agent
    /// is behind (the socket's buffer is full), which is the flow control.
    public func write(kind: UInt8, bytes: UnsafeRawBufferPointer) throws(LocalError) {
        let length = UInt32(bytes.count)
        var header: [UInt8] = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), kind]
        try writing.withLock { closed throws(LocalError) in
            guard !closed, !ended.withLock({ $0 }) else { throw LocalError(.failed, "the stream connection is closed") }
            var headerSent = 0
            var bodySent = 0
            while headerSent < header.count || bodySent < bytes.count {
                let sent = header.withUnsafeMutableBytes { head -> Int in
                    var parts = [
                        iovec(iov_base: head.baseAddress! + headerSent, iov_len: head.count - headerSent),
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress.map { $0 + bodySent }), iov_len: bytes.count - bodySent),
                    ]
                    return parts.withUnsafeMutableBufferPointer { parts -> Int in
                        var message = msghdr()
                        let skipHeader = headerSent == head.count
                        message.msg_iov = skipHeader ? parts.baseAddress! + 1 : parts.baseAddress!
                        message.msg_iovlen = skipHeader || bytes.isEmpty ? 1 : 2
                        return sendmsg(fd, &message, Int32(MSG_NOSIGNAL))
                    }
                }
                if sent < 0 {
                    if errno == EINTR { continue }
                    throw LocalError(.failed, "writing the stream to the agent failed: \(String(cString: strerror(errno)))")
                }
                let toHeader = min(sent, header.count - headerSent)
                headerSent += toHeader
                bodySent += sent - toHeader
            }
        }
    }

    /// Sends an empty frame of `kind` at once if no write is under way and the socket has room
    /// (true), without waiting for either (false: nothing was sent).
    public func writeIfIdle(kind: UInt8) -> Bool {
        let header: [UInt8] = [0, 0, 0, 0, kind]
        let sent: Bool? = writing.withLockIfAvailable { closed -> Bool in
            guard !closed, !ended.withLock({ $0 }) else { return true }
            var offset = 0
            while offset < header.count {
                // Only the first byte may find no room; once the frame has begun, it is finished.
                let flags = Int32(MSG_NOSIGNAL) | (offset == 0 ? Int32(MSG_DONTWAIT) : 0)
                let n = header.withUnsafeBytes { raw in send(fd, raw.baseAddress! + offset, raw.count - offset, flags) }
                if n < 0 {
                    if errno == EINTR { continue }
                    return !(offset == 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                }
                offset += n
            }
            return true
        }
        return sent ?? false
    }

    /// Sends a frame with no payload, or a short one.
    public func write(kind: UInt8, _ bytes: [UInt8] = []) throws(LocalError) {
        let result: Result<Void, LocalError> = bytes.withUnsafeBytes { raw in
            do throws(LocalError) {
                try write(kind: kind, bytes: raw)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Ends the connection both ways: the reader's `readFrame` returns nil, and writes fail,
    /// a write blocked on a full socket included. The descriptor itself is released by `close`.
    public func shutdown() {
        // The descriptor stays valid until `close`, which waits for writers: no lock is needed here.
        let first = ended.withLock { ended in
            defer { ended = true }
            return !ended
        }
        if first { systemShutdown(fd) }
    }

    /// Releases the descriptor; call once, when no thread reads any more. Waits for a write
    /// under way, so shut down first to end one that is blocked.
    public func close() {
        ended.withLock { $0 = true }
        writing.withLock { closed in
            guard !closed else { return }
            systemClose(fd)
            closed = true
        }
    }
}
