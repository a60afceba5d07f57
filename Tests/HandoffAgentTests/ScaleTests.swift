import Foundation
import HandoffLocalAPI
import HandoffTesting
import Testing

@testable import HandoffAgent
import HandoffProcess

/// The CI-sized run of `Benchmarks/scale.sh`: eight agents, each in a network namespace of its
/// own on one bridge, in two accounts of four sharing the link.
@Suite(
    "Eight hosts, two accounts, one link", .serialized,
    .enabled(if: canMakeNamespaces, "needs root and iproute2 to make network namespaces; skipped"),
    .enabled(if: hasNft, "needs nftables' nft to count each host's datagrams; skipped"))
struct ScaleTests {
    static let hosts = (1...8).map { "h\($0)" }

    /// Counts, in a host's namespace, the beacon datagrams (512 bytes of UDP payload, whatever
    /// the port: unicast beacons go to a device's link port) it sends to the groups and to
    /// anyone else.
    static let counters = """
        table inet scale {
            chain out {
                type filter hook output priority 0; policy accept;
                udp length 520 ip daddr 239.255.71.68 counter name group
                udp length 520 ip6 daddr ff02::4846 counter name group6
                udp length 520 ip daddr != 239.255.71.68 counter name unicast
                udp length 520 ip6 daddr != ff02::4846 counter name unicast6
            }
            counter group {}
            counter group6 {}
            counter unicast {}
            counter unicast6 {}
        }
        """

    /// The packets counted by `name` (both families) in `host`'s namespace.
    static func packets(_ segment: Segment, _ host: String, _ name: String) throws -> Int {
        var total = 0
        for counter in [name, name + "6"] {
            let text = try segment.run(in: host, ["nft", "list", "counter", "inet", "scale", counter])
            guard let range = text.range(of: #"packets (\d+)"#, options: .regularExpression) else { continue }
            total += Int(text[range].split(separator: " ")[1]) ?? 0
        }
        return total
    }

    @Test("Item 5 (scale, in CI): 8 agents in 2 accounts of 4 on one link: each lists exactly its account's members; an activity reaches its account only; while it is offered, no host sends a beacon by unicast, and each sends a handful to the group, however many devices share the link")
    func twoAccountsOfFour() async throws {
        try await Segment.with(hosts: Self.hosts) { segment in
            var devices: [TestDevice] = []
            for host in Self.hosts { devices.append(try await segment.start(host, name: "dev-\(host)")) }
            let first = Array(devices[0..<4]), second = Array(devices[4..<8])
            try await segment.harness.pair(first, account: "home")
            try await segment.harness.pair(second, account: "office")
            for (index, device) in devices.enumerated() {
                let members = Set((index < 4 ? first : second).map(\.name)).subtracting([device.name])
                let listed = try await eventually(within: .seconds(20)) {
                    Set((try await device.call(.devices).devices ?? []).filter { $0.isNearby && !$0.isThisDevice }.map(\.name)) == members
                }
                #expect(listed, "\(device.name) does not list exactly \(members.sorted())")
            }

            // The window: counters from now, an activity offered on h1.
            for host in Self.hosts { try segment.run(in: host, ["nft", "-f", "-"], input: Data(Self.counters.utf8)) }
            let publish = ChildProcess()
            publish.executableURL = builtExecutable("handoff")
            publish.arguments = ["publish", "--type", "com.example.scale.editing", "--title", "Scale", "--socket", devices[0].socket, "--exit-after", "30"]
            publish.standardOutput = FileHandle.nullDevice
            publish.standardError = FileHandle.nullDevice
            try publish.run()
            defer { if publish.isRunning { publish.terminate() } }
            for device in first.dropFirst() {
                #expect(await eventually(within: .seconds(15)) { (try? await device.nearby().first?.activity.activityType) == "com.example.scale.editing" }, "\(device.name) did not list the activity")
            }
            // The other account's devices hear its beacons and open none.
            for device in second {
                #expect(await eventually(within: .seconds(10)) { ((try? await device.call(.status).status?.discovery?.unopened) ?? 0) > 0 }, "\(device.name) heard no beacon of the other account: is the link up?")
                #expect(try await device.nearby().isEmpty, "\(device.name) lists another account's activity")
            }
            // Several beacon refreshes pass: what is counted is what they send.
            try await Task.sleep(for: .seconds(8))

            // With members heard over multicast, nothing goes by unicast (before the fix, every
            // beacon also went to each other account's DNS-SD service: here 4 more a beacon).
            // To the group, a few each: the change and repeats, whatever the number of hosts.
            var report: [String] = []
            for host in Self.hosts {
                let unicast = try Self.packets(segment, host, "unicast"), group = try Self.packets(segment, host, "group")
                report.append("\(host): \(group) to the group, \(unicast) unicast")
                #expect(unicast == 0, "\(host) sent \(unicast) beacons by unicast")
                #expect(group <= 8, "\(host) sent \(group) beacons to the group in the window")
            }
            #expect(try Self.packets(segment, "h1", "group") >= 1, "h1 sent no beacon for its activity: \(report)")
        }
    }
}
