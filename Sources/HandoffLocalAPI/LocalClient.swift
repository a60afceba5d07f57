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
private func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 { connect(fd, address, length) }
private func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int { send(fd, bytes, count, flags) }
private func systemRead(_ fd: Int32, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, bytes, count) }

/// Where the local socket is.
public enum LocalSocket {
    /// `$HANDOFF_SOCKET` when set; otherwise `$XDG_RUNTIME_DIR/handoff/agent.sock`; otherwise
    /// (no runtime directory, as in many containers) `/tmp/handoff-UID/agent.sock`.
    public static func defaultPath(environment: [String: String]) -> String {
        defaultPath { environment[$0] }
    }

    /// The same, from this process's environment.
    public static func defaultPath() -> String {
        // `getenv`, not `ProcessInfo`, whose first use copies the whole environment into a
        // dictionary: `handoff continue` starts on every call (docs/agent.md, Performance).
        defaultPath { name in getenv(name).map { String(cString: $0) } }
    }

    private static func defaultPath(_ variable: (String) -> String?) -> String {
        if let explicit = variable("HANDOFF_SOCKET"), !explicit.isEmpty { return explicit }
        if let runtime = variable("XDG_RUNTIME_DIR"), !runtime.isEmpty { return runtime + "/handoff/agent.sock" }
        return "/tmp/handoff-\(getuid())/agent.sock"
    }

    /// The longest socket path the system takes (the size of `sun_path`, less its NUL).
    public static let maximumPathBytes: Int = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1
}

/// A client of the local socket: connects, says `hello`, then sends messages and calls the
/// agent, while a reader thread hands every other message to `onMessage`.
///
/// Blocking sockets on one thread of its own, so it needs no event loop: the app library and
/// the CLI both use it.
public final class LocalClient: Sendable {
    /// The agent's answer to `hello`.
    public let hello: LocalReply
    public let path: String

    private let fd: Int32
    private let state: Mutex<ClientState>
    /// Held while writing to or closing the descriptor; true once it is closed.
    private let descriptor = Mutex(false)
    private let onMessage: @Sendable (LocalMessage) -> Void
    private let onClose: @Sendable (String) -> Void

    private struct ClientState: ~Copyable {
        /// Calls waiting for their reply (request 1 is the hello).
        var pending = PendingRequests<CheckedContinuation<Result<LocalReply, LocalError>, Never>>(first: 2)
        var closed: String?
    }

    /// Connects to the agent at `path` and introduces this client. Throws `LocalError`
    /// (`.notFound` when no agent listens there) naming the path.
    public init(
        path: String = LocalSocket.defaultPath(), role: LocalRole, bundleIdentifier: String? = nil,
        onMessage: @escaping @Sendable (LocalMessage) -> Void = { _ in }, onClose: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(LocalError) {
        self.path = path
        self.onMessage = onMessage
        self.onClose = onClose
        self.state = Mutex(ClientState())
        fd = try Self.connect(path)
        var decoder = FrameDecoder(maximumPayload: LocalMessage.maximumFrame)
        do throws(LocalError) {
            hello = try Self.introduce(fd, path: path, role: role, bundleIdentifier: bundleIdentifier, &decoder) { frame throws(LocalError) in
                guard case .reply(1, let reply) = try LocalMessage(frame: frame) else { return nil }
                if let error = reply.error { throw error }
                return reply
            }
        } catch {
            systemClose(fd)
            throw error
        }
        let reader = Thread { [self, decoder] in
            self.readLoop(decoder)
        }
        reader.name = "handoff-local-api"
        reader.start()
    }

    /// Says `hello` on a connected socket, proves this process holds it, and returns the
    /// agent's answer to `hello` as `read` reads it (`read` returns nil for any other message).
    private static func introduce<Answer>(
        _ fd: Int32, path: String, role: LocalRole, bundleIdentifier: String?, _ decoder: inout FrameDecoder,
        answer read: (Frame) throws(LocalError) -> Answer?
    ) throws(LocalError) -> Answer {
        try checkServer(fd, path: path)
        // An agent answers hello at once; a socket that does not is not an agent. (At once
        // on an idle machine: one busy with a build or a flood may take seconds.)
        setReceiveTimeout(fd, seconds: helloTimeout)
        do {
            try write(fd, LocalMessage.call(request: 1, .hello(version: LocalMessage.version, role: role, bundleIdentifier: bundleIdentifier)).frame)
        } catch {
            // An agent that refuses a client at once (it serves too many) says why first.
            if let frame = try? readFrame(fd, &decoder), case .reply(_, let reply)? = try? LocalMessage(frame: frame), let refusal = reply.error {
                throw refusal
            }
            throw error
        }
        // The agent asks this process to prove it holds the connection, then answers hello;
        // nothing else comes first.
        while true {
            guard let frame = try readFrame(fd, &decoder) else {
                throw LocalError(.failed, "the agent at \(path) closed the connection during hello")
            }
            if let answer = try read(frame) {
                setReceiveTimeout(fd, seconds: 0)
                return answer
            }
            if case .prove(let nonce) = try LocalMessage(frame: frame) {
                try write(fd, LocalMessage.proof(nonce: nonce).frame)
                continue
            }
            throw LocalError(.failed, "the agent at \(path) did not answer hello")
        }
    }

    /// Connects, says `hello`, makes one call and returns its reply (with `error` set when the
    /// agent refused), all on the calling thread, then closes the connection. For a command
    /// that makes one call and needs nothing of the agent's answer to `hello` but its success
    /// (`handoff continue`): no reader thread, and the answer to `hello` is not decoded.
    /// Messages that come before the reply are passed over.
    public static func callOnce(path: String = LocalSocket.defaultPath(), role: LocalRole = .control, _ call: LocalCall) throws(LocalError) -> LocalReply {
        let fd = try connect(path)
        defer { systemClose(fd) }
        var decoder = FrameDecoder(maximumPayload: LocalMessage.maximumFrame)
        try introduce(fd, path: path, role: role, bundleIdentifier: nil, &decoder) { frame throws(LocalError) -> Void? in
            if LocalMessageJSON.enabled, frame.kind == LocalMessage.frameKind, let (request, error) = LocalMessageJSON.replyOutcome(frame.payload) {
                guard request == 1 else { return nil }
                if let error { throw error }
                return ()
            }
            guard case .reply(1, let reply) = try LocalMessage(frame: frame) else { return nil }
            if let error = reply.error { throw error }
            return ()
        }
        try write(fd, LocalMessage.call(request: 2, call).frame)
        while true {
            guard let frame = try readFrame(fd, &decoder) else {
                throw LocalError(.failed, "the agent at \(path) closed the connection")
            }
            // A newer agent may say things this client does not know; skip them, as the reader
            // thread does.
            if case .reply(2, let reply)? = try? LocalMessage(frame: frame) { return reply }
        }
    }

    /// Connects as `init` does, on a thread of its own: connecting blocks until the agent
    /// answers `hello`, which must not hold up one of the few threads that async code shares
    /// (an agent in the same process may need it to answer).
    public static func connect(
        path: String = LocalSocket.defaultPath(), role: LocalRole, bundleIdentifier: String? = nil,
        onMessage: @escaping @Sendable (LocalMessage) -> Void = { _ in }, onClose: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(LocalError) -> LocalClient {
        let result: Result<LocalClient, LocalError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                do throws(LocalError) {
                    continuation.resume(returning: .success(try LocalClient(path: path, role: role, bundleIdentifier: bundleIdentifier, onMessage: onMessage, onClose: onClose)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            thread.name = "handoff-local-api-connect"
            thread.start()
        }
        return try result.get()
    }

    /// Whether the connection has ended.
    public var isClosed: Bool { state.withLock { $0.closed != nil } }

    /// Sends a message that has no answer.
    public func send(_ message: LocalMessage) throws(LocalError) {
        if let closed = state.withLock({ $0.closed }) { throw LocalError(.failed, closed) }
        do {
            // Once closed, the descriptor's number may belong to another socket: never write then.
            try descriptor.withLock { closed throws(LocalError) in
                guard !closed else { throw LocalError(.failed, "the connection has ended") }
                try Self.write(fd, message.frame)
            }
        } catch {
            end("could not write to the agent at \(path): \(error.message)")
            throw error
        }
    }

    /// Calls the agent and returns its reply (a reply with `error` set when the agent refused).
    /// Throws only when the connection fails.
    public func call(_ call: LocalCall) async throws(LocalError) -> LocalReply {
        let result: Result<LocalReply, LocalError> = await withCheckedContinuation { continuation in
            let request: UInt64? = state.withLock { $0.pending.issue(continuation) }
            guard let request else {
                continuation.resume(returning: .failure(LocalError(.failed, "the connection to the agent at \(path) has ended")))
                return
            }
            do {
                try send(.call(request: request, call))
            } catch {
                // `end` resumes every pending call, this one included.
            }
        }
        return try result.get()
    }

    /// Closes the connection; pending calls end with an error.
    public func close() {
        end("the client closed the connection")
        // The reader thread wakes up, sees the end, and closes the descriptor.
        descriptor.withLock { closed in
            if !closed { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private func end(_ reason: String) {
        let pending: [CheckedContinuation<Result<LocalReply, LocalError>, Never>]? = state.withLock { state in
            guard state.closed == nil else { return nil }
            state.closed = reason
            return state.pending.close()
        }
        guard let pending else { return }
        for continuation in pending {
            continuation.resume(returning: .failure(LocalError(.failed, reason)))
        }
        onClose(reason)
    }

    private func readLoop(_ initial: FrameDecoder) {
        var decoder = initial
        defer {
            descriptor.withLock { closed in
                closed = true
                systemClose(fd)
            }
        }
        while true {
            let frame: Frame?
            do {
                frame = try Self.readFrame(fd, &decoder)
            } catch {
                end("the connection to the agent at \(path) failed: \(error.message)")
                return
            }
            guard let frame else {
                end("the agent at \(path) closed the connection")
                return
            }
            let message: LocalMessage
            do {
                message = try LocalMessage(frame: frame)
            } catch {
                // A newer agent may say things this client does not know; skip them.
                continue
            }
            if case .reply(let request, let reply) = message {
                let waiting = state.withLock { $0.pending.settle(request) }
                waiting?.resume(returning: .success(reply))
            } else {
                onMessage(message)
            }
        }
    }

    // MARK: Sockets

    static func connect(_ path: String) throws(LocalError) -> Int32 {
        let bytes = Array(path.utf8)
        guard bytes.count <= LocalSocket.maximumPathBytes else {
            throw LocalError(.badRequest, "the socket path \(path) is longer than \(LocalSocket.maximumPathBytes) bytes; choose a shorter one")
        }
        #if canImport(Darwin)
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #else
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #endif
        guard fd >= 0 else { throw LocalError(.failed, "cannot make a socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                systemConnect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if result != 0 {
            let code = errno
            systemClose(fd)
            switch code {
            case ENOENT, ECONNREFUSED:
                throw LocalError(.notFound, "no Handoff agent is running at \(path); start it with 'handoffd'")
            case EACCES:
                throw LocalError(.notAllowed, "not allowed to connect to the agent at \(path): it belongs to another user")
            default:
                throw LocalError(.failed, "cannot connect to the agent at \(path): \(String(cString: strerror(code)))")
            }
        }
        return fd
    }

    /// Refuses a socket served by another user: on a shared machine, someone else could have
    /// put a socket where the agent's should be.
    static func checkServer(_ fd: Int32, path: String) throws(LocalError) {
        #if os(Linux)
        var credentials = (pid: Int32(0), uid: UInt32(0), gid: UInt32(0))
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        let result = withUnsafeMutablePointer(to: &credentials) { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, $0, &length) }
        guard result == 0 else { return }
        guard credentials.uid == getuid() else {
            throw LocalError(.notAllowed, "the socket \(path) is served by another user (uid \(credentials.uid)), not by your agent; refusing to use it")
        }
        #endif
    }

    /// How long a client waits for the agent's answer to `hello`, in seconds: 15, or what
    /// `HANDOFF_HELLO_TIMEOUT` says (1 to 3600). An agent answers at once on an idle machine;
    /// the test suite, which starts hundreds of agents at once in one process on two cores,
    /// gives them longer.
    static var helloTimeout: Int {
        helloTimeout(setting: getenv("HANDOFF_HELLO_TIMEOUT").map { String(cString: $0) })
    }

    /// The hello timeout `HANDOFF_HELLO_TIMEOUT`'s value `setting` gives (nil: not set).
    package static func helloTimeout(setting: String?) -> Int {
        guard let setting, let seconds = Int(setting) else { return 15 }
        return min(max(seconds, 1), 3600)
    }

    static func setReceiveTimeout(_ fd: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    static func write(_ fd: Int32, _ frame: Frame) throws(LocalError) {
        let bytes = frame.encoded
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                systemSend(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw LocalError(.failed, String(cString: strerror(errno)))
            }
            offset += sent
        }
    }

    /// The next frame, nil at the end of the stream.
    static func readFrame(_ fd: Int32, _ decoder: inout FrameDecoder) throws(LocalError) -> Frame? {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            do {
                if let frame = try decoder.next() { return frame }
            } catch {
                throw LocalError(.failed, error.description)
            }
            let count = chunk.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw LocalError(.failed, "no answer within \(helloTimeout) seconds") }
                throw LocalError(.failed, String(cString: strerror(errno)))
            }
            if count == 0 { return nil }
            decoder.append(chunk[..<count])
        }
    }
}
