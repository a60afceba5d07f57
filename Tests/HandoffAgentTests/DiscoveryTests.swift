import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import HandoffTesting
import Testing

@testable import HandoffAgent

/// Discovery on loopback only: these tests send multicast on `lo` and nowhere else.
@Suite("Discovery over UDP multicast on loopback")
struct DiscoveryTests {
    let port = Int.random(in: 12_000..<16_000)

    func configuration(expiry: Duration = .seconds(45), refresh: Duration = .seconds(30)) -> DiscoveryConfiguration {
        DiscoveryConfiguration(port: port, interfaces: ["lo"], refreshInterval: refresh, idleRefreshInterval: refresh, expiry: expiry)
    }

    func agent(_ key: BeaconKey, expiry: Duration = .seconds(45), refresh: Duration = .seconds(30), device: UUID = UUID()) async throws -> Discovery {
        let discovery = Discovery(device: device, keys: [key], linkPort: 50_000, configuration: configuration(expiry: expiry, refresh: refresh))
        try await discovery.start()
        return discovery
    }

    let notes = ActivityAnnouncement(id: UUID(), activityType: "com.example.notes.editing", title: "Groceries", teamIdentifier: "TEAM1")

    /// The next event matching `matches`, or nil after a bounded wait.
    func next(_ events: AsyncStream<DiscoveryEvent>, within limit: Duration = .seconds(10), _ matches: @escaping @Sendable (DiscoveryEvent) -> Bool) async -> DiscoveryEvent? {
        await withTimeLimit(limit) {
            for await event in events where matches(event) { return event }
            return nil
        }
    }

    /// Waits (boundedly) until `condition` holds for `discovery`'s statistics.
    func statistics(of discovery: Discovery, _ condition: (DiscoveryStatistics) -> Bool) async -> DiscoveryStatistics {
        _ = await eventually { condition(await discovery.statistics) }
        return await discovery.statistics
    }

    @Test("An activity announced on one device is heard by another of the account")
    func heard() async throws {
        let key = BeaconKey.generate()
        let a = try await agent(key), b = try await agent(key)
        let events = await b.changes()
        try await a.announce(notes)
        let event = await next(events) { if case .heard(let device) = $0 { device.activity == notes } else { false } }
        guard case .heard(let device)? = event else { Issue.record("B never heard A's activity"); return }
        #expect(device.sender == a.device)
        #expect(device.address == "127.0.0.1")
        #expect(device.linkPort == 50_000)
        await a.stop(); await b.stop()
    }

    @Test("S3: A device of another account opens none of the beacons and lists nothing")
    func otherAccount() async throws {
        let a = try await agent(BeaconKey.generate()), stranger = try await agent(BeaconKey.generate())
        try await a.announce(notes)
        let seen = await statistics(of: stranger) { $0.unopened >= 1 }
        #expect(seen.unopened >= 1)
        #expect(seen.accepted == 0)
        #expect(await stranger.nearby.isEmpty)
        await a.stop(); await stranger.stop()
    }

    @Test("A withdrawn activity is heard as none")
    func withdrawn() async throws {
        let key = BeaconKey.generate()
        let a = try await agent(key), b = try await agent(key)
        let events = await b.changes()
        try await a.announce(notes)
        _ = await next(events) { if case .heard(let device) = $0 { device.activity != nil } else { false } }
        try await a.announce(nil)
        let event = await next(events) { if case .heard(let device) = $0 { device.activity == nil } else { false } }
        #expect(event != nil)
        await a.stop(); await b.stop()
    }

    @Test("A device that falls silent is gone after the expiry")
    func expiry() async throws {
        let key = BeaconKey.generate()
        let a = try await agent(key, refresh: .milliseconds(100)), b = try await agent(key, expiry: .milliseconds(400))
        let events = await b.changes()
        try await a.announce(notes)
        _ = await next(events) { if case .heard = $0 { true } else { false } }
        await a.stop()
        let gone = await next(events) { $0 == .gone(a.device) }
        #expect(gone != nil)
        // A beacon A sent just before it stopped can still be on its way through B's event loop
        // to its actor on a loaded machine, and lists A again when it arrives (seen once in the
        // full suite); none comes after it.
        #expect(await eventually(within: .seconds(5)) { await b.nearby.isEmpty })
        await b.stop()
    }

    @Test("A device that says it hears someone over IPv6 only keeps this device's refreshes going over IPv6 there while it is listed, past the expiry, until its beacon says otherwise")
    func wantsIPv6() async throws {
        let key = BeaconKey.generate()
        // Expiry 1 s: an idle device that beacons every 120 s is heard far less often than that.
        let b = try await agent(key, expiry: .seconds(1))
        #expect(await !b.needsIPv6(on: "lo"), "everyone is heard over IPv4")
        let events = await b.changes()
        let sender = UUID()
        func beacon(_ sequence: UInt64, wantsIPv6: Bool) throws -> [UInt8] {
            try Beacon.seal(
                BeaconContent(sender: sender, sequence: sequence, timestamp: Date(), linkPort: 1, activity: nil, refreshSeconds: 120, wantsIPv6: wantsIPv6),
                with: key)
        }
        try await sendRaw(try beacon(1, wantsIPv6: true))
        _ = await next(events) { if case .heard = $0 { true } else { false } }
        #expect(await b.needsIPv6(on: "lo"))
        // Longer than the expiry, shorter than the device's three intervals: still listed,
        // still asking (it was forgotten after the expiry, and its refreshes went unheard).
        // Period: the expiry, waited out on purpose.
        try await Task.sleep(for: .seconds(1.5))
        #expect(await b.nearby.contains { $0.sender == sender })
        #expect(await b.needsIPv6(on: "lo"), "the ask of a device listed still was forgotten after the expiry")
        try await sendRaw(try beacon(2, wantsIPv6: false))
        #expect(await eventually { await !b.needsIPv6(on: "lo") }, "its beacon no longer asks, and refreshes still go over IPv6")
        await b.stop()
    }

    @Test("A device with IPv6 and no IPv4 on an interface asks the others to refresh over IPv6 there; with both, only when it hears someone over IPv6 alone")
    func asksForIPv6WithoutIPv4() {
        let v4 = MulticastPath(interface: "eth0", family: .v4, address: "10.0.0.2")
        let v6 = MulticastPath(interface: "eth0", family: .v6, address: "2")
        let wifi = MulticastPath(interface: "wlan0", family: .v6, address: "3")
        #expect(!Discovery.asksForIPv6(paths: [v4, v6], hearsOnlyIPv6: { _ in false }))
        #expect(Discovery.asksForIPv6(paths: [v4, v6], hearsOnlyIPv6: { $0 == "eth0" }))
        // Its IPv4 lease ended: it hears no IPv4 refresh there.
        #expect(Discovery.asksForIPv6(paths: [v6], hearsOnlyIPv6: { _ in false }))
        #expect(Discovery.asksForIPv6(paths: [v4, v6, wifi], hearsOnlyIPv6: { _ in false }))
        #expect(!Discovery.asksForIPv6(paths: [v4], hearsOnlyIPv6: { _ in true }))
    }

    @Test("A device is heard over IPv6 only when its IPv4 copy had time to come: not in the moment between the two copies of one beacon")
    func heardOverIPv6Only() {
        let now = Date()
        let device = UUID()
        func only(v4: Double?, v6: Double) -> Bool {
            Discovery.hearsOnlyIPv6([device: (v4.map { now.addingTimeInterval(-$0) }, ["eth0": now.addingTimeInterval(-v6)])], on: "eth0", now: now, expiry: 45)
        }
        // A newcomer's first beacon came over IPv6 an instant ago; its IPv4 copy, sent just
        // before or after it, is still on its way. A greeting sent now must not ask for IPv6
        // (in 32 namespaces, such greetings kept refreshes going over IPv6 for 45 s).
        #expect(!only(v4: nil, v6: 0.0001))
        #expect(!only(v4: nil, v6: 0.5))
        // No IPv4 copy came: over IPv6 only.
        #expect(only(v4: nil, v6: 1.5))
        #expect(only(v4: 60, v6: 10))
        // Both came: not.
        #expect(!only(v4: 10, v6: 10))
        #expect(!only(v4: 0.0001, v6: 0.0001))
        // Too long ago to count.
        #expect(!only(v4: nil, v6: 50))
        #expect(!Discovery.hearsOnlyIPv6([device: (nil, ["eth1": now.addingTimeInterval(-5)])], on: "eth0", now: now, expiry: 45))
    }

    @Test("S4: A captured beacon sent again is refused and changes nothing")
    func replayed() async throws {
        let key = BeaconKey.generate()
        let b = try await agent(key)
        let events = await b.changes()
        let sender = UUID()
        let captured = try Beacon.seal(BeaconContent(sender: sender, sequence: 7, timestamp: Date(), linkPort: 1, activity: notes), with: key)
        try await sendRaw(captured)
        _ = await next(events) { if case .heard = $0 { true } else { false } }
        try await sendRaw(captured)
        let after = await statistics(of: b) { $0.replayed >= 1 }
        #expect(after.replayed == 1)
        #expect(after.accepted == 1)
        #expect(await b.nearby.map(\.sender) == [sender])
        await b.stop()
    }

    @Test("S10: A flood of beacons from one address is mostly dropped before it is opened, counted as one flood, and a member's beacon from another address is still heard")
    func beaconFlood() async throws {
        let key = BeaconKey.generate()
        let b = try await agent(key)
        let events = await b.changes()
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.2", port: 0).get()
        let options = try #require(channel as? any SocketOptionProvider)
        try await options.setIPMulticastIF(in_addr(s_addr: inet_addr("127.0.0.1"))).get()
        try await options.setIPMulticastTTL(1).get()
        let group = try SocketAddress(ipAddress: "239.255.71.68", port: port)
        let started = ContinuousClock.now
        for _ in 0..<2_000 {
            let noise = (0..<Beacon.size).map { _ in UInt8.random(in: 0...255) }
            channel.write(AddressedEnvelope(remoteAddress: group, data: channel.allocator.buffer(bytes: noise)), promise: nil)
        }
        try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: group, data: channel.allocator.buffer(bytes: [0])))
        let seconds = Int(((ContinuousClock.now - started) / .seconds(1)).rounded(.up))
        try await channel.close()
        // The member repeats its beacon, as devices do: one sent into a full socket buffer is
        // lost, the next one is heard.
        let sender = UUID()
        let repeating = Task {
            for sequence in 1...20 where !Task.isCancelled {
                try? await sendRaw(try Beacon.seal(BeaconContent(sender: sender, sequence: UInt64(sequence), timestamp: Date(), linkPort: 1, activity: notes), with: key))
                // Period: a device repeats its beacon (here every half second).
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        let heard = await next(events) { if case .heard(let device) = $0 { device.sender == sender } else { false } }
        repeating.cancel()
        #expect(heard != nil, "the member's beacon was lost in the flood")
        let statistics = await b.statistics
        // At most the budget of each second the flood took (and of the one it spilled into).
        let budget = DiscoveryConfiguration(interfaces: []).beaconsPerSecondPerAddress * (seconds + 1)
        #expect(statistics.unopened <= budget, "\(statistics.unopened) forged beacons were opened, over \(budget)")
        #expect(b.floodWatch.floods == 1)
        await b.stop()
    }

    @Test("S10: A flood that arrives on the multicast and the unicast socket at once is one flood, logged once; and once again after discovery is made anew on the same unicast sockets (as after a removal), not once per reader")
    func floodLoggedOncePerFlood() async throws {
        let key = BeaconKey.generate()
        let unicastPort = Int.random(in: 16_000..<20_000)
        let sockets = try await UnicastSockets.bind(host: "127.0.0.1", port: unicastPort, eventLoopGroup: MultiThreadedEventLoopGroup.singleton)
        defer { for socket in sockets { socket.close(promise: nil) } }
        func discovery(_ log: LogLines) async throws -> Discovery {
            var configuration = configuration()
            configuration.unicastListen = ("127.0.0.1", unicastPort)
            configuration.unicastSockets = sockets
            let made = Discovery(device: UUID(), keys: [key], linkPort: 50_000, configuration: configuration, logger: log.logger)
            try await made.start()
            return made
        }
        func flood(multicast: Bool = true) async throws {
            let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.2", port: 0).get()
            let options = try #require(channel as? any SocketOptionProvider)
            try await options.setIPMulticastIF(in_addr(s_addr: inet_addr("127.0.0.1"))).get()
            try await options.setIPMulticastTTL(1).get()
            var targets = [try SocketAddress(ipAddress: "127.0.0.1", port: unicastPort)]
            if multicast { targets.append(try SocketAddress(ipAddress: "239.255.71.68", port: port)) }
            for index in 0..<1_000 {
                let noise = (0..<Beacon.size).map { _ in UInt8.random(in: 0...255) }
                channel.write(AddressedEnvelope(remoteAddress: targets[index % targets.count], data: channel.allocator.buffer(bytes: noise)), promise: nil)
            }
            try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: targets[0], data: channel.allocator.buffer(bytes: [0])))
            try await channel.close()
        }
        let firstLog = LogLines()
        let first = try await discovery(firstLog)
        try await flood()
        #expect(await eventually { first.floodWatch.floods == 1 }, "the flood was not seen")
        #expect(firstLog.count("flood of beacons", at: .warning) == 1, "logged \(firstLog.count("flood of beacons", at: .warning)) times")
        await first.stop()

        // Made anew on the same unicast sockets: only the new reader hears, and logs, the next
        // flood there (a reader left behind would take every datagram first).
        let secondLog = LogLines()
        let second = try await discovery(secondLog)
        let before = await first.statistics.unopened
        try await flood(multicast: false)
        #expect(await eventually { second.floodWatch.floods == 1 }, "the second flood was not seen")
        #expect(await first.statistics.unopened == before, "the stopped discovery's reader still reads the unicast socket")
        #expect(secondLog.count("flood of beacons", at: .warning) == 1, "logged \(secondLog.count("flood of beacons", at: .warning)) times")
        #expect(firstLog.count("flood of beacons", at: .warning) == 1)
        await second.stop()
    }

    @Test("A device that says it refreshes rarely stays listed for three of its intervals, not just the expiry")
    func rareRefresh() async throws {
        let key = BeaconKey.generate()
        // A says it refreshes every 2 s (3 s on the wire, with its jitter): B keeps it for 9 s.
        let a = try await agent(key, refresh: .seconds(2)), b = try await agent(key, expiry: .milliseconds(300))
        let events = await b.changes()
        try await a.announce(notes)
        _ = await next(events) { if case .heard = $0 { true } else { false } }
        await a.stop()
        // Well past B's own expiry, well before three of A's intervals.
        try await Task.sleep(for: .seconds(1))
        #expect(await b.nearby.map(\.sender) == [a.device], "gone before three of its 2 s intervals")
        // Gone after about 8 s more; the wait allows for a loaded machine.
        let gone = await next(events, within: .seconds(30)) { $0 == .gone(a.device) }
        #expect(gone != nil)
        await b.stop()
    }

    @Test("A device whose interface comes back asks, and the others answer at once rather than at their next refresh")
    func asksForAnswers() async throws {
        let key = BeaconKey.generate()
        let a = try await agent(key), b = try await agent(key)
        try await b.announce(notes)
        let events = await a.changes()
        _ = await next(events) { if case .heard(let device) = $0 { device.sender == b.device } else { false } }
        // A starts again as the same device (as after its interface came back): B knows it, so
        // only A's request makes B answer before its 30 s refresh.
        await a.stop()
        try await Task.sleep(for: .milliseconds(1_100))
        let again = try await agent(key, device: a.device)
        let answered = await eventually(within: .seconds(5)) { await again.nearby.contains { $0.activity == notes } }
        #expect(answered, "B did not answer A's request")
        await again.stop(); await b.stop()
    }

    @Test("Waiting for this device's own beacons (doctor's loop check) ends when discovery stops, not at its limit or never")
    func ownBeaconWaitEndsWithTheStop() async throws {
        let discovery = try await agent(BeaconKey.generate())
        let before = await discovery.ownBeaconsHeard
        // An interface no beacon comes back on, and a limit longer than the test.
        let waiting = Task { await discovery.awaitOwnBeacons(on: ["nosuch0"], since: before, limit: .seconds(600)) }
        #expect(await eventually { await discovery.ownBeaconWaiterCount == 1 })
        await discovery.stop()
        let ended = await withTimeLimit(.seconds(10)) { await waiting.value }
        #expect(ended != nil, "the wait outlived the stop")
        waiting.cancel()
    }

    @Test("An interface that is not there is reported as down, and discovery starts anyway (it is used once it appears)")
    func missingInterface() async throws {
        let discovery = Discovery(
            device: UUID(), keys: [BeaconKey.generate()], linkPort: 1,
            configuration: DiscoveryConfiguration(port: port, interfaces: ["nosuch0", "lo"]))
        try await discovery.start()
        let interfaces = await discovery.interfaces
        #expect(interfaces.first == DiscoveryInterface(name: "nosuch0", isUp: false, ipv4: nil, ipv6: false))
        #expect(interfaces.last?.ipv4 == "127.0.0.1")
        await discovery.stop()
    }

    @Test("Static peers hear each other's beacons by unicast, without multicast")
    func staticPeers() async throws {
        let key = BeaconKey.generate()
        let portA = Int.random(in: 16_000..<18_000), portB = Int.random(in: 18_000..<20_000)
        func unicastOnly(listen: Int, peer: Int) -> DiscoveryConfiguration {
            DiscoveryConfiguration(
                port: port, interfaces: [], refreshInterval: .seconds(30),
                unicastListen: ("127.0.0.1", listen), staticPeers: [("127.0.0.1", peer)])
        }
        let a = Discovery(device: UUID(), keys: [key], linkPort: 50_001, configuration: unicastOnly(listen: portA, peer: portB))
        let b = Discovery(device: UUID(), keys: [key], linkPort: 50_002, configuration: unicastOnly(listen: portB, peer: portA))
        try await a.start()
        try await b.start()
        let events = await b.changes()
        try await a.announce(notes)
        let event = await next(events) { if case .heard(let device) = $0 { device.activity == notes } else { false } }
        guard case .heard(let device)? = event else { Issue.record("B never heard A by unicast"); return }
        #expect(device.sender == a.device)
        #expect(device.linkPort == 50_001)
        await a.stop(); await b.stop()
    }

    /// A UDP socket on loopback that counts what arrives: where a device of another account
    /// takes beacons by unicast.
    final class DatagramCounter: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let count = Shared(0)
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { count.update { $0 += 1 } }
    }

    @Test("Item 5: beacons go by unicast to a service DNS-SD found only while no member is heard over multicast: never to every other account's device on a network where multicast works", arguments: [false, true])
    func noUnicastToStrangers(memberHeard: Bool) async throws {
        let key = BeaconKey.generate()
        let mdns = Int.random(in: 20_000..<24_000)
        // The stranger: a DNS-SD service of another account's device, whose "link port" is a
        // socket this test counts datagrams on.
        let counter = DatagramCounter()
        let strangerSocket = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(counter) } }
            .bind(host: "127.0.0.1", port: 0).get()
        let strangerPort = UInt16(try #require(strangerSocket.localAddress?.port))
        let stranger = ServiceDiscovery(
            linkPort: strangerPort, configuration: .init(port: mdns, rotation: .seconds(600), ipv6: false),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "test.dnssd"))
        await stranger.start()
        await stranger.follow(ServiceDiscovery.links(named: ["lo"], ipv4: true, ipv6: false))
        func member(_ linkPort: UInt16) -> Discovery {
            Discovery(
                device: UUID(), keys: [key], linkPort: linkPort,
                configuration: DiscoveryConfiguration(
                    port: port, interfaces: ["lo"], ipv6: false, refreshInterval: .milliseconds(300), idleRefreshInterval: .milliseconds(300),
                    unicastListen: ("127.0.0.1", Int(linkPort)), serviceDiscoveryPort: mdns))
        }
        let a = member(UInt16.random(in: 24_000..<26_000))
        try await a.start()
        var b: Discovery?
        if memberHeard {
            b = member(UInt16.random(in: 26_000..<28_000))
            try await b!.start()
            #expect(await eventually(within: .seconds(10)) { await a.nearby.contains { $0.sender == b!.device } }, "A never heard B")
            // Heard over multicast, not only by unicast (which lists B too, and leaves A sending
            // to the services DNS-SD found until multicast is seen to carry).
            #expect(await eventually(within: .seconds(10)) { await a.heardOverMulticast(b!.device) }, "A never heard B over multicast")
        }
        #expect(await eventually(within: .seconds(10)) { (await a.serviceDiscoveryState?.services ?? []).contains { $0.port == strangerPort } }, "A's DNS-SD never found the stranger")
        // A datagram A sent before, still on its way, is not counted: one refresh to arrive.
        try await Task.sleep(for: .milliseconds(300))
        // A few refreshes later (the behaviour under test is what is sent over that time).
        counter.count.update { $0 = 0 }
        try await Task.sleep(for: .seconds(2))
        if memberHeard {
            #expect(counter.count.value == 0, "A sent \(counter.count.value) beacons by unicast to another account's device while multicast carried B's")
        } else {
            // With no member heard over multicast, the network may carry mDNS and not our group:
            // the services DNS-SD found still get the beacons.
            #expect(counter.count.value > 0, "A sent no beacon to the service DNS-SD found, on a network where no member is heard")
        }
        await a.stop()
        await b?.stop()
        await stranger.stop()
        try await strangerSocket.close()
    }

    /// Sends bytes to the discovery group through loopback only.
    func sendRaw(_ bytes: [UInt8]) async throws {
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let options = try #require(channel as? any SocketOptionProvider)
        try await options.setIPMulticastIF(in_addr(s_addr: inet_addr("127.0.0.1"))).get()
        try await options.setIPMulticastTTL(1).get()
        let group = try SocketAddress(ipAddress: "239.255.71.68", port: port)
        try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: group, data: channel.allocator.buffer(bytes: bytes)))
        try await channel.close()
    }
}
