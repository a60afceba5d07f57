// The discovery benchmark (Benchmarks/discovery.sh): two handoffd processes with the defaults
// in two network namespaces on a bridge, paired. In repeated runs, until each measure's run
// medians agree within 10 %:
//   - discovery latency: from `becameCurrent` on A to B's watcher hearing it, 100 changes;
//   - the baseline: one multicast datagram from A's namespace to B's, the floor for any
//     discovery on this machine;
//   - discovery after B's interface comes back: A's activity changes while B's link is down;
//     from the link coming up to B listing the new activity.
// Then the bytes each quiet device's interface sends a second (beacons over IPv4 and IPv6,
// DNS-SD, a link's packets, and whatever the kernel adds), A offering an activity and B none,
// over IDLE_SECONDS (default 600) before any continuation, as long again after one opened
// a link, and as long again with B's clipboard offer out (B copied 1 KB, A pasted it once).
// Prints Markdown tables; exits 1 if a target is missed. Needs root (namespaces).
import BenchmarkReport
import Foundation
import HandoffLocalAPI

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

/// The baseline's receiving end: prints the one-way time of each datagram (it carries its
/// send time), until `count` arrived or none came for two seconds.
func runMulticastReceiver(group: String, port: Int, local: String, count: Int) -> Never {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var patience = timeval(tv_sec: 2, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr(group)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    // On the namespace's own address: it has no route to pick an interface by.
    var membership = ip_mreq(imr_multiaddr: in_addr(s_addr: inet_addr(group)), imr_interface: in_addr(s_addr: inet_addr(local)))
    setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &membership, socklen_t(MemoryLayout<ip_mreq>.size))
    print("ready")
    fflush(nil)
    var buffer = [UInt8](repeating: 0, count: 64)
    for _ in 0..<count {
        guard recv(fd, &buffer, buffer.count, 0) >= 8 else { break }
        let sent = buffer.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        print(milliseconds(now() - sent))
        fflush(nil)
    }
    exit(0)
}

/// The baseline's sending end: `count` datagrams, 20 ms apart, each carrying its send time.
func runMulticastSender(group: String, port: Int, local: String, count: Int) -> Never {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    var interface = in_addr(s_addr: inet_addr(local))
    setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_IF, &interface, socklen_t(MemoryLayout<in_addr>.size))
    var target = sockaddr_in()
    target.sin_family = sa_family_t(AF_INET)
    target.sin_port = in_port_t(UInt16(port).bigEndian)
    target.sin_addr.s_addr = inet_addr(group)
    for _ in 0..<count {
        let stamp = now()
        let bytes = (0..<8).map { UInt8(truncatingIfNeeded: stamp >> (56 - 8 * UInt64($0))) }
        _ = withUnsafePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        usleep(20_000)
    }
    exit(0)
}

/// What a namespace's `eth0` has sent, in bytes.
func sentBytes(_ namespace: String) -> Int {
    let output = Pipe()
    let process = start(["ip", "netns", "exec", namespace, "cat", "/sys/class/net/eth0/statistics/tx_bytes"], output: output)
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
}

/// Whether `host` has a TCP connection established (a link: the local sockets are Unix ones).
func hasLink(_ host: Host) -> Bool { established(host) > 0 }

/// Runs the benchmark and returns its targets, checked, once everything it started is gone.
func discoveryBenchmark() async throws -> Targets {
    let targets = Targets()
    guard getuid() == 0, shell(["ip", "netns", "add", "hd\(getpid())probe"]) == 0 else {
        print("The discovery benchmark needs root, to make network namespaces: run it as root.")
        targets.check("run as root (network namespaces)", false, "not root")
        return targets
    }
    shell(["ip", "netns", "del", "hd\(getpid())probe"])
    let changes = 100
    let outages = 10
    let window = Int(ProcessInfo.processInfo.environment["IDLE_SECONDS"] ?? "600") ?? 600
    let machine = machineDescription()
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let prefix = "hd\(getpid() % 100_000)"
    undoOnFailure.withLock { $0 = prefix }
    makeBridgedNamespaces(prefix: prefix, names: ["a", "b"], subnet: "10.79.0") { namespace in
        shell(["ip", "netns", "exec", namespace, "sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"])
    }
    let hosts = ["a", "b"].enumerated().map { index, name in
        Host(name: name, namespace: "\(prefix)\(name)", address: "10.79.0.\(index + 1)", port: 47_170)
    }
    let (a, b) = (hosts[0], hosts[1])
    var processes: [ChildProcess] = []
    defer {
        for process in processes { stop(process) }
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap(Int32.init) {
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root) { kill(pid, SIGTERM) }
        }
        for name in ["a", "b", "br"] { shell(["ip", "netns", "del", "\(prefix)\(name)"]) }
        try? FileManager.default.removeItem(atPath: root)
    }

    // Two agents with the defaults (links on [::], beacons over IPv4 and IPv6, DNS-SD on, links
    // kept an hour unused), paired; the receiving app installed on B, unsigned (development
    // mode, which changes nothing on the network).
    for host in [a, b] {
        processes.append(start(host.command([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name, "--state-dir", host.state, "--socket", host.socket,
            "--interface", "eth0", "--log-level", "error", "--development-mode", "on",
            // A copy stays offered through its quiet window (the default is 2 minutes); nothing
            // else changes until a copy is made.
            "--clipboard-expiry", "1h",
        ])))
    }
    await pair(a, b)
    let app = try appFolder("Receiver", bundle: bundleIdentifier, activityType: activityType)
    _ = await call(b, .installApp(directory: app))

    let counter = LockedCounter()
    let origin = try originApp(socket: a.socket, counter: counter)
    let heard = HeardActivities()
    let watcher = try LocalClient(path: b.socket, role: .control) { message in
        if case .event(let event) = message, let id = event.activity?.activity.id { heard.record(id) }
    }
    _ = try await watcher.call(.watch)
    var offered = UUID()
    func offer() -> UUID {
        offered = UUID()
        try? origin.send(.becameCurrent(ActivityAnnouncement(id: offered, activityType: activityType, title: "Benchmark", teamIdentifier: team)))
        return offered
    }

    // The baseline's receiver and sender are started anew each run.
    var port = 47_199
    let runs = try await repeatRuns(["discovery", "multicast datagram", "after the link comes back"]) { _ in
        var run: [String: [Double]] = [:]
        port += 1
        let receiverOutput = Pipe()
        let receiver = start(b.command([CommandLine.arguments[0], "mcast-recv", "239.255.71.99", String(port), b.address, String(changes)]), output: receiverOutput)
        _ = receiverOutput.fileHandleForReading.availableData
        let sender = start(a.command([CommandLine.arguments[0], "mcast-send", "239.255.71.99", String(port), a.address, String(changes)]))
        sender.waitUntilExit()
        run["multicast datagram"] = String(decoding: receiverOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").compactMap { Double($0) }
        receiver.waitUntilExit()

        for _ in 0..<changes {
            let start = now()
            let id = offer()
            await waitFor("B to list the activity") { heard.contains(id) }
            run["discovery", default: []].append(milliseconds(heard.time(id)! - start))
            try await Task.sleep(for: .milliseconds(20))
        }
        for _ in 0..<outages {
            shell(["ip", "-n", b.namespace!, "link", "set", "eth0", "down"])
            try await Task.sleep(for: .milliseconds(300))
            let id = offer()
            try await Task.sleep(for: .milliseconds(200))
            let start = now()
            shell(["ip", "-n", b.namespace!, "link", "set", "eth0", "up"])
            await waitFor("B to list the activity after its link came back", seconds: 60) { heard.contains(id) }
            run["after the link comes back", default: []].append(milliseconds(heard.time(id)! - start))
            try await Task.sleep(for: .milliseconds(500))
        }
        return run
    }

    /// Each device's bytes a second on its `eth0` over `window` seconds: everything it sends
    /// (beacons over IPv4 and IPv6, DNS-SD, a link's packets, and what the kernel adds).
    /// Also how often each device's DNS-SD names changed in the window (`nameRotations`), and
    /// how long it lasted: with `untilRotation`, past `window` until each device's names have
    /// changed once in it (at most one rotation period, 15 minutes, more), so that its traffic
    /// includes a rotation whenever the runs before it took.
    func quietWindow(untilRotation: Bool = false) async throws -> (a: Double, b: Double, linkAtStart: Bool, linkAtEnd: Bool, rotations: (a: Int, b: Int), seconds: Double) {
        func rotations(_ host: Host) async -> Int { await call(host, .status).status?.discovery?.nameRotations ?? 0 }
        let linkAtStart = hasLink(a) || hasLink(b)
        let (rotatedA, rotatedB) = (await rotations(a), await rotations(b))
        let (startA, startB) = (sentBytes(a.namespace!), sentBytes(b.namespace!))
        let started = now()
        try await Task.sleep(for: .seconds(window))
        if untilRotation {
            let limit = started + UInt64(window + 900) * 1_000_000_000
            while now() < limit {
                let (nowA, nowB) = (await rotations(a), await rotations(b))
                if nowA > rotatedA && nowB > rotatedB { break }
                // Period: the names change on their own schedule; a look every 2 s.
                try await Task.sleep(for: .seconds(2))
            }
        }
        let seconds = Double(now() - started) / 1e9
        let rates = (Double(sentBytes(a.namespace!) - startA) / seconds, Double(sentBytes(b.namespace!) - startB) / seconds)
        let linkAtEnd = hasLink(a) || hasLink(b)
        return (rates.0, rates.1, linkAtStart, linkAtEnd, (await rotations(a) - rotatedA, await rotations(b) - rotatedB), seconds)
    }
    // The issue's windows are 10 minutes; a shorter one (a quick run) cannot be made to hold a
    // rotation without becoming 15 minutes long, and only says how many it held.
    let holdsRotation = window >= 600
    // Quiet, before any continuation: A offers one activity (unchanged), B none.
    _ = offer()
    try await Task.sleep(for: .seconds(5))
    let before = try await quietWindow()
    // A continuation opens a link; then quiet again, the link kept open (an hour unused).
    let control = try LocalClient(path: b.socket, role: .control)
    let iteration = counter.peek()
    if let error = try await control.call(.continue(activity: offered)).error { fail("continue: \(error)") }
    control.close()
    await waitFor("the receiving app to restore") { restoredTime(of: iteration, on: b) != nil }
    let linkOpened = hasLink(b)
    let after = try await quietWindow(untilRotation: holdsRotation)
    // Quiet with a clipboard offer out: B copies 1 KB (its beacons carry the offer while it is
    // offered), A pastes it once, over the link, as a person would; then nothing.
    try await onOwnThread { try clipboardCopy(b.socket, [UInt8](repeating: 0x61, count: 1024), type: "text/plain;charset=utf-8") }
    await waitFor("A to hear B's copy") { await call(a, .status).status?.clipboard?.deviceName == b.name }
    let (pastedBytes, _) = try await onOwnThread { try clipboardPaste(a.socket) }
    guard pastedBytes == 1024 else { fail("A pasted \(pastedBytes) bytes of B's 1 KB copy") }
    let clipboardOut = try await quietWindow()
    watcher.close()
    origin.close()

    func row(_ name: String) -> String {
        "\(format(runs.percentile(name, 0.5))) ms | \(format(runs.percentile(name, 0.99))) ms"
    }
    func link(_ window: (a: Double, b: Double, linkAtStart: Bool, linkAtEnd: Bool, rotations: (a: Int, b: Int), seconds: Double)) -> String {
        "\(format(window.seconds, 0)) s; a link open at its start: \(window.linkAtStart ? "yes" : "no"), at its end: \(window.linkAtEnd ? "yes" : "no"); "
            + "DNS-SD names changed: A \(window.rotations.a), B \(window.rotations.b)"
    }
    print("""
        Discovery benchmark. Machine: \(machine).
        Two network namespaces on one bridge (IPv4 and IPv6 link-local); agents with the defaults (DNS-SD on, links kept an hour \
        unused); release build, static Swift runtime. Per run \(changes) changes and \(outages) link outages; quiet windows of \(window) s\(holdsRotation ? ", the one after the continuation until each device's DNS-SD names have changed in it" : "").
        \(runs.agreement(minimum: 3))

        \(runs.table())

        | measure (all runs' samples) | p50 | p99 |
        | --- | --- | --- |
        | discovery: `becameCurrent` on A to B's watcher hearing it | \(row("discovery")) |
        | baseline: one multicast datagram, A to B | \(row("multicast datagram")) |
        | discovery after B's link comes back: link up to the new activity listed | \(row("after the link comes back")) |

        | a quiet device's traffic, everything its interface sends | before any continuation | after a continuation opened a link |
        | --- | --- | --- |
        | A, one activity offered | \(format(before.a, 1)) B/s | \(format(after.a, 1)) B/s |
        | B, no activity | \(format(before.b, 1)) B/s | \(format(after.b, 1)) B/s |
        | the window | \(link(before)) | \(link(after)) (the continuation opened one: \(linkOpened ? "yes" : "no")) |

        | a quiet device's traffic with a clipboard offer out (B copied 1 KB, A pasted it once) | the window |
        | --- | --- |
        | A, one activity offered | \(format(clipboardOut.a, 1)) B/s |
        | B, no activity, its copy offered | \(format(clipboardOut.b, 1)) B/s |
        | the window | \(link(clipboardOut)) |

        """)
    let discovery50 = runs.percentile("discovery", 0.5), discovery99 = runs.percentile("discovery", 0.99)
    targets.check("discovery p50 ≤ 10 ms", discovery50 <= 10, "\(format(discovery50)) ms")
    targets.check("discovery p99 ≤ 50 ms", discovery99 <= 50, "\(format(discovery99)) ms")
    targets.check("the continuation opened a link", linkOpened, linkOpened ? "yes" : "no: the after window measured no link")
    // Links stay open an hour unused: the window after the continuation carries the kept link's
    // keepalive (the accepting side's probe and its answer every 5 minutes).
    targets.check(
        "the link stayed open through the window after the continuation", after.linkAtStart && after.linkAtEnd,
        after.linkAtStart && after.linkAtEnd ? "yes" : "no: the window measured no kept link")
    // Names change every 13.5 to 15 minutes, and the window after the continuation lasts until
    // each device's have changed in it: its traffic target includes a rotation (issue 15).
    if holdsRotation {
        let rotated = after.rotations.a >= 1 && after.rotations.b >= 1
        targets.check(
            "the window after a continuation holds a DNS-SD name change of each device", rotated,
            "A \(after.rotations.a), B \(after.rotations.b), in \(format(after.seconds, 0)) s")
    }
    for (name, window) in [("before any continuation", before), ("after a continuation", after)] {
        targets.check("A with an activity ≤ 40 B/s, \(name)", window.a <= 40, "\(format(window.a, 1)) B/s")
        targets.check("B without an activity ≤ 10 B/s, \(name)", window.b <= 10, "\(format(window.b, 1)) B/s")
    }
    targets.check("A with an activity ≤ 40 B/s, a clipboard offer out", clipboardOut.a <= 40, "\(format(clipboardOut.a, 1)) B/s")
    targets.check("B with a clipboard offer out ≤ 40 B/s", clipboardOut.b <= 40, "\(format(clipboardOut.b, 1)) B/s")
    print(targets.table)
    return targets
}
