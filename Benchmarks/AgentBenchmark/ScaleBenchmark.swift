// The scale benchmark (Benchmarks/scale.sh): DEVICES handoffd processes (default 32), each in
// a network namespace of its own on one bridge, in ACCOUNTS accounts (default 1) of equal
// size, with the default settings. It measures:
//   - how long until every device lists every other member of its account;
//   - discovery: `becameCurrent` on each account's first device until each other member's
//     watcher hears it, 20 changes (p50, p99, and until the last member heard it);
//   - each device's traffic (everything its interface sends) over IDLE_SECONDS (default 240, from
//     SETTLE_SECONDS, default 60, after the last discovery change),
//     each account's first device offering an activity;
//   - each agent's memory (PSS) and CPU over that window;
//   - each agent's CPU while STRANGERS addresses (default 200) beacon as devices of other
//     accounts would, one beacon a second each, for 60 s;
//   - the links open, idle and after every other member continued the first device's
//     activity once (a web page, opened with /bin/true: no app is installed 31 times).
// Nothing may grow with the square of the devices: per device, traffic and memory should stay
// flat as DEVICES grows, and the links grow with the continuations, not with the pairs.
// Prints Markdown tables; exits 1 if a target is missed. Needs root (namespaces).
import BenchmarkReport
import Foundation
import HandoffLocalAPI
import HandoffWire

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

/// Runs the benchmark and returns its targets, checked, once everything it started is gone.
func scaleBenchmark() async throws -> Targets {
    let targets = Targets()
    let environment = ProcessInfo.processInfo.environment
    let count = min(max(Int(environment["DEVICES"] ?? "") ?? 32, 2), 200)
    let accounts = min(max(Int(environment["ACCOUNTS"] ?? "") ?? 1, 1), count / 2)
    // Two of a member's refresh periods (120 s): a window of one holds one beacon of each
    // member or two, and reads as 4.6 or 9.2 B/s.
    let window = Int(environment["IDLE_SECONDS"] ?? "") ?? 240
    // Before the window: longer than the 45 s for which what joining and the discovery changes
    // set in motion lasts (a device heard over IPv6 only, a greeting).
    let settle = Int(environment["SETTLE_SECONDS"] ?? "") ?? 60
    let discoverySettle = Int(environment["DISCOVERY_SETTLE_SECONDS"] ?? "") ?? 30
    guard getuid() == 0, shell(["ip", "netns", "add", "hs\(getpid())probe"]) == 0 else {
        print("The scale benchmark needs root, to make network namespaces: run it as root.")
        targets.check("run as root (network namespaces)", false, "not root")
        return targets
    }
    shell(["ip", "netns", "del", "hs\(getpid())probe"])
    let machine = machineDescription()
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let prefix = "hs\(getpid() % 100_000)"
    undoOnFailure.withLock { $0 = prefix }
    // Names of letters only, so that `undo` tells this run's namespaces from another's.
    let letters = Array("abcdefghijklmnopqrstuvwxyz")
    let names = (0..<count).map { index -> String in String([letters[index / 26], letters[index % 26]]) }
    makeBridgedNamespaces(prefix: prefix, names: names, subnet: "10.81.0") { namespace in
        shell(["ip", "netns", "exec", namespace, "sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"])
    }
    let hosts = names.enumerated().map { index, name in
        Host(name: name, namespace: "\(prefix)\(name)", address: "10.81.0.\(index + 1)", port: 47_170)
    }
    var processes: [ChildProcess] = []
    defer {
        for process in processes { stop(process) }
        undo(namespaces: prefix)
    }
    let started = now()
    for host in hosts {
        processes.append(start(host.command([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name, "--state-dir", host.state, "--socket", host.socket,
            "--interface", "eth0", "--log-level", "error", "--browser", "/bin/true",
        ])))
    }
    await waitFor("the agents to start", seconds: 120) { hosts.allSatisfy { FileManager.default.fileExists(atPath: $0.socket) } }
    let startSeconds = Double(now() - started) / 1e9

    // Accounts: the first device of each makes it, the others join with a token.
    let size = count / accounts
    let groups: [[Host]] = (0..<accounts).map { index -> [Host] in
        let end = index == accounts - 1 ? count : (index + 1) * size
        return Array(hosts[(index * size)..<end])
    }
    let joining = now()
    for (index, group) in groups.enumerated() {
        _ = await call(group[0], .createAccount(name: "scale \(index)"))
        for host in group.dropFirst() {
            let code = await call(group[0], .invite(token: true, host: group[0].address, lifetime: 120)).invitation!.code
            _ = await call(host, .join(code: code))
            _ = await call(host, .awaitJoinResult)
        }
    }
    let joinSeconds = Double(now() - joining) / 1e9
    let meshing = now()
    for group in groups {
        for host in group {
            await waitFor("\(host.name) to list every member of its account", seconds: 120) {
                (await call(host, .devices).devices ?? []).filter { $0.isNearby && !$0.isThisDevice }.count == group.count - 1
            }
        }
    }
    let meshSeconds = Double(now() - meshing) / 1e9

    // Discovery, within each account: its first device's origin app changes its activity, a
    // web page.
    var origins: [LocalClient] = []
    var heard: [[HeardActivities]] = []
    var watchers: [LocalClient] = []
    for group in groups {
        origins.append(try webPageOrigin(socket: group[0].socket))
        var groupHeard: [HeardActivities] = []
        for host in group.dropFirst() {
            let record = HeardActivities()
            let watcher = try LocalClient(path: host.socket, role: .control) { message in
                if case .event(let event) = message, let id = event.activity?.activity.id { record.record(id) }
            }
            _ = try await watcher.call(.watch)
            watchers.append(watcher)
            groupHeard.append(record)
        }
        heard.append(groupHeard)
    }
    // The changes begin once what the joins set off has passed (each joined device's first
    // DNS-SD probes and announcements, its greetings): discovery in a settled account. Read
    // with SETTLE_SECONDS below; DISCOVERY_SETTLE_SECONDS=0 measures in the middle of it.
    try await Task.sleep(for: .seconds(discoverySettle))
    var each: [Double] = []
    var last: [Double] = []
    var offered: [UUID] = []
    for _ in 0..<20 {
        offered = []
        var starts: [UInt64] = []
        for origin in origins {
            let id = UUID()
            starts.append(now())
            try origin.send(.becameCurrent(ActivityAnnouncement(id: id, activityType: activityType, title: "Scale", teamIdentifier: team, hasWebpageURL: true)))
            offered.append(id)
        }
        for (index, groupHeard) in heard.enumerated() {
            let id = offered[index]
            await waitFor("every member to hear the activity") { groupHeard.allSatisfy { $0.contains(id) } }
            let times = groupHeard.map { milliseconds($0.time(id)! - starts[index]) }
            each += times
            last.append(times.max()!)
        }
        try await Task.sleep(for: .milliseconds(200))
    }
    FileHandle.standardError.write(Data("discovery, each change until the last member heard it (ms): \(last.map { format($0, 1) }.joined(separator: " "))\n".utf8))

    // Quiet: the first devices offer their activity, nobody asks anything.
    try await Task.sleep(for: .seconds(settle))
    let sentBefore = hosts.map { sentBytes($0.namespace!) }
    let cpuBefore = processes.map { cpuSeconds(of: $0.processIdentifier) }
    let quietStart = now()
    try await Task.sleep(for: .seconds(window))
    let quietSeconds = Double(now() - quietStart) / 1e9
    let rates = hosts.indices.map { Double(sentBytes(hosts[$0].namespace!) - sentBefore[$0]) / quietSeconds }
    let cpu = processes.indices.map { (cpuSeconds(of: processes[$0].processIdentifier) - cpuBefore[$0]) / quietSeconds * 100 }
    let memories = processes.compactMap { memory(of: $0.processIdentifier) }
    let idleLinks = hosts.map { established($0) }.reduce(0, +)

    // Strangers: addresses off the subnet, each sending one beacon-sized datagram a second to
    // the discovery group, from a namespace of their own on the bridge. Random bytes: to a
    // device of another account a stranger's sealed beacon is as unreadable.
    let strangers = min(max(Int(environment["STRANGERS"] ?? "") ?? 200, 1), 60_000)
    let strangerSeconds = 60.0
    addBridgedNamespace(prefix: prefix, name: "zz", address: "10.81.0.250")
    for host in hosts {
        // The agents cannot route answers to the strangers' addresses; they must hear them anyway.
        shell(["ip", "netns", "exec", host.namespace!, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.eth0.rp_filter=0"])
    }
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Scripts/spoof-flood.py").standardizedFileURL.path
    let cpuBeforeStrangers = processes.map { cpuSeconds(of: $0.processIdentifier) }
    let strangersStart = now()
    let strangerOutput = Pipe()
    let flooder = start([
        "ip", "netns", "exec", "\(prefix)zz", "python3", script, "239.255.71.68", "47168", String(strangers), String(strangers),
        String(strangerSeconds), String(Beacon.size), "10.82", "eth0",
    ], output: strangerOutput)
    let strangerSent = String(decoding: strangerOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    flooder.waitUntilExit()
    let strangersElapsed = Double(now() - strangersStart) / 1e9
    let strangerCPU = processes.indices.map { (cpuSeconds(of: processes[$0].processIdentifier) - cpuBeforeStrangers[$0]) / strangersElapsed * 100 }
    var stillListed = true
    for group in groups {
        for host in group where (await call(host, .devices).devices ?? []).filter({ $0.isNearby && !$0.isThisDevice }).count != group.count - 1 {
            stillListed = false
        }
    }

    // Every other member continues its account's activity once: one link each, to the first
    // device (the page is fetched over it, then "opened" with /bin/true).
    for (index, group) in groups.enumerated() {
        for host in group.dropFirst() {
            let reply = await call(host, .continue(activity: offered[index]))
            if let error = reply.error { fail("\(host.name) could not continue: \(error)") }
        }
    }
    let linksAfter = hosts.map { established($0) }.reduce(0, +)
    let firstDevicesLinks = groups.map { established($0[0]) }
    for watcher in watchers { watcher.close() }
    for origin in origins { origin.close() }

    let first = Set(groups.map { $0[0].name })
    let memberRates = hosts.indices.filter { !first.contains(hosts[$0].name) }.map { rates[$0] }
    let originRates = hosts.indices.filter { first.contains(hosts[$0].name) }.map { rates[$0] }
    func mb(_ kb: Double) -> String { format(kb / 1024, 1) + " MB" }
    let pss = memories.map { Double($0.pss) }
    let uss = memories.map { Double($0.uss) }
    print("""
        Scale benchmark. Machine: \(machine).
        \(count) handoffd processes, each in a network namespace of its own on one bridge (IPv4 and IPv6 link-local), in \(accounts) \
        account\(accounts == 1 ? "" : "s") of \(size)\(count % accounts == 0 ? "" : " (the last larger)"); defaults (DNS-SD on, links kept an hour unused); \
        release build, static Swift runtime; discovery changes from \(discoverySettle) s after the last join, \
        quiet window \(window) s, from \(settle) s after the last discovery change. \
        One run (its setup takes minutes): the spread between runs is not measured here; docs/agent.md (Scale) gives several.

        | measure | value |
        | --- | --- |
        | all \(count) agents started | \(format(startSeconds, 1)) s |
        | \(count - accounts) joins, one after another | \(format(joinSeconds, 1)) s (\(format(joinSeconds / Double(count - accounts) * 1000, 0)) ms each) |
        | until every device listed every member of its account | \(format(meshSeconds, 1)) s |
        | discovery, to each member: p50 / p99 | \(format(percentile(each, 0.5))) / \(format(percentile(each, 0.99))) ms |
        | discovery, until the last member of the account heard it: p50 / p99 | \(format(percentile(last, 0.5))) / \(format(percentile(last, 0.99))) ms |
        | traffic of a member without an activity: median / max | \(format(percentile(memberRates, 0.5), 1)) / \(format(memberRates.max() ?? 0, 1)) B/s |
        | traffic of a first device, with an activity: median / max | \(format(percentile(originRates, 0.5), 1)) / \(format(originRates.max() ?? 0, 1)) B/s |
        | memory per agent, PSS (the executable's shared pages divided among the \(count)): median / max | \(mb(percentile(pss, 0.5))) / \(mb(pss.max() ?? 0)) |
        | memory per agent, USS (its own pages only): median / max | \(mb(percentile(uss, 0.5))) / \(mb(uss.max() ?? 0)) |
        | CPU per agent over the window: median / max | \(format(percentile(cpu, 0.5), 3)) / \(format(cpu.max() ?? 0, 3)) % |
        | CPU per agent while \(strangers) strangers beaconed (\(strangerSent.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "SENT ", with: "")) beacons in \(Int(strangerSeconds)) s): median / max | \(format(percentile(strangerCPU, 0.5), 3)) / \(format(strangerCPU.max() ?? 0, 3)) % |
        | every device still listed every member of its account after that | \(stillListed ? "yes" : "NO") |
        | TCP connections open, idle (all namespaces, both ends) | \(idleLinks) |
        | the same after every member continued once | \(linksAfter) (on each first device: \(firstDevicesLinks.map(String.init).joined(separator: ", "))) |

        """)
    targets.check("discovery to each member p99 ≤ 50 ms", percentile(each, 0.99) <= 50, "\(format(percentile(each, 0.99))) ms")
    targets.check("a member without an activity sends ≤ 10 B/s (median)", percentile(memberRates, 0.5) <= 10, "\(format(percentile(memberRates, 0.5), 1)) B/s")
    targets.check("a first device with an activity sends ≤ 40 B/s (median)", percentile(originRates, 0.5) <= 40, "\(format(percentile(originRates, 0.5), 1)) B/s")
    targets.check("no link open while idle", idleLinks == 0, "\(idleLinks)")
    targets.check("an agent hearing \(strangers) strangers uses < 1 % of a core (median)", percentile(strangerCPU, 0.5) < 1, "\(format(percentile(strangerCPU, 0.5), 3)) %")
    targets.check("the strangers hide no member", stillListed, stillListed ? "none hidden" : "a member was no longer listed")
    // One link per continuing member, counted at both ends.
    targets.check("links grow with the continuations, not with the pairs", linksAfter <= 2 * (count - accounts), "\(linksAfter) for \(count - accounts) continuations")
    print(targets.table)
    return targets
}

/// An origin app whose activity is a web page: it answers every save with the page.
func webPageOrigin(socket: String) throws -> LocalClient {
    let box = OriginBox()
    let client = try LocalClient(path: socket, role: .app) { message in
        guard case .save(let request, let id) = message, let client = box.client else { return }
        let activity = ActivityAnnouncement(id: id, activityType: activityType, title: "Scale", teamIdentifier: team, hasWebpageURL: true)
        try? client.send(.saved(request: request, ActivityRecord(activity: activity, webpageURL: "https://example.com/scale")))
    }
    box.client = client
    return client
}

/// The established TCP connections in `host`'s namespace: its links (the local sockets are Unix ones).
func established(_ host: Host) -> Int {
    let output = Pipe()
    let process = start(host.command(["ss", "-Htn", "state", "established"]), output: output)
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return text.split(separator: "\n").count
}
