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
        fd = try LocalSocketIO.connect(path)
        var decoder = FrameDecoder(maximumPayload: LocalMessage.maximumFrame)
        do throws(LocalError) {
            hello = try LocalSocketIO.introduce(fd, path: path, role: role, bundleIdentifier: bundleIdentifier, &decoder) { frame throws(LocalError) in
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
                try LocalSocketIO.write(fd, message.frame)
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
                frame = try LocalSocketIO.readFrame(fd, &decoder)
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

}
