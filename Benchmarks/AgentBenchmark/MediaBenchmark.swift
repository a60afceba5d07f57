import BenchmarkReport
import Foundation
import HandoffDesktop
import HandoffLocalAPI
import HandoffProcess
import Synchronization

/// Context switches (voluntary and not: its wake-ups) of each thread of `pid` so far, by thread.
func wakeups(_ pid: Int32) -> [String: Int] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    var counts: [String: Int] = [:]
    for task in tasks {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
        counts[task] = status.split(separator: "\n").filter { $0.contains("ctxt_switches:") }
            .compactMap { $0.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }.reduce(0, +)
    }
    return counts
}

/// The wake-ups between two readings: each thread alive at the end, from its count at the start
/// (0 for a thread started since). A thread that ended meanwhile takes its count with it.
func wakeups(from start: [String: Int], to end: [String: Int]) -> Int {
    end.reduce(0) { $0 + $1.value - (start[$1.key] ?? 0) }
}

/// A player on a host's session bus, polled for where it is (the benchmark's own client).
func playerPosition(_ bus: DBusConnection, prefix: String = "org.mpris.MediaPlayer2.mpv") async -> (owner: String, playing: Bool, seconds: Double)? {
    guard let name = try? await bus.listNames().first(where: { $0.hasPrefix(prefix) }), let owner = try? await bus.owner(of: name),
        let values = try? await bus.properties(of: MPRIS.player, at: MPRIS.path, on: owner, timeout: .seconds(2))
    else { return nil }
    return (owner, values["PlaybackStatus"]?.string == "Playing", Double(values["Position"]?.integer ?? 0) / 1e6)
}

/// Asks every player on `bus` to quit, and waits until none is left.
func quitPlayers(_ bus: DBusConnection) async {
    await waitFor("the players to quit") {
        let names = ((try? await bus.listNames()) ?? []).filter { $0.hasPrefix(MPRIS.namePrefix) }
        for name in names {
            _ = try? await bus.call(DBusMessage(kind: .methodCall, path: MPRIS.path, interface: MPRIS.root, member: "Quit", destination: name), timeout: .seconds(2))
        }
        return names.isEmpty
    }
}

/// The media benchmark: a media item continued from A to B, from `handoff continue` to B's
/// player playing at the position, beside the same player started on B's copy of the file by
/// hand at that position (the floor); and what the session service costs while no player runs,
/// beside the service without a session bus (no media, no tray: as before them).
func mediaBenchmark() async throws -> Targets {
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/mpv"), FileManager.default.fileExists(atPath: "/etc/mpv/scripts/mpris.so"),
        FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")
    else { fail("the media benchmark needs mpv, mpv-mpris and dbus-daemon (apt-get install mpv mpv-mpris dbus-daemon)") }
    let hosts = TwoHosts(prefix: "hm", subnet: "10.81.0")
    let (a, b, interface, useNamespaces) = (hosts.a, hosts.b, hosts.interface, hosts.namespaces)
    var processes: [ChildProcess] = []
    defer {
        for process in processes { stop(process) }
        hosts.remove()
    }

    // Each host: a synced folder with the sound file, its own session bus, and on B mpv's entry.
    let song = "song one.wav"
    var samples = Data("RIFF".utf8)
    func le<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { samples.append(contentsOf: $0) } }
    let count = 8000 * 180
    le(UInt32(36 + count))
    samples.append(contentsOf: Array("WAVEfmt ".utf8))
    le(UInt32(16)); le(UInt16(1)); le(UInt16(1)); le(UInt32(8000)); le(UInt32(8000)); le(UInt16(1)); le(UInt16(8))
    samples.append(contentsOf: Array("data".utf8))
    le(UInt32(count))
    samples.append(Data(repeating: 128, count: count))
    var environments: [String: [String]] = [:]
    for host in [a, b] {
        let sync = "\(root)/\(host.name)-sync"
        try FileManager.default.createDirectory(atPath: sync, withIntermediateDirectories: true)
        try samples.write(to: URL(fileURLWithPath: "\(sync)/\(song)"))
        try FileManager.default.createDirectory(atPath: "\(root)/\(host.name)-share/applications", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(root)/home", withIntermediateDirectories: true)
        environments[host.name] = [
            "DBUS_SESSION_BUS_ADDRESS=unix:path=\(root)/\(host.name)-bus", "XDG_DATA_HOME=\(root)/\(host.name)-data",
            "XDG_DATA_DIRS=\(root)/\(host.name)-share:/usr/share", "HOME=\(root)/home", "PATH=/usr/bin:/bin",
        ]
        processes.append(start(host.command(["/usr/bin/dbus-daemon", "--session", "--nofork", "--address=unix:path=\(root)/\(host.name)-bus"])))
    }
    try Data("[Desktop Entry]\nType=Application\nName=mpv Media Player\nExec=/usr/bin/mpv --really-quiet --ao=null --vo=null -- %U\nMimeType=audio/x-wav;\n".utf8)
        .write(to: URL(fileURLWithPath: "\(root)/b-share/applications/mpv.desktop"))

    let discoveryPort = String(Int.random(in: 20_000..<40_000))
    var agents: [ChildProcess] = []
    for host in [a, b] {
        agents.append(start(host.command([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name == "a" ? "alpha" : "beta", "--state-dir", host.state,
            "--socket", host.socket, "--listen", "\(host.address):\(host.port)", "--interface", interface, "--discovery-port", discoveryPort,
            "--dns-sd", "off", "--log-level", "error", "--container", "sync=\(root)/\(host.name)-sync",
        ])))
    }
    processes += agents
    let agentB = agents[1]
    await pair(a, b)
    func busAt(_ host: Host) async -> DBusConnection {
        var connected: DBusConnection?
        await waitFor("\(host.name)'s session bus") {
            guard let bus = try? DBusConnection(address: "unix:path=\(root)/\(host.name)-bus"), (try? await bus.hello()) != nil else { return false }
            connected = bus
            return true
        }
        return connected!
    }
    let busA = await busAt(a), busB = await busAt(b)
    /// Starts a session service on `host`; `bus` false leaves its session bus out of its
    /// environment (documents only: the service as it was before media and the tray).
    func service(_ host: Host, bus: Bool) async -> ChildProcess {
        let log = "\(root)/\(host.name)-service-\(bus).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        var environment = environments[host.name]!
        if !bus { environment.removeAll { $0.hasPrefix("DBUS_SESSION_BUS_ADDRESS=") } }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = host.command(["env", "-i"] + environment + [binaries.appendingPathComponent("handoff-session").path, "--socket", host.socket, "--backend", "none", "--verbose"])
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: log)
        do { try process.run() } catch { fail("cannot start handoff-session: \(error)") }
        await waitFor("\(host.name)'s session service") {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return bus ? text.contains("the tray shows what is nearby") : text.contains("offering documents")
        }
        return process
    }
    let serviceA = await service(a, bus: true)
    processes.append(serviceA)
    var serviceB = await service(b, bus: true)
    processes.append(serviceB)

    func mpv(_ host: Host, _ file: String, at seconds: Int) -> ChildProcess {
        start(host.command(["env", "-i"] + environments[host.name]! + ["/usr/bin/mpv", "--really-quiet", "--ao=null", "--vo=null", "--start=\(seconds)", "--", file]))
    }
    /// The session services' logs, for a failure's message.
    func logs() -> String {
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
        return files.map { "\n--- \($0):\n" + ((try? String(contentsOfFile: "\(root)/\($0)", encoding: .utf8)) ?? "") }.joined()
    }
    // One connection to B's agent asks what is nearby, for every wait (a connection each time
    // would reach the agent's limit of local clients).
    let watcher = try LocalClient(path: b.socket, role: .control)
    defer { watcher.close() }
    /// One continuation: A's mpv plays from 0:42; B continues it; milliseconds until B's mpv
    /// plays at A's position (± 1 s).
    func continueOnce() async throws -> Double {
        let player = mpv(a, "\(root)/a-sync/\(song)", at: 42)
        // mpv says it plays before its start position is reached: a person continues later.
        await waitFor("A's mpv to play at 0:42", explain: logs) {
            guard let state = await playerPosition(busA), state.playing, state.seconds >= 41.5 else { return false }
            return true
        }
        var offered: UUID?
        await waitFor("B to list A's media", explain: logs) {
            offered = (try? await watcher.call(.nearby))?.activities?
                .first { $0.activity.activityType == SystemActivityType.media }?.activity.id
            return offered != nil
        }
        let started = now()
        let reply = await call(b, .continue(activity: offered))
        guard reply.continued?.app == "system" else { fail("the continuation went to \(String(describing: reply.continued?.app))") }
        var at = 0.0
        await waitFor("B's mpv to play at 0:42", explain: logs) {
            guard let state = await playerPosition(busB), state.playing, state.seconds >= 41 else { return false }
            at = state.seconds
            return true
        }
        let elapsed = milliseconds(now() - started)
        guard at <= 45 else { fail("B's mpv plays at \(at) s, not at 0:42") }
        await quitPlayers(busB)
        await quitPlayers(busA)
        player.waitUntilExit()
        await waitFor("A's item to be withdrawn") {
            ((try? await watcher.call(.nearby))?.activities ?? []).allSatisfy { $0.activity.activityType != SystemActivityType.media }
        }
        return elapsed
    }
    /// The floor: the same mpv started on B's copy at 0:42 by hand; milliseconds until it plays there.
    func byHandOnce() async -> Double {
        let started = now()
        let player = mpv(b, "\(root)/b-sync/\(song)", at: 42)
        await waitFor("mpv to play at 0:42") {
            guard let state = await playerPosition(busB), state.playing, state.seconds >= 41 else { return false }
            return true
        }
        let elapsed = milliseconds(now() - started)
        await quitPlayers(busB)
        player.waitUntilExit()
        return elapsed
    }

    let iterations = Int(ProcessInfo.processInfo.environment["CONTINUATIONS"] ?? "") ?? 10
    let names = ["continue media", "mpv by hand"]
    let runs = try await repeatRuns(names) { _ in
        var run: [String: [Double]] = [:]
        for _ in 0..<iterations {
            run["continue media", default: []].append(try await continueOnce())
            run["mpv by hand", default: []].append(await byHandOnce())
        }
        return run
    }

    // Idle: no player. The service on B with its session bus (media and tray watching), then
    // without it, each over the same window, with B's agent beside it.
    let window = Double(ProcessInfo.processInfo.environment["IDLE_SECONDS"] ?? "") ?? 60
    /// CPU ticks and wake-ups of the service and of B's agent over the window.
    func idle(_ process: ChildProcess) async throws -> (ticks: Int, wakeups: Int, agentTicks: Int, agentWakeups: Int) {
        // A moment for what the start did to settle.
        try await Task.sleep(for: .seconds(2))
        let pids = (process.processIdentifier, agentB.processIdentifier)
        let before = (usage(pids.0).ticks, wakeups(pids.0), usage(pids.1).ticks, wakeups(pids.1))
        // The window itself.
        try await Task.sleep(for: .seconds(window))
        return (
            usage(pids.0).ticks - before.0, wakeups(from: before.1, to: wakeups(pids.0)), usage(pids.1).ticks - before.2,
            wakeups(from: before.3, to: wakeups(pids.1))
        )
    }
    let withBus = try await idle(serviceB)
    stop(serviceB)
    serviceB = await service(b, bus: false)
    processes.append(serviceB)
    let withoutBus = try await idle(serviceB)
    let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    func cpu(_ ticks: Int) -> Double { Double(ticks) / ticksPerSecond / window * 100 }
    func perSecond(_ count: Int) -> Double { Double(count) / window }

    let continueP50 = runs.percentile("continue media", 0.5)
    let floorP50 = runs.percentile("mpv by hand", 0.5)
    // What a continuation adds to the player's own start, run by run: the machine's state moves
    // both figures together, their difference much less.
    let added = (0..<runs.count).map {
        BenchmarkReport.percentile(runs.samples["continue media"]![$0], 0.5) - BenchmarkReport.percentile(runs.samples["mpv by hand"]![$0], 0.5)
    }
    print("""
        Media benchmark. Machine: \(machineDescription()).
        Two handoffd processes \(useNamespaces ? "in two network namespaces on one bridge (veth)" : "on loopback (not root: no namespaces)") \
        (release build, static Swift runtime), paired, each with a session bus of its own (dbus-daemon) and its session service \
        (handoff-session, no clipboard). Continue: mpv (mpv-mpris, no sound or picture) plays a file of A's synced folder from 0:42; \
        from `continue` on B's local socket until B's mpv, started by B's service on B's copy, says over MPRIS that it plays at 0:41 or \
        later (\(iterations) a run). By hand: the same mpv started on B's copy with --start=42, until it says the same. Both polled on \
        the bus every 10 ms.
        \(runs.agreement(minimum: 3))

        \(runs.table())

        What continuing adds to starting the player by hand, p50 of each run: \(added.map { format($0, 1) + " ms" }.joined(separator: ", ")).

        Idle, no player running, \(Int(window)) s each: B's session service with its session bus (watching players and the tray) \
        and without one (documents only, as before media).

        | B's session service | its CPU | its wake-ups | B's agent's CPU | B's agent's wake-ups |
        | --- | --- | --- | --- | --- |
        | with the session bus | \(format(cpu(withBus.ticks), 3)) % | \(format(perSecond(withBus.wakeups), 2)) /s | \(format(cpu(withBus.agentTicks), 3)) % | \(format(perSecond(withBus.agentWakeups), 2)) /s |
        | without it | \(format(cpu(withoutBus.ticks), 3)) % | \(format(perSecond(withoutBus.wakeups), 2)) /s | \(format(cpu(withoutBus.agentTicks), 3)) % | \(format(perSecond(withoutBus.agentWakeups), 2)) /s |

        """)
    let targets = Targets()
    targets.check(
        "continuing a media item adds ≤ 150 ms to starting the player by hand (p50), every run", added.allSatisfy { $0 <= 150 },
        "\(format(continueP50, 1)) ms against \(format(floorP50, 1)) ms by hand; adds \(format(added.min() ?? 0, 1))–\(format(added.max() ?? 0, 1)) ms")
    targets.check(
        "no player: the service's wake-ups with the session bus ≤ without it + 0.1/s", perSecond(withBus.wakeups) <= perSecond(withoutBus.wakeups) + 0.1,
        "\(format(perSecond(withBus.wakeups), 2)) /s against \(format(perSecond(withoutBus.wakeups), 2)) /s")
    targets.check(
        "no player: the service's CPU with the session bus ≤ 0.1 %", cpu(withBus.ticks) <= 0.1, "\(format(cpu(withBus.ticks), 3)) %")
    targets.check(
        "no player: B's agent's wake-ups with the service watching ≤ without + 5 %", perSecond(withBus.agentWakeups) <= perSecond(withoutBus.agentWakeups) * 1.05 + 0.1,
        "\(format(perSecond(withBus.agentWakeups), 2)) /s against \(format(perSecond(withoutBus.agentWakeups), 2)) /s")
    print(targets.table)
    return targets
}
