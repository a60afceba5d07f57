import Foundation
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// A link to another device, as the agent uses it: `TLSLink` over TLS, or a link of an
/// `InMemoryNetwork`.
package protocol OutgoingLink: AnyObject, Sendable {
    /// The device that answered `hello`.
    var device: UUID { get }
    var host: String { get }
    var port: Int { get }
    var isOpen: Bool { get }
    /// The address of this device the link went out from, where it is known.
    var localAddress: String? { get }
    func fetch(_ activityID: UUID, deadline: Duration) async -> Result<FetchedActivity, ContinuationFailure>
    /// The same fetch, started before this returns (the request is on its way when the link
    /// writes straight to its connection); `done` gets the one outcome.
    func fetch(_ activityID: UUID, deadline: Duration, then done: @escaping @Sendable (Result<FetchedActivity, ContinuationFailure>) -> Void)
    /// Opens a stream to `target` on the peer: a continuation stream to the app offering an
    /// activity, or a paste of its clipboard.
    func openStream(_ target: LinkStreamTarget, deadline: Duration) async -> Result<LinkStream, ContinuationFailure>
    func send(_ message: LinkMessage)
    func close()
}

/// A fetch sent as a link opens, with its `hello` (`AgentNetwork.open`).
package struct LinkFirstFetch: Sendable {
    package var activityID: UUID
    /// The fingerprint of the member the link is opened to: only it takes the fetch, and a
    /// link another member answers is closed before anything is sent.
    package var target: String
    /// From the moment the link is asked for: connecting, the handshake and the proofs are in it.
    package var deadline: Duration
    /// Gets the one outcome, as `OutgoingLink.fetch` gives it (also when the link never opens).
    package var done: @Sendable (Result<FetchedActivity, ContinuationFailure>) -> Void

    package init(activityID: UUID, target: String, deadline: Duration, done: @escaping @Sendable (Result<FetchedActivity, ContinuationFailure>) -> Void) {
        self.activityID = activityID
        self.target = target
        self.deadline = deadline
        self.done = done
    }
}

/// A link being opened (`AgentNetwork.start`): `finish` waits for it, once; `abandon` closes a
/// connection begun for a link whose `finish` will never be called.
package struct LinkStart<Link: Sendable>: Sendable {
    package let finish: @Sendable () async throws(ContinuationFailure) -> Link
    package let abandon: @Sendable () -> Void

    package init(finish: @escaping @Sendable () async throws(ContinuationFailure) -> Link, abandon: @escaping @Sendable () -> Void) {
        self.finish = finish
        self.abandon = abandon
    }
}

/// A listener for other devices' links.
package protocol LinkListening: Sendable {
    var port: Int { get }
    func close() async
}


extension OutgoingLink {
    package var localAddress: String? { nil }
}

extension TLSLink: OutgoingLink {
    package var localAddress: String? {
        guard let address = socket.localAddress?.ipAddress else { return nil }
        // An IPv4 address as a dual-stack socket shows it.
        return address.hasPrefix("::ffff:") && address.contains(".") ? String(address.dropFirst(7)) : address
    }
}
extension LinkListener: LinkListening {}

/// How an agent reaches the account's other devices: the links between them and the bus its
/// beacons travel on. The agent's logic is the same over any of them.
package protocol AgentNetwork: Sendable {
    /// Listens for links, accepting the peers `trust` approves (asked again before each
    /// frame), answering each frame with `answer` and giving the continuation streams peers
    /// open to `acceptStream`. `whenAccepted` learns of each connection between members as it
    /// is accepted, before its peer is known (`LinkListener`).
    func listen(
        identity: DeviceIdentity, trust: LinkTrust, host: String, port: Int,
        whenAccepted: @escaping @Sendable (UInt64) -> Void,
        acceptStream: @escaping @Sendable (LinkStreamTarget, LinkStream, LinkPeer) async -> ContinuationFailure?,
        answer: @escaping @Sendable (Frame, LinkPeer) async -> Frame?
    ) async throws -> any LinkListening

    /// Opens a link and exchanges `hello`; every failure is 4609, as `TLSLink.open`. A
    /// link with nothing on it for `idle` closes (nil: it stays open). `first` is a fetch sent
    /// with `hello`, before the peer answers (for TLS, sealed in the membership proof); its
    /// outcome goes to `first.done` whatever becomes of the link.
    func open(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration, idle: Duration?,
        first: LinkFirstFetch?
    ) async throws(ContinuationFailure) -> any OutgoingLink

    /// `open`, begun now and finished by the result's `finish`: a network whose connection can
    /// start before this returns starts it here (`TLSLink.start`).
    func start(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration, idle: Duration?,
        first: LinkFirstFetch?
    ) -> LinkStart<any OutgoingLink>

    /// A conversation on a link of its own (joining an account), accepting the server whose
    /// shown certificate `accepts` approves (`LinkTrust.shown`, pinned by an invitation):
    /// `first`, then whatever `next` makes of each answer, until it makes nothing. Returns the
    /// answers.
    func converse(
        _ first: Frame, host: String, port: Int, identity: DeviceIdentity, accepting accepts: @escaping @Sendable (String) -> Bool,
        next: @escaping @Sendable (Frame) -> Frame?
    ) async throws -> [Frame]

    /// Where beacons go instead of UDP, or nil for UDP multicast and unicast.
    var beaconBus: BeaconBus? { get }
}

extension AgentNetwork {
    /// Nothing begins before `finish`, which opens the link.
    package func start(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration, idle: Duration?,
        first: LinkFirstFetch?
    ) -> LinkStart<any OutgoingLink> {
        LinkStart(
            finish: { () async throws(ContinuationFailure) -> any OutgoingLink in
                try await open(host: host, port: port, identity: identity, pins: pins, deadline: deadline, idle: idle, first: first)
            },
            abandon: {})
    }

    /// A link that stays open until closed (one message, then closed by the caller).
    func open(host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration) async throws(ContinuationFailure) -> any OutgoingLink {
        try await open(host: host, port: port, identity: identity, pins: pins, deadline: deadline, idle: nil, first: nil)
    }
}

/// The real network: TLS 1.3 over TCP, beacons over UDP.
package struct SocketNetwork: AgentNetwork {
    package let eventLoopGroup: any EventLoopGroup
    /// Where listeners log (a flood of connections, once).
    package let logger: Logger

    package init(eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger = Logger(label: "handoff.link")) {
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    package func listen(
        identity: DeviceIdentity, trust: LinkTrust, host: String, port: Int,
        whenAccepted: @escaping @Sendable (UInt64) -> Void,
        acceptStream: @escaping @Sendable (LinkStreamTarget, LinkStream, LinkPeer) async -> ContinuationFailure?,
        answer: @escaping @Sendable (Frame, LinkPeer) async -> Frame?
    ) async throws -> any LinkListening {
        // A member link's answering side says hello with its proof (`LinkListener`'s greeting);
        // HANDOFF_LINK_GREETING=off waits for the other side's hello instead, for comparison.
        var greeting: Frame?
        if case .members = trust, ProcessInfo.processInfo.environment["HANDOFF_LINK_GREETING"] != "off" {
            greeting = LinkMessage.hello(version: LinkMessage.version, device: identity.id).frame
        }
        return try await LinkListener(
            identity: identity, trust: trust, host: host, port: port, eventLoopGroup: eventLoopGroup, logger: logger, greeting: greeting,
            whenAccepted: whenAccepted, acceptStream: acceptStream, answer: answer)
    }

    package func open(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration, idle: Duration?,
        first: LinkFirstFetch?
    ) async throws(ContinuationFailure) -> any OutgoingLink {
        try await TLSLink.open(host: host, port: port, identity: identity, pins: pins, deadline: deadline, idle: idle, eventLoopGroup: eventLoopGroup, first: first)
    }

    package func start(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration, idle: Duration?,
        first: LinkFirstFetch?
    ) -> LinkStart<any OutgoingLink> {
        let started = TLSLink.start(
            host: host, port: port, identity: identity, pins: pins, deadline: deadline, idle: idle, eventLoopGroup: eventLoopGroup, first: first)
        return LinkStart(finish: { () async throws(ContinuationFailure) -> any OutgoingLink in try await started.finish() }, abandon: started.abandon)
    }

    package func converse(
        _ first: Frame, host: String, port: Int, identity: DeviceIdentity, accepting accepts: @escaping @Sendable (String) -> Bool,
        next: @escaping @Sendable (Frame) -> Frame?
    ) async throws -> [Frame] {
        try await LinkClient.converse(first, host: host, port: port, identity: identity, trust: .shown(accepts), eventLoopGroup: eventLoopGroup, next: next)
    }

    package var beaconBus: BeaconBus? { nil }
}
