import HandoffLocalAPI
import Logging
import NIOCore

/// Reads one local client's messages on its connection's event loop, as they arrive: each
/// frame is read into a `LocalMessage` there and handed to the agent's stream of the client's
/// messages, with no task or async sequence between the socket and that stream. A frame that
/// is not a message is answered at once with the error (under its request number, if that can
/// be read) and told to the stream as a failure. A client that has `LocalAPIServer.queueLimit`
/// messages waiting for the agent is disconnected.
///
/// The first frame (read by `LocalAcceptor` during the handshake) goes to the stream before
/// anything the connection reads. When the handler is added it makes the client's `LocalPeer`
/// and the stream, and gives them to `started`.
final class LocalServeHandler: ChannelInboundHandler {
    typealias InboundIn = Frame

    /// What serving the client needs, once its connection is set up.
    struct Started: Sendable {
        var peer: LocalPeer
        var messages: AsyncStream<Result<LocalMessage, LocalError>>
        var writer: FrameWriter
    }

    private let client: AcceptedLocalClient
    private let logger: Logger
    private let started: EventLoopPromise<Started>
    private var peer: LocalPeer?
    private var inbox: AsyncStream<Result<LocalMessage, LocalError>>.Continuation?

    init(client: AcceptedLocalClient, logger: Logger, started: EventLoopPromise<Started>) {
        self.client = client
        self.logger = logger
        self.started = started
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel
        let writer = FrameWriter(channel: channel, limit: LocalAPIServer.queueLimit)
        let (messages, inbox) = AsyncStream<Result<LocalMessage, LocalError>>.makeStream(bufferingPolicy: .bufferingOldest(LocalAPIServer.queueLimit))
        let peer = LocalPeer(pid: client.pid, uid: client.uid, executable: client.executable, notAnApp: client.notAnApp, writer: writer) {
            writer.finish()
            channel.close(promise: nil)
        }
        self.peer = peer
        self.inbox = inbox
        receive(client.first, context: context)
        started.succeed(Started(peer: peer, messages: messages, writer: writer))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        inbox?.finish()
        inbox = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        receive(unwrapInboundIn(data), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        inbox?.finish()
        inbox = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("a local client's connection failed: \(error)", metadata: ["pid": "\(client.pid)"])
        context.close(promise: nil)
    }

    private func receive(_ frame: Frame, context: ChannelHandlerContext) {
        guard let inbox, let peer else { return }
        do throws(LocalError) {
            // A client that sends faster than the agent serves it is cut off.
            if case .dropped = inbox.yield(.success(try LocalMessage(frame: frame))) {
                logger.warning("a local client sent more than the agent could take and was disconnected", metadata: ["pid": "\(client.pid)"])
                inbox.finish()
                self.inbox = nil
                context.close(promise: nil)
            }
        } catch {
            // Told to the client at once, under its request number if that can be read.
            peer.send(.reply(request: LocalAPIServer.requestNumber(in: frame.payload), .failure(error)))
            inbox.yield(.failure(error))
        }
    }
}
