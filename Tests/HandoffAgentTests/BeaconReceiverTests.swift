import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import HandoffAgent

/// Where a beacon goes as it arrives: a stranger's (sealed with a key the account does not
/// have) stops on the event loop; a member's goes on to the discovery actor.
@Suite("Beacons as they arrive")
struct BeaconReceiverTests {
    @Test("Item 5: a beacon that opens with none of the account's keys is counted and dropped on the event loop, never handed to the discovery actor; members' beacons, and those sealed with a retired key, go on")
    func strangersStopAtTheSocket() async throws {
        let key = BeaconKey.generate(), retired = BeaconKey.generate(), stranger = BeaconKey.generate()
        let (datagrams, sink) = AsyncStream<Datagram>.makeStream()
        let strangers = StrangerBeacons()
        let receiver = BeaconReceiver(
            sink: sink, interface: nil, via: "test", multicastOn: nil, interfaceIndex: nil, budget: SourceBudget(perSecond: 1_000),
            overBudget: OverBudgetBeacons(), watch: FloodWatch(what: "beacons", logger: Logger(label: "test")), keys: [key, retired], strangers: strangers)
        let channel = EmbeddedChannel(handler: receiver)
        func arrive(_ bytes: [UInt8], from address: String) throws {
            let envelope = AddressedEnvelope(remoteAddress: try SocketAddress(ipAddress: address, port: 47_168), data: channel.allocator.buffer(bytes: bytes))
            try channel.writeInbound(envelope)
        }
        func beacon(_ key: BeaconKey) throws -> [UInt8] {
            try Beacon.seal(BeaconContent(sender: UUID(), sequence: 1, timestamp: Date(), linkPort: 1, activity: nil), with: key)
        }
        for index in 0..<50 { try arrive(try beacon(stranger), from: "10.9.\(index / 250).\(index % 250 + 1)") }
        try arrive(Array(repeating: 0x41, count: Beacon.size), from: "10.9.9.9")
        try arrive(try beacon(key), from: "10.0.0.2")
        try arrive(try beacon(retired), from: "10.0.0.3")
        sink.finish()
        var handedOn: [String] = []
        for await datagram in datagrams { handedOn.append(datagram.from) }
        #expect(handedOn == ["10.0.0.2", "10.0.0.3"], "handed to the actor: \(handedOn)")
        #expect(strangers.count == 51)
        #expect(strangers.from.count == 32, "at most 32 addresses are kept")
    }

    @Test("A beacon sealed with the account's key that breaks the wire's limits (17 clipboard types) is dropped at the socket, and the log says so once, however many come")
    func membersMalformedBeaconsAreLoggedOnce() async throws {
        let key = BeaconKey.generate()
        let log = LogLines()
        let (datagrams, sink) = AsyncStream<Datagram>.makeStream()
        let receiver = BeaconReceiver(
            sink: sink, interface: nil, via: "test", multicastOn: nil, interfaceIndex: nil, budget: SourceBudget(perSecond: 1_000),
            overBudget: OverBudgetBeacons(), watch: FloodWatch(what: "beacons", logger: log.logger), keys: [key], strangers: StrangerBeacons())
        let channel = EmbeddedChannel(handler: receiver)
        let offer = ClipboardOffer(
            generation: 1, copiedAt: Date(), lifetimeSeconds: 120,
            types: [ClipboardType(name: "text/plain;charset=utf-8", size: 5), ClipboardType(name: "image/png", size: 9)])
        var plaintext = try Beacon.encode(BeaconContent(sender: UUID(), sequence: 1, timestamp: Date(), linkPort: 1, activity: nil, accountRevision: 1, clipboard: offer))
        // The type count: after the header (47 bytes), the generation, the time and the lifetime.
        try #require(plaintext[47 + 18] == 2)
        plaintext[47 + 18] = 17
        for index in 0..<20 {
            let envelope = AddressedEnvelope(
                remoteAddress: try SocketAddress(ipAddress: "10.0.0.\(index + 2)", port: 47_168),
                data: channel.allocator.buffer(bytes: Beacon.seal(plaintext: plaintext, with: key)))
            try channel.writeInbound(envelope)
        }
        sink.finish()
        var handedOn = 0
        for await _ in datagrams { handedOn += 1 }
        #expect(handedOn == 0)
        #expect(log.count("does not read as a beacon", at: .notice) == 1)
    }

    @Test("S10: Over a member's address's budget (another local user floods from the same machine), the member's fresh beacons still pass; the flood, a replayed copy and an unproven address's beacons do not")
    func floodFromAMembersAddress() async throws {
        let key = BeaconKey.generate()
        let (datagrams, sink) = AsyncStream<Datagram>.makeStream()
        let budget = SourceBudget(perSecond: 10)
        let receiver = BeaconReceiver(
            sink: sink, interface: nil, via: "test", multicastOn: nil, interfaceIndex: nil, budget: budget, overBudget: OverBudgetBeacons(),
            watch: FloodWatch(what: "beacons", logger: Logger(label: "test")), keys: [key], strangers: StrangerBeacons())
        let channel = EmbeddedChannel(handler: receiver)
        func arrive(_ bytes: [UInt8], from address: String) throws {
            let envelope = AddressedEnvelope(remoteAddress: try SocketAddress(ipAddress: address, port: 47_168), data: channel.allocator.buffer(bytes: bytes))
            try channel.writeInbound(envelope)
        }
        let member = UUID()
        func beacon(_ sequence: UInt64) throws -> [UInt8] {
            try Beacon.seal(BeaconContent(sender: member, sequence: sequence, timestamp: Date(), linkPort: 1, activity: nil), with: key)
        }
        // The member's address proved itself; the second user's flood spends its budget.
        budget.trust("10.0.0.2")
        for _ in 0..<100 { try arrive((0..<Beacon.size).map { _ in UInt8.random(in: 0...255) }, from: "10.0.0.2") }
        let fresh = try beacon(7)
        try arrive(fresh, from: "10.0.0.2")
        try arrive(fresh, from: "10.0.0.2")
        try arrive(try beacon(6), from: "10.0.0.2")
        try arrive(try beacon(8), from: "10.0.0.2")
        // An address that never proved itself keeps the plain budget.
        for _ in 0..<20 { try arrive((0..<Beacon.size).map { _ in 0 }, from: "10.0.0.3") }
        try arrive(try beacon(9), from: "10.0.0.3")
        sink.finish()
        var handedOn: [[UInt8]] = []
        for await datagram in datagrams { handedOn.append(datagram.bytes) }
        let sequences = handedOn.compactMap { Beacon.open($0, with: [key])?.sequence }
        #expect(sequences == [7, 8], "the member's beacons handed on over the budget: \(sequences) of \(handedOn.count) datagrams")
    }
}
