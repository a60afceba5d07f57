import Foundation
import HandoffLocalAPI
import Logging
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One client of the local socket, as the agent sees it: the process behind it (from the
/// socket's peer credentials, which the kernel fills in and the client cannot forge) and a
/// way to send it messages.
package final class LocalPeer: Sendable {
    package let pid: Int32
    package let uid: UInt32
    /// The executable the process ran when it proved it holds the connection (`LocalHandshake`);
    /// nil when unreadable, or for a connection that did not say hello.
    package let executable: URL?
    /// Why the process is not taken for the app its executable is, if it is not.
    package let notAnApp: String?
    private let writer: FrameWriter?
    /// For a client in the agent's process: messages are handed to it at once, in order.
    private let deliver: (@Sendable (LocalMessage) -> Void)?
    /// For a client in the agent's process: ends its session.
    private let hangUp: @Sendable () -> Void

    /// A client in the agent's own process (no socket): it is taken to be the installed app
    /// it names in `hello`, as there is no other executable to check.
    package let isInProcess: Bool

    init(
        pid: Int32, uid: UInt32, executable: URL?, notAnApp: String? = nil, writer: FrameWriter, inProcess: Bool = false
    ) {
        self.pid = pid
        self.notAnApp = notAnApp
        self.uid = uid
        self.writer = writer
        self.deliver = nil
        // The writer ends a connection: finished by `close`, or cutting off a client that does not read.
        self.hangUp = {}
        self.isInProcess = inProcess
        self.executable = inProcess ? nil : executable
    }

    /// A client in the agent's own process, which `deliver` hands every message to as it is sent.
    init(inProcessDelivering deliver: @escaping @Sendable (LocalMessage) -> Void, hangUp: @escaping @Sendable () -> Void) {
        pid = getpid()
        uid = getuid()
        writer = nil
        self.deliver = deliver
        self.hangUp = hangUp
        self.notAnApp = nil
        isInProcess = true
        executable = nil
    }

    /// Sends a message to the client, in order. A client that leaves `LocalAPIServer.unreadLimit`
    /// bytes unread is disconnected (`FrameWriter`) rather than let the agent's memory grow.
    package func send(_ message: LocalMessage) {
        if let deliver {
            deliver(message)
            return
        }
        writer?.write(message.frame)
    }

    /// Ends the connection once what was sent has been written.
    package func close() {
        writer?.finish()
        if deliver != nil { hangUp() }
    }
}


/// Linux's `struct ucred`, which Glibc shows Swift only under `_GNU_SOURCE`: the same three
/// 32-bit fields in the same order.
struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// Why the local socket could not be opened.
package struct LocalAPIServerError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}

/// The agent's end of the local socket: a Unix stream socket, owner-only, carrying frames of
/// JSON messages (`docs/local-api.md`).
package final class LocalAPIServer: Sendable {
    /// How many bytes sent to a client may wait for it to read them before it is cut off: a
    /// few times the largest message, and tens of thousands of small answers.
    static let unreadLimit = 4 << 20

    /// The most clients served at once; more are refused with a message saying so.
    static let maximumClients = 256
    /// How long a frame a client has begun may take to arrive in full.
    static let partialFrameDeadline: TimeAmount = .seconds(10)

    package let path: String
    private let acceptor: LocalAcceptor
    private let serving: Task<Void, Never>

    /// Serves a connection that carries continuation streams: its first message (`request`,
    /// `call`), the frames that follow, and where to write. It answers the first message itself.
    package typealias StreamServe = @Sendable (
        _ client: LocalStreamClient, _ inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator, _ outbound: NIOAsyncChannelOutboundWriter<Frame>
    ) async -> Void

    /// Opens the socket at `path` (making its directory, owner-only) and calls `serve` for each
    /// client with its messages; the connection closes when `serve` returns. Refuses to start
    /// when another agent answers on the path; a stale socket file is replaced.
    package init(
        path: String, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger,
        serveStream: StreamServe? = nil,
        serve: @escaping @Sendable (LocalPeer, LocalMessages) async -> Void
    ) async throws(LocalAPIServerError) {
        self.path = path
        let directory = (path as NSString).deletingLastPathComponent
        guard path.utf8.count <= LocalSocket.maximumPathBytes else {
            throw LocalAPIServerError(message: "the socket path \(path) is longer than \(LocalSocket.maximumPathBytes) bytes; choose a shorter one with --socket")
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw LocalAPIServerError(message: "cannot make the socket's directory \(directory): \(error.localizedDescription)")
        }
        try Self.checkDirectory(directory)
        if FileManager.default.fileExists(atPath: path), let running = try? await LocalClient.connect(path: path, role: .control) {
            running.close()
            throw LocalAPIServerError(message: "another agent is already running at \(path); stop it first, or give this one another --socket")
        }
        let (accepted, arrivals) = AsyncStream<AcceptedLocalClient>.makeStream()
        let acceptor = try LocalAcceptor(path: path, maximumClients: Self.maximumClients, logger: logger) { arrivals.yield($0) }
        self.acceptor = acceptor
        self.serving = Task {
            await withDiscardingTaskGroup { group in
                for await client in accepted {
                    group.addTask {
                        defer { acceptor.served.subtract(1, ordering: .relaxed) }
                        // A connection that opens with a stream request carries stream frames, not messages.
                        if let serveStream, case .call(let request, let call)? = try? LocalMessage(frame: client.first), call.opensStream {
                            await Self.serveStreams(client, request: request, call: call, eventLoopGroup: eventLoopGroup, logger: logger, serveStream: serveStream)
                        } else {
                            await Self.serveMessages(client, eventLoopGroup: eventLoopGroup, logger: logger, serve: serve)
                        }
                    }
                }
                group.cancelAll()
            }
        }
        // Cancelling the serving task ends the stream of arrivals.
        arrivals.onTermination = { _ in }
    }

    /// Serves a client's messages: its connection's pipeline reads each into a message as it
    /// arrives (`LocalMessageDecoder`, on the event loop) for `serve`, which answers through the
    /// client's `LocalPeer`. The connection closes when `serve` returns, once what was sent to the
    /// client is written.
    private static func serveMessages(
        _ client: AcceptedLocalClient, eventLoopGroup: any EventLoopGroup, logger: Logger,
        serve: @escaping @Sendable (LocalPeer, LocalMessages) async -> Void
    ) async {
        let connection: (channel: any Channel, peer: LocalPeer, writer: FrameWriter, inbound: LocalInbound)
        do {
            connection = try await ClientBootstrap(group: eventLoopGroup).withConnectedSocket(client.descriptor) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let writer = FrameWriter(channel: channel, limit: unreadLimit)
                    let peer = LocalPeer(pid: client.pid, uid: client.uid, executable: client.executable, notAnApp: client.notAnApp, writer: writer)
                    // Frames are written through `writer`; what is read goes to `inbound`.
                    let inbound = LocalInbound(channel: channel)
                    try channel.pipeline.syncOperations.addHandlers(
                        FrameHandler(maximumPayload: LocalMessage.maximumFrame, partialDeadline: Self.partialFrameDeadline),
                        LocalMessageDecoder(peer: peer), inbound)
                    return (channel, peer, writer, inbound)
                }
            }
        } catch {
            logger.warning("could not serve a local client: \(error)", metadata: ["pid": "\(client.pid)"])
            return
        }
        let (channel, peer, writer) = (connection.channel, connection.peer, connection.writer)
        let first = LocalMessageDecoder.read(client.first, answeringFailuresTo: peer)
        await serve(peer, LocalMessages(first: first, inbound: connection.inbound))
        // What was sent (a last refusal) is written before the connection closes, unless the
        // client does not read it within 2 seconds.
        writer.finish()
        // Closing fails what is still unwritten, which drains the writer.
        let giveUp = channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        _ = try? await writer.whenDrained.get()
        giveUp.cancel()
        channel.close(promise: nil)
    }

    /// Serves a connection that carries a continuation stream, through `serveStream`.
    private static func serveStreams(
        _ client: AcceptedLocalClient, request: UInt64, call: LocalCall, eventLoopGroup: any EventLoopGroup, logger: Logger,
        serveStream: StreamServe
    ) async {
        let connection: NIOAsyncChannel<Frame, Frame>
        do {
            connection = try await ClientBootstrap(group: eventLoopGroup).withConnectedSocket(client.descriptor) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: LocalMessage.maximumFrame, partialDeadline: Self.partialFrameDeadline))
                    return try NIOAsyncChannel<Frame, Frame>(wrappingChannelSynchronously: channel)
                }
            }
        } catch {
            logger.warning("could not serve a local client: \(error)", metadata: ["pid": "\(client.pid)"])
            return
        }
        try? await connection.executeThenClose { inbound, outbound in
            let channel = connection.channel
            var iterator = inbound.makeAsyncIterator()
            let streamClient = LocalStreamClient(pid: client.pid, request: request, call: call) { channel.close(promise: nil) }
            await serveStream(streamClient, &iterator, outbound)
        }
    }

    /// The socket's folder must be this user's own, and no one else may write in it: in a
    /// shared place such as /tmp, another user could have made it first, to put their own
    /// socket where the agent's should be.
    static func checkDirectory(_ directory: String) throws(LocalAPIServerError) {
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            throw LocalAPIServerError(message: "cannot read the socket's folder \(directory): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw LocalAPIServerError(message: "the socket's folder \(directory) is not a folder (a link?); remove it, or choose another --socket")
        }
        guard info.st_uid == getuid() else {
            throw LocalAPIServerError(message: "the socket's folder \(directory) belongs to another user (uid \(info.st_uid)); choose another --socket")
        }
        guard info.st_mode & 0o022 == 0 else {
            throw LocalAPIServerError(message: "other users may write in the socket's folder \(directory); make it yours alone (chmod go-w), or choose another --socket")
        }
    }

    /// The request number of a message that could not be read, if it has a valid one (an
    /// integer from 1 to 2^53 − 1); else 0.
    static func requestNumber(in payload: [UInt8]) -> UInt64 {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
            let number = object["request"] as? NSNumber, !(object["request"] is Bool)
        else { return 0 }
        let value = number.doubleValue
        guard value >= 1, value < 9_007_199_254_740_992, value == value.rounded() else { return 0 }
        return UInt64(value)
    }

    /// Stops listening, closes every client and removes the socket file.
    package func close() async {
        await acceptor.close()
        serving.cancel()
    }
}

/// A client of an agent in the same process, with no socket between them: the same
/// `LocalMessage`s, handed over directly. For running apps and agents in one test process.
package final class InProcessClient: Sendable {
    private let inbox: AsyncStream<Result<LocalMessage, LocalError>>.Continuation
    private let closed: LockedValue<Bool>

    /// Whether the session has ended.
    package var isClosed: Bool { closed.value }

    init(inbox: AsyncStream<Result<LocalMessage, LocalError>>.Continuation, closed: LockedValue<Bool>) {
        self.inbox = inbox
        self.closed = closed
    }

    /// Sends a message to the agent, in order.
    package func send(_ message: LocalMessage) {
        inbox.yield(.success(message))
    }

    /// Ends the session, as closing a socket would.
    package func close() {
        closed.value = true
        inbox.finish()
    }
}

/// A connection of the local socket that carries continuation streams, as the agent sees it
/// before answering: who connected (the socket's peer credentials) and what it asks.
package struct LocalStreamClient: Sendable {
    package let pid: Int32
    /// The number of the first message, which the reply carries.
    package let request: UInt64
    /// `openStream`, `acceptStream`, `copy` or `paste`.
    package let call: LocalCall
    /// Closes the connection.
    package let close: @Sendable () -> Void
}

extension LocalCall {
    /// Whether this is the first message of a stream connection.
    package var opensStream: Bool {
        switch self {
        case .openStream, .acceptStream, .copy, .paste, .provideClipboard: return true
        default: return false
        }
    }
}
