import Foundation
import HandoffLocalAPI
import HandoffWire
import NIOCore
import NIOSSL

/// Serves one accepted link from its event loop: who the peer is, then each frame as it is
/// read. Stream frames are handled at once, in order; every other frame is answered by a task
/// of its own (so a slow answer, an app saving, holds up no other request), whose answer goes
/// straight to the connection. The first frame (the connecting side's `hello`) is answered
/// before any later one, unless this side greeted the peer already.
///
/// At most `maximumInFlight` answers are pending at once: past that, requests already read wait
/// their turn here and the link is not read until one is done, and TCP slows the sender.
final class LinkServeHandler: ChannelInboundHandler, ChannelOutboundHandler {
    typealias InboundIn = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = Frame

    /// What the listener gives every link it serves.
    struct Service: Sendable {
        /// Whether a peer's fingerprint is accepted now (asked before every frame).
        var accepts: @Sendable (String) -> Bool
        var acceptStream: (@Sendable (UUID, LinkStream, LinkPeer) async -> ContinuationFailure?)?
        var answer: @Sendable (Frame, LinkPeer) async -> Frame?
    }

    static let maximumInFlight = 64

    private enum State {
        /// Before the first frame.
        case waiting
        /// The first frame came; the peer is being identified, then the first frame answered.
        /// Frames read meanwhile wait here, in order.
        case starting(queued: [Frame])
        case serving(LinkPeer, LinkStreamMux)
        case ended
    }

    private let service: Service
    /// Between members: the peer proven by its membership proof. Otherwise the peer is the
    /// certificate it showed in the TLS handshake.
    private let proven: EventLoopFuture<LinkPeer>?
    /// Whether this side's `hello` went out with its proof already.
    private let greeted: Bool
    private var state = State.waiting
    private var inFlight = 0
    /// Requests read while `maximumInFlight` answers were pending, oldest first.
    private var backlog: [Frame] = []
    /// Whether a read was held back because `maximumInFlight` answers were pending.
    private var readHeld = false
    private var context: ChannelHandlerContext?
    private var writer: FrameWriter?

    init(service: Service, proven: EventLoopFuture<LinkPeer>?, greeted: Bool) {
        self.service = service
        self.proven = proven
        self.greeted = greeted
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        writer = FrameWriter(channel: context.channel, limit: .max)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        end()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch state {
        case .waiting:
            state = .starting(queued: [frame])
            identify(context)
        case .starting(var queued):
            queued.append(frame)
            state = .starting(queued: queued)
        case .serving(let peer, let streams):
            serve(frame, peer: peer, streams: streams, context: context)
        case .ended:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        // Not while the first frame is being answered (what comes meanwhile waits, and is
        // held to what one read brings), nor while `maximumInFlight` answers are pending.
        var starting = false
        if case .starting = state { starting = true }
        guard !starting, inFlight < Self.maximumInFlight, backlog.isEmpty else {
            readHeld = true
            return
        }
        context.read()
    }

    /// Who the peer is: known once its first frame came (a frame arrives only after the
    /// handshake and, between members, after the proof).
    private func identify(_ context: ChannelHandlerContext) {
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
        guard case .starting(let queued) = state, let context else { return }
        // Checked here, as before every later frame: only a peer accepted at this moment is
        // answered.
        guard var peer = found, service.accepts(peer.fingerprint) else {
            state = .ended
            context.close(promise: nil)
            return
        }
        peer.address = context.channel.remoteAddress?.ipAddress
        let identified = peer
        var acceptor: LinkStreamMux.Acceptor?
        if let acceptStream = service.acceptStream {
            acceptor = { activityID, stream in await acceptStream(activityID, stream, identified) }
        }
        let writer = self.writer
        let streams = LinkStreamMux(acceptor: acceptor, send: { message in writer?.write(message.frame) })
        let first = queued[0]
        if greeted, case .hello? = try? LinkMessage(frame: first) {
            // Answered already: this side's greeting went out with its proof.
            startServing(peer, streams, then: queued.dropFirst())
            return
        }
        // The first frame is answered before any later one is read.
        state = .starting(queued: Array(queued.dropFirst()))
        let answer = service.answer
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        Task {
            let reply = await answer(first, identified)
            if let reply { writer?.write(reply) }
            loop.execute {
                let handler = bound.value
                guard case .starting(let later) = handler.state else { return }
                handler.startServing(identified, streams, then: later[...])
            }
        }
    }

    private func startServing(_ peer: LinkPeer, _ streams: LinkStreamMux, then queued: ArraySlice<Frame>) {
        state = .serving(peer, streams)
        guard let context else { return }
        for frame in queued {
            guard case .serving = state else { return }
            serve(frame, peer: peer, streams: streams, context: context)
        }
        resumeReading()
    }

    private func serve(_ frame: Frame, peer: LinkPeer, streams: LinkStreamMux, context: ChannelHandlerContext) {
        guard service.accepts(peer.fingerprint) else {
            end()
            context.close(promise: nil)
            return
        }
        if LinkMessage.isStreamFrame(frame) {
            if let message = try? LinkMessage(frame: frame) { streams.received(message) }
            return
        }
        guard inFlight < Self.maximumInFlight else {
            backlog.append(frame)
            return
        }
        start(frame, peer: peer, context: context)
    }

    private func start(_ frame: Frame, peer: LinkPeer, context: ChannelHandlerContext) {
        inFlight += 1
        let answer = service.answer
        let writer = self.writer
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let loop = context.eventLoop
        Task {
            if let reply = await answer(frame, peer) { writer?.write(reply) }
            loop.execute { bound.value.answered() }
        }
    }

    /// An answer is done: the oldest request waiting starts, or a read held back goes ahead.
    private func answered() {
        inFlight -= 1
        guard let context, case .serving(let peer, _) = state else { return }
        if !backlog.isEmpty {
            let next = backlog.removeFirst()
            guard service.accepts(peer.fingerprint) else {
                end()
                context.close(promise: nil)
                return
            }
            start(next, peer: peer, context: context)
            return
        }
        resumeReading()
    }

    /// Reads again if a read was held back and nothing holds it any more.
    private func resumeReading() {
        guard readHeld, case .serving = state, inFlight < Self.maximumInFlight, backlog.isEmpty, let context else { return }
        readHeld = false
        context.read()
    }

    private func end() {
        if case .serving(_, let streams) = state { streams.linkEnded("the link closed") }
        state = .ended
        backlog = []
        writer?.finish()
    }
}
