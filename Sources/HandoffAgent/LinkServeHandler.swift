import Foundation
import HandoffLocalAPI
import HandoffWire
import NIOCore
import NIOSSL

/// Serves one accepted link from its event loop: who the peer is, then each frame as it is
/// read. What happens is decided by `LinkServeStateMachine`; this handler runs it. Stream
/// frames are handled at once, in order; every other frame is answered by a task of its own
/// (so a slow answer, an app saving, holds up no other request), whose answer goes straight to
/// the connection.
final class LinkServeHandler: ChannelInboundHandler, ChannelOutboundHandler {
    typealias InboundIn = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = Frame

    /// What the listener gives every link it serves.
    struct Service: Sendable {
        /// Whether a peer's fingerprint is accepted now (asked before every frame).
        var accepts: @Sendable (String) -> Bool
        var acceptStream: (@Sendable (LinkStreamTarget, LinkStream, LinkPeer) async -> ContinuationFailure?)?
        var answer: @Sendable (Frame, LinkPeer) async -> Frame?
    }

    static var maximumInFlight: Int { LinkServeStateMachine<LinkPeer>.maximumInFlight }

    private let service: Service
    /// Between members: the peer proven by its membership proof. Otherwise the peer is the
    /// certificate it showed in the TLS handshake.
    private let proven: EventLoopFuture<LinkPeer>?
    /// Whether this side's `hello` went out with its proof already.
    private let greeted: Bool
    private var machine = LinkServeStateMachine<LinkPeer>()
    /// The link's streams, once the peer is known.
    private var streams: LinkStreamMux?
    private var context: ChannelHandlerContext?
    private var writer: FrameWriter?

    init(service: Service, proven: EventLoopFuture<LinkPeer>?, greeted: Bool) {
        self.service = service
        self.proven = proven
        self.greeted = greeted
    }

    private var accepts: (LinkPeer) -> Bool {
        { [service] in service.accepts($0.fingerprint) }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        writer = FrameWriter(channel: context.channel, limit: .max)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        run(machine.ended())
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        run(machine.read(unwrapInboundIn(data), accepts: accepts))
    }

    func channelInactive(context: ChannelHandlerContext) {
        run(machine.ended())
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        run(machine.readWanted())
    }

    private func run(_ actions: [LinkServeStateMachine<LinkPeer>.Action]) {
        for action in actions {
            switch action {
            case .identify: identify()
            case .answerFirst(let frame, let peer): answer(frame, from: peer, first: true)
            case .dispatch(let frame, let peer): answer(frame, from: peer, first: false)
            case .stream(let frame): if let message = try? LinkMessage(frame: frame) { streams?.received(message) }
            case .read: context?.read()
            case .close: context?.close(promise: nil)
            case .finish(let servingStreams):
                if servingStreams { streams?.linkEnded("the link closed") }
                writer?.finish()
            }
        }
    }

    /// Who the peer is: known once its first frame came (a frame arrives only after the
    /// handshake and, between members, after the proof).
    private func identify() {
        guard let context else { return }
        let channel = context.channel
        let peer: EventLoopFuture<LinkPeer?> =
            proven.map { $0.map { Optional($0) } }
            ?? channel.nioSSL_peerCertificate().map { certificate in
                guard let certificate, let der = try? certificate.toDERBytes() else { return nil }
                return LinkPeer(fingerprint: DeviceIdentity.fingerprint(ofCertificate: der), certificate: der, address: nil)
            }
        let bound = NIOLoopBound(self, eventLoop: channel.eventLoop)
        peer.hop(to: channel.eventLoop).whenComplete { result in
            bound.value.identified((try? result.get()) ?? nil)
        }
    }

    private func identified(_ found: LinkPeer?) {
        guard let context else { return }
        var peer = found
        peer?.address = context.channel.remoteAddress?.ipAddress
        if let identified = peer, service.accepts(identified.fingerprint) {
            var acceptor: LinkStreamMux.Acceptor?
            if let acceptStream = service.acceptStream {
                acceptor = { target, stream in await acceptStream(target, stream, identified) }
            }
            let writer = self.writer
            streams = LinkStreamMux(acceptor: acceptor, send: { message in writer?.write(message.frame) })
        }
        run(machine.identified(peer, accepts: accepts, helloAnswered: greeted))
    }

    /// Answers `frame` in a task of its own; the answer goes straight to the connection, then
    /// the machine hears of it on the event loop.
    private func answer(_ frame: Frame, from peer: LinkPeer, first: Bool) {
        guard let context else { return }
        let answer = service.answer
        let writer = self.writer
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        // Not owned, and not cancelled when the link ends: an answer may change the account
        // (a sender writes an update and closes at once), which must not stop halfway. Begun
        // here, on the event loop's thread, up to its first suspension: the hop onto the agent
        // (free, where its tasks share this thread) and an answer that waits for nothing (an
        // early save) are made now, not after the loop's other work.
        Task.immediate {
            if let reply = await answer(frame, peer) {
                if HopTrace.isOn, case .fetch? = try? LinkMessage(frame: frame) { HopTrace.stamp("answered fetch") }
                writer?.write(reply)
            }
            loop.execute {
                let handler = bound.value
                handler.run(first ? handler.machine.firstAnswered(peer, accepts: handler.accepts) : handler.machine.answered(accepts: handler.accepts))
            }
        }
    }
}
