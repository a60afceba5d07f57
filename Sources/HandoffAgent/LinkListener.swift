import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// Listens for links from the account's other devices and answers each request frame.
package final class LinkListener: Sendable {
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
    package let floodWatch: FloodWatch
    /// The connections open, and those before their first frame by address.
    let connections: ConnectionGuard.Count
    /// Frames its links took from connecting proofs (a first request and its hello).
    package let earlyFramesRead: EarlyFrameCount

    /// The port it listens on (useful when it was asked for port 0).
    package let port: Int

    /// Starts listening for members of the account `pins` names. `answer` is called for every
    /// frame a peer sends; what it returns is sent back.
    package convenience init(
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
    /// and send its first frame (10 s; tests on a loaded machine give more). `readsEarlyFrames`
    /// false ignores the frames a connecting proof carries, as a device of an earlier version
    /// does (for tests).
    ///
    /// `whenAccepted` is told of every connection between members as it is accepted, before anything is known of
    /// who made it, by a number that the peer of its frames then carries (`LinkPeer.connection`);
    /// it is called on an event loop and must return at once.
    package init(
        identity: DeviceIdentity, trust: LinkTrust, host: String = "127.0.0.1", port: Int = 0,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "handoff.link"), greeting: Frame? = nil, handshakeDeadline: TimeAmount = .seconds(10), readsEarlyFrames: Bool = true,
        whenAccepted: (@Sendable (UInt64) -> Void)? = nil,
        acceptStream: (@Sendable (LinkStreamTarget, LinkStream, LinkPeer) async -> ContinuationFailure?)? = nil,
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
        let early = EarlyFrameCount()
        self.earlyFramesRead = early
        self.connections = count
        identity.links.makeContextAhead(after: .zero)
        let numbers = Atomic<UInt64>(0)
        let server = try await ServerBootstrap(group: eventLoopGroup)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try LinkTLS.watchForDeadPeers(channel, silence: LinkTLS.acceptedSilence)
                    // A context of its own, with the certificate of this period: no session of
                    // another connection resumes here. Made ahead, off the event loop.
                    let shown = identity.links.current()
                    let context = try identity.links.context(for: shown)
                    try HopTraceRecords.add(to: channel)
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context, customVerificationCallback: LinkTLS.verifier(trust)))
                    try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: maximumFrame))
                    let connection = numbers.add(1, ordering: .relaxed).newValue
                    let proof = try LinkTLS.addProof(
                        to: channel, .answering, trust: trust, identity: identity, shown: shown, maximumFrame: maximumFrame, deadline: handshakeDeadline,
                        readsEarly: readsEarlyFrames, earlyCount: early, connection: connection)
                    try channel.pipeline.syncOperations.addHandler(ConnectionGuard(count: count, limit: 256, deadline: handshakeDeadline, watch: watch))
                    // Held by the proof's handler, released with this side's proof.
                    if proof != nil, let greeting { channel.write(greeting, promise: nil) }
                    try channel.pipeline.syncOperations.addHandler(
                        LinkServeHandler(service: service, proven: proof?.peer.futureResult, greeted: proof != nil && greeting != nil))
                    accepted.add(channel)
                    if let whenAccepted, proof != nil { whenAccepted(connection) }
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
    package func close() async {
        serving.cancel()
        try? await server.channel.close()
        open.closeAll()
    }
}
