import HandoffFraming

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// The local socket as a blocking client speaks it, without Foundation: the `handoff` front
// links this and nothing heavier, so that `handoff continue` starts in well under a
// millisecond (docs/agent.md, Performance). `LocalClient` (the app library's and the CLI's
// client) is built on the same calls.

private func systemClose(_ fd: Int32) { _ = close(fd) }
private func systemConnect(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 { connect(fd, address, length) }
private func systemSend(_ fd: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int { send(fd, bytes, count, flags) }
private func systemRead(_ fd: Int32, _ bytes: UnsafeMutableRawPointer, _ count: Int) -> Int { read(fd, bytes, count) }

/// The local protocol's constants (docs/local-api.md).
public enum LocalProtocol {
    /// The frame kind of a JSON message: ASCII `J`.
    public static let frameKind: UInt8 = 0x4A
    /// The protocol version this build speaks; `hello` carries it.
    /// Version 2 added `prove` and `proof` to `hello`.
    public static let version = 2
    /// The largest frame either side accepts.
    public static let maximumFrame = 1 << 20
}

/// What a client of the local socket says it is in its `hello`.
public enum LocalRole: String, Codable, Sendable, Hashable {
    /// An app: it announces activities, answers saves and receives continuations. The agent
    /// verifies which installed app it is from the socket's peer credentials.
    case app
    /// A program acting for the person (the `handoff` CLI, scripts): it asks and may publish
    /// an activity of its own, but never receives continuations.
    case control
}

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

/// The blocking calls a client of the local socket makes: connect, introduce itself, write and
/// read frames. Errors are `LocalError`s that name the socket and say what to do.
package enum LocalSocketIO {

    package static func connect(_ path: String) throws(LocalError) -> Int32 {
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
    package static func checkServer(_ fd: Int32, path: String) throws(LocalError) {
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
    package static var helloTimeout: Int {
        helloTimeout(setting: getenv("HANDOFF_HELLO_TIMEOUT").map { String(cString: $0) })
    }

    /// The hello timeout `HANDOFF_HELLO_TIMEOUT`'s value `setting` gives (nil: not set).
    package static func helloTimeout(setting: String?) -> Int {
        guard let setting, let seconds = Int(setting) else { return 15 }
        return min(max(seconds, 1), 3600)
    }

    package static func setReceiveTimeout(_ fd: Int32, seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    package static func write(_ fd: Int32, _ frame: Frame) throws(LocalError) {
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
    package static func readFrame(_ fd: Int32, _ decoder: inout FrameDecoder) throws(LocalError) -> Frame? {
        while true {
            do {
                if let frame = try decoder.next() { return frame }
            } catch {
                throw LocalError(.failed, error.description)
            }
            // Read into scratch space that is neither zeroed nor kept (on the stack when the
            // thread has room): a zeroed 64 KiB array for every message read cost the apps and
            // the command line a fill of 64 KiB per message.
            let (count, failure) = withUnsafeTemporaryAllocation(byteCount: 64 * 1024, alignment: 16) { chunk in
                let count = systemRead(fd, chunk.baseAddress!, chunk.count)
                if count > 0 { decoder.append(UnsafeRawBufferPointer(rebasing: chunk[..<count])) }
                return (count, count < 0 ? errno : 0)
            }
            if count < 0 {
                if failure == EINTR { continue }
                if failure == EAGAIN || failure == EWOULDBLOCK { throw LocalError(.failed, "no answer within \(helloTimeout) seconds") }
                throw LocalError(.failed, String(cString: strerror(failure)))
            }
            if count == 0 { return nil }
        }
    }

    /// Says `hello` on a connected socket, proves this process holds it, and returns the
    /// agent's answer to `hello` as `read` reads it (`read` returns nil for any other message).
    package static func introduce<Answer>(
        _ fd: Int32, path: String, role: LocalRole, bundleIdentifier: String?, _ decoder: inout FrameDecoder,
        answer read: (Frame) throws(LocalError) -> Answer?
    ) throws(LocalError) -> Answer {
        try checkServer(fd, path: path)
        // An agent answers hello at once; a socket that does not is not an agent. (At once
        // on an idle machine: one busy with a build or a flood may take seconds.)
        setReceiveTimeout(fd, seconds: helloTimeout)
        do {
            try write(fd, Frame(kind: LocalProtocol.frameKind, payload: LocalJSONWriter.hello(request: 1, role: role, bundleIdentifier: bundleIdentifier)))
        } catch {
            // An agent that refuses a client at once (it serves too many) says why first.
            if let frame = try? readFrame(fd, &decoder), let refusal = LocalJSONReader.replyOutcome(frame.payload)?.error {
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
            if frame.kind == LocalProtocol.frameKind, let nonce = LocalJSONReader.proveNonce(frame.payload) {
                try write(fd, Frame(kind: LocalProtocol.frameKind, payload: LocalJSONWriter.proof(nonce: nonce)))
                continue
            }
            throw LocalError(.failed, "the agent at \(path) did not answer hello")
        }
    }

    /// Connects as a `control` client, says `hello`, makes one call (`call`, the JSON of a
    /// call numbered 2) and returns the payload of its reply, all on the calling thread, then
    /// closes the connection: for a command that makes one call (`handoff continue`), with no
    /// reader thread, and the answer to `hello` read only for its error. Messages that come
    /// before the reply are passed over; a message this reader cannot read is returned as if
    /// it were the reply (the caller then says it cannot read it), rather than waited past.
    package static func callOnce(path: String, call: [UInt8]) throws(LocalError) -> [UInt8] {
        let fd = try connect(path)
        defer { systemClose(fd) }
        var decoder = FrameDecoder(maximumPayload: LocalProtocol.maximumFrame)
        try introduce(fd, path: path, role: .control, bundleIdentifier: nil, &decoder) { frame throws(LocalError) -> Void? in
            guard frame.kind == LocalProtocol.frameKind, let (request, error) = LocalJSONReader.replyOutcome(frame.payload), request == 1 else { return nil }
            if let error { throw error }
            return ()
        }
        try write(fd, Frame(kind: LocalProtocol.frameKind, payload: call))
        while true {
            guard let frame = try readFrame(fd, &decoder) else {
                throw LocalError(.failed, "the agent at \(path) closed the connection")
            }
            // A newer agent may say things this client does not know; they are passed over, as
            // the reader thread does.
            guard frame.kind == LocalProtocol.frameKind else { continue }
            if let outcome = LocalJSONReader.replyOutcome(frame.payload) {
                if outcome.request == 2 { return frame.payload }
            } else if !LocalJSONReader.isOtherThanReply(frame.payload) {
                return frame.payload
            }
        }
    }
}
