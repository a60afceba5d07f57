import CHandoffSystem
import Foundation
import HandoffLocalAPI
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A local connection that passed its handshake: the socket, who is behind it, and its first
/// message, for the server to serve.
struct AcceptedLocalClient: Sendable {
    var descriptor: Int32
    var pid: Int32
    var uid: UInt32
    /// The executable of the connecting process, read before it proved it holds the connection
    /// (`LocalHandshake`); nil for a connection that did not say hello, or when unreadable.
    var executable: URL?
    /// Why the process is not taken for the app its executable is (`LocalAcceptor.loaderInjection`).
    var notAnApp: String? = nil
    var first: Frame
}

/// The local socket's listening end: accepts clients on a thread of its own, runs each one's
/// handshake (`LocalHandshake`) with the kernel's word for who wrote every byte, and hands the
/// connections that pass to `serve`. At most `maximumPending` handshakes run at once (the
/// oldest is dropped for a new one), each for at most `handshakeDeadline`; at most
/// `maximumClients` connections are served at once.
final class LocalAcceptor: Sendable {
    static let maximumPending = 64
    static let handshakeDeadline: Duration = .seconds(5)

    let path: String
    private let listener: Int32
    /// Written to wake the thread to stop.
    private let wake: (read: Int32, write: Int32)
    private let stopped = Mutex(false)
    private let finished = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let threadDone = Mutex(false)
    /// Connections being served now; the server counts them down as they close.
    let served = Atomic<Int>(0)
    let maximumClients: Int

    /// Listens on `path` (replacing a socket file there), owner-only.
    init(path: String, maximumClients: Int, logger: Logger, serve: @escaping @Sendable (AcceptedLocalClient) -> Void) throws(LocalAPIServerError) {
        self.path = path
        self.maximumClients = maximumClients
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw LocalAPIServerError(message: "cannot make the local socket: \(String(cString: strerror(errno)))") }
        // Set on the listener, so that every accepted socket has it from its first byte.
        _ = handoff_pass_credentials(fd)
        unlink(path)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        // Owner-only (its folder already is: LocalAPIServer.checkDirectory).
        guard bound == 0, chmod(path, 0o600) == 0, listen(fd, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw LocalAPIServerError(message: "cannot listen on \(path): \(reason)")
        }
        var pipeEnds: [Int32] = [0, 0]
        guard handoff_pipe(&pipeEnds) == 0 else {
            Glibc.close(fd)
            throw LocalAPIServerError(message: "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        listener = fd
        wake = (pipeEnds[0], pipeEnds[1])
        let thread = Thread { [self] in
            self.run(logger: logger, serve: serve)
            let waiting: CheckedContinuation<Void, Never>? = self.finished.withLock { waiting in
                self.threadDone.withLock { $0 = true }
                defer { waiting = nil }
                return waiting
            }
            waiting?.resume()
        }
        thread.name = "handoff-local-accept"
        thread.start()
    }

    /// Stops accepting, drops the handshakes under way and removes the socket file.
    func close() async {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        if first {
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = finished.withLock { waiting in
                if threadDone.withLock({ $0 }) { return true }
                waiting = continuation
                return false
            }
            if done { continuation.resume() }
        }
    }

    private struct Pending {
        var descriptor: Int32
        var pid: Int32
        var uid: UInt32
        var executable: URL?
        var notAnApp: String?
        var handshake: LocalHandshake
        var deadline: ContinuousClock.Instant
    }

    private func run(logger: Logger, serve: @escaping @Sendable (AcceptedLocalClient) -> Void) {
        var pending: [Pending] = []
        var refusedFull = 0
        // Set when accepting failed for want of descriptors: the listener is not polled until then.
        var backOffUntil: ContinuousClock.Instant?
        var outOfDescriptors = false
        defer {
            for client in pending { Glibc.close(client.descriptor) }
            Glibc.close(listener)
            Glibc.close(wake.read)
            Glibc.close(wake.write)
            unlink(path)
        }
        while true {
            let now = ContinuousClock.now
            if let until = backOffUntil, until <= now { backOffUntil = nil }
            // A negative descriptor is skipped by poll: the listener, while backing off.
            var polled = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0), pollfd(fd: backOffUntil == nil ? listener : -1, events: Int16(POLLIN), revents: 0)]
            polled += pending.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            let nearest = (pending.map(\.deadline) + [backOffUntil].compactMap { $0 }).min()
            let timeout = nearest.map { max(0, Int32(($0 - now).components.seconds * 1000 + ($0 - now).components.attoseconds / 1_000_000_000_000_000) + 1) } ?? -1
            let ready = poll(&polled, nfds_t(polled.count), timeout)
            if ready < 0 && errno != EINTR { logger.error("the local socket's poll failed: \(String(cString: strerror(errno)))") }
            if polled[0].revents != 0 { return }
            // Handshakes first (their indices follow the two fixed entries), from the last so
            // that removing one leaves the others' indices alone.
            for index in pending.indices.reversed() where polled[index + 2].revents != 0 {
                if !advance(&pending[index], logger: logger, serve: serve) {
                    pending.remove(at: index)
                }
            }
            let after = ContinuousClock.now
            pending.removeAll { client in
                guard client.deadline <= after else { return false }
                refuse(client.descriptor, request: 1, "no hello within \(Self.handshakeDeadline) of connecting")
                return true
            }
            if polled[1].revents & Int16(POLLIN) != 0 {
                acceptAll(into: &pending, refusedFull: &refusedFull, backOffUntil: &backOffUntil, outOfDescriptors: &outOfDescriptors, logger: logger)
            }
        }
    }

    private func acceptAll(into pending: inout [Pending], refusedFull: inout Int, backOffUntil: inout ContinuousClock.Instant?, outOfDescriptors: inout Bool, logger: Logger) {
        while true {
            let fd = handoff_accept(listener)
            if fd < 0 {
                if errno == EINTR { continue }
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    // The listener stays readable: wait a little rather than spin on it.
                    if !outOfDescriptors { logger.warning("cannot accept local clients: \(String(cString: strerror(errno))); trying again every 100 ms") }
                    outOfDescriptors = true
                    backOffUntil = .now + .milliseconds(100)
                }
                return
            }
            outOfDescriptors = false
            var credentials = PeerCredentials()
            var length = socklen_t(MemoryLayout<PeerCredentials>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
                Glibc.close(fd)
                continue
            }
            // A client of another user is refused: the socket is owner-only, but root's agent
            // must not serve other users either.
            guard credentials.uid == getuid() else {
                logger.warning("refused a local client of another user", metadata: ["pid": "\(credentials.pid)", "uid": "\(credentials.uid)"])
                Glibc.close(fd)
                continue
            }
            if served.load(ordering: .relaxed) + pending.count >= maximumClients {
                refusedFull += 1
                if refusedFull == 1 || refusedFull.isMultiple(of: 1000) {
                    logger.warning("the agent serves \(maximumClients) local clients already; refused a new one (\(refusedFull) so far)", metadata: ["pid": "\(credentials.pid)"])
                }
                refuse(fd, request: 1, "the agent serves \(maximumClients) local clients already; close some (watchers, scripts) and try again")
                continue
            }
            refusedFull = 0
            if pending.count >= Self.maximumPending {
                refuse(pending.removeFirst().descriptor, request: 1, "no hello within the time left to connect; the agent had many connections waiting")
            }
            pending.append(Pending(
                descriptor: fd, pid: credentials.pid, uid: credentials.uid, executable: nil,
                handshake: LocalHandshake(connectedPID: credentials.pid), deadline: .now + Self.handshakeDeadline))
        }
    }

    /// Reads what the client sent and moves its handshake on; false when the connection has
    /// left the pending list (served, or refused and closed).
    private func advance(_ client: inout Pending, logger: Logger, serve: @escaping @Sendable (AcceptedLocalClient) -> Void) -> Bool {
        while true {
            let wanted = client.handshake.wanted
            var bytes = [UInt8](repeating: 0, count: wanted)
            let read = Self.receive(client.descriptor, into: &bytes)
            switch read {
            case .wouldBlock:
                return true
            case .closed:
                Glibc.close(client.descriptor)
                return false
            case .bytes(let count, let writer):
                switch client.handshake.received(bytes[..<count], writtenBy: writer) {
                case .needMore:
                    continue
                case .challenge(let role):
                    // The executable is read now, and only then is the nonce sent: a proof
                    // comes from what the process ran at this moment or later. Only an app's:
                    // a control client is never taken for an app, and the command line's
                    // `handoff continue` should not wait for three reads of /proc.
                    client.executable = role == .app && Self.sharesNamespaces(client.pid) ? Self.executable(of: client.pid) : nil
                    // Started with the loader told to run other code in it: the executable may
                    // be the app's, but what speaks may not be.
                    if client.executable != nil, let why = Self.loaderInjection(of: client.pid) {
                        let reason = "process \(client.pid) \(why), so it is not taken for an installed app"
                        logger.warning("\(reason)", metadata: ["executable": "\(client.executable?.path ?? "?")"])
                        client.notAnApp = reason
                        client.executable = nil
                    }
                    // The system's generator (getrandom): not guessable ahead of time.
                    let nonce = Data(SystemRandom.bytes(16))
                    let frame = LocalMessage.prove(nonce: nonce).frame.encoded
                    let sent = frame.withUnsafeBytes { send(client.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    guard sent == frame.count else {
                        Glibc.close(client.descriptor)
                        return false
                    }
                    client.handshake.challenged(nonce: nonce)
                case .serve(let first):
                    // Read again: a process that passed the proof and then ran something else
                    // is not the app it was.
                    if client.executable != nil, Self.executable(of: client.pid) != client.executable {
                        refuse(client.descriptor, request: 1, "process \(client.pid) ran another executable while it said hello")
                        return false
                    }
                    served.add(1, ordering: .relaxed)
                    serve(AcceptedLocalClient(descriptor: client.descriptor, pid: client.pid, uid: client.uid, executable: client.executable, notAnApp: client.notAnApp, first: first))
                    return false
                case .refuse(let reason, let request):
                    logger.warning("refused a local client: \(reason)", metadata: ["pid": "\(client.pid)"])
                    refuse(client.descriptor, request: request, reason)
                    return false
                }
            }
        }
    }

    /// Answers `request` with a refusal (best effort: the socket is not waited on) and closes.
    private func refuse(_ fd: Int32, request: UInt64, _ reason: String) {
        let frame = LocalMessage.reply(request: request, .failure(LocalError(.notAllowed, reason))).frame.encoded
        _ = frame.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        Glibc.close(fd)
    }

    /// Whether process `pid` is in this process's user and pid namespaces. A process with a
    /// user namespace of its own may name any pid of its pid namespace as the writer of what it
    /// sends (it holds CAP_SYS_ADMIN there), so the kernel's word on who wrote a proof holds
    /// only for processes in ours: others are never taken for an installed app.
    static func sharesNamespaces(_ pid: Int32) -> Bool {
        let fileManager = FileManager.default
        return ["user", "pid"].allSatisfy { kind in
            guard let theirs = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/\(pid)/ns/\(kind)"),
                let ours = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/ns/\(kind)")
            else { return false }
            return theirs == ours
        }
    }

    /// The variables that make the dynamic loader run a library an executable did not ask for,
    /// and that people do not set in ordinary sessions (`LD_LIBRARY_PATH` is left alone:
    /// conda, CUDA and ROS set it in terminals). The agent starts apps without them.
    static let injectingVariables = ["LD_PRELOAD", "LD_AUDIT"]

    /// Why process `pid` may run other code than its executable's, as its environment shows
    /// (`/proc/PID/environ`, the process's own memory: a library already inside could rewrite
    /// it, so this stops only the plain route), or nil.
    static func loaderInjection(of pid: Int32) -> String? {
        guard let environment = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else {
            return "has an environment the agent cannot read"
        }
        for entry in environment.split(separator: 0) {
            guard let equals = entry.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let name = String(decoding: entry[entry.startIndex..<equals], as: UTF8.self)
            if injectingVariables.contains(name), equals + 1 < entry.endIndex {
                return "was started with \(name) set (the loader runs that library inside it); start it without \(name)"
            }
        }
        return nil
    }

    static func executable(of pid: Int32) -> URL? {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")).map { URL(fileURLWithPath: $0) }
    }

    private enum Received {
        case bytes(Int, writer: Int32?)
        case wouldBlock
        case closed
    }

    /// One read, with the process the kernel names as the bytes' writer. The kernel never joins
    /// bytes of two writers in one read of a socket with SO_PASSCRED.
    private static func receive(_ fd: Int32, into bytes: inout [UInt8]) -> Received {
        var writer: Int32 = 0
        var count: Int
        repeat {
            count = bytes.withUnsafeMutableBytes { handoff_receive(fd, $0.baseAddress, UInt($0.count), &writer) }
        } while count < 0 && errno == EINTR
        if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK ? .wouldBlock : .closed }
        if count == 0 { return .closed }
        // Pid 0: the bytes came with no writer (sent before the agent asked for credentials).
        return .bytes(count, writer: writer == 0 ? nil : writer)
    }
}
