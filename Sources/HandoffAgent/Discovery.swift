import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix

/// Where and how often a device announces itself.
public struct DiscoveryConfiguration: Sendable {
    /// The IPv4 multicast group (administratively scoped, so it stays on the local network).
    public var group: String
    public var port: Int
    /// The interfaces to announce and listen on, by name. There is no default: the agent
    /// chooses them, and tests name `lo`, so nothing ever floods a network by accident.
    public var interfaces: [String]
    /// How often an unchanged announcement is repeated. A change is announced at once.
    public var refreshInterval: Duration
    /// How long a device stays listed without a beacon from it.
    public var expiry: Duration
    /// How far a beacon's time may be from this device's clock.
    public var replayWindow: TimeInterval
    /// Where this device takes beacons by unicast (from static peers), as `host` and `port`;
    /// nil for none.
    public var unicastListen: (host: String, port: Int)?
    /// Devices that get this device's beacons by unicast, for networks without multicast and
    /// for VPNs: their `unicastListen` addresses.
    public var staticPeers: [(host: String, port: Int)]

    public init(
        group: String = "239.255.71.68", port: Int = 47_168, interfaces: [String],
        refreshInterval: Duration = .seconds(15), expiry: Duration = .seconds(45), replayWindow: TimeInterval = 30,
        unicastListen: (host: String, port: Int)? = nil, staticPeers: [(host: String, port: Int)] = []
    ) {
        self.group = group
        self.port = port
        self.interfaces = interfaces
        self.refreshInterval = refreshInterval
        self.expiry = expiry
        self.replayWindow = replayWindow
        self.unicastListen = unicastListen
        self.staticPeers = staticPeers
    }
}

/// A device of the account heard nearby.
public struct NearbyDevice: Sendable, Hashable {
    public var sender: UUID
    /// The address its beacon came from, where its link listens on `linkPort`.
    public var address: String
    public var linkPort: UInt16
    public var activity: BeaconActivity?
    public var lastHeard: Date
    /// The account's revision as that device knows it.
    public var accountRevision: UInt64 = 0
}

/// A device heard with a beacon key the account has retired: a member that missed a change
/// while it was away (or a removed device, which the agent ignores).
public struct StaleDevice: Sendable, Hashable {
    public var sender: UUID
    public var address: String
    public var linkPort: UInt16
    public var accountRevision: UInt64
}

/// What changed in the list of nearby devices.
public enum DiscoveryEvent: Sendable, Hashable {
    case heard(NearbyDevice)
    case gone(UUID)
    /// At most once every 10 seconds for each sender.
    case stale(StaleDevice)
}

/// What discovery has received, for diagnosis (and for tests of the security promises).
public struct DiscoveryStatistics: Sendable, Hashable {
    public var datagrams = 0
    /// Datagrams that did not open with the account's keys: another account, noise, forgeries.
    public var unopened = 0
    public var replayed = 0
    public var outsideWindow = 0
    public var accepted = 0
}

/// Why discovery could not start.
public enum DiscoveryError: Error, Sendable, CustomStringConvertible {
    case noSuchInterface(String)
    case notMulticast(String)

    public var description: String {
        switch self {
        case .noSuchInterface(let name):
            return "interface '\(name)' does not exist or has no IPv4 address; list them with 'ip -brief address'"
        case .notMulticast(let name):
            return "the socket on interface '\(name)' cannot join a multicast group"
        }
    }
}

/// Sealed activity beacons over UDP multicast: it announces this device's current activity
/// on the chosen interfaces and keeps the list of the account's devices heard nearby.
public actor Discovery {
    public nonisolated let device: UUID
    private let keys: [BeaconKey]
    private let retiredKeys: [BeaconKey]
    private var accountRevision: UInt64
    private var lastStale: [UUID: ContinuousClock.Instant] = [:]
    private let linkPort: UInt16
    private let configuration: DiscoveryConfiguration
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    /// Where beacons go instead of UDP (an in-memory network), and the address this device
    /// posts them from.
    private let bus: (bus: BeaconBus, address: String)?

    private var channels: [any Channel] = []
    private var unicastChannel: (any Channel)?
    private var staticPeerAddresses: [SocketAddress] = []
    private var groupAddress: SocketAddress?
    private var sequence: UInt64
    private var current: BeaconActivity?
    private var replayGuard: BeaconReplayGuard
    private var devices: [UUID: NearbyDevice] = [:]
    private var subscribers: [UUID: AsyncStream<DiscoveryEvent>.Continuation] = [:]
    private var tasks: [Task<Void, Never>] = []
    /// When this device last answered a newcomer's beacon with one of its own.
    private var lastGreeting = ContinuousClock.now - .seconds(60)
    private var greetingScheduled = false
    private var stopped = false
    public private(set) var statistics = DiscoveryStatistics()

    /// - Parameters:
    ///   - keys: the account's beacon keys, current first (then the previous one while a new
    ///     key spreads).
    ///   - retiredKeys: keys the account no longer uses: beacons they open are never listed,
    ///     only reported as `stale`, so that a member that missed a change can be told of it.
    ///   - accountRevision: the account's revision, carried in every beacon.
    public init(
        device: UUID, keys: [BeaconKey], retiredKeys: [BeaconKey] = [], accountRevision: UInt64 = 0, linkPort: UInt16,
        configuration: DiscoveryConfiguration,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger = Logger(label: "handoff.discovery"),
        bus: (bus: BeaconBus, address: String)? = nil
    ) {
        self.bus = bus
        precondition(!keys.isEmpty, "discovery needs the account's beacon key")
        self.device = device
        self.keys = keys
        self.retiredKeys = retiredKeys
        self.accountRevision = accountRevision
        self.linkPort = linkPort
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.replayGuard = BeaconReplayGuard(window: configuration.replayWindow)
        // Milliseconds since 1970, shifted: a restarted agent keeps counting upwards.
        self.sequence = UInt64(Date().timeIntervalSince1970 * 1000) << 10
    }

    /// Joins the group on every configured interface and starts listening and refreshing.
    public func start() async throws {
        let group = try SocketAddress(ipAddress: configuration.group, port: configuration.port)
        groupAddress = group
        let (datagrams, sink) = AsyncStream<(bytes: [UInt8], from: String)>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        if let bus {
            bus.bus.subscribe(device) { bytes, from in sink.yield((bytes, from)) }
        }
        for name in configuration.interfaces where bus == nil {
            channels.append(try await openChannel(on: name, group: group, sink: sink))
        }
        if let listen = configuration.unicastListen, bus == nil {
            unicastChannel = try await DatagramBootstrap(group: eventLoopGroup)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(BeaconReceiver(sink: sink))
                    }
                }
                .bind(host: listen.host, port: listen.port)
                .get()
        }
        staticPeerAddresses = try configuration.staticPeers.map { try SocketAddress.makeAddressResolvingHost($0.host, port: $0.port) }
        tasks.append(Task { [weak self] in
            for await datagram in datagrams {
                await self?.receive(datagram.bytes, from: datagram.from)
            }
        })
        tasks.append(Task { [weak self, refresh = configuration.refreshInterval] in
            while !Task.isCancelled {
                try? await Task.sleep(for: refresh)
                try? await self?.send()
            }
        })
        tasks.append(Task { [weak self, expiry = configuration.expiry] in
            while !Task.isCancelled {
                try? await Task.sleep(for: expiry / 4)
                await self?.expire()
            }
        })
        try await send()
    }

    /// Stops announcing and listening.
    public func stop() async {
        stopped = true
        bus?.bus.unsubscribe(device)
        for task in tasks { task.cancel() }
        tasks = []
        for channel in channels { try? await channel.close() }
        channels = []
        try? await unicastChannel?.close()
        unicastChannel = nil
        for subscriber in subscribers.values { subscriber.finish() }
        subscribers = [:]
    }

    /// Announces a new current activity (or none) at once.
    public func announce(_ activity: BeaconActivity?) async throws {
        current = activity
        try await send()
    }

    /// A new revision of the account, carried from the next beacon on.
    public func setAccountRevision(_ revision: UInt64) {
        accountRevision = revision
    }

    /// The account's devices heard recently.
    public var nearby: [NearbyDevice] {
        devices.values.sorted { $0.sender.uuidString < $1.sender.uuidString }
    }

    /// Changes from now on, until discovery stops.
    public func changes() -> AsyncStream<DiscoveryEvent> {
        let (stream, continuation) = AsyncStream<DiscoveryEvent>.makeStream()
        let id = UUID()
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(id) }
        }
        return stream
    }

    private func unsubscribe(_ id: UUID) { subscribers[id] = nil }

    private func publish(_ event: DiscoveryEvent) {
        for subscriber in subscribers.values { subscriber.yield(event) }
    }

    // MARK: Sending

    private func send() async throws {
        // A cancelled timer's sleep returns at once: a stopped discovery sends nothing more.
        guard !stopped, let groupAddress, !channels.isEmpty || unicastChannel != nil || bus != nil else { return }
        sequence += 1
        let content = BeaconContent(sender: device, sequence: sequence, timestamp: Date(), linkPort: linkPort, activity: current, accountRevision: accountRevision)
        let beacon = try Beacon.seal(content, with: keys[0])
        if let bus {
            bus.bus.post(beacon, from: bus.address, by: device)
            return
        }
        for channel in channels {
            let buffer = channel.allocator.buffer(bytes: beacon)
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: groupAddress, data: buffer))
        }
        // Static peers get the very same beacon by unicast, from the unicast socket.
        if let unicastChannel {
            for peer in staticPeerAddresses {
                let buffer = unicastChannel.allocator.buffer(bytes: beacon)
                try? await unicastChannel.writeAndFlush(AddressedEnvelope(remoteAddress: peer, data: buffer))
            }
        }
    }

    // MARK: Receiving

    private func receive(_ bytes: [UInt8], from address: String) {
        statistics.datagrams += 1
        guard let content = Beacon.open(bytes, with: keys) else {
            statistics.unopened += 1
            if !retiredKeys.isEmpty, let old = Beacon.open(bytes, with: retiredKeys), old.sender != device {
                reportStale(old, from: address)
            }
            return
        }
        guard content.sender != device else { return }
        switch replayGuard.admit(content) {
        case .accepted:
            statistics.accepted += 1
        case .replayed:
            statistics.replayed += 1
            return
        case .stale, .fromTheFuture:
            statistics.outsideWindow += 1
            logger.debug("beacon outside the time window: check the clocks", metadata: ["from": "\(address)"])
            return
        }
        let heard = NearbyDevice(
            sender: content.sender, address: address, linkPort: content.linkPort, activity: content.activity, lastHeard: Date(),
            accountRevision: content.accountRevision)
        let previous = devices[content.sender]
        devices[content.sender] = heard
        if previous == nil {
            greet()
        }
        if previous?.activity != heard.activity || previous?.address != heard.address || previous?.linkPort != heard.linkPort
            || previous?.accountRevision != heard.accountRevision
        {
            publish(.heard(heard))
        }
    }

    /// A beacon under a retired key: reported, rate-limited, never listed. Its time is checked,
    /// not its sequence: all that follows is an attempt to link to a pinned member.
    private func reportStale(_ content: BeaconContent, from address: String) {
        // A beacon recorded long ago and sent again is not worth a link.
        guard abs(content.timestamp.timeIntervalSinceNow) <= configuration.replayWindow else { return }
        let now = ContinuousClock.now
        if let last = lastStale[content.sender], now - last < .seconds(10) { return }
        if lastStale.count >= 256 { lastStale = [:] }
        lastStale[content.sender] = now
        publish(.stale(StaleDevice(sender: content.sender, address: address, linkPort: content.linkPort, accountRevision: content.accountRevision)))
    }

    /// A device heard for the first time (it started, or joined) learns of this one at once
    /// rather than at the next refresh: one beacon now, or, within a second of the last
    /// greeting, one as soon as that is a second old.
    private func greet() {
        let now = ContinuousClock.now
        let next = lastGreeting + .seconds(1)
        if now >= next {
            lastGreeting = now
            tasks.append(Task { [weak self] in try? await self?.send() })
        } else if !greetingScheduled {
            greetingScheduled = true
            tasks.append(Task { [weak self] in
                try? await Task.sleep(until: next)
                await self?.greetScheduled()
            })
        }
    }

    private func greetScheduled() async {
        greetingScheduled = false
        lastGreeting = ContinuousClock.now
        try? await send()
    }

    private func expire() {
        let limit = Date().addingTimeInterval(-configuration.expiry.seconds)
        for (sender, entry) in devices where entry.lastHeard < limit {
            devices[sender] = nil
            publish(.gone(sender))
        }
    }

    // MARK: Sockets

    private func openChannel(
        on name: String, group: SocketAddress, sink: AsyncStream<(bytes: [UInt8], from: String)>.Continuation
    ) async throws -> any Channel {
        guard var interface = try System.enumerateDevices().first(where: { $0.name == name && $0.address?.protocol == .inet }),
            case .v4(let local) = interface.address
        else {
            throw DiscoveryError.noSuchInterface(name)
        }
        // Loopback does not advertise multicast, but carries it; the tests run on it.
        interface.multicastSupported = true
        let channel = try await DatagramBootstrap(group: eventLoopGroup)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(BeaconReceiver(sink: sink))
                }
            }
            .bind(host: configuration.group, port: configuration.port)
            .get()
        guard let multicast = channel as? any MulticastChannel, let options = channel as? any SocketOptionProvider else {
            try? await channel.close()
            throw DiscoveryError.notMulticast(name)
        }
        try await multicast.joinGroup(group, device: interface).get()
        // Send only through this interface, one hop, and let other sockets on this host hear it.
        try await options.setIPMulticastIF(local.address.sin_addr).get()
        try await options.setIPMulticastTTL(1).get()
        try await options.setIPMulticastLoop(1).get()
        return channel
    }
}

/// Hands each received datagram to the discovery actor; opens nothing itself.
private final class BeaconReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    let sink: AsyncStream<(bytes: [UInt8], from: String)>.Continuation

    init(sink: AsyncStream<(bytes: [UInt8], from: String)>.Continuation) { self.sink = sink }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        // A beacon has one size; anything else is dropped before it costs more.
        guard envelope.data.readableBytes == Beacon.size else { return }
        sink.yield((Array(envelope.data.readableBytesView), envelope.remoteAddress.ipAddress ?? "?"))
    }
}

extension Duration {
    var seconds: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
