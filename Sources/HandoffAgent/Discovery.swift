import Foundation
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Where and how often a device announces itself.
package struct DiscoveryConfiguration: Sendable {
    /// The IPv4 multicast group (administratively scoped, so it stays on the local network).
    package var group: String
    /// The IPv6 multicast group (link-local scope: it never leaves the link).
    package var groupV6: String
    package var port: Int
    /// The interfaces to announce and listen on, by name. There is no default: the agent
    /// chooses them, and tests name `lo`, so nothing ever floods a network by accident.
    package var interfaces: [String]
    /// Instead of `interfaces`: every interface that is up and multicast-capable, loopback
    /// excepted, as they come and go.
    package var allMulticastInterfaces: Bool
    /// How often interfaces are looked at again: one that comes up, changes its address or
    /// goes away is followed within this time, without a restart.
    package var interfaceScan: Duration
    /// Whether beacons go out over IPv4 and over IPv6: over the families the link listener
    /// takes, since other devices open links to the address a beacon came from.
    package var ipv4: Bool
    package var ipv6: Bool
    /// How often an unchanged announcement is repeated. A change is announced at once.
    package var refreshInterval: Duration
    /// How often a device with no current activity repeats its beacon: rarely, since there is
    /// nothing to offer, only presence.
    package var idleRefreshInterval: Duration
    /// How long a device stays listed without a beacon from it.
    package var expiry: Duration
    /// How far a beacon's time may be from this device's clock.
    package var replayWindow: TimeInterval
    /// Where this device takes beacons by unicast (from static peers), as `host` and `port`;
    /// nil for none.
    package var unicastListen: (host: String, port: Int)?
    /// Sockets the caller already holds on `unicastListen` (`UnicastSockets.bind`), which
    /// discovery reads from and leaves open when it stops; empty: discovery opens its own.
    package var unicastSockets: [any Channel] = []
    /// Devices that get this device's beacons by unicast, for networks without multicast and
    /// for VPNs: their `unicastListen` addresses.
    package var staticPeers: [(host: String, port: Int)]
    /// The mDNS port DNS-SD runs on (5353); nil for no DNS-SD.
    package var serviceDiscoveryPort: Int?
    /// The longest time one set of DNS-SD names is used before new random ones replace it.
    package var nameRotation: Duration
    /// Called each time the DNS-SD names are renewed: what else identifies the device to
    /// strangers (the certificate its handshakes show) is renewed with them.
    package var namesRenewed: (@Sendable () -> Void)?
    /// How many datagrams a second from one address are opened; the rest are dropped unread.
    /// A device sends about one a second, more when it answers newcomers.
    package var beaconsPerSecondPerAddress = 200

    package init(
        group: String = "239.255.71.68", groupV6: String = "ff02::4846", port: Int = 47_168, interfaces: [String],
        allMulticastInterfaces: Bool = false, interfaceScan: Duration = .seconds(2), ipv4: Bool = true, ipv6: Bool = true,
        refreshInterval: Duration = .seconds(18), idleRefreshInterval: Duration = .seconds(120), expiry: Duration = .seconds(45),
        replayWindow: TimeInterval = 30,
        unicastListen: (host: String, port: Int)? = nil, staticPeers: [(host: String, port: Int)] = [],
        serviceDiscoveryPort: Int? = nil, nameRotation: Duration = .seconds(15 * 60)
    ) {
        self.serviceDiscoveryPort = serviceDiscoveryPort
        self.nameRotation = nameRotation
        self.group = group
        self.groupV6 = groupV6
        self.port = port
        self.interfaces = interfaces
        self.allMulticastInterfaces = allMulticastInterfaces
        self.interfaceScan = interfaceScan
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.refreshInterval = refreshInterval
        self.idleRefreshInterval = idleRefreshInterval
        self.expiry = expiry
        self.replayWindow = replayWindow
        self.unicastListen = unicastListen
        self.staticPeers = staticPeers
    }
}

/// A device of the account heard nearby.
package struct NearbyDevice: Sendable, Hashable {
    package var sender: UUID
    /// The address its beacon came from, where its link listens on `linkPort`.
    package var address: String
    package var linkPort: UInt16
    package var activity: ActivityAnnouncement?
    package var lastHeard: Date
    /// The account's revision as that device knows it.
    package var accountRevision: UInt64 = 0
    /// How often it says it repeats its beacon (nil: it did not say).
    package var refreshSeconds: UInt16?
    /// What it offers to paste, and when (on its clock) the beacon that said so was sent.
    package var clipboard: ClipboardOffer?
    package var sent: Date = .distantPast
}

/// A device heard with a beacon key the account has retired: a member that missed a change
/// while it was away (or a removed device, which the agent ignores).
package struct StaleDevice: Sendable, Hashable {
    package var sender: UUID
    package var address: String
    package var linkPort: UInt16
    package var accountRevision: UInt64
}

/// What changed in the list of nearby devices.
package enum DiscoveryEvent: Sendable, Hashable {
    case heard(NearbyDevice)
    case gone(UUID)
    /// At most once every 10 seconds for each sender.
    case stale(StaleDevice)
    /// This machine's addresses, after a look at the interfaces found them changed: a link
    /// that went out from an address no longer among them is dead (`Agent.closeLinks`).
    case localAddresses(Set<String>)
}

/// What discovery has received, for diagnosis (and for tests of the security promises).
package struct DiscoveryStatistics: Sendable, Hashable {
    package var datagrams = 0
    /// The same datagram again within two seconds: a beacon heard over IPv4 and IPv6, or on
    /// two interfaces of one network.
    package var duplicates = 0
    /// Datagrams that did not open with the account's keys: another account, noise, forgeries.
    package var unopened = 0
    package var replayed = 0
    package var outsideWindow = 0
    package var accepted = 0
}

/// An interface as discovery uses it now.
package struct DiscoveryInterface: Sendable, Hashable {
    package var name: String
    /// Whether it exists and is up.
    package var isUp: Bool
    /// The IPv4 address beacons go out from, if it has one.
    package var ipv4: String?
    /// Whether beacons go out over IPv6 (to the link-local group) on it.
    package var ipv6: Bool
}

/// Why discovery could not start.
package enum DiscoveryError: Error, Sendable, CustomStringConvertible {
    case noSuchInterface(String)
    case notMulticast(String)

    package var description: String {
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
package actor Discovery {
    package nonisolated let device: UUID
    private let keys: [BeaconKey]
    private let retiredKeys: [BeaconKey]
    private var accountRevision: UInt64
    private var lastStale: [UUID: ContinuousClock.Instant] = [:]
    private let linkPort: UInt16
    private let configuration: DiscoveryConfiguration
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    /// Beacons refused (over an address's budget, not opening, replayed, out of the time
    /// window), to log a flood once.
    package nonisolated let floodWatch: FloodWatch
    /// At most `beaconsPerSecondPerAddress` datagrams a second from one address are looked at;
    /// the rest are dropped before their seal costs anything.
    nonisolated let budget: SourceBudget
    /// Over a member's address's budget, its fresh beacons still pass (`OverBudgetBeacons`).
    nonisolated let overBudget = OverBudgetBeacons()
    /// The beacon sockets' datagrams, and the reads (wakes) that got them (`ReadCoalescer`).
    nonisolated let beaconReads = ReadCounts()
    /// Where beacons go instead of UDP (an in-memory network), and the address this device
    /// posts them from.
    private let bus: (bus: BeaconBus, address: String)?

    /// One multicast socket per interface and address family.
    private var paths: [MulticastPath: any Channel] = [:]
    /// Paths that failed to open, so that each failure is logged once.
    private var failedPaths: [MulticastPath: ContinuousClock.Instant] = [:]
    private var datagramSink: AsyncStream<Datagram>.Continuation?
    /// The sockets static peers' beacons arrive on and this device's go out from: IPv4 and,
    /// where it can, IPv6.
    private var unicastChannels: [any Channel] = []
    /// The static peers' last addresses, by `host:port` as configured.
    private var staticPeerAddresses: [String: SocketAddress] = [:]
    private var resolvingPeers = false
    /// Static peers whose name did not resolve, so that it is logged once.
    private var unresolvedPeers: Set<String> = []
    private var groupAddress: SocketAddress?
    private var groupAddressV6: SocketAddress?
    /// The interfaces in use, as last looked at.
    package private(set) var interfaces: [DiscoveryInterface] = []
    /// This device's own beacons heard back (multicast loops back to the sender's host), by
    /// the interface they came back on: proof that beacons leave and arrive there.
    package private(set) var ownBeaconsHeard: [String: Int] = [:]
    /// Those waiting for this device's own beacons to come back (`awaitOwnBeacons`).
    private var ownBeaconWaiters: [CheckedContinuation<Void, Never>] = []

    /// Waits until a beacon of this device's own came back on each of `interfaces` since
    /// `before` was read, or `limit` passed; returns what was heard by then.
    func awaitOwnBeacons(on interfaces: [String], since before: [String: Int], limit: Duration) async -> [String: Int] {
        let deadline = ContinuousClock.now + limit
        let timer = LoopTimer(after: limit) { [weak self] in self?.tasks.start("own beacons' limit") { await self?.wakeOwnBeaconWaiters() } }
        defer { timer.cancel() }
        while !stopped, ContinuousClock.now < deadline, !interfaces.allSatisfy({ (ownBeaconsHeard[$0] ?? 0) > (before[$0] ?? 0) }) {
            await withCheckedContinuation { ownBeaconWaiters.append($0) }
        }
        return ownBeaconsHeard
    }

    /// How many wait for their own beacons now (for tests).
    package var ownBeaconWaiterCount: Int { ownBeaconWaiters.count }

    private func wakeOwnBeaconWaiters() {
        let waiting = ownBeaconWaiters
        ownBeaconWaiters = []
        for waiter in waiting { waiter.resume() }
    }
    /// Addresses whose beacons did not open with the account's keys, with how many and when
    /// last (at most 32 addresses): devices of another account, or noise.
    package var unopenedFrom: [String: (count: Int, last: Date)] { strangers.from }
    /// Where beacons that open with no key are counted (on the event loop, or here for the
    /// in-memory bus).
    private nonisolated let strangers = StrangerBeacons()
    /// How far each device's clock is from this one's (positive: it is behind), from its
    /// last beacon, opened whether or not its time was within the window.
    package private(set) var clockOffsets: [UUID: TimeInterval] = [:]
    /// The beacons this device sent last, to know its own when they come back.
    private var sentBeacons: [[UInt8]] = []
    /// The last datagrams received, to tell a copy (another family or interface) from a replay.
    private var recentDatagrams: [(digest: [UInt8], via: String, at: ContinuousClock.Instant, sender: UUID?)] = []
    private var sequence: UInt64
    private var current: ActivityAnnouncement?
    /// What this device offers to paste, carried in every beacon while it is offered.
    private var clipboard: ClipboardOffer?
    private var replayGuard: BeaconReplayGuard
    private var devices: [UUID: NearbyDevice] = [:]
    private var subscribers: [UUID: AsyncStream<DiscoveryEvent>.Continuation] = [:]
    /// Its own work (reading, scans, expiry, hops from callbacks): ended when it stops.
    private let tasks: OwnedTasks
    /// When this device last answered a newcomer's beacon with one of its own.
    private var lastGreeting = ContinuousClock.now - .seconds(60)
    private var greetingScheduled = false
    private var greetingTask: Task<Void, Never>?
    private var stopped = false
    /// The next refresh, restarted by every beacon sent.
    private var refreshTask: Task<Void, Never>?
    /// News of interfaces from the kernel, when it can be had.
    private var interfaceWatcher: InterfaceWatcher?
    private var rescanScheduled = false
    /// One look at the interfaces at a time; a request meanwhile makes one more after it.
    private var scanning = false
    private var scanAgain = false
    /// DNS-SD, where it runs: publishes this device's service, finds the others'.
    private var serviceDiscovery: ServiceDiscovery?
    /// Services DNS-SD found whose address no beacon came from: beacons go to them by unicast
    /// too, for networks that carry mDNS but not our multicast group.
    private var serviceTargets: [DNSSDService] = []
    /// Whether the next beacon asks the others to answer at once (after a start, or an
    /// interface coming up).
    private var askForAnswers = true
    /// When each device was last heard over IPv4, and over IPv6 on which interfaces: a
    /// refresh goes over IPv6 only where some device is heard over nothing else.
    private var familiesHeard: [UUID: (v4: Date?, v6: [String: Date])] = [:]
    /// The interfaces on which a device's last beacon said it wants IPv6 (it hears nothing
    /// else there): kept while it is listed, however seldom an idle device beacons.
    private var wantsIPv6Heard: [UUID: Set<String>] = [:]
    /// This machine's addresses at the last look (`DiscoveryEvent.localAddresses`).
    private var localAddresses: Set<String> = []
    /// What beacons did, the ones dropped on arrival included.
    package var statistics: DiscoveryStatistics {
        var counted = opened
        let unopened = strangers.count
        counted.unopened = unopened
        counted.datagrams += unopened
        return counted
    }
    /// The same, for the datagrams that reached the actor (`unopened` only from the bus).
    private var opened = DiscoveryStatistics()

    /// How often DNS-SD's names changed (`ServiceDiscoveryStatistics.rotations`); nil with
    /// DNS-SD off.
    package var nameRotations: Int? {
        get async { await serviceDiscovery?.statistics.rotations }
    }

    /// - Parameters:
    ///   - keys: the account's beacon keys, current first (then the previous one while a new
    ///     key spreads).
    ///   - retiredKeys: keys the account no longer uses: beacons they open are never listed,
    ///     only reported as `stale`, so that a member that missed a change can be told of it.
    ///   - accountRevision: the account's revision, carried in every beacon.
    package init(
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
        tasks = OwnedTasks(logger: logger)
        self.floodWatch = FloodWatch(what: "beacons", logger: logger)
        self.budget = SourceBudget(perSecond: configuration.beaconsPerSecondPerAddress)
        self.replayGuard = BeaconReplayGuard(window: configuration.replayWindow)
        // Milliseconds since 1970, shifted: a restarted agent keeps counting upwards.
        self.sequence = UInt64(Date().timeIntervalSince1970 * 1000) << 10
    }

    /// A discovery dropped without `stop()` still ends its netlink thread, whose loop would
    /// otherwise run for the life of the process. Its sockets stay open until their event
    /// loops end: call `stop()`.
    deinit {
        interfaceWatcher?.stop()
    }

    /// Joins the groups on the chosen interfaces and starts listening and refreshing.
    /// Interfaces that are not there (yet) are used once they appear.
    package func start() async throws {
        let group = try SocketAddress(ipAddress: configuration.group, port: configuration.port)
        groupAddress = group
        groupAddressV6 = configuration.ipv6 ? try? SocketAddress(ipAddress: configuration.groupV6, port: configuration.port) : nil
        let (datagrams, sink) = AsyncStream<Datagram>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        datagramSink = sink
        if let bus {
            bus.bus.subscribe(device) { bytes, from in sink.yield(Datagram(bytes: bytes, from: from, via: "bus")) }
        } else {
            await followInterfaces(announce: false)
            for name in configuration.interfaces where !interfaces.contains(where: { $0.name == name && ($0.ipv4 != nil || $0.ipv6) }) {
                logger.warning("interface '\(name)' is not up or has no address; beacons go out on it once it is ('ip -brief address' lists them)")
            }
        }
        if let listen = configuration.unicastListen, bus == nil {
            unicastChannels = try await openUnicast(host: listen.host, port: listen.port, sink: sink)
        }
        if let port = configuration.serviceDiscoveryPort, bus == nil {
            let made = ServiceDiscovery(
                linkPort: linkPort,
                configuration: .init(
                    port: port, rotation: configuration.nameRotation, ipv4: configuration.ipv4, ipv6: configuration.ipv6,
                    namesRenewed: configuration.namesRenewed),
                eventLoopGroup: eventLoopGroup, logger: logger)
            await made.start()
            serviceDiscovery = made
            let found = await made.changes()
            tasks.start("DNS-SD services") { [weak self] in
                for await services in found { await self?.serviceDiscoveryFound(services) }
            }
            await made.follow(ServiceDiscovery.links(named: interfaces.filter(\.isUp).map(\.name), ipv4: configuration.ipv4, ipv6: configuration.ipv6))
        }
        await resolveStaticPeers()
        // Stopped while starting: close what was opened, start nothing more.
        guard !stopped else {
            await serviceDiscovery?.stop()
            serviceDiscovery = nil
            for channel in paths.values { try? await channel.close() }
            paths = [:]
            await releaseUnicast()
            return
        }
        tasks.start("beacons") { [weak self] in
            for await datagram in datagrams {
                await self?.receive(datagram.bytes, from: datagram.from, via: datagram.via, interface: datagram.interface)
            }
        }
        if bus == nil {
            // The kernel tells of changes at once; the look every few seconds is what is left
            // where it cannot (and a safety net where it can).
            interfaceWatcher = InterfaceWatcher.start { [weak self] in
                self?.tasks.start("interfaces changed") { await self?.interfacesChanged() }
            }
            let scan = interfaceWatcher == nil ? configuration.interfaceScan : configuration.interfaceScan * 5
            tasks.start("interface scan") { [weak self] in
                while !Task.isCancelled {
                    // Period: the interface scan (a safety net beside the kernel's news).
                    try? await LoopTimer.sleep(for: scan)
                    await self?.followInterfaces(announce: true)
                }
            }
        }
        tasks.start("expiry") { [weak self, expiry = configuration.expiry] in
            while !Task.isCancelled {
                // Period: devices not heard for the expiry go, checked four times an expiry.
                try? await LoopTimer.sleep(for: expiry / 4)
                await self?.expire()
            }
        }
        try await send()
    }

    /// Stops announcing and listening.
    package func stop() async {
        stopped = true
        bus?.bus.unsubscribe(device)
        tasks.cancel()
        // Those waiting for their own beacons hear no more: they are answered with what came.
        wakeOwnBeaconWaiters()
        refreshTask?.cancel()
        refreshTask = nil
        greetingTask?.cancel()
        greetingTask = nil
        interfaceWatcher?.stop()
        interfaceWatcher = nil
        await serviceDiscovery?.stop()
        serviceDiscovery = nil
        for channel in paths.values { try? await channel.close() }
        paths = [:]
        await releaseUnicast()
        for subscriber in subscribers.values { subscriber.finish() }
        subscribers = [:]
        await tasks.end()
    }

    /// Sends a beacon now, with what is current (for `doctor`'s loop test).
    package func announceNow() async {
        try? await send()
    }

    /// Announces a new current activity (or none) at once.
    package func announce(_ activity: ActivityAnnouncement?) async throws {
        current = activity
        try await send()
    }

    /// Announces what this device offers to paste (or nothing) at once.
    package func announce(clipboard offer: ClipboardOffer?) async throws {
        guard offer != clipboard else { return }
        clipboard = offer
        try await send()
    }

    /// A new revision of the account, carried from the next beacon on.
    package func setAccountRevision(_ revision: UInt64) {
        accountRevision = revision
    }

    /// The account's devices heard recently.
    package var nearby: [NearbyDevice] {
        devices.values.sorted { $0.sender.uuidString < $1.sender.uuidString }
    }

    /// Changes from now on, until discovery stops.
    package func changes() -> AsyncStream<DiscoveryEvent> {
        let (stream, continuation) = AsyncStream<DiscoveryEvent>.makeStream()
        let id = UUID.random()
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in
            self?.tasks.start("unsubscribe") { await self?.unsubscribe(id) }
        }
        return stream
    }

    private func unsubscribe(_ id: UUID) { subscribers[id] = nil }

    /// Hands every change to `handler`, in order, until discovery stops (which ends the task
    /// doing it with the others it owns).
    package func forward(to handler: @escaping @Sendable (DiscoveryEvent) async -> Void) {
        let stream = changes()
        tasks.start("forward changes") {
            for await change in stream { await handler(change) }
        }
    }

    private func publish(_ event: DiscoveryEvent) {
        for subscriber in subscribers.values { subscriber.yield(event) }
    }

    // MARK: Sending

    /// How often the beacon is repeated now: often while an activity is offered, rarely without.
    private var currentRefresh: Duration {
        current == nil && clipboard == nil ? configuration.idleRefreshInterval : configuration.refreshInterval
    }

    /// Sends a beacon on every path and to every static peer. A refresh (`refresh: true`)
    /// skips IPv6 on an interface whose devices are all heard over IPv4 as well.
    private func send(refresh: Bool = false) async throws {
        // A cancelled timer's sleep returns at once: a stopped discovery sends nothing more.
        guard !stopped, !paths.isEmpty || !unicastChannels.isEmpty || bus != nil else { return }
        sequence += 1
        let interval = currentRefresh
        let content = BeaconContent(
            sender: device, sequence: sequence, timestamp: Date(), linkPort: linkPort, activity: current, accountRevision: accountRevision,
            refreshSeconds: UInt16(clamping: Int((interval.seconds * 1.05).rounded(.up))), asksForAnswers: askForAnswers,
            wantsIPv6: Self.asksForIPv6(paths: Set(paths.keys), hearsOnlyIPv6: hearsOnlyIPv6(on:)), clipboard: clipboard)
        askForAnswers = false
        let beacon = try Beacon.seal(content, with: keys[0])
        if sentBeacons.count >= 8 { sentBeacons.removeFirst() }
        sentBeacons.append(beacon)
        scheduleRefresh(after: interval)
        if let bus {
            bus.bus.post(beacon, from: bus.address, by: device)
            return
        }
        let v4Interfaces = Set(paths.keys.filter { $0.family == .v4 }.map(\.interface))
        // One interface going down does not keep the beacon from the others.
        for (path, channel) in paths {
            guard let group = path.family == .v4 ? groupAddress : groupAddressV6 else { continue }
            if refresh, path.family == .v6, v4Interfaces.contains(path.interface), !needsIPv6(on: path.interface) { continue }
            let buffer = channel.allocator.buffer(bytes: beacon)
            try? await channel.writeAndFlush(AddressedEnvelope(remoteAddress: group, data: buffer))
        }
        // Static peers, and services DNS-SD found that no beacon came from, get the very same
        // beacon by unicast, from the unicast socket of their family.
        for peer in Array(staticPeerAddresses.values) + (await serviceTargetAddresses()) {
            guard let channel = unicastChannels.first(where: { $0.localAddress?.protocol == peer.protocol }) else { continue }
            let buffer = channel.allocator.buffer(bytes: beacon)
            try? await channel.writeAndFlush(AddressedEnvelope(remoteAddress: peer, data: buffer))
        }
    }

    /// The next refresh, `interval` from now give or take a twentieth (so that devices started
    /// together do not stay in step, and the timing does not mark a device).
    private func scheduleRefresh(after interval: Duration) {
        refreshTask?.cancel()
        let jittered = interval * Double.random(in: 0.95...1.05)
        refreshTask = Task { [weak self] in
            // Period: the refresh, jittered (on the event loop's clock, as every period here).
            try? await LoopTimer.sleep(for: jittered)
            guard !Task.isCancelled else { return }
            await self?.refresh()
        }
    }

    /// A refresh goes out at once with the static peers' addresses as they are; their names
    /// are resolved again beside it, so that a slow name server never delays a beacon.
    private func refresh() async {
        tasks.start("resolve static peers") { [weak self] in await self?.resolveStaticPeers() }
        try? await send(refresh: true)
    }

    /// Where DNS-SD found a Handoff service no account device's beacon came from: the first
    /// address of each, at most 16.
    private func serviceTargetAddresses() async -> [SocketAddress] {
        // Lately: within two idle refreshes, as a member with nothing to offer beacons that seldom.
        let recent = Date().addingTimeInterval(-max(configuration.expiry, configuration.idleRefreshInterval * 2).seconds)
        // A service is covered only by its device's beacons over multicast: the group then
        // carries beacons on that link, this device's too. One heard by unicast proves only
        // that it reaches this device; the unicast it sent is the way back it needs.
        let overMulticast = devices.values.filter { device in
            guard let heard = familiesHeard[device.sender] else { return false }
            return (heard.v4.map { $0 > recent } ?? false) || heard.v6.values.contains { $0 > recent }
        }
        let heardFrom = Set(overMulticast.map { "\($0.address) \($0.linkPort)" })
        let covered = serviceTargets.filter { service in service.addresses.contains { heardFrom.contains("\($0) \(service.port)") } }
        // Unicast to the others is for networks that carry mDNS but not our group. Where a
        // member's beacons come over multicast, the services left are devices of other
        // accounts (their beacons never open here): they get none of this device's, which
        // would otherwise go out once more for each of them, on every device.
        let multicastCarries = familiesHeard.values.contains { heard in
            (heard.v4.map { $0 > recent } ?? false) || heard.v6.values.contains { $0 > recent }
        }
        // DNS-SD need not keep fresh the services whose beacons arrive, nor, where multicast
        // carries the beacons, any: each other account's device cost every device a question
        // each refresh (8 accounts of 4 on one link: 27 questions at a time, 8.5 B/s).
        await serviceDiscovery?.setCovered(Set(covered.map(\.instance)), all: multicastCarries)
        if multicastCarries { return [] }
        return serviceTargets.filter { !covered.contains($0) }.prefix(16).compactMap { service in
            guard let address = service.addresses.first else { return nil }
            return try? SocketAddress.makeAddressResolvingHost(address, port: Int(service.port))
        }
    }

    /// A service found for the first time (a device started, joined, or came into reach) gets
    /// a beacon at once, as a device heard for the first time does (`greet`), not at the next
    /// refresh, two minutes off for a device with nothing to offer.
    private func serviceDiscoveryFound(_ services: [DNSSDService]) {
        let known = Set(serviceTargets.map(\.instance))
        serviceTargets = services
        if services.contains(where: { !known.contains($0.instance) }) { greet() }
    }

    /// The DNS-SD services found, the names in use, and what DNS-SD saw (nil: it does not run).
    package var serviceDiscoveryState: (services: [DNSSDService], instance: String, announced: Bool, statistics: ServiceDiscoveryStatistics)? {
        get async {
            guard let serviceDiscovery else { return nil }
            return (await serviceDiscovery.services, await serviceDiscovery.currentNames.instance, await serviceDiscovery.isAnnounced, await serviceDiscovery.statistics)
        }
    }

    /// Whether a refresh must go over IPv6 on `interface`: some device there is heard over
    /// IPv6 and not over IPv4 lately, or its last beacon said it is in that case itself (it may
    /// not hear our IPv4).
    func needsIPv6(on interface: String) -> Bool {
        hearsOnlyIPv6(on: interface) || wantsIPv6Heard.values.contains { $0.contains(interface) }
    }

    /// Whether this device's beacons ask the others to refresh over IPv6 too: on some
    /// interface it has IPv6 and no IPv4 (its lease ended, or the network has none), or hears
    /// some device only over IPv6. A device without IPv4 hears none of the IPv4 refreshes.
    static func asksForIPv6(paths: Set<MulticastPath>, hearsOnlyIPv6: (String) -> Bool) -> Bool {
        let withIPv4 = Set(paths.filter { $0.family == .v4 }.map(\.interface))
        return paths.contains { $0.family == .v6 && (!withIPv4.contains($0.interface) || hearsOnlyIPv6($0.interface)) }
    }

    /// Whether some device is heard over IPv6 on `interface` and not over IPv4 lately.
    private func hearsOnlyIPv6(on interface: String) -> Bool {
        Self.hearsOnlyIPv6(familiesHeard, on: interface, now: Date(), expiry: configuration.expiry.seconds)
    }

    /// How long a beacon heard over IPv6 waits for its IPv4 copy before its sender counts as
    /// heard over IPv6 only. A device multicasts each beacon over both, back to back, and either
    /// copy may be read first; a greeting made in between would ask every device to send its
    /// refreshes over IPv6 too, for `expiry`.
    static let otherCopyWait: TimeInterval = 1

    /// Whether, in `families`, some device was heard over IPv6 on `interface` within `expiry`
    /// seconds of `now`, at least `otherCopyWait` ago, and not over IPv4 since `expiry` ago.
    static func hearsOnlyIPv6(_ families: [UUID: (v4: Date?, v6: [String: Date])], on interface: String, now: Date, expiry: TimeInterval) -> Bool {
        let recent = now.addingTimeInterval(-expiry)
        let settled = now.addingTimeInterval(-otherCopyWait)
        return families.values.contains { heard in
            (heard.v6[interface].map { $0 > recent && $0 <= settled } ?? false) && !(heard.v4.map { $0 > recent } ?? false)
        }
    }

    /// Whether `sender`'s beacons came over multicast lately (a beacon by unicast lists it
    /// nearby too, but says nothing of what multicast carries).
    package func heardOverMulticast(_ sender: UUID) -> Bool {
        guard let heard = familiesHeard[sender] else { return false }
        return heard.v4 != nil || !heard.v6.isEmpty
    }

    private func noteFamily(of sender: UUID, from address: String, interface: String?) {
        guard let interface else { return }
        if address.contains(":") {
            familiesHeard[sender, default: (nil, [:])].v6[interface] = Date()
        } else {
            familiesHeard[sender, default: (nil, [:])].v4 = Date()
        }
    }

    /// Resolves the static peers' names again (a peer's address may have changed, or its VPN
    /// come up), off the actor; a name that does not resolve keeps its last address.
    private func resolveStaticPeers() async {
        guard bus == nil, !configuration.staticPeers.isEmpty, !resolvingPeers else { return }
        resolvingPeers = true
        defer { resolvingPeers = false }
        for peer in configuration.staticPeers {
            let name = "\(peer.host):\(peer.port)"
            do {
                let address = try await NIOThreadPool.singleton.runIfActive {
                    try SocketAddress.makeAddressResolvingHost(peer.host, port: peer.port)
                }
                staticPeerAddresses[name] = address
                if unresolvedPeers.remove(name) != nil { logger.notice("static peer \(name) resolves again") }
            } catch {
                if unresolvedPeers.insert(name).inserted {
                    logger.warning("static peer \(name) does not resolve: \(error); trying again at every refresh")
                }
            }
        }
    }

    // MARK: Receiving

    private func receive(_ bytes: [UInt8], from address: String, via: String, interface: String?) {
        // This device's own beacon, come back (multicast loops back to the sending host): proof
        // that beacons leave and arrive on that interface, for `doctor`. Nothing more to do.
        if sentBeacons.contains(bytes) {
            if let interface {
                ownBeaconsHeard[interface, default: 0] += 1
                wakeOwnBeaconWaiters()
            }
            return
        }
        opened.datagrams += 1
        // The same beacon over IPv4 and IPv6 (or on two interfaces of one network) counts
        // once; the same bytes again on the same socket are a replay, for the replay guard.
        let now = ContinuousClock.now
        let digest = bytes
        recentDatagrams.removeAll { now - $0.at > .seconds(2) }
        if let first = recentDatagrams.first(where: { $0.digest == digest && $0.via != via }) {
            opened.duplicates += 1
            if let sender = first.sender { noteFamily(of: sender, from: address, interface: interface) }
            return
        }
        if recentDatagrams.count >= 256 { recentDatagrams.removeFirst() }
        recentDatagrams.append((digest, via, now, nil))
        guard let content = Beacon.open(bytes, with: keys) else {
            // Counted with the strangers' beacons (sockets drop those on arrival; these came
            // from the in-memory bus, or are sealed with a retired key).
            opened.datagrams -= 1
            strangers.record(from: address)
            floodWatch.refused(from: address, reason: "did not open")
            if !retiredKeys.isEmpty, let old = Beacon.open(bytes, with: retiredKeys), old.sender != device {
                reportStale(old, from: address)
            }
            return
        }
        guard content.sender != device else { return }
        switch replayGuard.admit(content) {
        case .accepted:
            opened.accepted += 1
            // A member's address: spoofed strangers, however many, never take its budget.
            budget.trust(address)
            // From accepted beacons only: a replayed old one says nothing of a clock.
            if clockOffsets[content.sender] != nil || clockOffsets.count < 256 {
                clockOffsets[content.sender] = Date().timeIntervalSince(content.timestamp)
            }
            if let last = recentDatagrams.indices.last, recentDatagrams[last].digest == digest { recentDatagrams[last].sender = content.sender }
            noteFamily(of: content.sender, from: address, interface: interface)
            if let interface {
                if content.wantsIPv6 {
                    wantsIPv6Heard[content.sender, default: []].insert(interface)
                } else {
                    wantsIPv6Heard[content.sender]?.remove(interface)
                }
            }
        case .replayed:
            opened.replayed += 1
            floodWatch.refused(from: address, reason: "replayed")
            return
        case .stale, .fromTheFuture:
            opened.outsideWindow += 1
            floodWatch.refused(from: address, reason: "outside the time window")
            logger.debug("beacon outside the time window: check the clocks", metadata: ["from": "\(address)"])
            return
        }
        let heard = NearbyDevice(
            sender: content.sender, address: address, linkPort: content.linkPort, activity: content.activity, lastHeard: Date(),
            accountRevision: content.accountRevision, refreshSeconds: content.refreshSeconds, clipboard: content.clipboard, sent: content.timestamp)
        let previous = devices[content.sender]
        devices[content.sender] = heard
        // A newcomer, or a device that asks (it just started, or its interface came back),
        // hears this one at once.
        if previous == nil || content.asksForAnswers {
            greet()
        }
        if previous?.activity != heard.activity || previous?.address != heard.address || previous?.linkPort != heard.linkPort
            || previous?.accountRevision != heard.accountRevision || previous?.clipboard != heard.clipboard
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
            tasks.start("greeting") { [weak self] in try? await self?.send() }
        } else if !greetingScheduled {
            greetingScheduled = true
            greetingTask = Task { [weak self] in
                // Rate: at most one greeting a second.
                try? await Task.sleep(until: next)
                guard !Task.isCancelled else { return }
                await self?.greetScheduled()
            }
        }
    }

    private func greetScheduled() async {
        greetingScheduled = false
        lastGreeting = ContinuousClock.now
        try? await send()
    }

    /// Drops devices not heard for the expiry, or for three of their own refresh intervals
    /// when those are longer.
    private func expire() {
        let now = Date()
        for (sender, entry) in devices {
            // A device's own interval counts up to 5 minutes: no member stays listed for hours.
            let keep = max(configuration.expiry.seconds, 3 * min(Double(entry.refreshSeconds ?? 0), 300))
            guard now.timeIntervalSince(entry.lastHeard) > keep else { continue }
            devices[sender] = nil
            familiesHeard[sender] = nil
            wantsIPv6Heard[sender] = nil
            publish(.gone(sender))
        }
    }

    // MARK: Sockets

    /// The kernel said an interface or address changed: look again shortly (news comes in
    /// bursts: a link coming up, then its addresses).
    private func interfacesChanged() async {
        guard !rescanScheduled else { return }
        rescanScheduled = true
        // Debounce: the rest of the burst of news arrives meanwhile.
        try? await Task.sleep(for: .milliseconds(50))
        rescanScheduled = false
        await followInterfaces(announce: true)
    }

    /// Looks at the interfaces again: opens sockets on those that came up or changed address,
    /// closes those on interfaces that went down or away, and announces at once on a change.
    private func followInterfaces(announce: Bool) async {
        guard !scanning else {
            scanAgain = true
            return
        }
        scanning = true
        defer { scanning = false }
        repeat {
            scanAgain = false
            await lookAtInterfaces(announce: announce)
        } while scanAgain
    }

    private func lookAtInterfaces(announce: Bool) async {
        guard !stopped, let sink = datagramSink else { return }
        let enumerated = try? System.enumerateDevices()
        let devices = enumerated ?? []
        if let enumerated {
            let addresses = Set(enumerated.compactMap { $0.address?.ipAddress })
            if addresses != localAddresses {
                for gone in localAddresses.subtracting(addresses).sorted() { logger.notice("this device's address \(gone) went away") }
                localAddresses = addresses
                publish(.localAddresses(addresses))
            }
        }
        let names: [String]
        if configuration.allMulticastInterfaces {
            names = Array(Set(devices.filter { $0.multicastSupported }.map(\.name)))
                .filter { !(InterfaceFlags(name: $0)?.isLoopback ?? true) }.sorted()
        } else {
            names = configuration.interfaces
        }
        var wanted: [MulticastPath: NIONetworkDevice] = [:]
        var report: [DiscoveryInterface] = []
        for name in names {
            let flags = InterfaceFlags(name: name)
            let up = flags?.isUp ?? devices.contains { $0.name == name }
            var state = DiscoveryInterface(name: name, isUp: up, ipv4: nil, ipv6: false)
            if up {
                if configuration.ipv4, let v4 = devices.first(where: { $0.name == name && $0.address?.protocol == .inet }), let ip = v4.address?.ipAddress {
                    wanted[MulticastPath(interface: name, family: .v4, address: ip)] = v4
                    state.ipv4 = ip
                }
                if groupAddressV6 != nil, let v6 = devices.first(where: { $0.name == name && $0.address?.protocol == .inet6 }) {
                    wanted[MulticastPath(interface: name, family: .v6, address: String(v6.interfaceIndex))] = v6
                }
            }
            report.append(state)
        }
        var changed = false
        for (path, channel) in paths where wanted[path] == nil {
            paths[path] = nil
            try? await channel.close()
            logger.info("stopped announcing on \(path)")
            changed = true
        }
        // A path that failed is tried again after 30 s (its failure logged the first time).
        failedPaths = failedPaths.filter { wanted[$0.key] != nil }
        let retryAfter = ContinuousClock.now - .seconds(30)
        let toOpen = wanted.filter { entry in
            guard paths[entry.key] == nil else { return false }
            guard let failed = failedPaths[entry.key] else { return true }
            return failed < retryAfter
        }
        for (path, device) in toOpen.sorted(by: { $0.key.description < $1.key.description }) {
            do {
                let channel = try await openChannel(path, device: device, sink: sink)
                // Stopped, or opened meanwhile: this one is not wanted.
                guard !stopped, paths[path] == nil else {
                    try? await channel.close()
                    continue
                }
                paths[path] = channel
                if announce { logger.info("announcing on \(path)") }
                changed = true
            } catch {
                let again = failedPaths[path] != nil
                failedPaths[path] = ContinuousClock.now
                // Loopback carries IPv6 multicast only on some kernels; it is not worth a warning.
                if again || (path.family == .v6 && path.interface == "lo") {
                    logger.debug("no IPv6 multicast on \(path): \(error)")
                } else {
                    logger.warning("cannot announce on \(path): \(error)")
                }
            }
        }
        for index in report.indices {
            report[index].ipv6 = paths.keys.contains { $0.interface == report[index].name && $0.family == .v6 }
            if !paths.keys.contains(where: { $0.interface == report[index].name && $0.family == .v4 }) { report[index].ipv4 = nil }
        }
        interfaces = report
        await serviceDiscovery?.follow(ServiceDiscovery.links(named: report.filter(\.isUp).map(\.name), ipv4: configuration.ipv4, ipv6: configuration.ipv6))
        if changed && announce {
            askForAnswers = true
            try? await send()
        }
    }

    private func openChannel(
        _ path: MulticastPath, device: NIONetworkDevice, sink: AsyncStream<Datagram>.Continuation
    ) async throws -> any Channel {
        let v6 = path.family == .v6
        guard let group = v6 ? groupAddressV6 : groupAddress else { throw DiscoveryError.notMulticast(path.interface) }
        let scope = v6 ? path.interface : nil
        let index = device.interfaceIndex
        let budget = self.budget, overBudget = self.overBudget, watch = floodWatch, keys = self.keys + self.retiredKeys, strangers = self.strangers
        // IPv4 binds the group itself; IPv6 the wildcard, with packet info to keep to its interface.
        return try await MulticastSocket.open(
            path, device: device, group: group, bindHost: v6 ? "::" : configuration.group, hops: 1, coalescing: (ReadCoalescer.beaconWindow, beaconReads),
            eventLoopGroup: eventLoopGroup
        ) {
            BeaconReceiver(
                sink: sink, interface: scope, via: "\(path)", multicastOn: path.interface, interfaceIndex: index, budget: budget, overBudget: overBudget,
                watch: watch, keys: keys, strangers: strangers)
        }
    }

    /// The unicast sockets, on the listen address: those the caller holds, else its own
    /// (`UnicastSockets.bind`). Each reads beacons through handlers of their own names (a
    /// `ReadCoalescer`, then the reader), which `releaseUnicast` takes away again from the caller's.
    private func openUnicast(host: String, port: Int, sink: AsyncStream<Datagram>.Continuation) async throws -> [any Channel] {
        let channels = configuration.unicastSockets.isEmpty
            ? try await UnicastSockets.bind(host: host, port: port, eventLoopGroup: eventLoopGroup) : configuration.unicastSockets
        do {
            for channel in channels {
                try await channel.setOption(.maxMessagesPerRead, value: UInt(ReadCoalescer.batch)).get()
                let counts = beaconReads
                try await channel.eventLoop.submit {
                    try channel.pipeline.syncOperations.addHandler(
                        ReadCoalescer(window: ReadCoalescer.beaconWindow, counts: counts), name: UnicastSockets.coalescerName)
                }.get()
                try await channel.pipeline.addHandler(
                    BeaconReceiver(
                        sink: sink, interface: nil, via: "unicast \(host)", multicastOn: nil, interfaceIndex: nil, budget: budget,
                        overBudget: overBudget, watch: floodWatch, keys: keys + retiredKeys, strangers: strangers),
                    name: UnicastSockets.receiverName
                ).get()
            }
        } catch {
            for channel in channels {
                // Ours are closed; the caller's keep nothing of this attempt, so that the next
                // start does not add a second coalescer or reader.
                if configuration.unicastSockets.isEmpty { try? await channel.close() } else { await removeReaders(from: channel) }
            }
            throw error
        }
        return channels
    }

    /// Takes the beacon reader and its coalescer away from a unicast socket the caller holds.
    /// A handler already gone (the socket closed) is no failure; any other is logged.
    private func removeReaders(from channel: any Channel) async {
        for name in [UnicastSockets.receiverName, UnicastSockets.coalescerName] {
            do {
                try await channel.pipeline.removeHandler(name: name).get()
            } catch ChannelPipelineError.notFound, ChannelError.ioOnClosedChannel {
                continue
            } catch {
                logger.error("could not take the old beacon reader '\(name)' off a unicast socket: \(error); beacons there may go unheard until a restart")
            }
        }
    }

    /// Closes the unicast sockets discovery opened; the caller's stay open, without its reader.
    private func releaseUnicast() async {
        for channel in unicastChannels {
            if configuration.unicastSockets.isEmpty {
                try? await channel.close()
            } else {
                await removeReaders(from: channel)
            }
        }
        unicastChannels = []
    }
}

/// The UDP sockets on a link listener's address and port, where static peers' (and VPNs')
/// beacons arrive and this device's unicast beacons leave from.
package enum UnicastSockets {
    static let receiverName = "beacons"
    static let coalescerName = "beacon reads"

    /// Binds them without a reader: for `0.0.0.0` or `::`, one for each family (IPv6 only
    /// where the host has it). No address reuse: a port another program holds is refused.
    package static func bind(host: String, port: Int, eventLoopGroup: any EventLoopGroup) async throws -> [any Channel] {
        func open(_ host: String, v6Only: Bool) async throws -> any Channel {
            var bootstrap = DatagramBootstrap(group: eventLoopGroup)
            if v6Only {
                bootstrap = bootstrap.channelOption(.socket(SocketOptionLevel(IPPROTO_IPV6), SocketOptionName(IPV6_V6ONLY)), value: 1)
            }
            return try await bootstrap.bind(host: host, port: port).get()
        }
        guard host == "0.0.0.0" || host == "::" else { return [try await open(host, v6Only: false)] }
        var channels = [try await open("0.0.0.0", v6Only: false)]
        if let v6 = try? await open("::", v6Only: true) { channels.append(v6) }
        return channels
    }
}

/// One multicast socket: an interface, a family, and the address (IPv4) or index (IPv6)
/// it was opened with, so that a change of either opens a new one.
struct MulticastPath: Hashable, Sendable, CustomStringConvertible {
    enum Family: Sendable { case v4, v6 }
    var interface: String
    var family: Family
    var address: String

    var description: String { family == .v4 ? "\(interface) (IPv4 \(address))" : "\(interface) (IPv6)" }
}

/// An interface's flags, from `/sys/class/net/NAME/flags`; nil where there is no such file.
struct InterfaceFlags {
    var isUp: Bool
    var isLoopback: Bool

    init?(name: String) {
        guard !name.contains("/"), let text = try? String(contentsOfFile: "/sys/class/net/\(name)/flags", encoding: .utf8),
            let flags = UInt(text.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "0x", with: ""), radix: 16)
        else { return nil }
        isUp = flags & 0x1 != 0
        isLoopback = flags & 0x8 != 0
    }
}

/// A datagram as a socket received it: its bytes, the sender's address, and which socket.
struct Datagram: Sendable {
    var bytes: [UInt8]
    var from: String
    var via: String
    /// The interface of the multicast socket it came on; nil for unicast.
    var interface: String? = nil
}

/// Beacons that opened with none of the account's keys (current, previous or retired):
/// another account's devices, noise, forgeries. Counted where they arrive, on the event loop,
/// and never handed on: a stranger's beacon costs its one failed open, not the trip to the
/// discovery actor.
final class StrangerBeacons: Sendable {
    private struct State {
        var count = 0
        var from: [String: (count: Int, last: Date)] = [:]
    }
    private let state = Mutex(State())

    /// Counts one from `address`, keeping at most 32 addresses (the longest quiet goes).
    func record(from address: String) {
        state.withLock { state in
            state.count += 1
            if state.from[address] == nil && state.from.count >= 32, let oldest = state.from.min(by: { $0.value.last < $1.value.last }) {
                state.from[oldest.key] = nil
            }
            state.from[address] = ((state.from[address]?.count ?? 0) + 1, Date())
        }
    }

    var count: Int { state.withLock { $0.count } }
    var from: [String: (count: Int, last: Date)] { state.withLock { $0.from } }
}

/// Hands each received datagram that opens with one of the account's keys to the discovery
/// actor; one that opens with none is counted here and dropped. Discovery made again (a new
/// beacon key) takes it off the unicast sockets it shares with links, so it is removable: one
/// left there keeps the old keys and drops every beacon before the new reader sees it.
final class BeaconReceiver: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    let sink: AsyncStream<Datagram>.Continuation
    /// The interface an IPv6 multicast socket is on: a link-local sender is only reachable
    /// with it (`fe80::1%eth0`).
    let interface: String?
    /// Which socket this is.
    let via: String
    /// The interface of a multicast socket, and its index: what arrives on another is not its.
    let multicastOn: String?
    let interfaceIndex: Int?

    let budget: SourceBudget
    let overBudget: OverBudgetBeacons
    let watch: FloodWatch
    /// Every key a beacon the actor looks at may be sealed with: current, previous, retired.
    let keys: [BeaconKey]
    let strangers: StrangerBeacons

    init(
        sink: AsyncStream<Datagram>.Continuation, interface: String?, via: String, multicastOn: String?, interfaceIndex: Int?,
        budget: SourceBudget, overBudget: OverBudgetBeacons, watch: FloodWatch, keys: [BeaconKey], strangers: StrangerBeacons
    ) {
        self.budget = budget
        self.overBudget = overBudget
        self.watch = watch
        self.keys = keys
        self.strangers = strangers
        self.sink = sink
        self.interface = interface
        self.via = via
        self.multicastOn = multicastOn
        self.interfaceIndex = interfaceIndex
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        // A beacon has one size; anything else is dropped before it costs more.
        guard envelope.data.readableBytes == Beacon.size else { return }
        if let interfaceIndex, let arrived = envelope.metadata?.packetInfo?.interfaceIndex, arrived != interfaceIndex { return }
        let from = Self.describe(envelope.remoteAddress, interface: interface)
        let bytes = Array(envelope.data.readableBytesView)
        guard budget.spend(from) else {
            // A member's address is shared with all else its machine runs: another local user's
            // flood from it must not silence the member. Over its budget, what comes from it is
            // opened (as cheap as reading it was), and fresh beacons of the account still pass.
            guard budget.isTrusted(from), case .opened(let content) = Beacon.read(bytes, with: keys), overBudget.admit(content) else {
                watch.refused(from: from, reason: "over \(budget.perSecond) a second from one address")
                return
            }
            sink.yield(Datagram(bytes: bytes, from: from, via: via, interface: multicastOn))
            return
        }
        switch Beacon.read(bytes, with: keys) {
        case .opened: break
        case .malformed:
            // A member's, which this version cannot read: said once, as a flood of them would be.
            watch.noteOnce(
                "malformed", "a beacon sealed with this account's key does not read as a beacon (a device of a newer version, or one that breaks the limits: more than 16 clipboard types, a type name over 100 bytes, a type named twice): such beacons are ignored")
            watch.refused(from: from, reason: "sealed by a member, not a beacon")
            return
        case .notOurs:
            strangers.record(from: from)
            watch.refused(from: from, reason: "did not open")
            return
        }
        sink.yield(Datagram(bytes: bytes, from: from, via: via, interface: multicastOn))
    }

    /// The sender's address as a link can be opened to it: a link-local IPv6 address keeps
    /// its scope.
    static func describe(_ address: SocketAddress, interface: String?) -> String {
        guard let ip = address.ipAddress else { return "?" }
        guard case .v6(let v6) = address, ip.lowercased().hasPrefix("fe80:") else { return ip }
        if let interface { return "\(ip)%\(interface)" }
        var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        guard v6.address.sin6_scope_id != 0, if_indextoname(v6.address.sin6_scope_id, &name) != nil else { return ip }
        return "\(ip)%\(String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))"
    }
}

/// The beacons let through over a member's address's budget: only one of the account's keys
/// seals one, so a stranger's flood cannot add to them, and a replayed copy is let through at
/// most once (each sender's sequence only rises here). The actor's replay guard judges them
/// as any other.
final class OverBudgetBeacons: Sendable {
    private let latest = Mutex<[UUID: UInt64]>([:])

    func admit(_ content: BeaconContent) -> Bool {
        latest.withLock { latest in
            if let last = latest[content.sender], content.sequence <= last { return false }
            // Only holders of a key add senders; a compromised member's made-up ones are bounded.
            if latest[content.sender] == nil, latest.count >= 256 { latest = [:] }
            latest[content.sender] = content.sequence
            return true
        }
    }
}

extension Duration {
    var seconds: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
