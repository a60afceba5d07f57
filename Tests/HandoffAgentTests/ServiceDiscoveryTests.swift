import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

#if canImport(Glibc)
import Glibc
#endif

/// DNS-SD and rotation on loopback only: mDNS on a test port of `lo`, nothing elsewhere.
@Suite("DNS-SD and rotation on loopback")
struct ServiceDiscoveryTests {
    let port = Int.random(in: 8_000..<12_000)

    func serviceDiscovery(linkPort: UInt16, rotation: Duration = .seconds(600)) async -> ServiceDiscovery {
        let made = ServiceDiscovery(
            linkPort: linkPort, configuration: .init(port: port, rotation: rotation, ipv6: false),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "test.dnssd"))
        await made.start()
        await made.follow(ServiceDiscovery.links(named: ["lo"], ipv4: true, ipv6: false))
        return made
    }

    @Test("Two responders on one link find each other's services, each under its random name, and never list their own")
    func findEachOther() async throws {
        let a = await serviceDiscovery(linkPort: 1111), b = await serviceDiscovery(linkPort: 2222)
        // Bounded generously: the full suite keeps 2 cores busy, and this asks whether they find
        // each other, not how fast (the discovery benchmark times it).
        let found = await eventually(within: .seconds(30)) {
            let onB = await b.services, onA = await a.services
            return onB.contains { $0.port == 1111 } && onA.contains { $0.port == 2222 }
        }
        #expect(found)
        let seenByB = try #require(await b.services.first { $0.port == 1111 })
        #expect(seenByB.instance == (await a.currentNames.instance))
        #expect(seenByB.addresses == ["127.0.0.1"])
        #expect(seenByB.txt == ["v=1"])
        #expect(await !b.services.contains { $0.port == 2222 }, "its own service")
        #expect(await a.isAnnounced)
        await a.stop()
        // A's goodbye removes it at once, not at the end of its TTL.
        let gone = await eventually(within: .seconds(5)) { await !b.services.contains { $0.port == 1111 } }
        #expect(gone)
        await b.stop()
    }

    @Test("S10: After an mDNS flood of 400 fake services the real one is listed again within seconds, and the fakes are not logged one by one")
    func floodOfFakeServices() async throws {
        let log = LogLines()
        let a = await serviceDiscovery(linkPort: 1111)
        let b = ServiceDiscovery(
            linkPort: 2222, configuration: .init(port: port, rotation: .seconds(600), ipv6: false),
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: log.logger)
        await b.start()
        await b.follow(ServiceDiscovery.links(named: ["lo"], ipv4: true, ipv6: false))
        // Before the flood, bounded as generously as in findEachOther: the full suite keeps 2
        // cores busy (seen to take over 10 s in CI under load); the claim is what follows.
        try #require(await eventually(within: .seconds(30)) { await b.services.contains { $0.port == 1111 } }, "B never found A")

        // A host on the link answers with 400 services nobody asked for, from the mDNS port
        // (sharing it, as responders do), to the group on lo only.
        let host = try LinkHost(port: port)
        for message in 0..<40 {
            var records: [DNSRecord] = []
            for index in 0..<10 {
                let instance = "fake\(message)x\(index)"
                let name = DNSSDResponder.serviceType.prepending(instance)
                let host = DNSName(labels: ["host-\(instance)", "local"])
                records += [
                    DNSRecord(name: DNSSDResponder.serviceType, ttl: 4500, data: .ptr(name)),
                    DNSRecord(name: name, cacheFlush: true, ttl: 4500, data: .srv(priority: 0, weight: 0, port: 9, target: host)),
                    DNSRecord(name: host, cacheFlush: true, ttl: 4500, data: .a([127, 0, 3, UInt8(index + 1)])),
                ]
            }
            host.send(DNSMessage(isResponse: true, isAuthoritative: true, answers: records))
            // A flood spread over time, as a misbehaving host would send it.
            try await Task.sleep(for: .milliseconds(15))
        }
        // The fakes took the cache; A's records were pushed out.
        let listedAgain = await eventually(within: .seconds(15)) { await b.services.contains { $0.port == 1111 } }
        #expect(listedAgain, "A was not listed again within 15 s of the flood")
        let lines = log.count("found a Handoff service")
        #expect(lines <= 12, "\(lines) lines logged for the fake services")
        await a.stop()
        await b.stop()
    }

    @Test(
        "Where members' beacons come over multicast, no service's records are kept fresh: other accounts' devices cost no questions (32 devices in 8 accounts asked 27 at a time)",
        arguments: [false, true])
    func noRefreshesWhereMulticastCarries(_ multicastCarries: Bool) async throws {
        let capture = try await MulticastCapture.start(group: "224.0.0.251", port: port)
        let b = await serviceDiscovery(linkPort: 2222)
        await b.setCovered([], all: multicastCarries)
        // Another account's device, its records living 12 s: refreshed from 9.6 s on (RFC 6762,
        // 5.2), and expired at 12 s, after the 10 s in which a missing record is asked for.
        let host = try LinkHost(port: port)
        let instance = DNSSDResponder.serviceType.prepending("stranger\(port)")
        let target = DNSName(labels: ["stranger-host-\(port)", "local"])
        host.send(DNSMessage(isResponse: true, isAuthoritative: true, answers: [
            DNSRecord(name: DNSSDResponder.serviceType, ttl: 4500, data: .ptr(instance)),
            DNSRecord(name: instance, cacheFlush: true, ttl: 12, data: .srv(priority: 0, weight: 0, port: 9, target: target)),
            DNSRecord(name: target, cacheFlush: true, ttl: 12, data: .a([127, 0, 3, 1])),
        ]))
        try #require(await eventually(within: .seconds(10)) { await b.services.contains { $0.port == 9 } }, "B never listed the service")
        // Until after the records expire (refreshes are due from 9.6 s, on a clock that ticks
        // once a second): every refresh B would ask has been asked.
        let asked = await eventually(within: .seconds(15)) {
            capture.peek().contains { bytes in
                guard let message = try? DNSMessage(bytes: bytes), !message.isResponse else { return false }
                return message.questions.contains { $0.name == instance || $0.name == target }
            }
        }
        #expect(asked == !multicastCarries, asked ? "B asked to refresh the stranger's records" : "B never refreshed the records")
        if multicastCarries {
            // Multicast no longer carries members' beacons: the records are needed again, and
            // B browses at once without known answers, so that every service answers in full.
            let before = capture.peek().count
            await b.setCovered([], all: false)
            let browsed = await eventually(within: .seconds(5)) {
                capture.peek().dropFirst(before).contains { bytes in
                    guard let message = try? DNSMessage(bytes: bytes), !message.isResponse else { return false }
                    return message.questions.contains { $0.name == DNSSDResponder.serviceType && $0.type == DNSType.ptr } && message.answers.isEmpty
                }
            }
            #expect(browsed, "B did not browse again when multicast stopped carrying the beacons")
        }
        _ = await capture.stop()
        await b.stop()
    }

    @Test("Names rotate on schedule and on an interface change; the other side follows, and the old name is gone")
    func rotation() async throws {
        // Every 8 s: probing and announcing a name takes about 2 s, and in the full suite on 2
        // cores the tasks doing it can wait seconds for a thread. Once, at 4 s, every rotation
        // came before the announcement (A: 5 rotations in 30 s, never announced; B listed nothing).
        let a = await serviceDiscovery(linkPort: 3333, rotation: .seconds(8)), b = await serviceDiscovery(linkPort: 4444)
        // Missed once in the full suite under load: say what each side saw if it happens again.
        let found = await eventually(within: .seconds(30)) { await b.services.contains { $0.port == 3333 } }
        if !found {
            let seen = "A: \(await a.statistics), names \(await a.currentNames), announced \(await a.isAnnounced). B: \(await b.statistics), lists \(await b.services)"
            Issue.record("B did not list A within 30 s. \(seen)")
        }
        let first = await a.currentNames
        let rotated = await eventually(within: .seconds(30)) { await a.currentNames.instance != first.instance }
        #expect(rotated)
        let second = await a.currentNames
        #expect(second.host != first.host)
        #expect(!sharesRun(Array(first.instance.utf8), Array(second.instance.utf8), length: 6))
        // B lists A once, under a name of A's since the first (A may have rotated again by then).
        let followed = await eventually(within: .seconds(30)) {
            let listed = await b.services.filter { $0.port == 3333 }.map(\.instance)
            return listed.count == 1 && listed[0] != first.instance
        }
        #expect(followed, "B lists A under its new name only")
        // An interface change renews the names at once.
        let beforeChange = await a.currentNames.instance
        await a.follow([])
        #expect(await a.currentNames.instance != beforeChange)
        await a.stop()
        await b.stop()
    }

    @Test("S1: Beacons captured across rotations share no run of six bytes, and no byte position keeps one value")
    func beaconsAcrossRotations() async throws {
        let beaconPort = port + 1
        let key = BeaconKey.generate()
        let capture = try await MulticastCapture.start(group: "239.255.71.68", port: beaconPort)
        let discovery = Discovery(
            device: UUID(), keys: [key], linkPort: 47_170,
            configuration: DiscoveryConfiguration(
                port: beaconPort, interfaces: ["lo"], ipv6: false, refreshInterval: .milliseconds(150), idleRefreshInterval: .milliseconds(150),
                serviceDiscoveryPort: port, nameRotation: .seconds(1)))
        try await discovery.start()
        try await discovery.announce(ActivityAnnouncement(id: UUID(), activityType: "com.example.notes.editing", title: "Groceries", teamIdentifier: "TEAM1"))
        var names: Set<String> = []
        for _ in 0..<30 {
            // Period: the name is sampled ten times a second, across several 1 s rotations.
            try await Task.sleep(for: .milliseconds(100))
            if let state = await discovery.serviceDiscoveryState { names.insert(state.instance) }
        }
        // What `status` reports as `nameRotations` (Benchmarks/discovery.sh checks its window
        // held one): every change of name counted.
        let rotations = await discovery.nameRotations
        #expect((rotations ?? 0) >= names.count - 1, "\(String(describing: rotations)) rotations counted, \(names.count) names seen")
        await discovery.stop()
        let beacons = await capture.stop().filter { $0.count == Beacon.size }
        #expect(names.count >= 2, "the names rotated during the capture")
        try #require(beacons.count >= 10, "captured \(beacons.count) beacons")
        for i in beacons.indices {
            for j in beacons.indices where j > i {
                #expect(!sharesRun(beacons[i], beacons[j], length: 6), "beacons \(i) and \(j) share six bytes")
            }
        }
        for position in 0..<Beacon.size {
            #expect(Set(beacons.map { $0[position] }).count > 1, "byte \(position) is the same in every beacon")
        }
    }

    /// Whether `a` and `b` have a run of `length` equal bytes in common, anywhere.
    func sharesRun(_ a: [UInt8], _ b: [UInt8], length: Int) -> Bool {
        guard a.count >= length, b.count >= length else { return false }
        let runs = Set((0...(a.count - length)).map { a[$0..<$0 + length] })
        return (0...(b.count - length)).contains { runs.contains(b[$0..<$0 + length]) }
    }
}

/// Every datagram sent to a multicast group on `lo` while it runs.
final class MulticastCapture: Sendable {
    private let channel: any Channel
    private let collector: Collector

    private init(channel: any Channel, collector: Collector) {
        self.channel = channel
        self.collector = collector
    }

    static func start(group: String, port: Int) async throws -> MulticastCapture {
        let collector = Collector()
        let channel = try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) } }
            .bind(host: group, port: port).get()
        var loopback = try #require(try System.enumerateDevices().first { $0.name == "lo" && $0.address?.protocol == .inet })
        loopback.multicastSupported = true
        try await (channel as! any MulticastChannel).joinGroup(try SocketAddress(ipAddress: group, port: port), device: loopback).get()
        return MulticastCapture(channel: channel, collector: collector)
    }

    func stop() async -> [[UInt8]] {
        try? await channel.close()
        return collector.received.withLock { $0 }
    }

    /// What it has captured so far.
    func peek() -> [[UInt8]] { collector.received.withLock { $0 } }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let received = Mutex<[[UInt8]]>([])

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = Array(Self.unwrapInboundIn(data).data.readableBytesView)
            received.withLock { $0.append(bytes) }
        }
    }
}

/// Another host on `lo` (127.0.0.2), sending mDNS from the mDNS port (shared, as responders
/// do) to the group on lo only.
final class LinkHost {
    private let fd: Int32
    private var group = sockaddr_in()

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_port = in_port_t(UInt16(port).bigEndian)
        local.sin_addr.s_addr = inet_addr("127.0.0.2")
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0 else {
            close(fd)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        var interface = in_addr(s_addr: inet_addr("127.0.0.1"))
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &interface, socklen_t(MemoryLayout<in_addr>.size))
        group = local
        group.sin_addr.s_addr = inet_addr("224.0.0.251")
    }

    deinit { close(fd) }

    func send(_ message: DNSMessage) {
        let bytes = message.encoded()
        _ = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &group) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
    }
}
