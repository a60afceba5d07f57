import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// The fingerprints (`DeviceIdentity.fingerprint`) of the account's current members' long-term
/// certificates: the only members a link accepts. Read at every membership proof and before
/// every frame, so a removed member is refused at once.
public typealias LinkPins = @Sendable () -> Set<String>

/// Why a link could not be set up.
public enum LinkError: Error, Sendable, CustomStringConvertible {
    case badIdentity(String)
    /// The link ended (closed, or failed with `reason`) after `answers` answers had come.
    case ended(answers: Int, reason: String)

    public var description: String {
        switch self {
        case .badIdentity(let why): return "this device's identity cannot be used for TLS: \(why)"
        case .ended(let answers, let reason): return "the link ended after \(answers) answers: \(reason)"
        }
    }
}

/// TLS for links between the account's devices: TLS 1.3 only, and both sides present a
/// certificate: the one shown for the period (`LinkCertificates`), which names no one. Who is
/// at the other end is decided by the link's `LinkTrust`: for members, by the membership proof
/// inside the link (`LinkProofHandler`); for pairing, by the shown certificate's fingerprint,
/// checked in the handshake. No certificate authority and no host name is trusted, and a
/// stranger learns nothing that names the device.
package enum LinkTLS {
    static func context(showing shown: LinkCertificates.Shown) throws -> NIOSSLContext {
        try NIOSSLContext(configuration: configuration(showing: shown))
    }

    /// The configuration both ends of a link use. A listener makes a new context from it for
    /// every connection: a TLS context keeps the keys of the session tickets it issues (and a
    /// cache of sessions), and a resumed session skips the certificate check. A context that
    /// lives for one connection can resume nothing, so every handshake presents and checks a
    /// certificate, and every link between members proves membership anew.
    static func configuration(showing shown: LinkCertificates.Shown) throws -> TLSConfiguration {
        let tls = try shown.tls.get()
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(tls.certificate)], privateKey: .privateKey(tls.key))
        configuration.minimumTLSVersion = .tlsv13
        configuration.maximumTLSVersion = .tlsv13
        // Ask for (and send) certificates; who is accepted is decided by the link's trust.
        configuration.certificateVerification = .noHostnameVerification
        // No authority is trusted, so the system's store is never loaded: loading it costs a
        // context tens of milliseconds.
        configuration.trustRoots = .certificates([])
        return configuration
    }

    /// A link notices a peer that vanished without closing (its network dropped, its machine
    /// froze): keepalive probes after `silence` seconds of silence, every 2 s, 3 unanswered
    /// end it; data unacknowledged for 15 s ends it. Requests and streams on it then fail
    /// instead of waiting.
    ///
    /// The device that opened a link probes after 5 s, but only while something waits on the
    /// link (`PeerConnection`): an idle link sends nothing until that device closes it
    /// (`--link-idle`, 60 s by default). The device that accepted it probes after 90 s of
    /// silence, later than that close: it learns of a peer that vanished from an idle link, and
    /// adds nothing to a link that is only waiting to be closed.
    static let acceptedSilence = 90

    static func watchForDeadPeers(_ channel: any Channel, silence: Int = 5) throws {
        guard let options = channel.syncOptions else { return }
        try options.setOption(.socketOption(.so_keepalive), value: 1)
        #if os(Linux)
        let tcp = NIOBSDSocket.OptionLevel(rawValue: CInt(IPPROTO_TCP))
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_KEEPIDLE))), value: silence)
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_KEEPINTVL))), value: 2)
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_KEEPCNT))), value: 3)
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_USER_TIMEOUT))), value: 15_000)
        #endif
    }

    /// What the handshake accepts: for members, any well-formed certificate valid now (the
    /// membership proof decides); for pairing, the certificate `trust` approves.
    static func verifier(_ trust: LinkTrust) -> NIOSSLCustomVerificationCallback {
        { certificates, promise in
            guard let leaf = certificates.first, let der = try? leaf.toDERBytes() else {
                promise.succeed(.failed)
                return
            }
            promise.succeed(acceptsShown(der, trust) ? .certificateVerified : .failed)
        }
    }

    /// Whether the handshake accepts the shown certificate `der` under `trust`.
    package static func acceptsShown(_ der: [UInt8], _ trust: LinkTrust, now: Date = Date()) -> Bool {
        guard let presented = try? Certificate(derEncoded: der), isValidNow(presented, now: now) else { return false }
        switch trust {
        case .members: return true
        case .shown(let accepts): return accepts(DeviceIdentity.fingerprint(ofCertificate: der))
        }
    }

    package static func isValidNow(_ certificate: Certificate, now: Date = Date()) -> Bool {
        certificate.notValidBefore <= now && now <= certificate.notValidAfter
    }

    /// The handlers after TLS that decide who the peer is, for a link under `trust`: a
    /// `LinkProofHandler` for members (returned, to learn the peer from), nothing for pairing.
    static func addProof(
        to channel: any Channel, _ role: LinkProof.Role, trust: LinkTrust, identity: DeviceIdentity, shown: LinkCertificates.Shown, maximumFrame: Int,
        deadline: TimeAmount = .seconds(10)
    ) throws -> LinkProofHandler? {
        guard case .members(let accepts) = trust else { return nil }
        let handler = LinkProofHandler(
            role, identity: identity, shown: shown.certificateDER, accepting: accepts, maximumFrame: maximumFrame, deadline: deadline, eventLoop: channel.eventLoop)
        do {
            try channel.pipeline.syncOperations.addHandler(handler)
        } catch {
            handler.peer.fail(error)
            throw error
        }
        return handler
    }
}

/// The device at the other end of a link, as its membership proof (or, on a pairing link, its
/// shown certificate) says.
public struct LinkPeer: Sendable, Hashable {
    /// SHA-256 of its long-term certificate, as `DeviceIdentity.fingerprint` (on a pairing
    /// link, of the certificate it showed).
    public var fingerprint: String
    /// Its long-term certificate, DER (on a pairing link, the one it showed).
    public var certificate: [UInt8]
    /// The certificate it showed in the handshake, DER.
    public var presented: [UInt8]
    /// The address it connected from, where known.
    public var address: String?

    public init(fingerprint: String, certificate: [UInt8], presented: [UInt8]? = nil, address: String? = nil) {
        self.fingerprint = fingerprint
        self.certificate = certificate
        self.presented = presented ?? certificate
        self.address = address
    }
}

/// Turns the bytes of a link into frames and back, refusing oversized frames by closing.
final class FrameHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = ByteBuffer

    private var decoder: FrameDecoder
    /// How long a frame may take to arrive once it has begun; nil for no limit.
    private let partialDeadline: TimeAmount?
    private var partialTimer: Scheduled<Void>?

    init(maximumPayload: Int, partialDeadline: TimeAmount? = nil) {
        decoder = FrameDecoder(maximumPayload: maximumPayload)
        self.partialDeadline = partialDeadline
    }

    /// Changes the frame limit from the next frame on (a link between members is held to a
    /// small one until its peer is proven).
    func setMaximumPayload(_ maximum: Int) {
        decoder.maximumPayload = maximum
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        do {
            // Whole frames in this read go straight from it to their payloads: one copy of a
            // stream's bytes, not two. What is left (a frame begun) waits in the decoder.
            if decoder.bufferedByteCount == 0 {
                while let declared = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self).map(Int.init),
                    declared <= decoder.maximumPayload, buffer.readableBytes >= Frame.headerSize + declared
                {
                    buffer.moveReaderIndex(forwardBy: 4)
                    let kind = buffer.readInteger(as: UInt8.self)!
                    let payload = buffer.readBytes(length: declared)!
                    context.fireChannelRead(wrapInboundOut(Frame(kind: kind, payload: payload)))
                }
            }
            decoder.append(buffer.readableBytesView)
            while let frame = try decoder.next() {
                context.fireChannelRead(wrapInboundOut(frame))
            }
        } catch {
            context.fireErrorCaught(error)
            context.close(promise: nil)
            return
        }
        // Bytes came: the wait they ended is over (see `read`).
        partialTimer?.cancel()
        partialTimer = nil
    }

    /// A frame begun must go on arriving: a sender that stops half-way would otherwise hold its
    /// buffer and connection for ever. So each read asked for while a frame is unfinished must
    /// bring bytes within the deadline. The clock runs only while a read is asked for: while
    /// this side reads nothing (the frames read wait for the link's credit, and NIO's
    /// back-pressure holds further reads back), a sender that waits is not to blame; and a
    /// transfer that goes on for longer than the deadline, every read ending inside a frame, is
    /// making progress.
    func read(context: ChannelHandlerContext) {
        if decoder.bufferedByteCount > 0, partialTimer == nil, let partialDeadline {
            let channel = context.channel
            partialTimer = context.eventLoop.scheduleTask(in: partialDeadline) { channel.close(promise: nil) }
        }
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        partialTimer?.cancel()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        // Header and payload straight into one buffer: one copy of the payload, not two.
        var buffer = context.channel.allocator.buffer(capacity: Frame.headerSize + frame.payload.count)
        buffer.writeInteger(UInt32(frame.payload.count))
        buffer.writeInteger(frame.kind)
        buffer.writeBytes(frame.payload)
        context.write(wrapOutboundOut(buffer), promise: promise)
    }
}

/// Bounds what connections can cost before they prove anything: at most `limit` open at
/// once, at most `perSourceLimit` of them from one address still before their first frame,
/// and each must complete its TLS handshake (and, between members, its membership proof) and
/// send a first frame within `deadline`, or it is closed. When every slot is taken, a new connection takes the slot of one still waiting
/// for its first frame: the longest waiting, from the address with the most waiting. So
/// strangers holding connections open from many addresses cannot keep a member's new link
/// (or a join) out; only links that have proved themselves keep their slots. Refusals are
/// counted by `watch`, which logs a flood once.
final class ConnectionGuard: ChannelInboundHandler, Sendable {
    typealias InboundIn = Frame
    typealias InboundOut = Frame

    /// What the connections of one listener share.
    final class Count: Sendable {
        let value = Mutex(0)
        /// Connections before their first frame, by source address.
        let pending = Mutex<[String: Int]>([:])
        /// The same connections, oldest first, for one to give its slot to a newcomer.
        let waiting = Mutex<[String: [ConnectionGuard]]>([:])
    }

    private let count: Count
    private let limit: Int
    private let perSourceLimit: Int
    private let deadline: TimeAmount
    private let watch: FloodWatch?
    private let timer = Mutex<Scheduled<Void>?>(nil)
    private let counted = Mutex(false)
    /// The source while this connection is pending (counted in `Count.pending`).
    private let pendingSource = Mutex<String?>(nil)
    private let channel = Mutex<(any Channel)?>(nil)

    init(count: Count, limit: Int, perSourceLimit: Int = 16, deadline: TimeAmount, watch: FloodWatch? = nil) {
        self.count = count
        self.limit = limit
        self.perSourceLimit = perSourceLimit
        self.deadline = deadline
        self.watch = watch
    }

    func channelActive(context: ChannelHandlerContext) {
        let source = context.channel.remoteAddress?.ipAddress ?? "?"
        let pendingAdmitted = count.pending.withLock { pending in
            guard pending[source, default: 0] < perSourceLimit else { return false }
            pending[source, default: 0] += 1
            return true
        }
        guard pendingAdmitted else {
            watch?.refused(from: source, reason: "over \(perSourceLimit) handshakes at once from one address")
            context.close(promise: nil)
            return
        }
        pendingSource.withLock { $0 = source }
        // A free slot, or the slot of the connection that waits longest from the address with
        // the most waiting (which then counts as closed).
        let (admitted, victim): (Bool, ConnectionGuard?) = count.value.withLock { open in
            if open < limit {
                open += 1
                return (true, nil)
            }
            let victim: ConnectionGuard? = count.waiting.withLock { waiting in
                guard let crowded = waiting.max(by: { $0.value.count < $1.value.count })?.key, var queue = waiting[crowded], !queue.isEmpty else { return nil }
                let oldest = queue.removeFirst()
                waiting[crowded] = queue.isEmpty ? nil : queue
                return oldest
            }
            guard let victim else { return (false, nil) }
            // Under the count's lock, as `channelInactive` decrements it: the victim's slot passes
            // to this connection, unless the victim closed meanwhile and gave it back already.
            let stillCounted = victim.counted.withLock { counted in
                defer { counted = false }
                return counted
            }
            if !stillCounted { open += 1 }
            return (true, victim)
        }
        if let victim {
            let from = victim.pendingSource.withLock { $0 } ?? "?"
            victim.evict()
            watch?.refused(from: from, reason: "waiting for a first frame when every slot was taken")
        }
        guard admitted else {
            endPending()
            watch?.refused(from: source, reason: "over \(limit) connections open")
            context.close(promise: nil)
            return
        }
        counted.withLock { $0 = true }
        channel.withLock { $0 = context.channel }
        count.waiting.withLock { $0[source, default: []].append(self) }
        let channel = context.channel
        let watch = self.watch
        let seconds = deadline.nanoseconds / 1_000_000_000
        timer.withLock {
            $0 = context.eventLoop.scheduleTask(in: deadline) {
                watch?.refused(from: source, reason: "no first frame within \(seconds) s")
                channel.close(promise: nil)
            }
        }
        context.fireChannelActive()
    }

    /// Closes this connection, whose slot was given away (it no longer counts as open).
    private func evict() {
        timer.withLock { $0?.cancel() }
        endPending()
        channel.withLock { $0 }?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        timer.withLock { scheduled in
            scheduled?.cancel()
            scheduled = nil
        }
        endPending()
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer.withLock { $0?.cancel() }
        endPending()
        channel.withLock { $0 = nil }
        count.value.withLock { open in
            if counted.withLock({ counted in defer { counted = false }; return counted }) { open -= 1 }
        }
        context.fireChannelInactive()
    }

    private func endPending() {
        guard let source = pendingSource.withLock({ source in defer { source = nil }; return source }) else { return }
        count.pending.withLock { pending in
            let left = pending[source, default: 1] - 1
            pending[source] = left > 0 ? left : nil
        }
        count.waiting.withLock { waiting in
            guard var queue = waiting[source] else { return }
            queue.removeAll { $0 === self }
            waiting[source] = queue.isEmpty ? nil : queue
        }
    }
}

/// Listens for links from the account's other devices and answers each request frame.
public final class LinkListener: Sendable {
    /// The connections accepted and still open, each served by its `LinkServeHandler` from its
    /// event loop: kept from the moment a connection is set up, so that closing the listener
    /// closes every one, even one accepted as it closed.
    final class Open: Sendable {
        private let channels = Mutex<(closed: Bool, open: [ObjectIdentifier: any Channel])>((false, [:]))

        func add(_ channel: any Channel) {
            let id = ObjectIdentifier(channel)
            let closed = channels.withLock { channels in
                if !channels.closed { channels.open[id] = channel }
                return channels.closed
            }
            if closed { return channel.close(promise: nil) }
            channel.closeFuture.whenComplete { [weak self] _ in _ = self?.channels.withLock { $0.open.removeValue(forKey: id) } }
        }

        /// Closes every connection, and any added later.
        func closeAll() {
            let open = channels.withLock { channels in
                channels.closed = true
                defer { channels.open = [:] }
                return Array(channels.open.values)
            }
            for channel in open { channel.close(promise: nil) }
        }
    }

    private let server: NIOAsyncChannel<Void, Never>
    private let serving: Task<Void, Never>
    private let open: Open
    /// Connections refused (over the limits, or silent past the deadline), to log a flood once.
    public let floodWatch: FloodWatch
    /// The connections open, and those before their first frame by address.
    let connections: ConnectionGuard.Count

    /// The port it listens on (useful when it was asked for port 0).
    public let port: Int

    /// Starts listening for members of the account `pins` names. `answer` is called for every
    /// frame a peer sends; what it returns is sent back.
    public convenience init(
        identity: DeviceIdentity, pins: @escaping LinkPins, host: String = "127.0.0.1", port: Int = 0,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        handshakeDeadline: TimeAmount = .seconds(10),
        answer: @escaping @Sendable (Frame) async -> Frame?
    ) async throws {
        try await self.init(
            identity: identity, trust: .members({ pins().contains($0) }), host: host, port: port, maximumFrame: maximumFrame,
            eventLoopGroup: eventLoopGroup, handshakeDeadline: handshakeDeadline, answer: { frame, _ in await answer(frame) })
    }

    /// Starts listening, accepting the peers `trust` approves. Its approval is asked again
    /// before each frame, so a peer that stops being accepted (a removed member) is cut off on
    /// links it already has. `answer` learns who sent each frame; `acceptStream` takes the
    /// continuation streams peers open (nil refuses them).
    ///
    /// `greeting`, on links between members, is this side's `hello`: it leaves with this side's
    /// membership proof, in the same flush, instead of in answer to the connecting side's
    /// `hello`, which then gets no answer of its own. The connecting side can send its first
    /// request as soon as it has read the proof and the greeting: one round trip fewer for every
    /// link opened (docs/wire-protocol.md, Links). Like every frame of this side, it is held
    /// until the peer is proven a member.
    ///
    /// `handshakeDeadline` is how long a connection may take to complete TLS, prove membership
    /// and send its first frame (10 s; tests on a loaded machine give more).
    public init(
        identity: DeviceIdentity, trust: LinkTrust, host: String = "127.0.0.1", port: Int = 0,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "handoff.link"), greeting: Frame? = nil, handshakeDeadline: TimeAmount = .seconds(10),
        acceptStream: (@Sendable (UUID, LinkStream, LinkPeer) async -> FetchFailure?)? = nil,
        answer: @escaping @Sendable (Frame, LinkPeer) async -> Frame?
    ) async throws {
        // Fails early if the identity cannot be used at all.
        _ = try LinkTLS.configuration(showing: identity.links.current())
        let count = ConnectionGuard.Count()
        let accepted = Open()
        self.open = accepted
        let service = LinkServeHandler.Service(accepts: trust.accepts, acceptStream: acceptStream, answer: answer)
        let watch = FloodWatch(what: "link connections", threshold: 50, logger: logger)
        self.floodWatch = watch
        self.connections = count
        let server = try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try LinkTLS.watchForDeadPeers(channel, silence: LinkTLS.acceptedSilence)
                    // A context of its own, with the certificate of this period: no session of
                    // another connection resumes here.
                    let shown = identity.links.current()
                    let context = try LinkTLS.context(showing: shown)
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context, customVerificationCallback: LinkTLS.verifier(trust)))
                    try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: maximumFrame))
                    let proof = try LinkTLS.addProof(
                        to: channel, .answering, trust: trust, identity: identity, shown: shown, maximumFrame: maximumFrame, deadline: handshakeDeadline)
                    try channel.pipeline.syncOperations.addHandler(ConnectionGuard(count: count, limit: 256, deadline: handshakeDeadline, watch: watch))
                    // Held by the proof's handler, released with this side's proof.
                    if proof != nil, let greeting { channel.write(greeting, promise: nil) }
                    try channel.pipeline.syncOperations.addHandler(
                        LinkServeHandler(service: service, proven: proof?.peer.futureResult, greeted: proof != nil && greeting != nil))
                    accepted.add(channel)
                }
            }
        self.server = server
        self.port = server.channel.localAddress?.port ?? port
        // The connections serve themselves; the stream of them is only drained, so that
        // accepting goes on.
        self.serving = Task {
            try? await server.executeThenClose { connections in
                for try await _ in connections {}
            }
        }
    }

    /// Stops listening and closes every link.
    public func close() async {
        serving.cancel()
        try? await server.channel.close()
        open.closeAll()
    }
}

/// One exchange with another device: connect, TLS handshake, the membership proof (between
/// members), one request frame, its answer, close. (Keeping one link per peer open for reuse comes with
/// the continuation protocol.)
public enum LinkClient {
    /// Sends `frame` to the device at `host:port` and returns its answer. Throws if the TLS
    /// handshake or the membership proof fails (the peer is not a pinned member, or it does not
    /// pin this device), if the link closes first, or if the connection cannot be made.
    public static func exchange(
        _ frame: Frame, host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> Frame {
        try await exchange(frame, host: host, port: port, identity: identity, trust: .members({ pins().contains($0) }), maximumFrame: maximumFrame, eventLoopGroup: eventLoopGroup)
    }

    /// As `exchange(_:host:port:identity:pins:)`, accepting the peer `trust` approves.
    public static func exchange(
        _ frame: Frame, host: String, port: Int, identity: DeviceIdentity, trust: LinkTrust,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> Frame {
        let answers = try await converse(
            [frame], host: host, port: port, identity: identity, trust: trust, maximumFrame: maximumFrame, eventLoopGroup: eventLoopGroup)
        return answers[0]
    }

    /// Sends `frames` in order on one link and returns the peer's answers, one per frame.
    public static func converse(
        _ frames: [Frame], host: String, port: Int, identity: DeviceIdentity, trust: LinkTrust,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> [Frame] {
        guard let first = frames.first else { return [] }
        let rest = Array(frames.dropFirst())
        let sent = Mutex(0)
        return try await converse(first, host: host, port: port, identity: identity, trust: trust, maximumFrame: maximumFrame, eventLoopGroup: eventLoopGroup) { _ in
            sent.withLock { count in
                defer { count += 1 }
                return count < rest.count ? rest[count] : nil
            }
        }
    }

    /// Sends `first` on one link, then whatever `next` makes of each answer, waiting for each
    /// answer before the next frame, until `next` makes nothing; returns the answers.
    public static func converse(
        _ first: Frame, host: String, port: Int, identity: DeviceIdentity, trust: LinkTrust,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        next: @escaping @Sendable (Frame) -> Frame?
    ) async throws -> [Frame] {
        let shown = identity.links.current()
        let context = try LinkTLS.context(showing: shown)
        let channel = try await ClientBootstrap(group: eventLoopGroup)
            .connect(literalOrHost: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: LinkTLS.verifier(trust))
                    try channel.pipeline.syncOperations.addHandler(tls)
                    try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: maximumFrame))
                    _ = try LinkTLS.addProof(to: channel, .connecting, trust: trust, identity: identity, shown: shown, maximumFrame: maximumFrame)
                    return try NIOAsyncChannel<Frame, Frame>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            var answers: [Frame] = []
            var frame: Frame? = first
            while let sending = frame {
                // How far the conversation got tells a refused link from a peer that left.
                do {
                    try await outbound.write(sending)
                    guard let answer = try await iterator.next() else {
                        throw LinkError.ended(answers: answers.count, reason: "closed by the peer")
                    }
                    answers.append(answer)
                    frame = next(answer)
                } catch let error as LinkError {
                    throw error
                } catch {
                    throw LinkError.ended(answers: answers.count, reason: "\(error)")
                }
            }
            return answers
        }
    }
}

extension ClientBootstrap {
    /// Connects to `host`, which for a link is nearly always an address as discovery heard it:
    /// such an address is connected to as it is. `connect(host:port:)` would look it up with
    /// `getaddrinfo` on a thread of its own and race the answers (Happy Eyeballs), about 5 %
    /// of a link's opening in a profile, for a name that needs no lookup. A name, or an IPv6
    /// address with a scope (`fe80::1%eth0`), goes through the lookup as before.
    func connect<Output: Sendable>(
        literalOrHost host: String, port: Int, channelInitializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Output>
    ) async throws -> Output {
        if let address = try? SocketAddress(ipAddress: host, port: port) {
            return try await connect(to: address, channelInitializer: channelInitializer)
        }
        return try await connect(host: host, port: port, channelInitializer: channelInitializer)
    }
}
