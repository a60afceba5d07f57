import Foundation
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix

/// What DNS-SD has seen and done, for diagnosis.
package struct ServiceDiscoveryStatistics: Sendable, Hashable {
    package var messages = 0
    /// Datagrams that are not DNS messages we read.
    package var malformed = 0
    /// Our own messages heard back (multicast loops back to this host).
    package var own = 0
    package var answered = 0
    /// Messages not looked at because the budget for the second was spent (a flood).
    package var overBudget = 0
    package var conflicts = 0
    /// Times the names changed: on schedule, on interface changes, after conflicts.
    package var rotations = 0
}

/// DNS-SD over multicast DNS, our own on NIO: publishes this device's `_handoff._tcp`
/// service under random names that rotate, and browses for the others'. It shares port
/// 5353 with whatever else answers mDNS on the host (avahi): every socket is opened with
/// address reuse, joins the group on one interface only, and sends with TTL 255 as the RFC
/// asks.
///
/// Discovery tells it which interfaces to use (`follow`); what it finds, it offers as places
/// to send beacons by unicast where multicast beacons do not arrive.
actor ServiceDiscovery {
    struct Configuration: Sendable {
        var port: Int = 5353
        /// The longest time one set of names is used; each period is a random 90 to 100% of it.
        var rotation: Duration = .seconds(15 * 60)
        var ipv4 = true
        var ipv6 = true
        /// The most messages looked at per second on each socket; the rest are counted and dropped.
        var budgetPerSecond = 200
        /// Called after each renewal of the names.
        var namesRenewed: (@Sendable () -> Void)?
    }

    /// An interface as DNS-SD uses it: its devices (for joining and sending) and its addresses.
    struct Link: Sendable, Equatable {
        var name: String
        var v4: NIONetworkDevice?
        var v6: NIONetworkDevice?
        /// The addresses published for the host name: IPv4 and IPv6 link-local only. Global
        /// IPv6 addresses (temporary and stable ones) would tie each other together.
        var addresses: [[UInt8]]
        /// Every address the interface has, to know our own packets.
        var ownAddresses: [[UInt8]] = []
        /// IPv4 networks on it (address and mask), to tell an on-link sender.
        var networks: [(address: UInt32, mask: UInt32)]

        static func == (lhs: Link, rhs: Link) -> Bool {
            lhs.name == rhs.name && lhs.addresses == rhs.addresses && lhs.ownAddresses == rhs.ownAddresses && (lhs.v4 == nil) == (rhs.v4 == nil) && (lhs.v6 == nil) == (rhs.v6 == nil)
                && lhs.v6?.interfaceIndex == rhs.v6?.interfaceIndex
        }
    }

    private let configuration: Configuration
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private var responder: DNSSDResponder
    private var links: [String: Link] = [:]
    private var sockets: [MulticastPath: any Channel] = [:]
    private var caches: [String: DNSSDCache] = [:]
    /// Instance names this device used, so that its own records heard back are never a service.
    private var ownInstances: Set<DNSName> = []
    /// The last messages sent, to know our own when they come back.
    private var sent: [[UInt8]] = []
    private var budget: [MulticastPath: (second: ContinuousClock.Instant, count: Int)] = [:]
    private var sink: AsyncStream<(bytes: [UInt8], from: SocketAddress, path: MulticastPath)>.Continuation?
    /// Its own work (reading, the cache's clock, delayed answers): ended when it stops.
    private let tasks: OwnedTasks
    private var publishing: Task<Void, Never>?
    private var rotationTask: Task<Void, Never>?
    private var browsing: Task<Void, Never>?
    private var stopped = false
    /// Grows at every rotation, withdrawal and stop: an answer made under one is not sent under another.
    private var generation = 0
    /// When each address was last answered by unicast: at most once a second, so that a
    /// forged source cannot turn this device into a reflector.
    private var lastUnicast: [String: ContinuousClock.Instant] = [:]
    private var subscribers: [UUID: AsyncStream<[DNSSDService]>.Continuation] = [:]
    private var lastServices: [DNSSDService] = []
    /// When records were last pushed out of a full cache (a flood), until the browser has
    /// asked again after it.
    private var floodSeen: ContinuousClock.Instant?
    /// Services found and logged in the current minute, to log a flood of them once.
    private var foundLogged: (minute: ContinuousClock.Instant, count: Int)?
    /// Instances whose device's beacons arrive anyway: their records are not refreshed.
    private var covered: Set<String> = []
    /// Every service is covered (`setCovered`).
    private var coversAll = false
    /// When each question for something missing was asked, and how often: asked again after
    /// 1, 2, 4... seconds, at most every 5 minutes, so that a service that never resolves
    /// costs almost nothing.
    private var asked: [DNSQuestion: (count: Int, next: ContinuousClock.Instant)] = [:]
    package private(set) var statistics = ServiceDiscoveryStatistics()

    static let groupV4 = "224.0.0.251"
    static let groupV6 = "ff02::fb"

    init(linkPort: UInt16, configuration: Configuration = Configuration(), eventLoopGroup: any EventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        tasks = OwnedTasks(logger: logger)
        responder = DNSSDResponder(port: linkPort)
    }

    /// The services other hosts publish, on every interface.
    var services: [DNSSDService] { lastServices }

    /// The names in use now (for tests of rotation, and for `doctor`).
    var currentNames: (instance: String, host: String) { (responder.instance, responder.host) }

    var isAnnounced: Bool { responder.phase == .announced }

    /// The service list whenever it changes, until stopped.
    func changes() -> AsyncStream<[DNSSDService]> {
        let (stream, continuation) = AsyncStream<[DNSSDService]>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = UUID.random()
        subscribers[id] = continuation
        continuation.onTermination = { [weak self] _ in self?.tasks.start("unsubscribe") { await self?.unsubscribe(id) } }
        return stream
    }

    private func unsubscribe(_ id: UUID) { subscribers[id] = nil }

    /// The services whose beacons arrive (`instances`), or, with `all`, every service: members'
    /// beacons come over multicast, so no beacon goes to any service by unicast and none of
    /// their records need keeping fresh (`Discovery`). Those records are not asked for again;
    /// they expire, and rotations and announcements bring them back.
    ///
    /// When multicast stops carrying them, the records are needed again, for unicast beacons:
    /// one browse without known answers brings every service's records back at once, where
    /// otherwise they would come back only with each device's next rotation.
    func setCovered(_ instances: Set<String>, all: Bool = false) async {
        covered = instances
        let wasAll = coversAll
        coversAll = all
        if wasAll && !all { await query(knownAnswers: false) }
    }

    func start() {
        let (datagrams, sink) = AsyncStream<(bytes: [UInt8], from: SocketAddress, path: MulticastPath)>.makeStream(bufferingPolicy: .bufferingNewest(256))
        self.sink = sink
        tasks.start("mDNS") { [weak self] in
            for await datagram in datagrams { await self?.receive(datagram.bytes, from: datagram.from, path: datagram.path) }
        }
        tasks.start("cache clock") { [weak self] in
            while !Task.isCancelled {
                // Period: the cache's records are aged once a second (RFC 6762, 5.2 and 10).
                // On the event loop's clock: a task's sleep would wake two of Dispatch's
                // threads every second to wake the loop.
                try? await LoopTimer.sleep(for: .seconds(1))
                await self?.tick()
            }
        }
        scheduleRotation()
    }

    /// Says goodbye on every interface, then closes everything.
    func stop() async {
        guard !stopped else { return }
        // The goodbyes are made, and everything stopped, before the first await: nothing is
        // answered with the old TTLs after them.
        let goodbyes = withdraw { _ in true }
        stopped = true
        responder.stop()
        for (message, channel, path) in goodbyes { await send(message, on: channel, path: path) }
        tasks.cancel()
        for task in [publishing, rotationTask, browsing].compactMap({ $0 }) { task.cancel() }
        for channel in sockets.values { try? await channel.close() }
        sockets = [:]
        sink?.finish()
        for subscriber in subscribers.values { subscriber.finish() }
        subscribers = [:]
        await tasks.end()
    }

    /// Uses these interfaces from now on. Any change (one more or less, an address) closes
    /// and opens sockets as needed, and the names rotate: a device that moves to another
    /// network carries nothing from the last one.
    func follow(_ wanted: [Link]) async {
        guard !stopped, let sink else { return }
        let next = Dictionary(wanted.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        guard next != links else { return }
        // Goodbye from the old names, where they were announced and the interface still is;
        // nothing is answered until the new names are probed.
        let goodbyes = withdraw { next[$0] != nil }
        // What was learnt on a link that changed (another network, maybe) is forgotten with it.
        caches = caches.filter { next[$0.key] != nil && next[$0.key] == links[$0.key] }
        asked = [:]
        links = next
        for (message, channel, path) in goodbyes { await send(message, on: channel, path: path) }
        var wantedPaths: [MulticastPath: NIONetworkDevice] = [:]
        for link in wanted {
            if configuration.ipv4, let v4 = link.v4, let ip = v4.address?.ipAddress {
                wantedPaths[MulticastPath(interface: link.name, family: .v4, address: ip)] = v4
            }
            if configuration.ipv6, let v6 = link.v6 {
                wantedPaths[MulticastPath(interface: link.name, family: .v6, address: String(v6.interfaceIndex))] = v6
            }
        }
        for (path, channel) in sockets where wantedPaths[path] == nil {
            sockets[path] = nil
            try? await channel.close()
        }
        for (path, device) in wantedPaths where sockets[path] == nil {
            do {
                let channel = try await open(path, device: device, sink: sink)
                guard !stopped else {
                    try? await channel.close()
                    return
                }
                sockets[path] = channel
            } catch {
                logger.debug("no mDNS on \(path): \(error)")
            }
        }
        guard !stopped else { return }
        responder.addresses = links.mapValues(\.addresses)
        rotate(reason: "the interfaces changed")
        browse()
    }

    // MARK: Publishing

    private func scheduleRotation() {
        rotationTask?.cancel()
        // Close to the longest: each rotation costs every device on the link about 2 KB.
        let period = configuration.rotation * Double.random(in: 0.9...1.0)
        rotationTask = Task { [weak self] in
            try? await Task.sleep(for: period)
            guard !Task.isCancelled else { return }
            await self?.rotateOnSchedule()
        }
    }

    private func rotateOnSchedule() async {
        guard !stopped else { return }
        let goodbyes = withdraw { _ in true }
        rotate(reason: "on schedule")
        for (message, channel, path) in goodbyes { await send(message, on: channel, path: path) }
    }

    /// The goodbyes for the names in use on the interfaces `keep` accepts (none if they were
    /// not announced yet), made now; from now on nothing is answered for those names, and
    /// answers still waiting are not sent.
    private func withdraw(_ keep: (String) -> Bool) -> [(DNSMessage, any Channel, MulticastPath)] {
        defer {
            generation += 1
            responder.withdraw()
        }
        guard responder.phase == .announced else { return [] }
        return sockets.filter { keep($0.key.interface) }.map { (responder.goodbye(on: $0.key.interface), $0.value, $0.key) }
    }

    private func rememberOwn(_ name: DNSName) {
        if ownInstances.count >= 64 { ownInstances = [responder.instanceName] }
        ownInstances.insert(name)
    }

    /// New names, probed and then announced; the schedule starts again.
    private func rotate(reason: String) {
        rememberOwn(responder.instanceName)
        responder.renew()
        rememberOwn(responder.instanceName)
        generation += 1
        statistics.rotations += 1
        configuration.namesRenewed?()
        logger.debug("DNS-SD names renewed (\(reason))")
        scheduleRotation()
        publishing?.cancel()
        publishing = Task { [weak self] in await self?.probeAndAnnounce() }
    }

    /// Three probes 250 ms apart after a random wait of up to 250 ms, then two announcements a
    /// second apart (RFC 6762, 8). A conflict on the way starts again with new names.
    private func probeAndAnnounce() async {
        var attempts = 0
        while !Task.isCancelled, !stopped {
            // RFC 6762, 8.1: a random wait before the first probe, then 250 ms between probes.
            try? await Task.sleep(for: .milliseconds(Int.random(in: 0...250)))
            for _ in 0..<3 {
                guard !Task.isCancelled, !responder.conflicted else { break }
                for (path, channel) in askingSockets { await send(responder.probe(on: path.interface), on: channel, path: path) }
                // RFC 6762, 8.1: 250 ms between probes.
                try? await Task.sleep(for: .milliseconds(250))
            }
            guard !Task.isCancelled else { return }
            guard responder.conflicted else { break }
            statistics.conflicts += 1
            attempts += 1
            logger.notice("another host answers for this device's DNS-SD name; choosing another")
            rememberOwn(responder.instanceName)
            responder.renew()
            rememberOwn(responder.instanceName)
            generation += 1
            // Fifteen conflicts in a row: someone answers every name. Wait as RFC 6762, 8.1 says.
            if attempts >= 15 { try? await Task.sleep(for: .seconds(5)) }
        }
        guard !Task.isCancelled, !stopped else { return }
        responder.probingSucceeded()
        let announcing = generation
        for round in 0..<2 {
            // RFC 6762, 8.3: the second announcement a second after the first.
            if round == 1 { try? await Task.sleep(for: .seconds(1)) }
            // Made all at once: a rotation meanwhile must not see these names announced.
            guard !Task.isCancelled, generation == announcing, responder.phase == .announced else { return }
            // Over IPv4 where there is IPv4, like questions: hosts that speak only IPv6 ask, and are answered.
            let messages = askingSockets.map { (responder.announcement(on: $0.key.interface, now: .now), $0.value, $0.key) }
            for (message, channel, path) in messages { await send(message, on: channel, path: path) }
        }
    }

    // MARK: Browsing

    /// Asks for `_handoff._tcp` at once, a second later and two seconds after that, then
    /// hourly (RFC 6762, 5.2 asks for intervals that at least double): services that start
    /// later announce themselves, so asking more often would only cost every device traffic.
    private func browse() {
        browsing?.cancel()
        browsing = Task { [weak self] in
            // RFC 6762, 5.2: a first question 20-120 ms after starting, then at doubling intervals.
            try? await Task.sleep(for: .milliseconds(Int.random(in: 20...120)))
            var asked = 0
            while !Task.isCancelled {
                await self?.query()
                asked += 1
                // RFC 6762, 5.2: intervals that at least double (1 s, 2 s, then hourly).
                try? await Task.sleep(for: asked == 1 ? .seconds(1) : asked == 2 ? .seconds(2) : .seconds(3600))
            }
        }
    }

    /// The sockets questions go out on: IPv4 where an interface has it (every responder on a
    /// dual-stack link hears IPv4), IPv6 where it has nothing else. Announcements and
    /// goodbyes go out on both, for hosts that only speak one.
    private var askingSockets: [(key: MulticastPath, value: any Channel)] {
        let withIPv4 = Set(sockets.keys.filter { $0.family == .v4 }.map(\.interface))
        return sockets.filter { $0.key.family == .v4 || !withIPv4.contains($0.key.interface) }.map { ($0.key, $0.value) }
    }

    private func query(extra: [String: [DNSQuestion]] = [:], knownAnswers: Bool = true) async {
        let now = ContinuousClock.now
        for (path, channel) in askingSockets {
            let cache = caches[path.interface] ?? DNSSDCache()
            var questions = [DNSQuestion(name: DNSSDResponder.serviceType, type: DNSType.ptr)] + cache.missingQuestions(now: now).prefix(16)
            questions += extra[path.interface] ?? []
            // Kept well under the 9000 bytes of a message (RFC 6762, 17).
            let known = knownAnswers ? Array(cache.knownAnswers(name: DNSSDResponder.serviceType, type: DNSType.ptr, now: now).prefix(48)) : []
            await send(DNSMessage(isResponse: false, questions: questions, answers: known), on: channel, path: path)
        }
    }

    /// Once a second: expired records go, records in use are refreshed before they expire,
    /// half-resolved services are asked about.
    private func tick() async {
        guard !stopped else { return }
        let now = ContinuousClock.now
        // A flood pushed records out of the cache, real services' among them: once it has
        // been quiet for 2 s, ask again, so they answer and are listed again at once.
        if let flood = floodSeen, now - flood >= .seconds(2) {
            floodSeen = nil
            logger.notice("the DNS-SD cache was full during a flood of records; asking for the services again")
            await query()
        }
        var questions: [String: [DNSQuestion]] = [:]
        let skipped = Set(lastServices.filter { coversAll || covered.contains($0.instance) }.flatMap { [DNSSDResponder.serviceType.prepending($0.instance), DNSName($0.host)] })
        if asked.count > 256 {
            // The oldest go first; clearing them all would let a flood undo the backoff.
            for (question, _) in asked.sorted(by: { $0.value.next < $1.value.next }).prefix(asked.count - 192) { asked[question] = nil }
        }
        for name in caches.keys {
            caches[name]?.expire(now: now)
            let refresh = (caches[name]?.refreshQuestions(now: now) ?? []).filter { !skipped.contains($0.name) }
            let missing = (caches[name]?.missingQuestions(now: now) ?? []).filter { question in
                guard let last = asked[question] else { return true }
                return now >= last.next
            }
            for question in missing {
                let count = (asked[question]?.count ?? 0) + 1
                asked[question] = (count, now + .seconds(min(1 << min(count, 9), 300)))
            }
            // At most 32 questions a second on a link, whatever others announce.
            let due = Array((refresh + missing).prefix(32))
            if !due.isEmpty { questions[name] = due }
        }
        publishServices()
        for (path, channel) in askingSockets {
            guard let due = questions[path.interface] else { continue }
            await send(DNSMessage(isResponse: false, questions: Array(Set(due)).sorted { $0.name.description < $1.name.description }), on: channel, path: path)
        }
    }

    private func publishServices() {
        let now = ContinuousClock.now
        // Only addresses on the link they were found on: a record pointing elsewhere would make
        // every device send beacons there.
        let found = caches.keys.sorted().flatMap { name in
            caches[name]!.services(on: name, excluding: ownInstances, now: now).compactMap { service -> DNSSDService? in
                guard let link = links[name] else { return nil }
                var service = service
                service.addresses = service.addresses.filter { Self.isOnLink(text: $0, link) }
                return service.addresses.isEmpty ? nil : service
            }
        }
        guard found != lastServices else { return }
        for service in found where !lastServices.contains(where: { $0.instance == service.instance && $0.interface == service.interface }) {
            // Five a minute are logged one by one; a flood of them is summed up.
            if let logged = foundLogged, now - logged.minute < .seconds(60) {
                foundLogged?.count += 1
            } else {
                if let logged = foundLogged, logged.count > 5 {
                    logger.notice("found \(logged.count - 5) more Handoff services with DNS-SD in a minute than were logged (a flood of announcements?)")
                }
                foundLogged = (now, 1)
            }
            if (foundLogged?.count ?? 0) <= 5 {
                logger.info("found a Handoff service with DNS-SD", metadata: ["instance": "\(service.instance)", "interface": "\(service.interface)", "addresses": "\(service.addresses.joined(separator: " "))", "port": "\(service.port)"])
            } else if foundLogged?.count == 6 {
                logger.notice("more than 5 Handoff services found with DNS-SD in a minute; the rest are not logged one by one")
            }
        }
        lastServices = found
        for subscriber in subscribers.values { subscriber.yield(found) }
    }

    // MARK: Receiving

    private func receive(_ bytes: [UInt8], from source: SocketAddress, path: MulticastPath) async {
        guard !stopped else { return }
        let now = ContinuousClock.now
        var spent = budget[path] ?? (now, 0)
        if now - spent.second >= .seconds(1) { spent = (now, 0) }
        spent.count += 1
        budget[path] = spent
        guard spent.count <= configuration.budgetPerSecond else {
            statistics.overBudget += 1
            if spent.count == configuration.budgetPerSecond + 1 {
                logger.warning("more than \(configuration.budgetPerSecond) mDNS messages in a second on \(path); the rest of the second is ignored")
            }
            return
        }
        // Ours, come back: the same bytes, from the mDNS port and one of our addresses (the
        // same query may well come from another host too).
        if sent.contains(bytes), source.port == configuration.port, let link = links[path.interface], Self.isOwnAddress(source, link) {
            statistics.own += 1
            return
        }
        statistics.messages += 1
        let message: DNSMessage
        do {
            message = try DNSMessage(bytes: bytes)
        } catch {
            statistics.malformed += 1
            return
        }
        guard let link = links[path.interface], Self.isOnLink(source, link) else { return }
        let legacy = source.port != configuration.port
        if message.isResponse {
            // RFC 6762, 11: responses come from the mDNS port.
            guard !legacy else { return }
            let before = caches[path.interface]?.evicted ?? 0
            let kept = Set(lastServices.filter { covered.contains($0.instance) }.flatMap { [DNSSDResponder.serviceType.prepending($0.instance), DNSName($0.host)] })
            if caches[path.interface, default: DNSSDCache()].insert(message.answers + message.additionals, now: now, keeping: kept) {
                publishServices()
            }
            if (caches[path.interface]?.evicted ?? 0) > before { floodSeen = now }
        }
        let reply = responder.receive(message, on: path.interface, legacy: legacy, now: now)
        if responder.conflicted, responder.phase == .announced {
            statistics.conflicts += 1
            logger.notice("another host claims this device's DNS-SD name; choosing another")
            rotate(reason: "a conflict")
            return
        }
        guard let reply, let channel = sockets[path] else { return }
        statistics.answered += 1
        switch reply {
        case .unicast(let answer):
            let key = source.ipAddress ?? "?"
            if let last = lastUnicast[key], now - last < .seconds(1) { return }
            if lastUnicast.count >= 256 { lastUnicast = lastUnicast.filter { now - $0.value < .seconds(1) } }
            lastUnicast[key] = now
            await send(answer, on: channel, path: path, to: source)
        case .multicast(let answer, let delay):
            if delay > .zero {
                let made = generation
                tasks.start("shared answer") { [weak self] in
                    // RFC 6762, 6: a shared answer waits 20-120 ms (answers from others may make it unneeded).
                    try? await Task.sleep(for: delay)
                    await self?.sendIfOpen(answer, path: path, generation: made)
                }
            } else {
                await send(answer, on: channel, path: path)
            }
        }
    }

    private func sendIfOpen(_ message: DNSMessage, path: MulticastPath, generation made: Int) async {
        guard !stopped, generation == made, responder.phase == .announced, let channel = sockets[path] else { return }
        await send(message, on: channel, path: path)
    }

    /// Whether a sender is on the link: IPv4 within one of the interface's networks (or
    /// 169.254/16), IPv6 link-local or in one of its /64s. Nothing from farther away is
    /// answered or cached, so the service cannot be used to reflect traffic elsewhere.
    static func isOnLink(_ source: SocketAddress, _ link: Link) -> Bool {
        switch source {
        case .v4(let address):
            let ip = UInt32(bigEndian: address.address.sin_addr.s_addr)
            if ip >> 16 == 0xA9FE { return true }
            return link.networks.contains { ip & $0.mask == $0.address & $0.mask }
        case .v6(let address):
            let bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
            if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return true }
            return link.ownAddresses.contains { $0.count == 16 && $0.prefix(8) == bytes.prefix(8) }
        default:
            return false
        }
    }

    static func isOnLink(text: String, _ link: Link) -> Bool {
        let bare = text.split(separator: "%").first.map(String.init) ?? text
        guard let address = try? SocketAddress(ipAddress: bare, port: 0) else { return false }
        return isOnLink(address, link)
    }

    /// Whether a datagram came from one of this host's own addresses on the link.
    static func isOwnAddress(_ source: SocketAddress, _ link: Link) -> Bool {
        switch source {
        case .v4(let address):
            let bytes = withUnsafeBytes(of: address.address.sin_addr) { Array($0) }
            return bytes.first == 127 || link.ownAddresses.contains(bytes)
        case .v6(let address):
            let bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
            return bytes == Array(repeating: 0, count: 15) + [1] || link.ownAddresses.contains(bytes)
        default:
            return false
        }
    }

    // MARK: Sockets

    private func send(_ message: DNSMessage, on channel: any Channel, path: MulticastPath, to destination: SocketAddress? = nil) async {
        let bytes = message.encoded()
        if sent.count >= 32 { sent.removeFirst() }
        sent.append(bytes)
        guard let target = destination ?? (try? SocketAddress(ipAddress: path.family == .v4 ? Self.groupV4 : Self.groupV6, port: configuration.port)) else { return }
        try? await channel.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: channel.allocator.buffer(bytes: bytes)))
    }

    private func open(
        _ path: MulticastPath, device: NIONetworkDevice, sink: AsyncStream<(bytes: [UInt8], from: SocketAddress, path: MulticastPath)>.Continuation
    ) async throws -> any Channel {
        let v6 = path.family == .v6
        let index = device.interfaceIndex
        // The wildcard, so that unicast answers to port 5353 arrive too; TTL 255 as RFC 6762, 11 asks.
        return try await MulticastSocket.open(
            path, device: device, group: try SocketAddress(ipAddress: v6 ? Self.groupV6 : Self.groupV4, port: configuration.port),
            bindHost: v6 ? "::" : "0.0.0.0", hops: 255, unicastHops: 255, eventLoopGroup: eventLoopGroup
        ) {
            MDNSReceiver(sink: sink, path: path, interfaceIndex: index)
        }
    }

    /// The links for interfaces by name, from the host's devices now.
    static func links(named names: [String], ipv4: Bool, ipv6: Bool) -> [Link] {
        let devices = (try? System.enumerateDevices()) ?? []
        return names.compactMap { name in
            let mine = devices.filter { $0.name == name }
            let v4 = ipv4 ? mine.first { $0.address?.protocol == .inet } : nil
            let v6 = ipv6 ? mine.first { $0.address?.protocol == .inet6 } : nil
            guard v4 != nil || v6 != nil else { return nil }
            var addresses: [[UInt8]] = []
            var own: [[UInt8]] = []
            var networks: [(UInt32, UInt32)] = []
            for device in mine {
                switch (device.address, device.netmask) {
                case (.v4(let address)?, let mask):
                    guard ipv4 else { continue }
                    addresses.append(withUnsafeBytes(of: address.address.sin_addr) { Array($0) })
                    own.append(addresses.last!)
                    var bits: UInt32 = 0xFFFF_FFFF
                    if case .v4(let m)? = mask { bits = UInt32(bigEndian: m.address.sin_addr.s_addr) }
                    networks.append((UInt32(bigEndian: address.address.sin_addr.s_addr), bits))
                case (.v6(let address)?, _):
                    guard ipv6 else { continue }
                    let bytes = withUnsafeBytes(of: address.address.sin6_addr) { Array($0) }
                    own.append(bytes)
                    if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { addresses.append(bytes) }
                default:
                    continue
                }
            }
            return Link(name: name, v4: v4, v6: v6, addresses: addresses.sorted { $0.lexicographicallyPrecedes($1) },
                        ownAddresses: own.sorted { $0.lexicographicallyPrecedes($1) }, networks: networks)
        }
    }
}

/// Hands each mDNS datagram that arrived on the socket's own interface to the actor.
private final class MDNSReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>

    let sink: AsyncStream<(bytes: [UInt8], from: SocketAddress, path: MulticastPath)>.Continuation
    let path: MulticastPath
    let interfaceIndex: Int

    init(sink: AsyncStream<(bytes: [UInt8], from: SocketAddress, path: MulticastPath)>.Continuation, path: MulticastPath, interfaceIndex: Int) {
        self.sink = sink
        self.path = path
        self.interfaceIndex = interfaceIndex
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope = Self.unwrapInboundIn(data)
        guard envelope.data.readableBytes >= 12, envelope.data.readableBytes <= DNSMessage.maximumSize else { return }
        if let arrived = envelope.metadata?.packetInfo?.interfaceIndex, arrived != interfaceIndex { return }
        sink.yield((Array(envelope.data.readableBytesView), envelope.remoteAddress, path))
    }
}
