// The agent's benchmark (Benchmarks/agent.sh): two real handoffd processes, in two network
// namespaces on a bridge when run as root (else on loopback), paired into one account. In
// repeated runs, until each measure's run medians agree within 10 %:
//   - continue on a warm link: from `continue` on B's local socket to the receiving app (this
//     program, installed on B and started by B's agent) holding the restored activity, with a
//     3 KB userInfo that the origin app on A saves at that moment;
//   - the same from the command line: from spawning `handoff continue ID` to the app holding it;
//   - the baseline: the fastest fresh TLS 1.3 exchange NIO makes between the same two hosts
//     (BareTLS.swift: both certificates, pinned, warm event loops, 3 KB each way);
//   - discovery: from `becameCurrent` on A to B's watcher hearing it.
// Then both agents idle for MEMORY_SECONDS (default 300) with their link open: memory (RSS,
// PSS, USS; median and maximum of a sample a second) and CPU. Then continue after 1.4 s of
// quiet, twice, each paired with the bare exchange after the same quiet, on agents that give
// their memory back after 1 s idle as they do after 15 s with the defaults: on the link kept
// open (as links stay, an hour unused), judged against the back-to-back bare exchange; then,
// restarted with links that close after 1 s idle, on a new link each time (the handshake and
// membership proof in the figure), reported. Targets fail the run (exit status 1).
import BenchmarkReport
import Foundation
import Handoff
import HandoffAgent
import HandoffLocalAPI

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

/// Spawns `path` with `arguments`, its output thrown away, and returns at once.
func spawn(_ path: String, _ arguments: [String]) -> pid_t {
    var pid = pid_t()
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    let status = posix_spawn(&pid, path, &actions, nil, argv, environ)
    guard status == 0 else { fail("cannot spawn \(path): \(String(cString: strerror(status)))") }
    return pid
}

/// The CPU time an agent has used so far (ns); the benchmark fails if its clock cannot be read
/// (the agent is gone), rather than report a difference with nothing.
func agentCPU(_ pid: pid_t) -> UInt64 {
    guard let time = cpuTime(of: pid) else { fail("cannot read the CPU clock of the agent with process id \(pid): has it exited?") }
    return time
}

/// `pid`'s exit status once it has ended; 128 plus the signal's number if a signal ended it (as
/// a shell says), so that a program that crashed never reads as one that succeeded.
func waitForExit(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let signal = status & 0x7F
    return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
}

/// Runs the benchmark and returns its targets, checked, once everything it started is gone.
func orchestrate() async throws -> Targets {
    let iterations = Int(ProcessInfo.processInfo.environment["ITERATIONS"] ?? "200") ?? 200
    let cliIterations = max(10, iterations / 4)
    let discoveryChanges = max(10, iterations / 4)
    let quietIterations = Int(ProcessInfo.processInfo.environment["QUIET_ITERATIONS"] ?? "20") ?? 20
    let pacedIterations = max(10, iterations / 4)
    let pace = Int(ProcessInfo.processInfo.environment["PACE_MS"] ?? "20") ?? 20
    let memorySeconds = Int(ProcessInfo.processInfo.environment["MEMORY_SECONDS"] ?? "300") ?? 300
    let useNamespaces = getuid() == 0 && shell(["ip", "netns", "add", "hb\(getpid())probe"]) == 0
    if useNamespaces { shell(["ip", "netns", "del", "hb\(getpid())probe"]) }
    let machine = machineDescription()
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    // HOPS=N (Benchmarks/hops.sh): every process stamps where each continuation is (HopTrace)
    // into one file, which the agents find in their environment.
    let hops = ProcessInfo.processInfo.environment["HOPS"].flatMap(Int.init)
    let hopFile = "\(root)/hops.trace"
    if hops != nil { setenv("HANDOFF_HOP_TRACE", hopFile, 1) }

    let prefix = "hb\(getpid() % 100_000)"
    undoOnFailure.withLock { $0 = prefix }
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
    var agents: [String: ChildProcess] = [:]
    var helpers: [ChildProcess] = []
    defer {
        for process in Array(agents.values) + helpers { stop(process) }
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap(Int32.init) {
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root) { kill(pid, SIGTERM) }
        }
        if useNamespaces {
            for name in ["a", "b", "br"] { shell(["ip", "netns", "del", "\(prefix)\(name)"]) }
        }
        try? FileManager.default.removeItem(atPath: root)
    }

    // AGENT_WRAPPER="valgrind --tool=callgrind --instr-atstart=no": each agent runs under that
    // command (split at spaces), for the profile modes below.
    let wrapper = ProcessInfo.processInfo.environment["AGENT_WRAPPER"].map { $0.split(separator: " ").map(String.init) } ?? []
    func startAgents(_ settings: [String]) {
        for host in [a, b] {
            agents[host.name] = start(host.command(wrapper + [
                binaries.appendingPathComponent("handoffd").path, "--name", host.name == "a" ? "origin" : "receiver", "--state-dir", host.state,
                "--socket", host.socket, "--listen", "\(host.address):\(host.port)", "--interface", interface, "--discovery-port", discoveryPort,
                "--development-mode", "on", "--log-level", "error",
            ] + settings))
        }
    }
    /// Whether B has a link to A open: an established TCP connection to A's link port in B's
    /// network namespace, read from B's agent's own `/proc` entry. No process is started to
    /// look, so that looking leaves the processors as quiet as they were.
    func linkOpen() -> Bool { linkPort() != nil }
    /// B's local port of its link to A, if one is open.
    func linkPort() -> Substring? {
        guard let pid = agents["b"]?.processIdentifier else { return nil }
        let port = String(format: ":%04X", a.port)
        for table in ["tcp", "tcp6"] {
            // Read to its end: the kernel makes the table a page at a time, and says its size is 0.
            guard let file = FileHandle(forReadingAtPath: "/proc/\(pid)/net/\(table)") else { continue }
            let text = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
            try? file.close()
            // "sl local_address rem_address st ...": 01 is ESTABLISHED.
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                if fields.count > 3, fields[3] == "01", fields[2].hasSuffix(port) { return fields[1].split(separator: ":").last }
            }
        }
        return nil
    }

    // Two agents, paired; links stay open for 10 minutes unused, so that the memory window
    // below has one.
    startAgents(["--link-idle", "10m"])
    await pair(a, b)
    let app = try appFolder("Receiver", bundle: bundleIdentifier, activityType: activityType)
    _ = await call(b, .installApp(directory: app))
    let counter = LockedCounter()
    let saves = SaveTimes()
    var origin = try originApp(socket: a.socket, counter: counter, saves: saves)
    let payload = try UserInfoCoding.encode(typicalUserInfo(iteration: 0)).count
    let heard = HeardActivities()
    let watcher = try LocalClient(path: b.socket, role: .control) { message in
        if case .event(let event) = message, let id = event.activity?.activity.id { heard.record(id) }
    }
    _ = try await watcher.call(.watch)
    var activityID = UUID()
    func offer(_ origin: LocalClient) async throws -> Double {
        activityID = UUID()
        let id = activityID
        let start = now()
        try origin.send(.becameCurrent(ActivityAnnouncement(id: id, activityType: activityType, title: "Benchmark", teamIdentifier: team)))
        await waitFor("B to list the activity") { heard.contains(id) }
        return milliseconds(heard.time(id)! - start)
    }
    _ = try await offer(origin)

    // The baseline's server, on A.
    let baselineFolder = "\(root)/tls"
    try makeBareTLSIdentities(in: baselineFolder)
    let tlsPort = a.port + 100
    let serverOutput = Pipe()
    let baselineServer = start(a.command([CommandLine.arguments[0], "tls-server", baselineFolder, a.address, String(tlsPort)]), output: serverOutput)
    helpers.append(baselineServer)
    _ = serverOutput.fileHandleForReading.availableData

    func restoredAt(_ iteration: Int) async -> UInt64 { await waitForRestore(of: iteration, on: b) }
    let control = try LocalClient(path: b.socket, role: .control)
    /// One continuation through B's agent, timed from the call to its answer (the daemon level:
    /// the origin's save included, the activity sent to the app) and to the app holding it.
    /// Where the time of the warm continuations went: to the origin app's save request, the
    /// app's save, from its answer to the app on B, and from that to the caller's answer.
    let legNames = [
        "B's agent, the link, A's agent: the call to the origin app's save request",
        "the origin app: the save (3 KB userInfo encoded) and its answer",
        "A's agent, the link, B's agent: the answer to the app on B holding it",
        "B's agent: the app's delivery to the caller's answer",
    ]
    var legs: [String: [Double]] = [:]
    func continueOnce(_ client: LocalClient, legsToo: Bool = true) async throws -> (daemon: Double, app: Double) {
        let iteration = counter.peek()
        HopTrace.stamp("call")
        let start = now()
        if let error = try await client.call(.continue(activity: activityID)).error { fail("continue: \(error)") }
        let answered = now()
        HopTrace.stamp("answered")
        let restored = await restoredAt(iteration)
        if legsToo, let save = saves.times(of: iteration) {
            // Stamped by three processes: the app on B can hold the activity before the origin
            // app has stamped its answer, so a leg can come out negative.
            legs[legNames[0], default: []].append(milliseconds(save.arrived) - milliseconds(start))
            legs[legNames[1], default: []].append(milliseconds(save.answered) - milliseconds(save.arrived))
            legs[legNames[2], default: []].append(milliseconds(restored) - milliseconds(save.answered))
            legs[legNames[3], default: []].append(milliseconds(answered) - milliseconds(restored))
        }
        return (milliseconds(answered - start), signedMilliseconds(from: start, to: restored))
    }
    for _ in 0..<5 { _ = try await continueOnce(control) }  // the app started, the link open
    legs = [:]
    // PROFILE_SECONDS=N: only warm continuations, one after another for N seconds, after
    // printing the agents' process ids (for `perf record -p`); then the benchmark ends.
    if let seconds = ProcessInfo.processInfo.environment["PROFILE_SECONDS"].flatMap(Double.init) {
        FileHandle.standardError.write(Data("profile: A's agent \(agents["a"]!.processIdentifier), B's agent \(agents["b"]!.processIdentifier)\n".utf8))
        let end = now() + UInt64(seconds * 1e9)
        var daemon: [Double] = []
        let (pidA, pidB) = (agents["a"]!.processIdentifier, agents["b"]!.processIdentifier)
        // AGENT_BEFORE / AGENT_AFTER (Benchmarks/instructions.sh: callgrind_control's zero and
        // dump): run with each agent's process id just before and just after the measured
        // continuations, so that what they count is those continuations alone.
        let environment = ProcessInfo.processInfo.environment
        func hook(_ name: String, _ pids: [Int32]) {
            guard let command = environment[name]?.split(separator: " ").map(String.init) else { return }
            for pid in pids { _ = shell(command + ["\(pid)"]) }
        }
        hook("AGENT_BEFORE", [pidA, pidB])
        let (cpuA, cpuB) = (agentCPU(pidA), agentCPU(pidB))
        while now() < end {
            daemon.append(try await continueOnce(control).daemon)
        }
        let cpu = [signedMilliseconds(from: cpuA, to: agentCPU(pidA)), signedMilliseconds(from: cpuB, to: agentCPU(pidB))].map { $0 / Double(daemon.count) }
        hook("AGENT_AFTER", [pidA, pidB])
        // PROFILE_NEW_LINKS=N (Scripts/hot-code.sh): then N continuations on new links, as after
        // quiet: before each, B's link is reset (`ss -K`, as root) and seen closed. Then the hook
        // AGENT_AFTER_NEW_LINKS runs with each agent's process id.
        if let count = environment["PROFILE_NEW_LINKS"].flatMap(Int.init) {
            for _ in 0..<count {
                if shell(b.command(["ss", "-K", "-tn", "dst", a.address, "dport", "=", ":\(a.port)"])) != 0 { fail("ss -K failed: are you root?") }
                await waitFor("the link to close", seconds: 10) { !linkOpen() }
                daemon.append(try await continueOnce(control).daemon)
                if !linkOpen() { fail("the continuation after the reset opened no link") }
            }
            hook("AGENT_AFTER_NEW_LINKS", [pidA, pidB])
        }
        // With AGENT_WRAPPER, the baseline's exchanges on a kept connection under it too: a
        // server of its own on A, measured as the agents are, around each of two client runs
        // (TLS_SHORT and TLS_LONG exchanges; each client, also under the wrapper, counts from
        // its start), so that the difference of the two is the exchanges alone, the client's
        // start, connection and handshake cancelled out.
        if !wrapper.isEmpty, let short = environment["TLS_SHORT"].flatMap(Int.init), let long = environment["TLS_LONG"].flatMap(Int.init) {
            let wrappedOutput = Pipe()
            let server = start(a.command(wrapper + [CommandLine.arguments[0], "tls-server", baselineFolder, a.address, String(tlsPort + 1)]), output: wrappedOutput)
            helpers.append(server)
            _ = wrappedOutput.fileHandleForReading.availableData
            for count in [short, long] {
                hook("AGENT_BEFORE", [server.processIdentifier])
                let client = start(b.command(wrapper + [CommandLine.arguments[0], "tls-warm-client", baselineFolder, a.address, String(tlsPort + 1), String(count)]))
                client.waitUntilExit()
                if client.terminationStatus != 0 { fail("the warm TLS client under \(wrapper.joined(separator: " ")) failed") }
                hook("AGENT_AFTER", [server.processIdentifier])
                FileHandle.standardError.write(Data("profile: TLS client \(client.processIdentifier) made \(count) exchanges, served by \(server.processIdentifier)\n".utf8))
            }
        }
        FileHandle.standardError.write(Data("""
            profile: \(daemon.count) continuations, continue p50 \(format(percentile(daemon, 0.5), 3)) ms, p99 \(format(percentile(daemon, 0.99), 3)) ms; \
            p50 \(format(percentile(legs[legNames[0]] ?? [], 0.5), 3)) ms to the save request; \
            CPU per continuation: A's agent \(format(cpu[0], 3)) ms, B's agent \(format(cpu[1], 3)) ms\n
            """.utf8))
        return Targets()
    }

    // `handoff` as installed (agent.sh builds it as a static executable), else the one built here.
    let cli = ProcessInfo.processInfo.environment["HANDOFF_CLI_FRONT"] ?? binaries.appendingPathComponent("handoff").path
    /// Each run's CPU time of A's and B's agents per warm continuation (all their threads).
    var cpuPerContinuation: [(Double, Double)] = []
    let runs = try await repeatRuns([
        "continue", "continue to the app", "CLI continue", "CLI to the app", "paced continue", "paced to the app", "bare TLS", "paced bare TLS", "warm TLS", "discovery",
    ]) { _ in
        var run: [String: [Double]] = [:]
        let clientOutput = Pipe()
        let client = start(b.command([CommandLine.arguments[0], "tls-client", baselineFolder, a.address, String(tlsPort), String(iterations)]), output: clientOutput)
        let baselineText = String(decoding: clientOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        client.waitUntilExit()
        run["bare TLS"] = baselineText.split(separator: "\n").compactMap { Double($0) }
        guard run["bare TLS"]!.count == iterations else { fail("the TLS baseline measured \(run["bare TLS"]!.count) of \(iterations)") }
        // The same, each after `pace` of quiet: the baseline of the paced continuations.
        let pacedOutput = Pipe()
        let pacedClient = start(b.command([CommandLine.arguments[0], "tls-client", baselineFolder, a.address, String(tlsPort), String(pacedIterations), String(pace)]), output: pacedOutput)
        let pacedText = String(decoding: pacedOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        pacedClient.waitUntilExit()
        run["paced bare TLS"] = pacedText.split(separator: "\n").compactMap { Double($0) }
        guard run["paced bare TLS"]!.count == pacedIterations else { fail("the paced TLS baseline measured \(run["paced bare TLS"]!.count) of \(pacedIterations)") }
        // The link's own floor: the same exchange on a connection kept open.
        let warmOutput = Pipe()
        let warmClient = start(b.command([CommandLine.arguments[0], "tls-warm-client", baselineFolder, a.address, String(tlsPort), String(iterations)]), output: warmOutput)
        let warmText = String(decoding: warmOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        warmClient.waitUntilExit()
        run["warm TLS"] = warmText.split(separator: "\n").compactMap { Double($0) }
        guard run["warm TLS"]!.count == iterations else { fail("the warm TLS exchange measured \(run["warm TLS"]!.count) of \(iterations)") }

        for _ in 0..<discoveryChanges {
            run["discovery", default: []].append(try await offer(origin))
            try await Task.sleep(for: .milliseconds(20))
        }
        // 20 first, unmeasured, as each run of the bare exchanges begins (BareTLS.swift): what
        // came before (the discovery changes, 20 ms apart) left both processors idle, and the
        // first one or two continuations after it took about twice as long.
        for _ in 0..<20 { _ = try await continueOnce(control, legsToo: false) }
        let cpuBefore = (agentCPU(agents["a"]!.processIdentifier), agentCPU(agents["b"]!.processIdentifier))
        for _ in 0..<iterations {
            let (daemon, app) = try await continueOnce(control)
            run["continue", default: []].append(daemon)
            run["continue to the app", default: []].append(app)
        }
        // The warm continuations' CPU alone (the command line's, which follow, cost B a
        // connection and its handshake each).
        let usedA = signedMilliseconds(from: cpuBefore.0, to: agentCPU(agents["a"]!.processIdentifier))
        let usedB = signedMilliseconds(from: cpuBefore.1, to: agentCPU(agents["b"]!.processIdentifier))
        cpuPerContinuation.append((usedA / Double(iterations), usedB / Double(iterations)))
        for _ in 0..<cliIterations {
            let iteration = counter.peek()
            let start = now()
            let pid = spawn(cli, ["continue", activityID.uuidString, "--socket", b.socket])
            if waitForExit(pid) != 0 { fail("handoff continue failed") }
            run["CLI continue", default: []].append(milliseconds(now() - start))
            run["CLI to the app", default: []].append(signedMilliseconds(from: start, to: await restoredAt(iteration)))
        }
        // The same continuations with a pause before each: each begins on idle processors, with
        // nothing of the one before still running (B's `continued` to A, the origin app's
        // `wasContinued`), as a person's continuations do. Reported beside the back-to-back ones,
        // which the targets judge.
        for _ in 0..<pacedIterations {
            try await Task.sleep(for: .milliseconds(pace))
            let (daemon, app) = try await continueOnce(control, legsToo: false)
            run["paced continue", default: []].append(daemon)
            run["paced to the app", default: []].append(app)
        }
        return run
    }

    let warmLegs = legs
    // Both agents idle, their link open, no activity offered.
    try origin.send(.invalidated(activity: activityID))
    origin.close()
    try await Task.sleep(for: .seconds(1))
    let openBefore = linkOpen()
    let (pidA, pidB) = (agents["a"]!.processIdentifier, agents["b"]!.processIdentifier)
    async let windowA = MemoryWindow.watch(pidA, for: .seconds(memorySeconds))
    async let windowB = MemoryWindow.watch(pidB, for: .seconds(memorySeconds))
    let idle = try await [windowA, windowB]
    let openAfter = linkOpen()

    // The first continuation after that: the link still open, the agents' memory given back.
    origin = try originApp(socket: a.socket, counter: counter, saves: saves)
    _ = try await offer(origin)
    let firstAfterIdle = try await continueOnce(control).daemon
    control.close()
    watcher.close()
    origin.close()

    // After quiet, the agents as a long quiet leaves them: each gives its memory back after 1 s
    // with nothing to do (`--idle-release`, 15 s by default), so a continuation 1.4 s after the
    // one before meets the dropped code pages and the trimmed heap that one after minutes meets.
    // Their links stay open for the default hour (`--link-idle`), then close after 1 s unused.
    var rewatcher: LocalClient?
    func restartAgents(_ settings: [String]) async throws -> LocalClient {
        rewatcher?.close()
        origin.close()
        for agent in agents.values { stop(agent) }
        startAgents(settings)
        await waitFor("the agents to start again") { (try? LocalClient(path: a.socket, role: .control))?.close() != nil && (try? LocalClient(path: b.socket, role: .control))?.close() != nil }
        await waitFor("the devices to hear each other again", seconds: 30) { (await call(b, .devices).devices ?? []).contains { $0.isNearby && !$0.isThisDevice } }
        let watching = try LocalClient(path: b.socket, role: .control) { message in
            if case .event(let event) = message, let id = event.activity?.activity.id { heard.record(id) }
        }
        _ = try await watching.call(.watch)
        rewatcher = watching
        origin = try originApp(socket: a.socket, counter: counter, saves: saves)
        _ = try await offer(origin)
        let control = try LocalClient(path: b.socket, role: .control)
        _ = try await continueOnce(control)  // the app reconnected to the new agent
        return control
    }
    let quietGap = 1_400
    /// B's agent's resident memory now, in MB (`statm`: the kernel's counters, no page walk).
    func residentB() -> Double {
        guard let pid = agents["b"]?.processIdentifier,
              let text = try? String(contentsOfFile: "/proc/\(pid)/statm", encoding: .utf8),
              let pages = text.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) else { return .nan }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
    }
    /// Minor page faults of both agents so far (`/proc/PID/stat`, field 10).
    func agentFaults() -> Int {
        ["a", "b"].compactMap { agents[$0]?.processIdentifier }.reduce(0) { total, pid in
            guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let end = text.lastIndex(of: ")") else { return total }
            let fields = text[text.index(after: end)...].split(separator: " ")
            return total + (fields.count > 7 ? Int(fields[7]) ?? 0 : 0)
        }
    }
    var keptFaults: [Double] = [], quietFaults: [Double] = []
    /// Runs `body` with a bare TLS client on B (`tls-client ... stepped`): each call of its
    /// argument waits `quietGap`, has the client make one exchange, and returns its time.
    func pairedWithBare(_ body: (_ bareAfterQuiet: () async throws -> Double) async throws -> Void) async throws {
        let bareOutput = Pipe(), bareInput = Pipe()
        let bareClient = start(
            b.command([CommandLine.arguments[0], "tls-client", baselineFolder, a.address, String(tlsPort), String(quietIterations), "stepped"]),
            output: bareOutput, input: bareInput)
        let bareLines = LineReader(bareOutput.fileHandleForReading)
        try await body {
            // Period: the quiet before the bare exchange.
            try await Task.sleep(for: .milliseconds(quietGap))
            bareInput.fileHandleForWriting.write(Data("\n".utf8))
            guard let line = bareLines.next(), let bare = Double(line) else { fail("the TLS baseline after quiet gave no time") }
            return bare
        }
        try? bareInput.fileHandleForWriting.close()
        bareClient.waitUntilExit()
    }
    // On the link kept open: no handshake. Paired with the bare exchange after the same quiet,
    // as below. Not in the profile modes below, which look at new links only.
    var kept = Runs(["continue after quiet, link kept open", "bare TLS after quiet, beside it"])
    var keptResident: [Double] = []
    if hops == nil, ProcessInfo.processInfo.environment["PROFILE_QUIET"] == nil {
        let keptControl = try await restartAgents(["--idle-release", "1s"])
        kept = try await repeatRuns(kept.names) { _ in
            var run: [String: [Double]] = [:]
            try await pairedWithBare { bareAfterQuiet in
                for _ in 0..<quietIterations {
                    let link = linkPort()
                    run["bare TLS after quiet, beside it", default: []].append(try await bareAfterQuiet())
                    // Period: the same quiet before the continuation, after the bare exchange's close;
                    // B's memory is read 0.2 s before its end (given back 1 s into the quiet).
                    try await Task.sleep(for: .milliseconds(quietGap - 200))
                    keptResident.append(residentB())
                    let faults = agentFaults()
                    // Period: the rest of the quiet.
                    try await Task.sleep(for: .milliseconds(200))
                    run["continue after quiet, link kept open", default: []].append(try await continueOnce(keptControl, legsToo: false).daemon)
                    keptFaults.append(Double(agentFaults() - faults))
                    guard let link, linkPort() == link else { fail("the continuation on the kept link opened another (the link closed in the quiet)") }
                }
            }
            return run
        }
        keptControl.close()
    }

    /// HOPS=N: N continuations on `control`, each `quietGap` after the one before (after its
    /// link was seen closed, when `newLinks`), stamped by every process, as a table of `steps`;
    /// then N bare exchanges after the same quiet, stamped the same way. Prints both.
    func hopReport(_ hops: Int, control: LocalClient, newLinks: Bool, steps: [HopTable.Step], title: String, about: String) async throws {
        // Only what follows is read: the stamps of the continuations after quiet.
        truncate(hopFile, 0)
        var daemon: [Double] = []
        for _ in 0..<hops {
            if newLinks { await waitFor("the link to close", seconds: 10) { !linkOpen() } }
            try await Task.sleep(for: .milliseconds(quietGap))
            daemon.append(try await continueOnce(control, legsToo: false).daemon)
        }
        let stamps = (try? String(contentsOfFile: hopFile, encoding: .utf8)) ?? ""
        let table = HopTable(
            lines: stamps.split(separator: "\n"), a: agents["a"]!.processIdentifier, b: agents["b"]!.processIdentifier, caller: getpid(),
            steps: steps)
        let missing = table.missing.sorted { $0.value > $1.value }.map { "`\($0.key)` (\($0.value))" }.joined(separator: ", ")
        // The bare exchange after the same quiet, stamped the same way.
        truncate(hopFile, 0)
        let bareOutput = Pipe()
        let bareClient = start(
            b.command([CommandLine.arguments[0], "tls-client", baselineFolder, a.address, String(tlsPort), String(hops), String(quietGap)]), output: bareOutput)
        let bareTimes = String(decoding: bareOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").compactMap { Double($0) }
        bareClient.waitUntilExit()
        let bareStamps = (try? String(contentsOfFile: hopFile, encoding: .utf8)) ?? ""
        let bare = HopTable(
            lines: bareStamps.split(separator: "\n"), a: baselineServer.processIdentifier, b: bareClient.processIdentifier, caller: -1,
            steps: HopTable.bareAfterQuiet)
        let ours = HopTable.percentile(table.totals, 0.5), theirs = HopTable.percentile(bare.totals, 0.5)
        let placement =
            if !newLinks { "" }
            else if let medians = table.appAheadMedians {
                " In \(medians.aheadCount) of \(table.measured), the origin app's save ran on A's processor while A had the ClientHello to read: "
                    + "those took \(format(medians.ahead, 2)) ms (median), the other \(medians.otherCount) \(format(medians.others, 2)) ms."
            } else {
                " In \(table.appAhead.filter { $0 }.count) of \(table.measured), the origin app's save ran on A's processor while A had the ClientHello to read."
            }
        let waited = newLinks ? "; in \(table.fetchesWaited) A's fetch waited for the app (no early save ready)" : ""
        print(
            """
            ## \(title)

            \(machine). \(useNamespaces ? "Two network namespaces on a bridge" : "Loopback"); release builds; the agents give their \
            memory back after 1 s with nothing to do (`--idle-release 1s`). \(hops) continuations, \(about) Every process \
            stamped `CLOCK_MONOTONIC` where each continuation was (HopTrace); each hop is the time from one stamp to the next, \
            which it waits for. As the caller timed them, p50 \(format(percentile(daemon, 0.5), 3)) ms; \(table.measured) of \
            \(table.found) had every stamp\(missing.isEmpty ? "" : " (the first missing: \(missing))")\(waited).

            \(table.markdown())

            "One processor": in how many the hop's two stamps were made on one processor (for a hop from one process to \
            another, Linux woke the second beside the first).\(placement)

            The bare exchange after the same quiet (`tls-client` to `tls-server`: TLS 1.3, both certificates, 3 KB each way), \
            stamped the same way: as the client timed them, p50 \(format(percentile(bareTimes, 0.5), 3)) ms; \(bare.measured) of \
            \(bare.found) had every stamp.

            \(bare.markdown())

            Stamped, the continuation took \(format(ours, 2)) ms and the bare exchange \(format(theirs, 2)) ms (medians): \
            \(format(theirs > 0 ? ours / theirs : 0, 2))×.

            """)
        guard table.measured > 0, 2 * table.measured >= hops, bare.measured > 0, 2 * bare.measured >= hops else {
            fail("only \(table.measured) of \(hops) continuations and \(bare.measured) of \(hops) bare exchanges had every stamp; is handoffd built from this tree?")
        }
    }
    // PROFILE_QUIET=N with QUIET_LINK=kept: only continuations after quiet on the kept link,
    // each `quietGap` after the one before, for N seconds, after printing the agents' process
    // ids (for `perf record -p`).
    let profileQuiet = ProcessInfo.processInfo.environment["PROFILE_QUIET"].flatMap(Double.init)
    let keptOnly = ProcessInfo.processInfo.environment["QUIET_LINK"] == "kept"
    if let hops {
        let keptControl = try await restartAgents(["--idle-release", "1s"])
        try await hopReport(
            hops, control: keptControl, newLinks: false, steps: HopTable.keptAfterQuiet, title: "Continue after quiet on the kept link, hop by hop",
            about: "each \(quietGap) ms after the one before, on the link kept open.")
        keptControl.close()
    }
    if let seconds = profileQuiet, keptOnly {
        let keptControl = try await restartAgents(["--idle-release", "1s"])
        FileHandle.standardError.write(Data("profile: A's agent \(agents["a"]!.processIdentifier), B's agent \(agents["b"]!.processIdentifier)\n".utf8))
        let end = now() + UInt64(seconds * 1e9)
        var daemon: [Double] = []
        while now() < end {
            // Period: the quiet before each continuation on the kept link.
            try await Task.sleep(for: .milliseconds(quietGap))
            daemon.append(try await continueOnce(keptControl, legsToo: false).daemon)
        }
        FileHandle.standardError.write(Data("profile: \(daemon.count) continuations after quiet on the kept link, p50 \(format(percentile(daemon, 0.5), 3)) ms\n".utf8))
        return Targets()
    }

    // Links that close after 1 s unused: each continuation opens one.
    let quietControl = try await restartAgents(["--link-idle", "1s", "--idle-release", "1s"])
    // Each continuation after quiet begins `quietGap` after the link of the one before was seen
    // closed (1 s unused, looked at every 250 ms): nothing has run since. Its baseline is the
    // bare exchange after the same quiet.
    // PROFILE_QUIET=N: only continuations after quiet (each opens a link, `quietGap` after the
    // one before), for N seconds, after printing the agents' process ids (for `strace -tt` or
    // `perf record -p`).
    if let hops {
        try await hopReport(
            hops, control: quietControl, newLinks: true, steps: HopTable.afterQuiet, title: "Continue after quiet on a new link, hop by hop",
            about: "each \(quietGap) ms after the link of the one before was seen closed (1 s unused): each opens a new one.")
        return Targets()
    }
    if let seconds = profileQuiet {
        FileHandle.standardError.write(Data("profile: A's agent \(agents["a"]!.processIdentifier), B's agent \(agents["b"]!.processIdentifier)\n".utf8))
        let end = now() + UInt64(seconds * 1e9)
        var daemon: [Double] = []
        while now() < end {
            await waitFor("the link to close", seconds: 10) { !linkOpen() }
            try await Task.sleep(for: .milliseconds(quietGap))
            daemon.append(try await continueOnce(quietControl).daemon)
        }
        FileHandle.standardError.write(Data("profile: \(daemon.count) continuations after quiet, p50 \(format(percentile(daemon, 0.5), 3)) ms\n".utf8))
        return Targets()
    }
    // Paired: each run alternates one bare exchange and one continuation, each after `quietGap`
    // in which nothing of the benchmark ran but its own timer: the continuation's link is seen
    // closed first (the close wakes both agents), then the machine is left alone. So both meet
    // the host in the same state, and a drift of the host between them moves both.
    let quiet = try await repeatRuns(["continue after quiet", "after quiet to the app", "bare TLS after quiet"]) { _ in
        var run: [String: [Double]] = [:]
        try await pairedWithBare { bareAfterQuiet in
            for _ in 0..<quietIterations {
                await waitFor("the link to close", seconds: 10) { !linkOpen() }
                run["bare TLS after quiet", default: []].append(try await bareAfterQuiet())
                let faults = agentFaults()
                // Period: the same quiet before the continuation, after the bare exchange's close.
                try await Task.sleep(for: .milliseconds(quietGap))
                let (daemon, app) = try await continueOnce(quietControl)
                quietFaults.append(Double(agentFaults() - faults))
                run["continue after quiet", default: []].append(daemon)
                run["after quiet to the app", default: []].append(app)
            }
        }
        return run
    }
    quietControl.close()
    rewatcher?.close()
    origin.close()

    // The report.
    let continue50 = runs.percentile("continue", 0.5), continue99 = runs.percentile("continue", 0.99)
    let bare50 = runs.percentile("bare TLS", 0.5), bare99 = runs.percentile("bare TLS", 0.99)
    let cli50 = runs.percentile("CLI continue", 0.5)
    let quiet50 = quiet.percentile("continue after quiet", 0.5)
    let discovery50 = runs.percentile("discovery", 0.5)
    func row(_ runs: Runs, _ name: String) -> String {
        "\(format(runs.percentile(name, 0.5), 3)) ms | \(format(runs.percentile(name, 0.99), 3)) ms"
    }
    func memoryRow(_ window: MemoryWindow, _ measure: KeyPath<MemorySample, Int>) -> String {
        "\(format(window.median(measure), 1)) MB | \(format(window.maximum(measure), 1)) MB"
    }
    print("""
        Agent benchmark. Machine: \(machine).
        \(useNamespaces ? "Two network namespaces on one bridge" : "Loopback (not root: no namespaces)"); release build, static Swift runtime. \
        userInfo \(payload) bytes; per run \(iterations) continuations back to back and bare TLS exchanges, \(cliIterations) from the command line, \
        \(pacedIterations) paced (\(pace) ms apart), \
        \(discoveryChanges) discovery changes; \(quietIterations) continuations after quiet per run.
        Bare TLS: one process per side, one warm event loop each, one TLS context each made before timing, TLS 1.3 with both \
        certificates (P-256) pinned by SHA-256, TCP_NODELAY, connect + 3 KB echoed + close, nothing else in the path.

        Warm runs. \(runs.agreement(minimum: 3))

        \(runs.table())

        After quiet on the link kept open (links stay open an hour unused): \(quietIterations) bare exchanges and \(quietIterations) \
        continuations alternating, each after \(quietGap) ms of quiet. The agents give their memory back after 1 s with nothing \
        to do (`--idle-release 1s`), as after minutes with the defaults: B's agent's RSS 0.2 s before each continuation, median \
        \(format(percentile(keptResident, 0.5), 1)) MB (\(format(keptResident.min() ?? .nan, 1))–\(format(keptResident.max() ?? .nan, 1))); \
        the two agents' page faults in each continuation, median \(format(percentile(keptFaults, 0.5), 0)). \(kept.agreement(minimum: 3))

        \(kept.table())

        After-quiet runs on new links, paired: \(quietIterations) bare exchanges and \(quietIterations) continuations alternating, each after \(quietGap) ms \
        in which nothing ran but the benchmark's timer (links close after 1 s unused, and each continuation's link is seen closed \
        before that quiet begins: each continuation opens a new one; memory given back after 1 s, as above; the two agents' page \
        faults from the end of the bare exchange to the continuation's answer, median \(format(percentile(quietFaults, 0.5), 0))). \(quiet.agreement(minimum: 3))

        \(quiet.table())

        | measure (all runs' samples) | p50 | p99 |
        | --- | --- | --- |
        | continue, warm link: `continue` on B's socket to its answer (the origin's save included) | \(row(runs, "continue")) |
        | the same, to the app on B holding the restored activity | \(row(runs, "continue to the app")) |
        | continue from the command line: spawning `handoff continue` to its exit | \(row(runs, "CLI continue")) |
        | the same, to the app holding the activity | \(row(runs, "CLI to the app")) |
        | continue, warm link, paced: the same with \(pace) ms of quiet before each | \(row(runs, "paced continue")) |
        | the same, to the app holding the activity | \(row(runs, "paced to the app")) |
        | continue after quiet on the link kept open (no handshake; memory given back), to the answer | \(row(kept, "continue after quiet, link kept open")) |
        | continue after quiet on a new link (handshake and membership proof included; memory given back), to the answer | \(row(quiet, "continue after quiet")) |
        | the same, to the app holding the activity | \(row(quiet, "after quiet to the app")) |
        | baseline: bare TLS 1.3 connect + 3 KB request and answer, A to B | \(row(runs, "bare TLS")) |
        | the same, paced: \(pace) ms of quiet before each connection | \(row(runs, "paced bare TLS")) |
        | the same after quiet: \(quietGap) ms of quiet before each, alternating with the continuations on the kept link | \(row(kept, "bare TLS after quiet, beside it")) |
        | the same, alternating with the continuations on new links | \(row(quiet, "bare TLS after quiet")) |
        | for reference: the same 3 KB request and answer on a TLS connection kept open (what the link's hop costs with nothing else in the path) | \(row(runs, "warm TLS")) |
        | discovery: `becameCurrent` on A to B's watcher hearing it | \(row(runs, "discovery")) |
        | continue, the first after \(memorySeconds) s idle (link open), to the answer | \(format(firstAfterIdle, 3)) ms | |

        Where a warm continuation's time goes (medians of all runs' continuations; the legs are measured from the apps, whose \
        clocks are the same CLOCK_MONOTONIC, and add up to the time to the app; the last one can be negative: B's agent sends the \
        app its activity before it answers the caller):

        | leg | p50 |
        | --- | --- |
        \(legNames.map { "| \($0) | \(format(percentile(warmLegs[$0] ?? [], 0.5), 3)) ms |" }.joined(separator: "\n"))

        CPU time per warm continuation, all threads (median of the runs, and their range): A's agent \
        \(format(percentile(cpuPerContinuation.map(\.0), 0.5), 3)) ms (\(format(cpuPerContinuation.map(\.0).min() ?? .nan, 3))–\(format(cpuPerContinuation.map(\.0).max() ?? .nan, 3))), \
        B's agent \(format(percentile(cpuPerContinuation.map(\.1), 0.5), 3)) ms (\(format(cpuPerContinuation.map(\.1).min() ?? .nan, 3))–\(format(cpuPerContinuation.map(\.1).max() ?? .nan, 3))).

        Idle, \(memorySeconds) s, link \(openBefore && openAfter ? "open throughout" : "NOT open throughout"), no activity offered, a sample a second:

        | agent | RSS median | RSS max | PSS median | PSS max | USS median | USS max | CPU |
        | --- | --- | --- | --- | --- | --- | --- | --- |
        | A (origin) | \(memoryRow(idle[0], \.rss)) | \(memoryRow(idle[0], \.pss)) | \(memoryRow(idle[0], \.uss)) | \(format(idle[0].cpuPercent, 3)) % |
        | B (opened the link) | \(memoryRow(idle[1], \.rss)) | \(memoryRow(idle[1], \.pss)) | \(memoryRow(idle[1], \.uss)) | \(format(idle[1].cpuPercent, 3)) % |

        """)
    let targets = Targets()
    // The targets are for two devices in namespaces (issue 15); on loopback, as a user who is
    // not root, the figures are printed but not taken as met.
    targets.check("two devices in network namespaces on a bridge (root)", useNamespaces, useNamespaces ? "yes" : "no: loopback, not root")
    targets.check("continue on a warm link (daemon level), p50 ≤ 1.0 ms", continue50 <= 1.0, "\(format(continue50, 3)) ms")
    // The machine's own tail beside it: the bare exchanges of the same runs, fresh and warm.
    let warm99 = runs.percentile("warm TLS", 0.99)
    targets.check(
        "continue on a warm link (daemon level), p99 ≤ 2.0 ms", continue99 <= 2.0,
        "\(format(continue99, 3)) ms (the same runs' bare TLS p99 \(format(bare99, 3)) ms, on a kept connection \(format(warm99, 3)) ms)")
    targets.check("`handoff continue`, spawn to exit, p50 ≤ 5 ms", cli50 <= 5.0, "\(format(cli50, 3)) ms")
    // After the link went quiet, it is still open (links stay open an hour unused): judged
    // against the back-to-back bare exchange, the baseline of the issue, the bare exchange
    // after the same quiet named beside it. On a new link (the first continuation to a device,
    // or one after an hour unused), the figure is reported, not judged: against the bare
    // exchange after the same quiet it was 2.1-2.5x on this machine (docs/agent.md).
    let pacedBare50 = runs.percentile("paced bare TLS", 0.5)
    let quietBare50 = quiet.percentile("bare TLS after quiet", 0.5)
    let kept50 = kept.percentile("continue after quiet, link kept open", 0.5)
    let keptBare50 = kept.percentile("bare TLS after quiet, beside it", 0.5)
    targets.check(
        "continue after the link went quiet (daemon level; link kept, memory given back), p50 ≤ 2× bare TLS", kept50 <= 2 * bare50,
        "\(format(kept50, 3)) ms, \(format(kept50 / bare50))× the back-to-back \(format(bare50, 3)) ms (\(format(kept50 / keptBare50))× the bare exchange after the same quiet, \(format(keptBare50, 3)) ms)")
    // Reported beside the targets.
    let newLink = "on a new link: \(format(quiet50, 3)) ms, \(format(quiet50 / quietBare50))× the bare exchange after the same quiet (\(format(quietBare50, 3)) ms), \(format(quiet50 / bare50))× the back-to-back one, \(format(quiet50 / pacedBare50))× the paced \(format(pacedBare50, 3)) ms"
    targets.check("discovery p50 ≤ 10 ms", discovery50 <= 10, "\(format(discovery50, 3)) ms")
    targets.check("the link stayed open through the idle window", openBefore && openAfter, openBefore && openAfter ? "yes" : "no: the memory figures are not of a linked agent")
    for (name, window) in [("A", idle[0]), ("B", idle[1])] {
        targets.check("\(name) idle: median RSS < 25 MB", window.median(\.rss) < 25, "\(format(window.median(\.rss), 1)) MB")
        targets.check("\(name) idle: maximum RSS < 32 MB", window.maximum(\.rss) < 32, "\(format(window.maximum(\.rss), 1)) MB")
        targets.check("\(name) idle: CPU < 1 % of a core", window.cpuPercent < 1, "\(format(window.cpuPercent, 3)) %")
    }
    print(targets.table)
    print("Continue after quiet \(newLink) (not judged).")
    return targets
}
