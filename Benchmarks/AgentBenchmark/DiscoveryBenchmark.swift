// The discovery benchmark (Benchmarks/discovery.sh): two handoffd processes in two network
// namespaces on a bridge, paired. It measures, in one run:
//   - discovery latency: from `becameCurrent` on A to B's watcher hearing it, over 100 changes;
//   - the baseline: one multicast datagram from A's namespace to B's, the floor for any
//     discovery on this machine;
//   - discovery after B's interface comes back: A's activity changes while B's link is down;
//     from the link coming up to B listing the new activity;
//   - the bytes a quiet device sends each second (everything on its link: beacons, and
//     whatever the kernel adds), with an activity offered and with none.
// Prints a Markdown table. Needs root (namespaces); says so and stops otherwise.
import Foundation
import HandoffLocalAPI

#if canImport(Glibc)
import Glibc
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

func discoveryBenchmark() async throws {
    guard getuid() == 0, shell(["ip", "netns", "add", "hd\(getpid())probe"]) == 0 else {
        print("The discovery benchmark needs root, to make network namespaces: run it as root.")
        return
    }
    shell(["ip", "netns", "del", "hd\(getpid())probe"])
    let changes = 100
    let outages = 20
    let window = Int(ProcessInfo.processInfo.environment["IDLE_SECONDS"] ?? "120") ?? 120
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let prefix = "hd\(getpid() % 100_000)"
    makeBridgedNamespaces(prefix: prefix, names: ["a", "b"], subnet: "10.79.0") { namespace in
        shell(["ip", "netns", "exec", namespace, "sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"])
    }
    let hosts = ["a", "b"].enumerated().map { index, name in
        Host(name: name, namespace: "\(prefix)\(name)", address: "10.79.0.\(index + 1)", port: 47_170)
    }
    let (a, b) = (hosts[0], hosts[1])
    var processes: [Process] = []
    defer {
        for process in processes where process.isRunning { process.terminate(); process.waitUntilExit() }
        for name in ["a", "b", "br"] { shell(["ip", "netns", "del", "\(prefix)\(name)"]) }
        try? FileManager.default.removeItem(atPath: root)
    }

    // The baseline: one multicast datagram from A to B.
    let receiverOutput = Pipe()
    let receiver = start(b.command([CommandLine.arguments[0], "mcast-recv", "239.255.71.99", "47199", b.address, String(changes)]), output: receiverOutput)
    processes.append(receiver)
    _ = receiverOutput.fileHandleForReading.availableData
    let sender = start(a.command([CommandLine.arguments[0], "mcast-send", "239.255.71.99", "47199", a.address, String(changes)]))
    sender.waitUntilExit()
    let baseline = String(decoding: receiverOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        .split(separator: "\n").compactMap { Double($0) }

    // Two agents with the defaults (links on [::], beacons over IPv4 and IPv6), paired.
    for host in [a, b] {
        processes.append(start(host.command([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name, "--state-dir", host.state, "--socket", host.socket,
            "--interface", "eth0", "--log-level", "error",
        ])))
    }
    await pair(a, b)

    let origin = try LocalClient(path: a.socket, role: .app)
    let heard = HeardActivities()
    let watcher = try LocalClient(path: b.socket, role: .control) { message in
        if case .event(let event) = message, let id = event.activity?.activity.id { heard.record(id) }
    }
    _ = try await watcher.call(.watch)
    func offer() -> UUID {
        let id = UUID()
        try? origin.send(.becameCurrent(LocalActivity(id: id, activityType: activityType, title: "Benchmark", teamIdentifier: team)))
        return id
    }

    var discovery: [Double] = []
    for _ in 0..<changes {
        let start = now()
        let id = offer()
        await waitFor("B to list the activity") { heard.contains(id) }
        discovery.append(milliseconds(heard.time(id)! - start))
        try await Task.sleep(for: .milliseconds(20))
    }

    var afterOutage: [Double] = []
    for _ in 0..<outages {
        shell(["ip", "-n", b.namespace!, "link", "set", "eth0", "down"])
        try await Task.sleep(for: .milliseconds(300))
        let id = offer()
        try await Task.sleep(for: .milliseconds(200))
        let start = now()
        shell(["ip", "-n", b.namespace!, "link", "set", "eth0", "up"])
        await waitFor("B to list the activity after its link came back", seconds: 60) { heard.contains(id) }
        afterOutage.append(milliseconds(heard.time(id)! - start))
        try await Task.sleep(for: .milliseconds(500))
    }

    // Quiet devices: A offers an activity (unchanged), B none; then neither.
    try await Task.sleep(for: .seconds(5))
    var startA = sentBytes(a.namespace!), startB = sentBytes(b.namespace!)
    try await Task.sleep(for: .seconds(window))
    let withActivity = Double(sentBytes(a.namespace!) - startA) / Double(window)
    let quietB = Double(sentBytes(b.namespace!) - startB) / Double(window)
    origin.close()
    try await Task.sleep(for: .seconds(5))
    startA = sentBytes(a.namespace!)
    startB = sentBytes(b.namespace!)
    try await Task.sleep(for: .seconds(window))
    let withoutActivity = (Double(sentBytes(a.namespace!) - startA) + Double(sentBytes(b.namespace!) - startB)) / 2 / Double(window)
    watcher.close()

    func row(_ values: [Double]) -> String {
        "\(String(format: "%.2f", percentile(values, 0.5))) ms | \(String(format: "%.2f", percentile(values, 0.99))) ms"
    }
    print("""
        Discovery benchmark: two network namespaces on one bridge (IPv4 and IPv6 link-local), \(changes) changes, \(outages) link outages, \
        quiet windows of \(window) s. Same run, same machine.

        | measure | p50 | p99 | target |
        | --- | --- | --- | --- |
        | discovery: `becameCurrent` on A to B's watcher hearing it | \(row(discovery)) | p50 ≤ 10 ms, p99 ≤ 50 ms |
        | baseline: one multicast datagram, A to B | \(row(baseline)) | |
        | discovery after B's link comes back: link up to the new activity listed | \(row(afterOutage)) | |
        | a quiet device's traffic, activity offered (A) | \(String(format: "%.1f", withActivity)) B/s | | ≤ 40 B/s |
        | a quiet device's traffic, no activity (B in the first window; A and B in the second) | \(String(format: "%.1f", (quietB + withoutActivity) / 2)) B/s | | ≤ 10 B/s |
        """)
}
