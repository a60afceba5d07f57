// The benchmarks' one executable: Benchmarks/agent.sh (ContinueBenchmark.swift), discovery.sh,
// flood.sh and streams.sh run it, each with its own subcommand. The same executable is also the
// receiving apps (`receiver`, and the stream apps) that the agents start, and the helpers run
// inside the namespaces: the two ends of the bare TLS baselines, the multicast baseline, the
// flooders. What the benchmarks share (the machine, repeated runs, memory, targets) is in
// Report.swift.
import BenchmarkReport
import Foundation
import Handoff
import HandoffAgent
import HandoffApp
import HandoffLocalAPI
import HandoffWire
import Synchronization

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

// A task's thread (Dispatch's) blocks every signal. `ChildProcess` starts its children with
// none blocked, but this program's own threads must see SIGTERM too: every process of this
// program unblocks them first.
var unblocked = sigset_t()
sigemptyset(&unblocked)
pthread_sigmask(SIG_SETMASK, &unblocked, nil)

/// Ends `process`: SIGTERM, and SIGKILL if it has not ended within two seconds.
func stop(_ process: ChildProcess) {
    guard process.isRunning else { return }
    process.terminate()
    let deadline = Date().addingTimeInterval(2)
    while process.isRunning && Date() < deadline { usleep(10_000) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
}

/// Ends the benchmark with status 1, first undoing what it started (`undoOnFailure`).
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("AgentBenchmark: \(message)\n".utf8))
    if let namespaces = undoOnFailure.withLock({ $0 }) { undo(namespaces: namespaces) }
    exit(1)
}

/// The prefix of the network namespaces the running benchmark made, once it made any (or ""
/// when it made none): what `fail` undoes.
let undoOnFailure = Mutex<String?>(nil)

/// Kills every process of this run (its state, sockets and apps live under `root`), removes
/// the network namespaces named `prefix`… and the run's folder.
func undo(namespaces prefix: String) {
    let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for pid in pids.compactMap(Int32.init) where pid != getpid() {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
        let arguments = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))).map { String(decoding: $0, as: UTF8.self) } ?? ""
        if exe.hasPrefix(root + "/") || arguments.contains(root + "/") { kill(pid, SIGKILL) }
    }
    if !prefix.isEmpty {
        let output = Pipe()
        let process = start(["ip", "netns", "list"], output: output)
        let names = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        for line in names.split(separator: "\n") {
            // Another run's namespaces start with another number: "hb12" is not "hb123".
            if let name = line.split(separator: " ").first, name.hasPrefix(prefix), name.dropFirst(prefix.count).allSatisfy(\.isLetter) {
                shell(["ip", "netns", "del", String(name)])
            }
        }
    }
    try? FileManager.default.removeItem(atPath: root)
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

/// Two hosts, a and b: as root two network namespaces on a bridge (each agent a host of its own,
/// as two devices are), else loopback, on ports of their own.
struct TwoHosts {
    let a: Host
    let b: Host
    let namespaces: Bool
    let prefix: String
    /// The first of the ports this run may use on loopback (the agents take `base` and `base + 2`).
    let base: Int
    /// The interface the agents' beacons use: the namespaces' veth, or loopback.
    var interface: String { namespaces ? "eth0" : "lo" }

    init(prefix letters: String, subnet: String) {
        namespaces = getuid() == 0 && shell(["ip", "netns", "add", "\(letters)\(getpid())probe"]) == 0
        if namespaces { shell(["ip", "netns", "del", "\(letters)\(getpid())probe"]) }
        prefix = "\(letters)\(getpid() % 100_000)"
        base = Int.random(in: 20_000..<40_000)
        if namespaces {
            undoOnFailure.withLock { [prefix] in $0 = prefix }
            makeBridgedNamespaces(prefix: prefix, names: ["a", "b"], subnet: subnet)
            a = Host(name: "a", namespace: "\(prefix)a", address: "\(subnet).1", port: 47_170)
            b = Host(name: "b", namespace: "\(prefix)b", address: "\(subnet).2", port: 47_170)
        } else {
            undoOnFailure.withLock { $0 = "" }
            a = Host(name: "a", namespace: nil, address: "127.0.0.1", port: base)
            b = Host(name: "b", namespace: nil, address: "127.0.0.1", port: base + 2)
        }
    }

    /// Removes the namespaces and the run's folder.
    func remove() {
        if namespaces {
            for name in ["a", "b", "br"] { shell(["ip", "netns", "del", "\(prefix)\(name)"]) }
        }
        try? FileManager.default.removeItem(atPath: root)
    }
}

@discardableResult
func shell(_ arguments: [String]) -> Int32 {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try? process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

func start(_ arguments: [String], output: Pipe? = nil, input: Pipe? = nil) -> ChildProcess {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = output ?? FileHandle.nullDevice
    process.standardInput = input ?? FileHandle.nullDevice
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

func waitFor(_ what: String, seconds: Double = 20, explain: () -> String = { "" }, _ condition: () async -> Bool) async {
    let deadline = now() + UInt64(seconds * 1e9)
    while now() < deadline {
        if await condition() { return }
        try? await Task.sleep(for: .milliseconds(10))
    }
    fail("timed out waiting for \(what)\(explain())")
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
    RestoredLog.of(host).time(of: iteration)
}

/// Waits until the receiving app on `host` has restored `iteration`, and returns when it did.
func waitForRestore(of iteration: Int, on host: Host, seconds: Double = 20) async -> UInt64 {
    guard let time = await RestoredLog.of(host).wait(for: iteration, seconds: seconds) else {
        fail("timed out waiting for the receiving app to restore iteration \(iteration)")
    }
    return time
}

/// The receiving app's log, read as it grows: each look reads only what was appended since the
/// last, so that waiting for the app costs the machine (two cores, shared with the agents being
/// measured) next to nothing however long the log gets.
final class RestoredLog: Sendable {
    private struct State {
        var offset: UInt64 = 0
        var partial = ""
        var times: [Int: UInt64] = [:]
    }
    private let path: String
    private let state = Mutex(State())
    private static let logs = Mutex<[String: RestoredLog]>([:])

    static func of(_ host: Host) -> RestoredLog {
        let path = "\(host.state)/data/\(bundleIdentifier)/restored.log"
        return logs.withLock { logs in
            if let log = logs[path] { return log }
            let log = RestoredLog(path: path)
            logs[path] = log
            return log
        }
    }

    private init(path: String) { self.path = path }

    private struct Waiter {
        var iteration: Int
        var deadline: UInt64
        var continuation: CheckedContinuation<UInt64?, Never>
    }
    private let waiters = Mutex<[UInt64: Waiter]>([:])
    private let nextWaiter = Atomic<UInt64>(0)
    private let watching = Mutex(false)

    /// When the app logged `iteration`, waiting up to `seconds` for it (nil after that). The
    /// wait is woken by the kernel as the log grows (inotify), so that the next continuation can
    /// begin the moment this one reached its app: a look every 10 ms let about half of the
    /// continuations meant to run back to back begin after a pause instead.
    func wait(for iteration: Int, seconds: Double = 20) async -> UInt64? {
        if let time = time(of: iteration) { return time }
        startWatching()
        return await withCheckedContinuation { continuation in
            let token = nextWaiter.wrappingAdd(1, ordering: .relaxed).newValue
            waiters.withLock { $0[token] = Waiter(iteration: iteration, deadline: now() + UInt64(seconds * 1e9), continuation: continuation) }
            // The line may have been written between the first look and now.
            settle()
        }
    }

    /// Resumes, once, each waiter whose iteration is in the log or whose time is up.
    private func settle() {
        let current = now()
        let ready: [(CheckedContinuation<UInt64?, Never>, UInt64?)] = waiters.withLock { waiters in
            var ready: [(CheckedContinuation<UInt64?, Never>, UInt64?)] = []
            for (token, waiter) in waiters {
                if let time = time(of: waiter.iteration) {
                    ready.append((waiter.continuation, time))
                } else if waiter.deadline <= current {
                    ready.append((waiter.continuation, nil))
                } else {
                    continue
                }
                waiters[token] = nil
            }
            return ready
        }
        for (continuation, time) in ready { continuation.resume(returning: time) }
    }

    /// A thread for the benchmark's life that wakes when the log is written (every 10 ms until
    /// the app has made the file, then on each write, and every second for the deadlines).
    private func startWatching() {
        guard watching.withLock({ watching in defer { watching = true }; return !watching }) else { return }
        let thread = Thread { [self] in
            let inotify = inotify_init1(Int32(IN_CLOEXEC))
            var watched = false
            var events = [UInt8](repeating: 0, count: 4096)
            while true {
                if !watched {
                    watched = inotify_add_watch(inotify, path, UInt32(IN_MODIFY)) >= 0
                    // A line written before the watch existed wakes nothing: look now.
                    if watched { settle() }
                }
                var entry = pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)
                if poll(&entry, 1, watched ? 1000 : 10) > 0 { _ = read(inotify, &events, events.count) }
                settle()
            }
        }
        thread.name = "restored-log"
        thread.start()
    }

    func time(of iteration: Int) -> UInt64? {
        state.withLock { state in
            if let time = state.times[iteration] { return time }
            guard let file = FileHandle(forReadingAtPath: path) else { return nil }
            defer { try? file.close() }
            try? file.seek(toOffset: state.offset)
            let data = (try? file.readToEnd()) ?? Data()
            state.offset += UInt64(data.count)
            state.partial += String(decoding: data, as: UTF8.self)
            var lines = state.partial.split(separator: "\n", omittingEmptySubsequences: false)
            state.partial = String(lines.removeLast())
            for line in lines {
                let parts = line.split(separator: " ")
                if parts.count == 2, let number = Int(parts[0]), let time = UInt64(parts[1]), state.times[number] == nil { state.times[number] = time }
            }
            return state.times[iteration]
        }
    }
}

/// Network namespaces `prefix` + each name, each with `eth0` at `subnet`.1, .2, … on one bridge
/// (in namespace `prefix`br, multicast snooping off), and `lo` up.
func makeBridgedNamespaces(prefix: String, names: [String], subnet: String, setUp: (String) -> Void = { _ in }) {
    shell(["ip", "netns", "add", "\(prefix)br"])
    shell(["ip", "-n", "\(prefix)br", "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])
    shell(["ip", "-n", "\(prefix)br", "link", "set", "br0", "up"])
    for (index, name) in names.enumerated() {
        addBridgedNamespace(prefix: prefix, name: name, address: "\(subnet).\(index + 1)", setUp: setUp)
    }
}

/// One more network namespace `prefix` + `name` on the bridge `makeBridgedNamespaces` made,
/// with `eth0` at `address`/24 and `lo` up.
func addBridgedNamespace(prefix: String, name: String, address: String, setUp: (String) -> Void = { _ in }) {
    let namespace = "\(prefix)\(name)"
    shell(["ip", "netns", "add", namespace])
    setUp(namespace)
    shell(["ip", "-n", namespace, "link", "add", "eth0", "type", "veth", "peer", "name", "p\(name)", "netns", "\(prefix)br"])
    shell(["ip", "-n", namespace, "addr", "add", "\(address)/24", "dev", "eth0"])
    shell(["ip", "-n", namespace, "link", "set", "eth0", "up"])
    shell(["ip", "-n", namespace, "link", "set", "lo", "up"])
    shell(["ip", "-n", "\(prefix)br", "link", "set", "p\(name)", "master", "br0", "up"])
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

/// The origin app: it answers every save with a fresh 3 KB userInfo, numbered by `counter`,
/// noting when each save came and when its answer went (`saves`).
func originApp(socket: String, counter: LockedCounter, saves: SaveTimes? = nil) throws -> LocalClient {
    let box = OriginBox()
    let client = try LocalClient(path: socket, role: .app) { message in
        guard case .save(let request, let id) = message, let client = box.client else { return }
        HopTrace.stamp("save asked")
        let arrived = now()
        let iteration = counter.next()
        let userInfo = try? UserInfoCoding.encode(typicalUserInfo(iteration: iteration))
        let record = ActivityRecord(activity: ActivityAnnouncement(id: id, activityType: activityType, title: "Benchmark", teamIdentifier: team), userInfo: userInfo)
        try? client.send(.saved(request: request, record))
        HopTrace.stamp("saved")
        saves?.record(iteration, arrived: arrived, answered: now())
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

/// When the origin app got each save request and sent its answer, by iteration.
final class SaveTimes: Sendable {
    private let times = Mutex<[Int: (arrived: UInt64, answered: UInt64)]>([:])
    func record(_ iteration: Int, arrived: UInt64, answered: UInt64) { times.withLock { $0[iteration] = (arrived, answered) } }
    func times(of iteration: Int) -> (arrived: UInt64, answered: UInt64)? { times.withLock { $0[iteration] } }
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
    try await streamBenchmark().finish()
case "clipboard"?:
    try await clipboardBenchmark().finish()
case "media"?:
    try await mediaBenchmark().finish()
case "tls-sink"?:
    try await runTLSSink(folder: CommandLine.arguments[2], port: Int(CommandLine.arguments[3])!, checking: CommandLine.arguments[4] == "check")
case "tls-source"?:
    try runTLSSource(folder: CommandLine.arguments[2], port: Int(CommandLine.arguments[3])!, checking: CommandLine.arguments[4] == "check")
case "receiver"?:
    runReceiver()
case "local-codec"?:
    try localCodecProfile()
case nil where isReceiver:
    runReceiver()
case "tls-server"?:
    let arguments = CommandLine.arguments
    try runBareTLSServer(folder: arguments[2], host: arguments[3], port: Int(arguments[4])!)
case "tls-client"?:
    let arguments = CommandLine.arguments
    // The last argument: milliseconds between exchanges, or "stepped" (one exchange for each line
    // read from standard input, its time printed at once).
    try runBareTLSClient(
        folder: arguments[2], host: arguments[3], port: Int(arguments[4])!, count: Int(arguments[5])!,
        pacedMilliseconds: arguments.count > 6 ? Int64(arguments[6]) : nil, stepped: arguments.count > 6 && arguments[6] == "stepped")
case "tls-warm-client"?:
    let arguments = CommandLine.arguments
    try runWarmTLSClient(
        folder: arguments[2], host: arguments[3], port: Int(arguments[4])!, count: Int(arguments[5])!,
        size: arguments.count > 6 ? Int(arguments[6])! : bareRequestSize)
case "mcast-recv"?:
    let arguments = CommandLine.arguments
    runMulticastReceiver(group: arguments[2], port: Int(arguments[3])!, local: arguments[4], count: Int(arguments[5])!)
case "mcast-send"?:
    let arguments = CommandLine.arguments
    runMulticastSender(group: arguments[2], port: Int(arguments[3])!, local: arguments[4], count: Int(arguments[5])!)
case "discovery"?:
    try await discoveryBenchmark().finish()
case "link-open"?:
    try await profileLinkOpen(count: Int(CommandLine.arguments.dropFirst(2).first ?? "300") ?? 300)
case "scale"?:
    try await scaleBenchmark().finish()
case "flood"?:
    try await floodBenchmark()
case "flood-source"?:
    runFloodSource(arguments: Array(CommandLine.arguments.dropFirst()))
case "hold-connections"?:
    runConnectionHolder(arguments: Array(CommandLine.arguments.dropFirst()))
case "forged-beacons"?:
    forgedBeacons(count: Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 10_000_000)
default:
    try await orchestrate().finish()
}

/// Lines from a child's output as they come (blocking).
final class LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next line, without its newline; nil at the end.
    func next() -> String? {
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeSubrange(...end)
                return line
            }
            let more = handle.availableData
            if more.isEmpty { return nil }
            buffer += more
        }
    }
}
