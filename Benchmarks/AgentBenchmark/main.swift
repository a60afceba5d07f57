// The agent's benchmark: two real handoffd processes, in two network namespaces when run as
// root (else on loopback), paired into one account. It measures, in one run:
//   - continue latency: from `continue` on B to the receiving app (this program, installed on
//     B and started by B's agent) holding the restored activity, with a 3 KB userInfo saved by
//     the origin app on A at that moment;
//   - the baseline: a bare TLS 1.3 connect (both certificates, pinned) plus one 3 KB request
//     and response between the same two hosts;
//   - discovery latency: from `becameCurrent` on A to the activity listed on B;
//   - the idle agent's resident memory and CPU.
// Prints a Markdown table. Run it with Benchmarks/agent.sh (a release build).
//
// The same executable is also the receiving app (`receiver`) and the two ends of the TLS
// baseline (`tls-server`, `tls-client`), run inside the namespaces.
import Foundation
import Handoff
import HandoffAgent
import HandoffApp
import HandoffLocalAPI
import HandoffWire
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, whatever its
/// network namespace.
func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func milliseconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e6 }

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("AgentBenchmark: \(message)\n".utf8))
    exit(1)
}

/// A userInfo of about 3 KB, like the seeds' examples (the same shape as the userInfo benchmark's).
func typicalUserInfo(iteration: Int) -> [AnyHashable: Any] {
    var recent: [Any] = []
    for i in 0..<12 {
        recent.append([
            "id": 10_000 + i, "name": "Store number \(i) on Market Street", "latitude": 37.7749 + Double(i) / 1000,
            "longitude": -122.4194 - Double(i) / 1000, "favorite": i % 3 == 0, "tags": ["retail", "open-late", "parking"],
        ] as [String: Any])
    }
    return [
        "iteration": iteration, "region.center.latitude": 37.7749, "region.center.longitude": -122.4194,
        "document": "Quarterly plan.shapes", "selection": [3, 5, 8, 13, 21],
        "draft": String(repeating: "Continue where you left off. ", count: 44), "recent": recent,
        "settings": ["zoom": 1.25, "grid": true, "units": "mm"] as [String: Any],
    ]
}

let bundleIdentifier = "com.example.bench.Receiver"
let activityType = "com.example.bench.activity"
let team = "BENCHTEAM"

// MARK: The receiving app

@MainActor
final class Restorer: Responder {
    let log: FileHandle
    init(log: FileHandle) {
        self.log = log
        super.init()
    }

    override func restoreUserActivityState(_ activity: UserActivity) {
        let iteration = activity.userInfo?["iteration"] as? Int ?? -1
        log.write(Data("\(iteration) \(now())\n".utf8))
    }
}

@MainActor
final class ReceiverDelegate: ApplicationDelegate {
    let restorer: Restorer
    init(restorer: Restorer) { self.restorer = restorer }

    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        restorationHandler([restorer])
        return true
    }
}

func runReceiver() -> Never {
    let folder = ProcessInfo.processInfo.environment["HANDOFF_APP_DATA"] ?? "/tmp"
    let path = folder + "/restored.log"
    // Appended to, never replaced: a second instance of the app (one started while the first
    // was reconnecting to a restarted agent) writes to the same log.
    let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
    guard fd >= 0 else { fail("cannot write \(path)") }
    let log = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    MainActor.assumeIsolated {
        let delegate = ReceiverDelegate(restorer: Restorer(log: log))
        _ = Application(delegate: delegate)
    }
    dispatchMain()
}

// MARK: The TLS baseline

func identities(_ folder: String) throws -> (server: DeviceIdentity, client: DeviceIdentity) {
    let serverStore = try StateStore(directory: URL(fileURLWithPath: folder + "/server"))
    let clientStore = try StateStore(directory: URL(fileURLWithPath: folder + "/client"))
    // The account key both hold, as members do (their links prove membership with it).
    let keyFile = URL(fileURLWithPath: folder + "/account-key")
    if !FileManager.default.fileExists(atPath: keyFile.path) {
        try Data((0..<32).map { _ in UInt8.random(in: 0...255) }).write(to: keyFile, options: .atomic)
    }
    let key = try [UInt8](Data(contentsOf: keyFile))
    func member(_ identity: DeviceIdentity) -> DeviceIdentity {
        identity.links.useAccountKeys([key])
        return identity
    }
    if let server = try DeviceIdentity.load(from: serverStore), let client = try DeviceIdentity.load(from: clientStore) {
        return (member(server), member(client))
    }
    let server = try DeviceIdentity.generate(name: "server")
    let client = try DeviceIdentity.generate(name: "client")
    try server.save(to: serverStore)
    try client.save(to: clientStore)
    return (member(server), member(client))
}

/// An echo server: each request frame comes back as the answer.
func runTLSServer(folder: String, host: String, port: Int) async throws -> Never {
    let (server, client) = try identities(folder)
    let pins: Set<String> = [server.fingerprint, client.fingerprint]
    let listener = try await LinkListener(identity: server, pins: { pins }, host: host, port: port) { frame in frame }
    print("listening \(listener.port)")
    fflush(nil)
    while true { try await Task.sleep(for: .seconds(3600)) }
}

/// Connects anew, sends 3 KB, reads the 3 KB answer, closes: `count` times. Prints the
/// latencies in milliseconds, one per line.
func runTLSClient(folder: String, host: String, port: Int, count: Int) async throws {
    let (server, client) = try identities(folder)
    let pins: Set<String> = [server.fingerprint, client.fingerprint]
    let request = Frame(kind: 0x10, payload: [UInt8](repeating: 0x41, count: 3 * 1024))
    var latencies: [Double] = []
    for _ in 0..<(count + 5) {
        let start = now()
        let answer = try await LinkClient.exchange(request, host: host, port: port, identity: client, pins: { pins })
        guard answer.payload.count == request.payload.count else { fail("the TLS echo answered \(answer.payload.count) bytes") }
        latencies.append(milliseconds(now() - start))
    }
    for latency in latencies.dropFirst(5) { print(latency) }
}

// MARK: The orchestrator

let binaries = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
let root = "/tmp/hb-\(getpid())"

struct Host {
    let name: String
    let namespace: String?
    let address: String
    let port: Int
    var socket: String { "\(root)/\(name).sock" }
    var state: String { "\(root)/\(name)" }

    func command(_ arguments: [String]) -> [String] {
        namespace.map { ["ip", "netns", "exec", $0] + arguments } ?? arguments
    }
}

@discardableResult
func shell(_ arguments: [String]) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try? process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

func start(_ arguments: [String], output: Pipe? = nil) -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = output ?? FileHandle.nullDevice
    process.standardError = FileHandle.standardError
    do { try process.run() } catch { fail("cannot run \(arguments.joined(separator: " ")): \(error)") }
    return process
}

func call(_ host: Host, _ request: LocalCall) async -> LocalReply {
    do {
        let client = try LocalClient(path: host.socket, role: .control)
        defer { client.close() }
        let reply = try await client.call(request)
        if let error = reply.error { fail("\(host.name): \(error)") }
        return reply
    } catch {
        fail("\(host.name): \(error)")
    }
}

func waitFor(_ what: String, seconds: Double = 20, _ condition: () async -> Bool) async {
    let deadline = now() + UInt64(seconds * 1e9)
    while now() < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(10))
    }
    fail("timed out waiting for \(what)")
}

/// Waits for both agents, puts them in one account with a token, and waits until they hear each other.
func pair(_ a: Host, _ b: Host) async {
    await waitFor("the agents to start") { FileManager.default.fileExists(atPath: a.socket) && FileManager.default.fileExists(atPath: b.socket) }
    _ = await call(a, .createAccount(name: "bench"))
    let code = await call(a, .invite(token: true, host: a.address, lifetime: 60)).invitation!.code
    _ = await call(b, .join(code: code))
    _ = await call(b, .awaitJoinResult)
    await waitFor("the devices to hear each other") { (await call(b, .devices).devices ?? []).contains { $0.isNearby && !$0.isThisDevice } }
}

/// When the receiving app on `host` restored the activity saved as `iteration` (its log).
func restoredTime(of iteration: Int, on host: Host) -> UInt64? {
    let text = (try? String(contentsOfFile: "\(host.state)/data/\(bundleIdentifier)/restored.log", encoding: .utf8)) ?? ""
    for line in text.split(separator: "\n").reversed() {
        let parts = line.split(separator: " ")
        if parts.count == 2, Int(parts[0]) == iteration { return UInt64(parts[1]) }
    }
    return nil
}

/// Network namespaces `prefix` + each name, each with `eth0` at `subnet`.1, .2, … on one bridge
/// (in namespace `prefix`br, multicast snooping off), and `lo` up.
func makeBridgedNamespaces(prefix: String, names: [String], subnet: String, setUp: (String) -> Void = { _ in }) {
    shell(["ip", "netns", "add", "\(prefix)br"])
    shell(["ip", "-n", "\(prefix)br", "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])
    shell(["ip", "-n", "\(prefix)br", "link", "set", "br0", "up"])
    for (index, name) in names.enumerated() {
        let namespace = "\(prefix)\(name)"
        shell(["ip", "netns", "add", namespace])
        setUp(namespace)
        shell(["ip", "-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", "p\(name)", "netns", "\(prefix)br"])
        shell(["ip", "-n", namespace, "addr", "add", "\(subnet).\(index + 1)/24", "dev", "eth0"])
        shell(["ip", "-n", namespace, "link", "set", "eth0", "up"])
        shell(["ip", "-n", namespace, "link", "set", "lo", "up"])
        shell(["ip", "-n", "\(prefix)br", "link", "set", "p\(name)", "master", "br0", "up"])
    }
}

/// Resident memory (kB) and CPU time (clock ticks) of a process, from /proc.
func usage(_ pid: Int32) -> (rssKB: Int, ticks: Int) {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true)[1]) } ?? 0
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
    let ticks = fields.count > 13 ? (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0) : 0
    return (rss, ticks)
}

func orchestrate() async throws {
    let iterations = Int(ProcessInfo.processInfo.environment["ITERATIONS"] ?? "200") ?? 200
    let discoveryChanges = 100
    let useNamespaces = getuid() == 0 && shell(["ip", "netns", "add", "hb\(getpid())probe"]) == 0
    if useNamespaces { shell(["ip", "netns", "del", "hb\(getpid())probe"]) }
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)

    let prefix = "hb\(getpid() % 100_000)"
    let a: Host
    let b: Host
    if useNamespaces {
        makeBridgedNamespaces(prefix: prefix, names: ["a", "b"], subnet: "10.78.0")
        a = Host(name: "a", namespace: "\(prefix)a", address: "10.78.0.1", port: 47_170)
        b = Host(name: "b", namespace: "\(prefix)b", address: "10.78.0.2", port: 47_170)
    } else {
        let base = Int.random(in: 20_000..<40_000)
        a = Host(name: "a", namespace: nil, address: "127.0.0.1", port: base)
        b = Host(name: "b", namespace: nil, address: "127.0.0.1", port: base + 2)
    }
    let interface = useNamespaces ? "eth0" : "lo"
    let discoveryPort = String(Int.random(in: 20_000..<40_000))
    var processes: [Process] = []
    defer {
        for process in processes where process.isRunning { process.terminate(); process.waitUntilExit() }
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap(Int32.init) {
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root) { kill(pid, SIGTERM) }
        }
        if useNamespaces {
            for name in ["a", "b", "br"] { shell(["ip", "netns", "del", "\(prefix)\(name)"]) }
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    // Two agents, paired.
    for host in [a, b] {
        processes.append(start(host.command([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name == "a" ? "origin" : "receiver", "--state-dir", host.state,
            "--socket", host.socket, "--listen", "\(host.address):\(host.port)", "--interface", interface, "--discovery-port", discoveryPort,
            "--development-mode", "on", "--log-level", "error",
        ])))
    }
    await pair(a, b)

    // The receiving app: this very program, installed on B.
    let app = try appFolder("Receiver", bundle: bundleIdentifier, activityType: activityType)
    _ = await call(b, .installApp(directory: app))

    // The origin app on A: it answers every save with a fresh 3 KB userInfo.
    let counter = LockedCounter()
    let origin = try originApp(socket: a.socket, counter: counter)
    let payload = try UserInfoCoding.encode(typicalUserInfo(iteration: 0)).count

    // Discovery latency: becameCurrent on A until B's watcher hears it.
    let heard = HeardActivities()
    let watcher = try LocalClient(path: b.socket, role: .control) { message in
        if case .event(let event) = message, let id = event.activity?.activity.id { heard.record(id) }
    }
    _ = try await watcher.call(.watch)
    var discovery: [Double] = []
    var activityID = UUID()
    for _ in 0..<discoveryChanges {
        activityID = UUID()
        let start = now()
        try origin.send(.becameCurrent(LocalActivity(id: activityID, activityType: activityType, title: "Benchmark", teamIdentifier: team)))
        await waitFor("B to list the activity") { heard.contains(activityID) }
        discovery.append(milliseconds(heard.time(activityID)! - start))
        try await Task.sleep(for: .milliseconds(20))
    }
    watcher.close()

    // Continue latency, through the receiving app started by B's agent.
    func restoredAt(_ iteration: Int) -> UInt64? { restoredTime(of: iteration, on: b) }
    let control = try LocalClient(path: b.socket, role: .control)
    var continues: [Double] = []
    for round in 0..<(iterations + 5) {
        let iteration = counter.peek()
        let start = now()
        let reply = try await control.call(.continue(activity: activityID))
        if let error = reply.error { fail("continue: \(error)") }
        await waitFor("the receiving app to restore") { restoredAt(iteration) != nil }
        if round >= 5 { continues.append(milliseconds(restoredAt(iteration)! - start)) }
    }
    control.close()

    // The baseline: a bare TLS 1.3 exchange between the same two hosts.
    let baselineFolder = "\(root)/tls"
    _ = try identities(baselineFolder)
    let tlsPort = a.port + 100
    let serverOutput = Pipe()
    processes.append(start(a.command([CommandLine.arguments[0], "tls-server", baselineFolder, a.address, String(tlsPort)]), output: serverOutput))
    _ = serverOutput.fileHandleForReading.availableData
    let clientOutput = Pipe()
    let client = start(b.command([CommandLine.arguments[0], "tls-client", baselineFolder, a.address, String(tlsPort), String(iterations)]), output: clientOutput)
    let baselineText = String(decoding: clientOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    client.waitUntilExit()
    let baseline = baselineText.split(separator: "\n").compactMap { Double($0) }
    guard baseline.count == iterations else { fail("the TLS baseline measured \(baseline.count) of \(iterations)") }

    // The idle agent (A, with no activity offered): memory, and CPU over 10 seconds; then its
    // memory once it has been idle long enough (15 s) to give back free heap and code pages.
    try origin.send(.invalidated(activity: activityID))
    origin.close()
    let idleSince = now()
    try await Task.sleep(for: .seconds(2))
    let pid = processes[0].processIdentifier
    let before = usage(pid)
    try await Task.sleep(for: .seconds(10))
    let after = usage(pid)
    let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    let cpuPercent = Double(after.ticks - before.ticks) / ticksPerSecond / 10 * 100
    try await Task.sleep(for: .milliseconds(Int(22_000 - milliseconds(now() - idleSince))))
    let released = usage(pid)

    // What giving memory back costs: the first continuation afterwards, both agents having
    // given back their code pages.
    let returning = try originApp(socket: a.socket, counter: counter)
    let lastActivity = UUID()
    try returning.send(.becameCurrent(LocalActivity(id: lastActivity, activityType: activityType, title: "Benchmark", teamIdentifier: team)))
    await waitFor("B to list the activity again") { (await call(b, .nearby).activities ?? []).contains { $0.activity.id == lastActivity } }
    let afterRelease = try LocalClient(path: b.socket, role: .control)
    let iteration = counter.peek()
    let firstStart = now()
    if let error = try await afterRelease.call(.continue(activity: lastActivity)).error { fail("continue after the idle release: \(error)") }
    await waitFor("the receiving app to restore") { restoredAt(iteration) != nil }
    let firstAfterRelease = milliseconds(restoredAt(iteration)! - firstStart)
    afterRelease.close()
    returning.close()

    let p50 = percentile(continues, 0.5)
    let base50 = percentile(baseline, 0.5)
    print("""
        Agent benchmark: \(useNamespaces ? "two network namespaces on one bridge" : "loopback (not root: no namespaces)"), \(iterations) continuations, \
        userInfo \(payload) bytes, \(discoveryChanges) discovery changes. Same run, same machine.

        | measure | p50 | p99 | target |
        | --- | --- | --- | --- |
        | continue: `continue` on B to the app on B holding the restored activity | \(String(format: "%.2f", p50)) ms | \(String(format: "%.2f", percentile(continues, 0.99))) ms | p50 ≤ 5 ms and ≤ 3x baseline |
        | baseline: TLS 1.3 connect + 3 KB request and response, A to B | \(String(format: "%.2f", base50)) ms | \(String(format: "%.2f", percentile(baseline, 0.99))) ms | |
        | continue p50 / baseline p50 | \(String(format: "%.2fx", p50 / base50)) | | ≤ 3x |
        | discovery: `becameCurrent` on A to listed on B | \(String(format: "%.2f", percentile(discovery, 0.5))) ms | \(String(format: "%.2f", percentile(discovery, 0.99))) ms | p50 ≤ 10 ms |
        | continue, the first after both agents gave memory back | \(String(format: "%.2f", firstAfterRelease)) ms | | |
        | idle agent, resident memory, 12 s after the last continuation | \(String(format: "%.1f", Double(after.rssKB) / 1024)) MB | | |
        | idle agent, resident memory, 22 s after (given back at 15 s idle) | \(String(format: "%.1f", Double(released.rssKB) / 1024)) MB | | < 25 MB |
        | idle agent, CPU over 10 s | \(String(format: "%.2f", cpuPercent)) % of a core | | < 1 % |
        """)
}

/// An app folder holding this very program, with a manifest of `bundle` declaring `activityType`.
func appFolder(_ name: String, bundle: String, activityType: String) throws -> String {
    let app = "\(root)/\(name).app"
    try FileManager.default.createDirectory(atPath: app, withIntermediateDirectories: true)
    try """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict>
        <key>CFBundleIdentifier</key><string>\(bundle)</string>
        <key>CFBundleExecutable</key><string>AgentBenchmark</string>
        <key>NSUserActivityTypes</key><array><string>\(activityType)</string></array>
        </dict></plist>
        """.write(toFile: app + "/Info.plist", atomically: true, encoding: .utf8)
    try """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict><key>com.apple.developer.team-identifier</key><string>\(team)</string></dict></plist>
        """.write(toFile: app + "/\(name).entitlements", atomically: true, encoding: .utf8)
    try FileManager.default.copyItem(atPath: CommandLine.arguments[0], toPath: app + "/AgentBenchmark")
    return app
}

/// The origin app: it answers every save with a fresh 3 KB userInfo, numbered by `counter`.
func originApp(socket: String, counter: LockedCounter) throws -> LocalClient {
    let box = OriginBox()
    let client = try LocalClient(path: socket, role: .app) { message in
        guard case .save(let request, let id) = message, let client = box.client else { return }
        let userInfo = try? UserInfoCoding.encode(typicalUserInfo(iteration: counter.next()))
        let record = LocalRecord(activity: LocalActivity(id: id, activityType: activityType, title: "Benchmark", teamIdentifier: team), userInfo: userInfo)
        try? client.send(.saved(request: request, record))
    }
    box.client = client
    return client
}

/// The origin's client, for its own message handler to answer with.
final class OriginBox: Sendable {
    private let storage = Mutex<LocalClient?>(nil)
    var client: LocalClient? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}

final class LockedCounter: Sendable {
    private let value = Mutex(1)
    func next() -> Int {
        value.withLock { value in
            defer { value += 1 }
            return value
        }
    }
    func peek() -> Int { value.withLock { $0 } }
}

final class HeardActivities: Sendable {
    private let times = Mutex<[UUID: UInt64]>([:])
    func record(_ id: UUID) { times.withLock { if $0[id] == nil { $0[id] = now() } } }
    func contains(_ id: UUID) -> Bool { times.withLock { $0[id] != nil } }
    func time(_ id: UUID) -> UInt64? { times.withLock { $0[id] } }
}

// Started by B's agent (no arguments, its bundle identifier in the environment): the receiving app.
let isReceiver = ProcessInfo.processInfo.environment["HANDOFF_BUNDLE_IDENTIFIER"] == bundleIdentifier
let isStreamReceiver = ProcessInfo.processInfo.environment["HANDOFF_BUNDLE_IDENTIFIER"] == streamBundle
switch CommandLine.arguments.dropFirst().first {
case nil where isStreamReceiver:
    runStreamReceiver()
case "stream-origin"?:
    runStreamOrigin()
case "streams"?:
    try await streamBenchmark()
case "tls-sink"?:
    try await runTLSSink(folder: CommandLine.arguments[2], port: Int(CommandLine.arguments[3])!, hashing: CommandLine.arguments[4] == "hash")
case "tls-source"?:
    try await runTLSSource(folder: CommandLine.arguments[2], port: Int(CommandLine.arguments[3])!, hashing: CommandLine.arguments[4] == "hash")
case "receiver"?:
    runReceiver()
case nil where isReceiver:
    runReceiver()
case "tls-server"?:
    let arguments = CommandLine.arguments
    try await runTLSServer(folder: arguments[2], host: arguments[3], port: Int(arguments[4])!)
case "tls-client"?:
    let arguments = CommandLine.arguments
    try await runTLSClient(folder: arguments[2], host: arguments[3], port: Int(arguments[4])!, count: Int(arguments[5])!)
case "mcast-recv"?:
    let arguments = CommandLine.arguments
    runMulticastReceiver(group: arguments[2], port: Int(arguments[3])!, local: arguments[4], count: Int(arguments[5])!)
case "mcast-send"?:
    let arguments = CommandLine.arguments
    runMulticastSender(group: arguments[2], port: Int(arguments[3])!, local: arguments[4], count: Int(arguments[5])!)
case "discovery"?:
    try await discoveryBenchmark()
case "flood"?:
    try await floodBenchmark()
case "flood-source"?:
    runFloodSource(arguments: Array(CommandLine.arguments.dropFirst()))
case "hold-connections"?:
    runConnectionHolder(arguments: Array(CommandLine.arguments.dropFirst()))
case "forged-beacons"?:
    forgedBeacons(count: Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 10_000_000)
default:
    try await orchestrate()
}
