// The flood load (SECURITY.md S3 and S10), run by Benchmarks/flood.sh:
//   - forged beacons: 10^7 random and bit-flipped beacons offered to the beacon opener and
//     replay guard, in process: none may open, and the guard must not change;
//   - floods: two real handoffd processes paired in one account (network namespaces as root,
//     else loopback), and a flooder (this program, `flood-source`, from its own address) that
//     sends A 10^5 beacons a second (random, bit-flipped, replayed and stale, sealed with the
//     account's real key) and opens 10^3 connections a second to A's link port (closed at
//     once, sent garbage, or held open), while B continues A's activity again and again,
//     through a new link after B restarts mid-flood. Measured in the same run without the
//     flood, as the baseline. It checks that every continuation succeeds, that A's memory
//     stays under a fixed bound, and that A logs each flood once;
//   - spoofed sources: 6,000 addresses that are nobody's send A 6,000 beacons a second
//     (Scripts/spoof-flood.py) for SPOOF_SECONDS: A must list B every second of it, and B keep
//     continuing A's activity;
//   - many addresses: 40 addresses hold 16 silent connections each to A's link port,
//     refilled, for MANY_SECONDS, and B restarts in it: its first continuation needs a new
//     link while every slot is wanted.
import Crypto
import BenchmarkReport
import Foundation
import Handoff
import HandoffAgent
import HandoffFuzzing
import HandoffLocalAPI
import HandoffWire
import Synchronization

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

/// The most resident memory A may reach during the flood.
let floodMemoryBoundMB = 256.0

// MARK: Forged beacons (S3)

func forgedBeacons(count: Int) {
    let outcome = ForgedBeacons.run(count: count)
    print("""
        | forged beacons (S3) | offered | opened | replay guard entries after | seconds |
        | --- | --- | --- | --- | --- |
        | random and 1–3 bits flipped | \(outcome.offered) | \(outcome.opened) | \(outcome.guardEntries) | \(String(format: "%.1f", outcome.seconds)) |

        """)
    if outcome.opened != 0 || outcome.guardEntries != 0 { fail("S3 broken: \(outcome.opened) forged beacons opened") }
}

// MARK: The flooder

/// Sends beacons and opens connections at the given rates for `seconds`, from `source`.
func runFloodSource(arguments: [String]) -> Never {
    guard arguments.count == 9, let udpPort = Int(arguments[3]), let tcpPort = Int(arguments[4]), let seconds = Double(arguments[6]),
        let beaconRate = Int(arguments[7]), let connectionRate = Int(arguments[8])
    else { fail("flood-source TARGET SOURCE UDP-PORT TCP-PORT STATE-OF-B SECONDS BEACONS/S CONNECTIONS/S") }
    let target = arguments[1]
    let source = arguments[2]
    // The account's real key and B's id, from B's state: replayed and stale beacons are
    // sealed properly, so that they reach the replay guard.
    let store = try! StateStore(directory: URL(fileURLWithPath: arguments[5]))
    let account = try! store.load(AccountState.self, from: AccountState.fileName)!
    let key = try! account.keys(in: store)[0]
    let b = try! DeviceIdentity.load(from: store)!.id
    @Sendable func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }
    func sealed(sequence: UInt64, age: TimeInterval) -> [UInt8] {
        try! Beacon.seal(BeaconContent(sender: b, sequence: sequence, timestamp: Date().addingTimeInterval(-age), linkPort: 1, activity: nil), with: key)
    }
    let kinds: [[[UInt8]]] = [
        (0..<64).map { _ in randomBytes(Beacon.size) },
        (0..<64).map { index in
            var bytes = sealed(sequence: UInt64(index) + 1, age: 0)
            bytes[Int.random(in: 0..<bytes.count)] ^= 1
            return bytes
        },
        (0..<64).map { index in sealed(sequence: UInt64(index) + 1, age: 0) },
        (0..<64).map { index in sealed(sequence: UInt64.max - UInt64(index), age: 600) },
    ]

    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

    @Sendable func address(_ host: String, _ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return address
    }
    @Sendable func bindSource(_ fd: Int32) {
        var local = address(source, 0)
        _ = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    }
    let deadline = now() + UInt64(seconds * 1e9)
    let counts = FloodCounts()
    let done = DispatchGroup()

    // Several threads for each load: one alone cannot make enough system calls a second, nor
    // wait out enough connection handshakes.
    let beaconThreads = 2
    let connectionThreads = 4
    for _ in 0..<beaconThreads {
        done.enter()
        Thread.detachNewThread {
            defer { done.leave() }
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            bindSource(fd)
            var destination = address(target, udpPort)
            var sent = 0
            let perMillisecond = max(1, beaconRate / 1000 / beaconThreads)
            var tick = now()
            while now() < deadline {
                for index in 0..<perMillisecond {
                    let kind = kinds[(sent + index) % 4]
                    let bytes = kind[(sent / 4 + index) % kind.count]
                    _ = withUnsafePointer(to: &destination) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                    }
                }
                sent += perMillisecond
                tick += 1_000_000
                let current = now()
                if tick > current { usleep(UInt32((tick - current) / 1000)) }
            }
            close(fd)
            counts.value.withLock { $0.beacons += sent }
        }
    }
    for _ in 0..<connectionThreads {
        done.enter()
        Thread.detachNewThread {
            defer { done.leave() }
            var held: [Int32] = []
            var opened = 0
            var refused = 0
            let interval = UInt64(1e9) / UInt64(max(1, connectionRate / connectionThreads))
            var tick = now()
            var destination = address(target, tcpPort)
            while now() < deadline {
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                bindSource(fd)
                var patience = timeval(tv_sec: 0, tv_usec: 200_000)
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &patience, socklen_t(MemoryLayout<timeval>.size))
                let connected = withUnsafePointer(to: &destination) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                if connected == 0 {
                    opened += 1
                    switch opened % 3 {
                    case 0:
                        close(fd)
                    case 1:
                        let garbage = randomBytes(64)
                        _ = send(fd, garbage, garbage.count, Int32(MSG_NOSIGNAL))
                        close(fd)
                    default:
                        held.append(fd)
                        if held.count > 4000 / connectionThreads { close(held.removeFirst()) }
                    }
                } else {
                    refused += 1
                    close(fd)
                }
                tick += interval
                let current = now()
                if tick > current { usleep(UInt32((tick - current) / 1000)) }
            }
            for fd in held { close(fd) }
            counts.value.withLock {
                $0.opened += opened
                $0.refused += refused
            }
        }
    }
    done.wait()
    let result = counts.value.withLock { $0 }
    print("\(result.beacons) \(result.opened) \(result.refused)")
    fflush(nil)
    exit(0)
}

/// Holds `perAddress` silent connections to TARGET:PORT from each of ADDRESSES for SECONDS,
/// opening a new one for each the target closes (the many-address attack on the link cap).
func runConnectionHolder(arguments: [String]) -> Never {
    guard arguments.count == 6, let port = Int(arguments[2]), let perAddress = Int(arguments[4]), let seconds = Double(arguments[5]) else {
        fail("hold-connections TARGET PORT ADDRESS,ADDRESS,... PER-ADDRESS SECONDS")
    }
    let target = arguments[1]
    let addresses = arguments[3].split(separator: ",").map(String.init)
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    func open(from source: String) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = local
        remote.sin_addr.s_addr = inet_addr(target)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        _ = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        _ = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        return fd
    }
    var held: [(source: String, fd: Int32)] = addresses.flatMap { source in (0..<perAddress).map { _ in (source, open(from: source)) } }
    var opened = held.count
    let deadline = now() + UInt64(seconds * 1e9)
    var scratch = [UInt8](repeating: 0, count: 256)
    while now() < deadline {
        usleep(50_000)
        for index in held.indices {
            var probe = pollfd(fd: held[index].fd, events: Int16(POLLIN), revents: 0)
            guard poll(&probe, 1, 0) > 0 else { continue }
            // Readable with nothing to read, or an error: the target closed it. Refill.
            let count = recv(held[index].fd, &scratch, scratch.count, Int32(MSG_DONTWAIT))
            if count <= 0 && !(count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                close(held[index].fd)
                held[index].fd = open(from: held[index].source)
                opened += 1
            }
        }
    }
    for entry in held { close(entry.fd) }
    print("\(opened)")
    fflush(nil)
    exit(0)
}

final class FloodCounts: Sendable {
    let value = Mutex((beacons: 0, opened: 0, refused: 0))
}

final class PeakMemory: Sendable {
    let value = Mutex(0)
}

// MARK: The orchestrator

func floodBenchmark() async throws {
    let seconds = Double(ProcessInfo.processInfo.environment["FLOOD_SECONDS"] ?? "40") ?? 40
    let beaconRate = Int(ProcessInfo.processInfo.environment["FLOOD_BEACONS"] ?? "100000") ?? 100_000
    let connectionRate = Int(ProcessInfo.processInfo.environment["FLOOD_CONNECTIONS"] ?? "1000") ?? 1000
    forgedBeacons(count: Int(ProcessInfo.processInfo.environment["FORGED_BEACONS"] ?? "10000000") ?? 10_000_000)

    let useNamespaces = getuid() == 0 && shell(["ip", "netns", "add", "hf\(getpid())probe"]) == 0
    if useNamespaces { shell(["ip", "netns", "del", "hf\(getpid())probe"]) }
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let prefix = "hf\(getpid() % 100_000)"
    undoOnFailure.withLock { $0 = prefix }
    let a: Host
    let b: Host
    let flooder: (namespace: String?, address: String)
    if useNamespaces {
        makeBridgedNamespaces(prefix: prefix, names: ["a", "b", "f"], subnet: "10.79.0")
        a = Host(name: "a", namespace: "\(prefix)a", address: "10.79.0.1", port: 47_170)
        b = Host(name: "b", namespace: "\(prefix)b", address: "10.79.0.2", port: 47_170)
        flooder = ("\(prefix)f", "10.79.0.3")
    } else {
        let base = Int.random(in: 20_000..<40_000)
        a = Host(name: "a", namespace: nil, address: "127.0.0.1", port: base)
        b = Host(name: "b", namespace: nil, address: "127.0.0.1", port: base + 2)
        flooder = (nil, "127.0.0.2")
    }
    let interface = useNamespaces ? "eth0" : "lo"
    let discoveryPort = String(Int.random(in: 20_000..<40_000))
    var processes: [ChildProcess] = []
    var agentB: ChildProcess?
    defer {
        for process in processes + [agentB].compactMap({ $0 }) { stop(process) }
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap(Int32.init) {
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root) { kill(pid, SIGTERM) }
        }
        if useNamespaces {
            for name in ["a", "b", "f", "br"] { shell(["ip", "netns", "del", "\(prefix)\(name)"]) }
        }
        if ProcessInfo.processInfo.environment["FLOOD_KEEP"] == nil { try? FileManager.default.removeItem(atPath: root) }
    }

    func startAgent(_ host: Host) throws -> ChildProcess {
        let log = "\(root)/\(host.name).log"
        if !FileManager.default.fileExists(atPath: log) { _ = FileManager.default.createFile(atPath: log, contents: nil) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        handle.seekToEndOfFile()
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = host.command([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name == "a" ? "origin" : "receiver", "--state-dir", host.state,
            "--socket", host.socket, "--listen", "\(host.address):\(host.port)", "--interface", interface, "--discovery-port", discoveryPort,
            "--development-mode", "on", "--log-level", "notice", "--notifications", "off",
        ])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = handle
        try process.run()
        return process
    }
    let agentA = try startAgent(a)
    processes.append(agentA)
    agentB = try startAgent(b)
    await pair(a, b)
    let app = try appFolder("Receiver", bundle: bundleIdentifier, activityType: activityType)
    _ = await call(b, .installApp(directory: app))
    let counter = LockedCounter()
    let origin = try originApp(socket: a.socket, counter: counter)
    let activityID = UUID()
    try origin.send(.becameCurrent(ActivityAnnouncement(id: activityID, activityType: activityType, title: "Flood", teamIdentifier: team)))
    await waitFor("B to list the activity") { (await call(b, .nearby).activities ?? []).contains { $0.activity.id == activityID } }

    func restoredAt(_ iteration: Int) -> UInt64? { restoredTime(of: iteration, on: b) }
    /// Continues A's activity on B `count` times; the latencies, and the failures with their reasons.
    func continueRepeatedly(_ count: Int, until end: UInt64? = nil) async -> (latencies: [Double], failures: [String]) {
        var latencies: [Double] = []
        var failures: [String] = []
        guard let control = try? LocalClient(path: b.socket, role: .control) else { return ([], ["B's socket cannot be reached"]) }
        defer { control.close() }
        var round = 0
        while end.map({ now() < $0 }) ?? (round < count) {
            round += 1
            let iteration = counter.peek()
            let start = now()
            do {
                let reply = try await control.call(.continue(activity: activityID))
                if let error = reply.error {
                    failures.append("\(error)")
                    continue
                }
            } catch {
                failures.append("\(error)")
                continue
            }
            let patience = now() + 10_000_000_000
            while restoredAt(iteration) == nil && now() < patience { try? await Task.sleep(for: .milliseconds(2)) }
            guard let at = restoredAt(iteration) else {
                failures.append("the app did not restore within 10 s")
                continue
            }
            latencies.append(milliseconds(at - start))
            try? await Task.sleep(for: .milliseconds(50))
        }
        return (latencies, failures)
    }

    // The baseline: the same continuations without a flood.
    let baseline = await continueRepeatedly(40)
    let baselineMemory = usage(agentA.processIdentifier).rssKB

    // The flood, from the flooder's own address.
    let output = Pipe()
    let source = start(
        (flooder.namespace.map { ["ip", "netns", "exec", $0] } ?? []) + [
            CommandLine.arguments[0], "flood-source", a.address, flooder.address, String(a.port), String(a.port), b.state, String(seconds),
            String(beaconRate), String(connectionRate),
        ], output: output)
    processes.append(source)
    let floodStart = now()
    let peak = PeakMemory()
    let sampler = Task {
        while !Task.isCancelled {
            let rss = usage(agentA.processIdentifier).rssKB
            peak.value.withLock { $0 = max($0, rss) }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
    let floodEnd = floodStart + UInt64(seconds * 1e9)
    // Continuations over the existing link for the first third of the flood...
    try await Task.sleep(for: .seconds(2))
    let during = await continueRepeatedly(0, until: floodStart + UInt64(seconds / 3 * 1e9))
    // ...then B restarts, so that its next continuation needs a new link to A, handshake and
    // all, while A is flooded.
    agentB?.terminate()
    agentB?.waitUntilExit()
    try? FileManager.default.removeItem(atPath: b.socket)
    agentB = try startAgent(b)
    await waitFor("B to restart") { FileManager.default.fileExists(atPath: b.socket) }
    let relisted = now()
    await waitFor("B to list A's activity again, during the flood", seconds: 30) {
        (await call(b, .nearby).activities ?? []).contains { $0.activity.id == activityID }
    }
    let relistSeconds = Double(now() - relisted) / 1e9
    let afterRestart = await continueRepeatedly(0, until: floodEnd - 2_000_000_000)
    let counts = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        .split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    source.waitUntilExit()
    sampler.cancel()
    let peakMB = Double(peak.value.withLock { $0 }) / 1024
    // The flood's end is logged after 10 quiet seconds.
    try await Task.sleep(for: .seconds(14))
    let after = await continueRepeatedly(20)

    let log = (try? String(contentsOfFile: "\(root)/a.log", encoding: .utf8)) ?? ""
    let beaconFloodLines = log.split(separator: "\n").filter { $0.contains("a flood of beacons") }.count
    let connectionFloodLines = log.split(separator: "\n").filter { $0.contains("a flood of link connections") }.count
    let endLines = log.split(separator: "\n").filter { $0.contains("stopped:") }
    let floodSeconds = seconds
    let sentBeacons = counts.first ?? 0
    let openedConnections = counts.count > 1 ? counts[1] : 0
    func row(_ name: String, _ result: (latencies: [Double], failures: [String])) -> String {
        let p50 = result.latencies.isEmpty ? "-" : String(format: "%.2f ms", percentile(result.latencies, 0.5))
        let p99 = result.latencies.isEmpty ? "-" : String(format: "%.2f ms", percentile(result.latencies, 0.99))
        return "| \(name) | \(result.latencies.count) | \(result.failures.count) | \(p50) | \(p99) |"
    }
    print("""
        Machine: \(machineDescription()). Release build, static Swift runtime. One run: what it checks holds or fails in \
        every run, and its latencies are of this run alone (their spread between runs is not measured here).
        Flood: \(useNamespaces ? "three network namespaces on one bridge (A, B, the flooder)" : "loopback, the flooder from 127.0.0.2"). \
        The flooder sent \(sentBeacons) beacons (\(Int(Double(sentBeacons) / floodSeconds))/s: random, bit-flipped, replayed, stale) to A's \
        unicast beacon port and opened \(openedConnections) connections (\(Int(Double(openedConnections) / floodSeconds))/s: closed at once, \
        garbage, held open; \(counts.count > 2 ? counts[2] : 0) more did not connect) to A's link port, for \(Int(floodSeconds)) s.

        | continuations of A's activity on B | succeeded | failed | p50 | p99 |
        | --- | --- | --- | --- | --- |
        \(row("baseline, no flood", baseline))
        \(row("during the flood, over the existing link", during))
        \(row("during the flood, B restarted: a new link to A", afterRestart))
        \(row("after the flood", after))

        | A under the flood | measured | bound |
        | --- | --- | --- |
        | resident memory before the flood | \(String(format: "%.1f", Double(baselineMemory) / 1024)) MB | |
        | peak resident memory during the flood | \(String(format: "%.1f", peakMB)) MB | < \(Int(floodMemoryBoundMB)) MB |
        | log lines announcing a beacon flood | \(beaconFloodLines) | 1 |
        | log lines announcing a connection flood | \(connectionFloodLines) | 1 |
        | log lines saying a flood stopped | \(endLines.count) | 2 |
        | B, restarted mid-flood, lists A's activity after | \(String(format: "%.1f", relistSeconds)) s | |
        """)
    for line in endLines { print("    \(line)") }
    var problems: [String] = []

    // Spoofed sources (S10): 6,000 addresses that are nobody's, 6,000 beacons a second to A's
    // beacon port, for SPOOF_SECONDS (120 by default). A must keep listing B, and B keep
    // continuing A's activity, throughout.
    let spoofSeconds = Double(ProcessInfo.processInfo.environment["SPOOF_SECONDS"] ?? "120") ?? 120
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Scripts/spoof-flood.py").standardizedFileURL.path
    if useNamespaces {
        // A cannot route answers back to the spoofed addresses; it must not drop them for that.
        shell(["ip", "netns", "exec", "\(prefix)a", "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0"])
    }
    let spoofOutput = Pipe()
    let spoofer = start(
        (flooder.namespace.map { ["ip", "netns", "exec", $0] } ?? []) + [
            "python3", script, a.address, String(a.port), "6000", "6000", String(spoofSeconds), String(Beacon.size),
            useNamespaces ? "10.80" : "127.1", useNamespaces ? "eth0" : "lo",
        ], output: spoofOutput)
    processes.append(spoofer)
    let spoofEnd = now() + UInt64(spoofSeconds * 1e9)
    let bID = try DeviceIdentity.load(from: StateStore(directory: URL(fileURLWithPath: b.state)))!.id
    let unlisted = Task {
        var missing = 0
        while now() < spoofEnd {
            let devices = await call(a, .devices).devices ?? []
            if !devices.contains(where: { $0.id == bID && $0.isNearby }) { missing += 1 }
            try? await Task.sleep(for: .seconds(1))
        }
        return missing
    }
    let spoofed = await continueRepeatedly(0, until: spoofEnd)
    let unlistedSeconds = await unlisted.value
    let spoofSent = String(decoding: spoofOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    spoofer.waitUntilExit()
    print("""

        Spoofed sources: \(spoofSent.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "SENT ", with: "")) beacons from 6,000 \
        addresses that are nobody's (\(useNamespaces ? "10.80.0.0/16, sent with IP_TRANSPARENT" : "127.1.0.0/16")) at 6,000/s for \(Int(spoofSeconds)) s.

        | continuations of A's activity on B | succeeded | failed | p50 | p99 |
        | --- | --- | --- | --- | --- |
        \(row("quiet (the baseline above)", baseline))
        \(row("during the spoofed-source flood", spoofed))

        | under the spoofed-source flood | measured | bound |
        | --- | --- | --- |
        | seconds A did not list B as nearby (asked every second) | \(unlistedSeconds) | 0 |
        """)
    fflush(nil)

    // Many addresses (S10): 40 addresses hold 16 silent connections each to A's link port,
    // opening a new one for each A closes, for MANY_SECONDS (30 by default); B restarts in the
    // middle, so that its link to A is made anew while every slot is wanted.
    let manySeconds = Double(ProcessInfo.processInfo.environment["MANY_SECONDS"] ?? "30") ?? 30
    let manyAddresses = (100..<140).map { useNamespaces ? "10.79.0.\($0)" : "127.0.0.\($0)" }
    if let namespace = flooder.namespace {
        for address in manyAddresses { shell(["ip", "-n", namespace, "addr", "add", "\(address)/24", "dev", "eth0"]) }
    }
    let holderOutput = Pipe()
    let holder = start(
        (flooder.namespace.map { ["ip", "netns", "exec", $0] } ?? []) + [
            CommandLine.arguments[0], "hold-connections", a.address, String(a.port), manyAddresses.joined(separator: ","), "16", String(manySeconds),
        ], output: holderOutput)
    processes.append(holder)
    let manyEnd = now() + UInt64(manySeconds * 1e9)
    try await Task.sleep(for: .seconds(3))
    let heldBefore = await continueRepeatedly(0, until: now() + UInt64(manySeconds / 3 * 1e9))
    agentB?.terminate()
    agentB?.waitUntilExit()
    try? FileManager.default.removeItem(atPath: b.socket)
    agentB = try startAgent(b)
    await waitFor("B to restart") { FileManager.default.fileExists(atPath: b.socket) }
    let restartedAt = now()
    await waitFor("B to list A's activity again, while the link slots are held", seconds: 30) {
        (await call(b, .nearby).activities ?? []).contains { $0.activity.id == activityID }
    }
    // B's first continuation after the restart needs a new link to A.
    let firstAfterRestart = await continueRepeatedly(1)
    let firstSeconds = Double(now() - restartedAt) / 1e9
    let heldAfter = await continueRepeatedly(0, until: manyEnd - 1_000_000_000)
    let reopened = String(decoding: holderOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    holder.waitUntilExit()
    print("""

        Many addresses: 40 addresses held 16 silent connections each to A's link port for \(Int(manySeconds)) s (\(reopened) opened in all, \
        a new one for each A closed), and B restarted in the middle.

        | continuations of A's activity on B | succeeded | failed | p50 | p99 |
        | --- | --- | --- | --- | --- |
        \(row("quiet (the baseline above)", baseline))
        \(row("during the many-address flood, over the existing link", heldBefore))
        \(row("B restarted in it: the first, over a new link", firstAfterRestart))
        \(row("B restarted in it: the rest", heldAfter))

        | B restarted in the many-address flood | measured |
        | --- | --- |
        | from the restart to its first continuation's end | \(String(format: "%.1f", firstSeconds)) s |
        """)
    for (name, result) in [("during the spoofed-source flood", spoofed), ("in the many-address flood", heldBefore), ("first after B's restart in the many-address flood", firstAfterRestart), ("after B's restart in the many-address flood", heldAfter)] {
        if !result.failures.isEmpty { problems.append("continuations \(name) failed: \(Set(result.failures).joined(separator: "; "))") }
        if result.latencies.isEmpty { problems.append("no continuation \(name) completed") }
    }
    if unlistedSeconds > 0 { problems.append("A did not list B for \(unlistedSeconds) s of the spoofed-source flood") }
    origin.close()
    for (name, result) in [("during", during), ("after the restart", afterRestart), ("after", after), ("baseline", baseline)] {
        if !result.failures.isEmpty { problems.append("continuations \(name) failed: \(Set(result.failures).joined(separator: "; "))") }
        if result.latencies.isEmpty { problems.append("no continuation \(name) completed") }
    }
    if peakMB >= floodMemoryBoundMB { problems.append("A's memory reached \(peakMB) MB") }
    if beaconFloodLines != 1 || connectionFloodLines != 1 { problems.append("A logged the floods \(beaconFloodLines) and \(connectionFloodLines) times") }
    if endLines.count != 2 { problems.append("A logged \(endLines.count) floods stopping, not 2") }
    if sentBeacons < Int(Double(beaconRate) * floodSeconds * 0.8) { problems.append("the flooder sent only \(sentBeacons) beacons") }
    if !problems.isEmpty { fail("S10 broken: " + problems.joined(separator: "; ")) }
}
