import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// One exchange with another device: connect, TLS handshake, the membership proof (between
/// members), one request frame, its answer, close. (Keeping one link per peer open for reuse comes with
/// the continuation protocol.)
package enum LinkClient {
    /// Sends `frame` to the device at `host:port` and returns its answer. Throws if the TLS
    /// handshake or the membership proof fails (the peer is not a pinned member, or it does not
    /// pin this device), if the link closes first, or if the connection cannot be made.
    package static func exchange(
        _ frame: Frame, host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> Frame {
        try await exchange(frame, host: host, port: port, identity: identity, trust: .members({ pins().contains($0) }), maximumFrame: maximumFrame, eventLoopGroup: eventLoopGroup)
    }

    /// As `exchange(_:host:port:identity:pins:)`, accepting the peer `trust` approves.
    package static func exchange(
        _ frame: Frame, host: String, port: Int, identity: DeviceIdentity, trust: LinkTrust,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> Frame {
        let answers = try await converse(
            [frame], host: host, port: port, identity: identity, trust: trust, maximumFrame: maximumFrame, eventLoopGroup: eventLoopGroup)
        return answers[0]
    }

    /// Sends `frames` in order on one link and returns the peer's answers, one per frame.
    package static func converse(
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
    package static func converse(
        _ first: Frame, host: String, port: Int, identity: DeviceIdentity, trust: LinkTrust,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        next: @escaping @Sendable (Frame) -> Frame?
    ) async throws -> [Frame] {
        let shown = identity.links.current()
        let context = try identity.links.context(for: shown)
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
