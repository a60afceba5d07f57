import Foundation
import HandoffLocalAPI
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent
import HandoffProcess

/// Whether nftables' `nft` is there, for a namespace's firewall.
let hasNft = ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"].contains { FileManager.default.isExecutableFile(atPath: $0) }

/// Whether this process may make network namespaces (root, with iproute2's `ip`).
let canMakeNamespaces: Bool = {
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") || FileManager.default.isExecutableFile(atPath: "/sbin/ip") || FileManager.default.isExecutableFile(atPath: "/usr/bin/ip") else {
        return false
    }
    let name = "hoprobe\(getpid() % 100_000)"
    defer { _ = try? shell(["ip", "netns", "del", name]) }
    _ = try? shell(["ip", "netns", "del", name])
    return (try? shell(["ip", "netns", "add", name])) != nil
}()

/// Runs a command and returns its output; throws with what it printed when it fails.
@discardableResult
func shell(_ arguments: [String], input: Data? = nil) throws -> String {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let stdin = Pipe()
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try? stdin.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw LocalError(.failed, "\(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
    }
    return text
}

/// Three hosts on one Ethernet segment, each a network namespace with its own `handoffd`
/// process: a bridge in a fourth namespace joins them. Nothing touches the host's own network.
final class Segment: Sendable {
    let prefix: String
    let hosts: [String]
    let harness: AgentHarness
    /// Whether the hosts have IPv4 addresses; without, the segment is IPv6 only (link-local).
    let ipv4: Bool
    private let agents = Mutex<[String: ChildProcess]>([:])
    /// The next segment's number in this process (10 to 99, then again).
    private static let numbers = Mutex(0)

    init(ipv4: Bool = true, hosts: [String] = ["a", "b", "c"]) throws {
        self.ipv4 = ipv4
        self.hosts = hosts
        harness = try AgentHarness()
        // Unique among this process's segments (a counter, not a random number: two live
        // segments of one name would share, and the one below delete, each other's hosts).
        let number = Segment.numbers.withLock { number in
            defer { number = (number + 1) % 90 }
            return number + 10
        }
        prefix = "ho\(getpid() % 10_000)\(number)"
        let bridge = "\(prefix)br"
        // A killed run's segments go before this process makes its first.
        _ = Segment.sweptStale
        try? FileManager.default.createDirectory(at: Segment.owners, withIntermediateDirectories: true)
        try? "\(getpid())".write(to: Segment.owners.appendingPathComponent(prefix), atomically: true, encoding: .utf8)
        // A run killed before it cleaned up leaves its namespaces; one of the same name is
        // stale (this process's pid and its own count name them), so it goes first.
        for name in [bridge] + hosts.map({ "\(prefix)\($0)" }) { _ = try? shell(["ip", "netns", "del", name]) }
        try shell(["ip", "netns", "add", bridge])
        try shell(["ip", "-n", bridge, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])
        try shell(["ip", "-n", bridge, "link", "set", "br0", "up"])
        for (index, host) in hosts.enumerated() {
            let namespace = "\(prefix)\(host)"
            try shell(["ip", "netns", "add", namespace])
            // Link-local IPv6 addresses usable at once, without duplicate detection's delay.
            try shell(["ip", "netns", "exec", namespace, "sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"])
            try shell(["ip", "-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", "p\(host)", "netns", bridge])
            if ipv4 {
                try shell(["ip", "-n", namespace, "addr", "add", "10.77.0.\(index + 1)/24", "dev", "eth0"])
            }
            try shell(["ip", "-n", namespace, "link", "set", "eth0", "up"])
            try shell(["ip", "-n", namespace, "link", "set", "lo", "up"])
            try shell(["ip", "-n", bridge, "link", "set", "p\(host)", "master", "br0", "up"])
        }
    }

    func address(_ host: String) -> String { "10.77.0.\(hosts.firstIndex(of: host)! + 1)" }

    /// Starts (or restarts) `handoffd` inside host `host`'s namespace, its links on the host's
    /// address, or on `listen` (nil: the default, `[::]`).
    func start(_ host: String, name: String, listen: String?? = .none, arguments extra: [String] = []) async throws -> TestDevice {
        let binary = try #require(builtExecutable("handoffd"))
        let state = harness.root.appendingPathComponent(host, isDirectory: true)
        let socket = harness.root.appendingPathComponent("\(host).sock").path
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "ip", "netns", "exec", "\(prefix)\(host)", binary.path, "--name", name, "--state-dir", state.path, "--socket", socket,
            "--interface", "eth0", "--log-level", "error", "--notifications", "off", "--development-mode", "on",
        ]
        switch listen {
        case .none: process.arguments! += ["--listen", "\(address(host)):47170"]
        case .some(.some(let address)): process.arguments! += ["--listen", address]
        case .some(.none): break
        }
        process.arguments! += extra
        try process.run()
        agents.withLock { $0[host] = process }
        let device = TestDevice(name: name, agent: nil, socket: socket, state: state)
        let up = await eventually { (try? await device.call(.status)) != nil }
        try #require(up, "handoffd did not start in namespace \(prefix)\(host)")
        return device
    }

    /// Kills host `host`'s agent at once, as a crash would. Awaits its end without holding
    /// one of the few threads Swift's tasks share.
    func crash(_ host: String) async {
        guard let process = agents.withLock({ $0[host] }) else { return }
        // `ip netns exec` runs the agent in its own process (exec), so the pid is the agent's.
        kill(process.processIdentifier, SIGKILL)
        _ = await process.exited()
    }

    /// Stops host `host`'s agent as a person would (SIGTERM): it says goodbye and closes.
    func stop(_ host: String) async {
        guard let process = agents.withLock({ $0[host] }), process.isRunning else { return }
        process.terminate()
        _ = await process.exited()
    }

    /// Runs a command inside host `host`'s namespace.
    @discardableResult
    func run(in host: String, _ arguments: [String], input: Data? = nil) throws -> String {
        try shell(["ip", "netns", "exec", "\(prefix)\(host)"] + arguments, input: input)
    }

    /// Runs `body` on a new segment, and tears it down however `body` ends.
    static func with(ipv4: Bool = true, hosts: [String] = ["a", "b", "c"], _ body: (Segment) async throws -> Void) async throws {
        let segment = try Segment(ipv4: ipv4, hosts: hosts)
        do {
            try await body(segment)
        } catch {
            await segment.tearDown()
            throw error
        }
        await segment.tearDown()
    }

    func tearDown() async {
        for process in agents.withLock({ Array($0.values) }) where process.isRunning {
            process.terminate()
            _ = await process.exited()
        }
        await harness.stop()
        // Whatever else a test started in a namespace (avahi, D-Bus) ends with it.
        for host in hosts {
            let pids = ((try? shell(["ip", "netns", "pids", "\(prefix)\(host)"])) ?? "").split(separator: "\n").compactMap { Int32($0) }
            for pid in pids { kill(pid, SIGKILL) }
        }
        for host in hosts { _ = try? shell(["ip", "netns", "del", "\(prefix)\(host)"]) }
        _ = try? shell(["ip", "netns", "del", "\(prefix)br"])
        try? FileManager.default.removeItem(at: Segment.owners.appendingPathComponent(prefix))
    }

    /// Where each segment notes the process that made it (its whole pid: the prefix holds only
    /// part of it), so that a later run can tell a killed run's namespaces from a live run's.
    static let owners = URL(fileURLWithPath: "/run/handoff-test-segments", isDirectory: true)

    /// Once per process, before its first segment: `sweepStale(in: owners)`.
    static let sweptStale: Void = { _ = sweepStale(in: owners) }()

    /// Deletes the namespaces of every segment noted in `folder` whose process is gone (a run
    /// killed before its tear-down), after killing what still runs in them (its `handoffd`s);
    /// returns the namespaces deleted. A segment whose process lives, or whose note cannot be
    /// read, is left alone, and so is every namespace no note names. (Pids are this PID
    /// namespace's: tests that share `/run` across PID namespaces would see live owners as gone.)
    static func sweepStale(in folder: URL) -> [String] {
        guard let notes = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return [] }
        let namespaces = ((try? shell(["ip", "netns", "list"])) ?? "").split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        var deleted: [String] = []
        for prefix in notes {
            let note = folder.appendingPathComponent(prefix)
            guard let text = try? String(contentsOf: note, encoding: .utf8), let owner = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), owner > 0,
                kill(owner, 0) != 0, errno == ESRCH
            else { continue }
            // The prefix's own hosts (letters after it), not another prefix's that begins alike.
            for namespace in namespaces where namespace.hasPrefix(prefix) && namespace.dropFirst(prefix.count).allSatisfy(\.isLetter) {
                // A live process that took the same prefix meanwhile (its pid the same modulo
                // 10,000) wrote its own note first: its namespaces are not stale.
                guard (try? String(contentsOf: note, encoding: .utf8)) == text else { break }
                let pids = ((try? shell(["ip", "netns", "pids", namespace])) ?? "").split(separator: "\n").compactMap { Int32($0) }
                for pid in pids { kill(pid, SIGKILL) }
                if (try? shell(["ip", "netns", "del", namespace])) != nil { deleted.append(namespace) }
            }
            try? FileManager.default.removeItem(at: note)
        }
        return deleted
    }
}

@Suite("Stale namespaces", .serialized, .enabled(if: canMakeNamespaces, "needs root and iproute2 to make network namespaces; skipped"))
struct StaleSegmentTests {
    @Test("A killed run's namespaces, and the programs still running in them, go when a later run sweeps; a live run's, and a name that only begins alike, stay")
    func killedRunsNamespacesAreSwept() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("segments-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // A pid that was a process and is no more.
        let gone = ChildProcess()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        _ = await gone.exited()
        let dead = gone.processIdentifier
        let tag = getpid() % 10_000
        let stale = "hostale\(tag)", live = "holive\(tag)", alike = "hostale\(tag)9"
        let all = ["\(stale)a", "\(stale)br", "\(live)a", "\(alike)a"]
        defer { for namespace in all { _ = try? shell(["ip", "netns", "del", namespace]) } }
        for namespace in all {
            _ = try? shell(["ip", "netns", "del", namespace])
            try shell(["ip", "netns", "add", namespace])
        }
        // What a killed run left running in its namespace.
        let left = ChildProcess()
        left.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        left.arguments = ["ip", "netns", "exec", "\(stale)a", "sleep", "600"]
        try left.run()
        defer { if left.isRunning { left.terminate() } }
        try #require(await eventually { ((try? shell(["ip", "netns", "pids", "\(stale)a"])) ?? "").contains("\(left.processIdentifier)") })
        try "\(dead)".write(to: folder.appendingPathComponent(stale), atomically: true, encoding: .utf8)
        try "\(getpid())".write(to: folder.appendingPathComponent(live), atomically: true, encoding: .utf8)

        let deleted = Segment.sweepStale(in: folder)

        #expect(deleted.sorted() == ["\(stale)a", "\(stale)br"])
        let listed = try shell(["ip", "netns", "list"])
        #expect(!listed.contains("\(stale)a") && !listed.contains("\(stale)br"))
        #expect(listed.contains("\(live)a") && listed.contains("\(alike)a"))
        let ended = await withTimeLimit(.seconds(10)) { await left.exited() }
        #expect(ended == ChildProcess.Termination(reason: .uncaughtSignal, status: SIGKILL), "what ran in the stale namespace was killed")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(stale).path))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent(live).path))
    }
}

/// Captures one beacon on a namespace's segment (Python, standard library) and sends it again.
let beaconTool = """
    import socket, struct, sys, time
    mode, path, local = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "collect":
        source, seconds = sys.argv[4], float(sys.argv[5])
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("239.255.71.68", 47168))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack("4s4s", socket.inet_aton("239.255.71.68"), socket.inet_aton(local)))
        end = time.time() + seconds
        with open(path, "wb") as out:
            while time.time() < end:
                s.settimeout(max(0.05, end - time.time()))
                try:
                    data, sender = s.recvfrom(2048)
                except socket.timeout:
                    break
                if sender[0] == source and len(data) == 512:
                    out.write(data)
    elif mode == "capture":
        source = sys.argv[4]
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("239.255.71.68", 47168))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack("4s4s", socket.inet_aton("239.255.71.68"), socket.inet_aton(local)))
        s.settimeout(30)
        while True:
            data, sender = s.recvfrom(2048)
            if sender[0] == source and len(data) == 512:
                open(path, "wb").write(data)
                break
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local))
        s.sendto(open(path, "rb").read(), ("239.255.71.68", 47168))
    """

@Suite("Three hosts in network namespaces", .serialized, .enabled(if: canMakeNamespaces, "needs root and iproute2 to make network namespaces; skipped"))
struct NamespaceTests {
    @Test("A and B in one account, C in another: A's activity continues on B; C sees nothing and is refused; a replayed beacon changes nothing; a removed device loses access; a crash mid-write leaves state that loads")
    func threeHosts() async throws {
        try await Segment.with { try await scenario($0) }
    }

    func scenario(_ segment: Segment) async throws {
        let a = try await segment.start("a", name: "alpha")
        let b = try await segment.start("b", name: "beta")
        let c = try await segment.start("c", name: "gamma")
        try await segment.harness.pair([a, b])
        try await c.call(.createAccount(name: "elsewhere"))
        try await segment.harness.installMapViewer(on: a)
        try await segment.harness.installMapViewer(on: b)
        try await segment.harness.installMapViewer(on: c)

        // A's MapViewer (it reaches its agent by the socket file, whatever namespace it is in).
        let origin = try segment.harness.runMapViewer(on: a)
        origin.send("show 37.7887 -122.4075 0.02")
        try #require(await eventually { (try? await b.nearby().first?.activity.activityType) == mapViewing }, "beta never listed alpha's activity")
        let offer = try #require(try await b.nearby().first)
        let continued = try #require(try await b.call(.continue(activity: offer.activity.id)).continued)
        #expect(continued.app == "com.example.handoff.MapViewer")
        #expect(await eventually { b.mapViewerEvents.contains { $0.hasPrefix("map shows center 37.7887, -122.4075") } }, "events on beta: \(b.mapViewerEvents)")

        // C hears the beacons but opens none, lists nothing, and is refused a link.
        #expect(await eventually { ((try? await c.call(.status).status?.discovery?.unopened) ?? 0) > 0 }, "gamma received no beacon at all: is the segment up?")
        #expect(try await c.nearby().isEmpty)
        #expect(try await c.call(.status).status?.discovery?.accepted == 0)
        for host in ["a", "b"] {
            let probe = try #require(try await c.call(.probe(host: segment.address(host), port: 47_170)).probe)
            #expect(probe.reachable && !probe.member, "\(probe.message)")
        }
        let fromB = try #require(try await b.call(.probe(host: segment.address("a"), port: 47_170)).probe)
        #expect(fromB.member && fromB.device == "alpha", "\(fromB.message)")

        // A beacon of A captured on the segment and sent again later is refused by B.
        let captured = segment.harness.root.appendingPathComponent("beacon.bin").path
        let capture = Task.detached { try segment.run(in: "c", ["python3", "-c", beaconTool, "capture", captured, segment.address("c"), segment.address("a")]) }
        // Each change makes A send a beacon at once; change until the capture has one.
        for step in 1...60 where !FileManager.default.fileExists(atPath: captured) {
            origin.send("show \(37.79 + Double(step) / 1000) -122.41 0.03")
            _ = await eventually(within: .milliseconds(300)) { FileManager.default.fileExists(atPath: captured) }
        }
        _ = try await capture.value
        let before = try #require(try await b.call(.status).status?.discovery)
        try segment.run(in: "c", ["python3", "-c", beaconTool, "replay", captured, segment.address("c")])
        #expect(await eventually { ((try? await b.call(.status).status?.discovery?.replayed) ?? 0) > before.replayed }, "beta did not count the replay")
        #expect(try await b.nearby().first?.activity.id == offer.activity.id, "the replay changed what beta lists")

        // B is removed: it learns it, its links are refused, and A's beacons are closed to it.
        try await a.call(.removeDevice(name: "beta"))
        #expect(await eventually { (try? await b.call(.status).status?.account) == .some(nil) }, "beta still thinks it is in the account")
        let afterRemoval = try #require(try await b.call(.probe(host: segment.address("a"), port: 47_170)).probe)
        #expect(afterRemoval.reachable && !afterRemoval.member, "\(afterRemoval.message)")
        #expect(try await b.nearby().isEmpty)

        // A crash in the middle of a state write leaves state that loads: B joins again, then A
        // is killed while it writes the account for B's removal, and starts again.
        let invitation = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 60)).invitation)
        try await b.call(.join(code: invitation.code))
        try await b.call(.awaitJoinResult)
        #expect(try await a.call(.status).status?.members == 2)
        let client = try await a.control()
        try client.send(.call(request: 1_000, .removeDevice(name: "beta")))
        await segment.crash("a")
        client.close()
        let restarted = try await segment.start("a", name: "alpha")
        let status = try #require(try await restarted.call(.status).status)
        #expect(status.account == "home")
        #expect(status.members == 1 || status.members == 2, "the account has \(status.members) members")
    }
}

extension NamespaceTests {
    @Test("Real networks: an address change is followed without a restart and learned by the peer from its next beacon; an interface that goes down and up carries beacons again; an IPv6-only link carries discovery, pairing and links")
    func realNetworks() async throws {
        try await Segment.with { try await followsInterfaces($0) }
        try await Segment.with(ipv4: false) { try await overIPv6($0) }
    }

    /// A raw app on `device` offers a MapViewer-like activity; returns once `viewer` lists it.
    func offer(on device: TestDevice, seenBy viewer: TestDevice, title: String) async throws -> (RawApp, ActivityAnnouncement) {
        let activity = ActivityAnnouncement(id: UUID(), activityType: mapViewing, title: title, teamIdentifier: "EXAMPLETEAM")
        let app = try await device.offer(activity, answering: .answer(ActivityRecord(activity: activity)), seenBy: viewer)
        return (app, activity)
    }

    func followsInterfaces(_ segment: Segment) async throws {
        // IPv4 only, so that nothing but the IPv4 path can carry the beacons.
        let a = try await segment.start("a", name: "alpha", listen: "0.0.0.0:47170")
        let b = try await segment.start("b", name: "beta", listen: "0.0.0.0:47170")
        try await segment.harness.pair([a, b])
        try await segment.harness.installMapViewer(on: b)
        _ = try await offer(on: a, seenBy: b, title: "before")

        // A's address changes: its beacons go out from the new one, and B links there.
        try segment.run(in: "a", ["ip", "addr", "del", "10.77.0.1/24", "dev", "eth0"])
        try segment.run(in: "a", ["ip", "addr", "add", "10.77.0.21/24", "dev", "eth0"])
        let (app, moved) = try await offer(on: a, seenBy: b, title: "after the move")
        let alpha = try await b.call(.devices).devices?.first { $0.name == "alpha" }
        #expect(alpha?.address == "10.77.0.21", "beta knows alpha at \(String(describing: alpha?.address))")
        let continued = try #require(try await b.call(.continue(activity: moved.id)).continued)
        #expect(continued.app == "com.example.handoff.MapViewer")
        app.client.close()

        // A's interface goes down and comes up: its beacons flow again with no restart.
        try segment.run(in: "a", ["ip", "link", "set", "eth0", "down"])
        // An outage longer than the interface scan (2 s), so that the agent sees it.
        try await Task.sleep(for: .seconds(3))
        try segment.run(in: "a", ["ip", "link", "set", "eth0", "up"])
        _ = try await offer(on: a, seenBy: b, title: "after the outage")
    }

    func overIPv6(_ segment: Segment) async throws {
        let a = try await segment.start("a", name: "alpha", listen: .some(nil))
        let b = try await segment.start("b", name: "beta", listen: .some(nil))
        // The invitation carries A's link-local address with its interface.
        try await segment.harness.pair([a, b])
        try await segment.harness.installMapViewer(on: b)
        let (app, activity) = try await offer(on: a, seenBy: b, title: "over IPv6")
        let alpha = try await b.call(.devices).devices?.first { $0.name == "alpha" }
        #expect(alpha?.address?.hasPrefix("fe80:") == true && alpha?.address?.hasSuffix("%eth0") == true, "\(String(describing: alpha?.address))")
        let continued = try #require(try await b.call(.continue(activity: activity.id)).continued)
        #expect(continued.app == "com.example.handoff.MapViewer")
        app.client.close()
    }
}

extension NamespaceTests {
    @Test(
        "A firewall: where it drops the discovery port, static peers still carry the beacons and doctor names the firewall; a dropped link port is told apart from a device that is down",
        .enabled(if: hasNft, "needs nftables' nft for the namespace's firewall; skipped"))
    func firewall() async throws {
        try await Segment.with { try await firewalled($0) }
    }

    func firewalled(_ segment: Segment) async throws {
        // B's firewall drops the multicast beacons' port, nothing else.
        try segment.run(in: "b", ["nft", "-f", "-"], input: Data("""
            table inet handoff-test {
                chain input { type filter hook input priority 0; udp dport 47168 drop; }
            }
            """.utf8))
        let a = try await segment.start("a", name: "alpha", arguments: ["--peer", "\(segment.address("b")):47170"])
        let b = try await segment.start("b", name: "beta", arguments: ["--peer", "\(segment.address("a")):47170"])
        try await segment.harness.pair([a, b])
        try await segment.harness.installMapViewer(on: b)
        let (app, activity) = try await offer(on: a, seenBy: b, title: "through the firewall")
        let continued = try #require(try await b.call(.continue(activity: activity.id)).continued)
        #expect(continued.app == "com.example.handoff.MapViewer")
        app.client.close()

        let onB = try #require(try await b.call(.doctor).checks)
        let interface = try #require(onB.first { $0.area == "interface" && $0.subject == "eth0" })
        #expect(interface.status == .problem && interface.finding.contains("firewall"), "\(interface)")
        #expect(interface.advice?.contains("--peer") == true)
        #expect(onB.first { $0.area == "peer" }?.status == .ok)
        #expect(onB.first { $0.area == "static-peer" }?.status == .ok)
        let onA = try #require(try await a.call(.doctor).checks)
        #expect(onA.first { $0.area == "interface" }?.status == .ok, "\(onA)")

        // A's firewall drops its link port: B is told that nothing answers at all.
        try segment.run(in: "a", ["nft", "-f", "-"], input: Data("""
            table inet handoff-test {
                chain input { type filter hook input priority 0; tcp dport 47170 drop; }
            }
            """.utf8))
        let dropped = try #require(try await b.call(.doctor).checks?.first { $0.area == "peer" })
        #expect(dropped.status == .problem && dropped.finding.contains("firewall"), "\(dropped)")
        #expect(dropped.advice?.contains("TCP port 47170") == true)

        // No firewall, but A's agent is down: the port refuses.
        try segment.run(in: "a", ["nft", "flush", "ruleset"])
        await segment.crash("a")
        let down = try #require(try await b.call(.doctor).checks?.first { $0.area == "peer" })
        #expect(down.status == .problem && down.finding.contains("refuses the connection"), "\(down)")
    }
}

extension NamespaceTests {
    @Test(
        "After a removal, static peers whose multicast is dropped still hear each other's beacons at once, and doctor says whether a static peer's beacons arrive",
        .enabled(if: hasNft, "needs nftables' nft for the namespaces' firewalls; skipped"))
    func staticPeersAfterRemoval() async throws {
        try await Segment.with { segment in
            // Only static peers carry beacons: the multicast port is dropped and DNS-SD is off.
            for host in ["a", "b", "c"] {
                try segment.run(in: host, ["nft", "-f", "-"], input: Data("""
                    table inet handoff-test {
                        chain input { type filter hook input priority 0; udp dport 47168 drop; }
                    }
                    """.utf8))
            }
            let off = ["--dns-sd", "off"]
            let a = try await segment.start(
                "a", name: "alpha", arguments: off + ["--peer", "\(segment.address("b")):47170", "--peer", "\(segment.address("c")):47170"])
            let b = try await segment.start("b", name: "beta", arguments: off + ["--peer", "\(segment.address("a")):47170"])
            let c = try await segment.start("c", name: "gamma", arguments: off + ["--peer", "\(segment.address("a")):47170"])
            try await segment.harness.pair([a, b])

            // A third device joins, and is removed: the beacon key changes on A and B.
            let invitation = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 60)).invitation)
            try await c.call(.join(code: invitation.code))
            try await c.call(.awaitJoinResult)
            try await a.call(.removeDevice(name: "gamma"))
            #expect(await eventually { (try? await c.call(.status).status?.account) == .some(nil) }, "gamma still thinks it is in the account")
            try #require(await eventually { (try? await b.call(.status).status?.members) == 2 }, "beta did not learn of the removal")

            // Beacons sealed with the new key reach each: a new activity is listed at once.
            let (onA, _) = try await offer(on: a, seenBy: b, title: "after the removal, on alpha")
            let (onB, _) = try await offer(on: b, seenBy: a, title: "after the removal, on beta")
            let heard = try #require(try await b.call(.doctor).checks?.first { $0.area == "static-peer" })
            #expect(heard.status == .ok && heard.finding.contains("beacons arrive"), "\(heard)")

            // B's firewall drops A's unicast beacons too, while links still open: once A is no
            // longer heard, doctor says its beacons do not arrive, not that all is well.
            try segment.run(in: "b", ["nft", "add", "rule", "inet", "handoff-test", "input", "udp", "dport", "47170", "drop"])
            #expect(
                await eventually(within: .seconds(120)) { (try? await b.call(.devices).devices?.first { $0.name == "alpha" }?.isNearby) == false },
                "beta still lists alpha nearby with its beacons dropped")
            let deaf = try #require(try await b.call(.doctor).checks?.first { $0.area == "static-peer" })
            #expect(deaf.status == .problem && deaf.finding.contains("answers") && deaf.finding.contains("no beacon"), "\(deaf)")
            #expect(deaf.advice?.contains("UDP port 47170") == true, "\(deaf)")
            onA.client.close()
            onB.client.close()
        }
    }
}

extension NamespaceTests {
    @Test(
        "Where the network carries mDNS but drops the beacon group, DNS-SD's unicast carries beacons both ways: each member lists the other and the other's new activity",
        .enabled(if: hasNft, "needs nftables' nft for the namespaces' firewalls; skipped"))
    func serviceDiscoveryBothWays() async throws {
        try await Segment.with(hosts: ["a", "b"]) { segment in
            for host in ["a", "b"] {
                try segment.run(in: host, ["nft", "-f", "-"], input: Data("""
                    table inet handoff-test {
                        chain input { type filter hook input priority 0; udp dport 47168 drop; }
                    }
                    """.utf8))
            }
            let a = try await segment.start("a", name: "alpha")
            let b = try await segment.start("b", name: "beta")
            try await a.call(.createAccount(name: "home"))
            let invitation = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 60)).invitation)
            try await b.call(.join(code: invitation.code))
            try await b.call(.awaitJoinResult)
            func lists(_ viewer: TestDevice, _ name: String) async -> Bool {
                (try? await viewer.call(.devices).devices?.contains { $0.name == name && $0.isNearby }) == true
            }
            func seen(_ device: TestDevice) async -> String {
                let checks = (try? await device.call(.doctor).checks ?? []) ?? []
                return checks.filter { $0.area.hasPrefix("dns-sd") || $0.area == "peer" }.map { "\($0.area) \($0.subject ?? ""): \($0.finding)" }.joined(separator: "; ")
            }
            let aListsB = await eventually(within: .seconds(60)) { await lists(a, "beta") }
            let seenOnA = await seen(a)
            #expect(aListsB, "alpha never listed beta: \(seenOnA)")
            let bListsA = await eventually(within: .seconds(60)) { await lists(b, "alpha") }
            let seenOnB = await seen(b)
            #expect(bListsA, "beta never listed alpha: \(seenOnB)")
            // Both ways now, not only at the start: each one's new activity reaches the other.
            let (onA, _) = try await offer(on: a, seenBy: b, title: "from alpha, over DNS-SD's unicast")
            let (onB, _) = try await offer(on: b, seenBy: a, title: "from beta, over DNS-SD's unicast")
            onA.client.close()
            onB.client.close()
        }
    }
}

extension NamespaceTests {
    @Test("S6: Join requests with wrong codes from two addresses during an invitation withdraw nothing: the real device still joins, and the inviting person is told who guessed")
    func joinFlood() async throws {
        try await Segment.with(hosts: ["a", "b", "c", "d"]) { segment in
            let a = try await segment.start("a", name: "alpha")
            let b = try await segment.start("b", name: "beta")
            let guessers = [try await segment.start("c", name: "gamma"), try await segment.start("d", name: "delta")]
            try await a.call(.createAccount(name: "home"))
            let token = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 60)).invitation)
            let typed = try #require(try await a.call(.invite(token: false, host: nil, lifetime: 60)).invitation)
            // The person waits for a device to ask, as 'handoff device invite' does.
            let asked = Task { try await a.attempt(.awaitJoin(invitation: typed.id)) }

            // Strangers on the link send tokens for the same listener with secrets of their
            // own: five each from two addresses, at once, as fast as their agents can.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for guesser in guessers {
                    group.addTask {
                        for _ in 0..<5 {
                            var forged = try Invitation(parsing: token.code)
                            forged.secret = (0..<forged.secret.count).map { _ in UInt8.random(in: 0...255) }
                            _ = try await guesser.attempt(.join(code: forged.code))
                            let refused = try await guesser.attempt(.awaitJoinResult)
                            #expect(refused.error != nil, "a guess joined: \(refused)")
                        }
                    }
                }
                try await group.waitForAll()
            }

            // The real device joins with the typed code; the person sees why to be careful.
            let verification = try #require(try await b.call(.join(code: typed.code)).verification)
            let request = try await asked.value
            let joinRequest = try #require(request.joinRequest, "the invitation did not wait for the real device: \(request)")
            #expect(joinRequest.name == "beta" && joinRequest.verification == verification)
            let warning = request.warnings?.first ?? ""
            #expect(warning.contains(segment.address("c")) && warning.contains(segment.address("d")) && warning.contains("stayed open"), "\(request)")
            try await a.call(.confirmJoin(invitation: typed.id, accept: true))
            #expect(try await b.call(.awaitJoinResult).account == "home")
            #expect(try await a.call(.status).status?.members == 2)
            // The token is still good too: nobody withdrew it.
            #expect(await eventually { (try? await a.call(.status).status?.members) == 2 })
            let gamma = try await guessers[0].attempt(.status)
            #expect(gamma.status?.account == nil)
        }
    }
}

extension NamespaceTests {
    /// The ports a namespace gives out for port 0 are narrowed to two, and another program
    /// holds UDP on the one the kernel hands a listener first (bind prefers the odd one).
    @Test("A link port chosen by the system is free for UDP too (static peers' beacons arrive there); a given port whose UDP another program holds is refused at start, saying so")
    func linkPortFreeForUDP() async throws {
        try await Segment.with(hosts: ["a"]) { segment in
            try segment.run(in: "a", ["sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40001"])
            let holder = ChildProcess()
            holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            holder.arguments = [
                "ip", "netns", "exec", "\(segment.prefix)a", "python3", "-c",
                "import socket, sys, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('0.0.0.0', 40001))\nprint('held', flush=True)\ntime.sleep(120)",
            ]
            let output = Pipe()
            holder.standardOutput = output
            try holder.run()
            defer {
                kill(holder.processIdentifier, SIGKILL)
                holder.waitUntilExit()
            }
            #expect(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("held"))

            // Given: the agent does not start, and says which port and why.
            let binary = try #require(builtExecutable("handoffd"))
            let state = segment.harness.root.appendingPathComponent("given", isDirectory: true)
            var refusal = ""
            do {
                // (An agent that started would run on: `timeout` ends it.)
                try segment.run(in: "a", [
                    "timeout", "20", binary.path, "--name", "given", "--state-dir", state.path, "--socket", segment.harness.root.appendingPathComponent("given.sock").path,
                    "--interface", "eth0", "--log-level", "error", "--notifications", "off", "--listen", "\(segment.address("a")):40001",
                ])
            } catch {
                refusal = "\(error)"
            }
            #expect(refusal.contains("UDP port 40001") && refusal.contains("--listen"), "\(refusal)")

            // Chosen: the agent takes the port whose UDP is free, and its beacons' socket opens.
            let a = try await segment.start("a", name: "alpha", listen: "\(segment.address("a")):0")
            try await a.call(.createAccount(name: "home"))
            let status = try #require(try await a.call(.status).status)
            #expect(status.linkPort == 40000)
        }
    }
}

extension NamespaceTests {
    @Test(
        "A link whose other end forgot it unseen (its reset lost, as when that device restarted or dropped the link while this one slept): the next continuation finds it dead and continues on a new link",
        .enabled(if: hasNft, "needs nftables' nft to lose the reset; skipped"))
    func forgottenLink() async throws {
        try await Segment.with(hosts: ["a", "b"]) { try await forgotten($0) }
    }

    /// The TCP connections established in host `host`'s namespace, as `ss` lists them.
    func established(_ segment: Segment, in host: String) throws -> [Substring] {
        try segment.run(in: host, ["ss", "-Htn", "state", "established"]).split(separator: "\n").filter { !$0.isEmpty }
    }

    func forgotten(_ segment: Segment) async throws {
        let a = try await segment.start("a", name: "alpha")
        let b = try await segment.start("b", name: "beta")
        try await segment.harness.pair([a, b])
        try await segment.harness.installMapViewer(on: b)
        let (first, activity) = try await offer(on: a, seenBy: b, title: "first")
        _ = try #require(try await b.call(.continue(activity: activity.id)).continued)
        first.client.close()
        let linked = try established(segment, in: "b")
        try #require(linked.count == 1, "beta has no link open to alpha after continuing: \(linked)")

        // A's end of the link goes, and what A sends B about it (its reset) is lost.
        try segment.run(in: "a", ["nft", "-f", "-"], input: Data("""
            table inet handoff-test {
                chain output { type filter hook output priority 0; ip daddr \(segment.address("b")) tcp sport 47170 drop; }
            }
            """.utf8))
        try segment.run(in: "a", ["ss", "-K", "-tn", "dst", segment.address("b")])
        #expect(await eventually { (try? established(segment, in: "a").isEmpty) == true }, "alpha's end of the link is still there")
        try segment.run(in: "a", ["nft", "flush", "ruleset"])
        let stale = try established(segment, in: "b")
        #expect(stale.count == 1, "beta saw its link end, so nothing was lost: \(stale)")

        // B's next continuation meets the dead link, and continues on a new one.
        let (second, again) = try await offer(on: a, seenBy: b, title: "second")
        let answer = try await b.attempt(.continue(activity: again.id))
        #expect(answer.continued?.app == "com.example.handoff.MapViewer", "\(String(describing: answer.error))")
        second.client.close()
    }
}

extension NamespaceTests {
    @Test(
        "Addresses that go away: a device renumbered with a link open lets that link go as its address goes and continues on a new one; with IPv4 gone on one device, the two still list each other and continue over link-local IPv6"
    )
    func addressesThatGoAway() async throws {
        try await Segment.with(hosts: ["a", "b"]) { try await renumberedWithLinkOpen($0) }
        try await Segment.with(hosts: ["a", "b"]) { try await ipv4Removed($0) }
    }

    func renumberedWithLinkOpen(_ segment: Segment) async throws {
        let a = try await segment.start("a", name: "alpha", listen: "0.0.0.0:47170")
        let b = try await segment.start("b", name: "beta", listen: "0.0.0.0:47170")
        try await segment.harness.pair([a, b])
        try await segment.harness.installMapViewer(on: b)
        let (first, activity) = try await offer(on: a, seenBy: b, title: "first")
        _ = try #require(try await b.call(.continue(activity: activity.id)).continued)
        first.client.close()
        try #require(try established(segment, in: "b").count == 1, "beta has no link open to alpha after continuing")

        // B is renumbered (a new lease): the address its link to A went out from is gone.
        try segment.run(in: "b", ["ip", "addr", "del", "10.77.0.2/24", "dev", "eth0"])
        try segment.run(in: "b", ["ip", "addr", "add", "10.77.0.22/24", "dev", "eth0"])
        // B lets its link go as the address goes, not at the next request's timeout.
        let closed = await eventually { (try? established(segment, in: "b").allSatisfy { !$0.contains("10.77.0.2:") }) == true }
        #expect(closed, "beta keeps a link from an address it no longer has: \((try? established(segment, in: "b")) ?? [])")
        let (second, again) = try await offer(on: a, seenBy: b, title: "second")
        let answer = try await b.attempt(.continue(activity: again.id))
        #expect(answer.continued?.app == "com.example.handoff.MapViewer", "\(String(describing: answer.error))")
        second.client.close()
    }

    func ipv4Removed(_ segment: Segment) async throws {
        // Both families, as a person's network has them: links listen on both.
        let a = try await segment.start("a", name: "alpha", listen: .some(nil))
        let b = try await segment.start("b", name: "beta", listen: .some(nil))
        try await segment.harness.pair([a, b])
        try await segment.harness.installMapViewer(on: a)
        try await segment.harness.installMapViewer(on: b)
        _ = try await offer(on: a, seenBy: b, title: "before")

        // A's IPv4 goes (its lease ended; link-local IPv6 stays): each hears the other over IPv6.
        try segment.run(in: "a", ["ip", "addr", "del", "10.77.0.1/24", "dev", "eth0"])
        let (app, moved) = try await offer(on: a, seenBy: b, title: "over IPv6 now")
        let alpha = try await b.call(.devices).devices?.first { $0.name == "alpha" }
        #expect(alpha?.address?.hasPrefix("fe80:") == true, "beta knows alpha at \(String(describing: alpha?.address))")
        let continued = try await b.attempt(.continue(activity: moved.id))
        #expect(continued.continued?.app == "com.example.handoff.MapViewer", "\(String(describing: continued.error))")
        app.client.close()
        // And the other way: B's activity reaches A, which has only IPv6 now, and continues there.
        let (back, backActivity) = try await offer(on: b, seenBy: a, title: "from beta")
        let beta = try await a.call(.devices).devices?.first { $0.name == "beta" }
        #expect(beta?.address?.hasPrefix("fe80:") == true, "alpha knows beta at \(String(describing: beta?.address))")
        let returned = try await a.attempt(.continue(activity: backActivity.id))
        #expect(returned.continued?.app == "com.example.handoff.MapViewer", "\(String(describing: returned.error))")
        back.client.close()
    }
}

extension NamespaceTests {
    @Test(
        "S10: A second local user's flood from the machine's own address does not silence the first user's device: its peer still hears each change during the flood",
        .enabled(if: canRunSecondUser, "needs root, setpriv and python3 to run a second local user's process; skipped"))
    func secondUsersFloodSilencesNoOne() async throws {
        try await Segment.with(hosts: ["a", "b"]) { segment in
            let a = try await segment.start("a", name: "alpha")
            let b = try await segment.start("b", name: "beta")
            try await segment.harness.pair([a, b])
            let (before, _) = try await offer(on: a, seenBy: b, title: "before the flood")
            before.client.close()

            // Another user of alpha's machine, unprivileged, with an ordinary socket: 5,000
            // beacon-sized datagrams a second from alpha's address (beta's budget for an
            // address is 200 a second), until told to stop.
            let user = try localUser("handoff-flooder").get()
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("local_flood.py")
            let flood = try RunningCommand(
                URL(fileURLWithPath: "/usr/bin/env"),
                [
                    "ip", "netns", "exec", "\(segment.prefix)a", "/usr/bin/setpriv", "--reuid", "\(user.uid)", "--regid", "\(user.gid)", "--clear-groups",
                    "/usr/bin/python3", "-c", try String(contentsOf: script, encoding: .utf8), "239.255.71.68", "47168", "eth0", "5000", "120",
                ])
            try #require(await eventually(within: .seconds(60)) { flood.output.contains("ready") }, "the flood printed: \(flood.output)")
            // Each change is beaconed once, at once: the flood must not swallow it.
            for round in 1...3 {
                let (app, _) = try await offer(on: a, seenBy: b, title: "during the flood, \(round)")
                app.client.close()
            }
            flood.closeInput()
            #expect(await eventually(within: .seconds(30)) { flood.isFinished }, "the flood did not stop: \(flood.output)")
            let sent = flood.output.split(separator: "\n").last { $0.hasPrefix("SENT ") }.flatMap { Int($0.dropFirst(5)) } ?? 0
            #expect(sent > 1_000, "the flood sent \(sent) datagrams: \(flood.output)")
        }
    }
}

extension NamespaceTests {
    @Test(
        "A join killed (kill -9) on either side before the joiner confirms adds nobody: the person letting in a killed joiner is told it was not added; a joiner whose inviter was killed says the join failed; after restarts neither lists the other"
    )
    func joinKilledAtEachStep() async throws {
        try await Segment.with(hosts: ["a", "b"]) { segment in
            var a = try await segment.start("a", name: "alpha")
            var b = try await segment.start("b", name: "beta")
            try await a.call(.createAccount(name: "home"))

            // The joiner is killed while the person on alpha reads the verification number.
            let first = try #require(try await a.call(.invite(token: false, host: segment.address("a"), lifetime: 60)).invitation)
            try await b.call(.join(code: first.code))
            _ = try #require(try await a.call(.awaitJoin(invitation: first.id)).joinRequest)
            await segment.crash("b")
            let letIn = try await a.attempt(.confirmJoin(invitation: first.id, accept: true))
            #expect(letIn.error?.message.contains("it was not added") == true, "the person was told: \(letIn)")
            #expect(try await a.call(.status).status?.members == 1)
            b = try await segment.start("b", name: "beta")
            #expect(try await b.call(.status).status?.account == nil)

            // The inviting device is killed while the joiner waits for the person there.
            let second = try #require(try await a.call(.invite(token: false, host: segment.address("a"), lifetime: 60)).invitation)
            try await b.call(.join(code: second.code))
            _ = try #require(try await a.call(.awaitJoin(invitation: second.id)).joinRequest)
            await segment.crash("a")
            let ended = try await b.attempt(.awaitJoinResult)
            #expect(ended.error != nil && ended.account == nil, "the joiner was told: \(ended)")
            a = try await segment.start("a", name: "alpha")
            #expect(try await a.call(.status).status?.members == 1)
            #expect(try await b.call(.status).status?.account == nil)
            #expect(!FileManager.default.fileExists(atPath: b.state.appendingPathComponent(AccountState.joiningFileName).path))

            // Both as they are now still make one account.
            let third = try #require(try await a.call(.invite(token: true, host: segment.address("a"), lifetime: 60)).invitation)
            try await b.call(.join(code: third.code))
            #expect(try await b.call(.awaitJoinResult).account == "home")
            #expect(try await a.call(.status).status?.members == 2)
        }
    }
}
