import Foundation
import HandoffLocalAPI
import HandoffTesting
import Testing
import HandoffProcess

/// Runs a built executable to its end and returns its status and what it printed. It waits
/// on a thread of its own: the program may need an agent in this process to answer meanwhile.
func run(_ name: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, output: String, errors: String) {
    let binary = try #require(builtExecutable(name), "\(name) was not built next to the tests")
    return try await onThread { try runToEnd(binary, arguments, environment: environment) }
}

func runToEnd(_ binary: URL, _ arguments: [String], environment: [String: String]) throws -> (status: Int32, output: String, errors: String) {
    let process = ChildProcess()
    process.executableURL = binary
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    // A binary the test just copied is busy while another test's child, forked meanwhile, still
    // holds the copy's descriptor (until it execs): tried again, as the agent's launcher does.
    var wait = 0.005
    while true {
        do {
            try process.run()
            break
        } catch let error as ChildProcess.LaunchError where error.code == ETXTBSY && wait < 2 {
            Thread.sleep(forTimeInterval: wait)
            wait *= 2
        }
    }
    let out = output.fileHandleForReading.readDataToEndOfFile()
    let err = errors.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
}

/// handoffd and handoff as processes: what a person sees when something is wrong.
@Suite("The handoffd and handoff programs")
struct ProcessTests {
    let folder = URL(fileURLWithPath: "/tmp/hp-\(UUID().uuidString.prefix(8))", isDirectory: true)

    @Test("handoff runs every command but a plain continue through handoff-cli: the same version, help and mistakes, with the same exit codes")
    func frontRunsTheFullCommandLine() async throws {
        let version = try await run("handoff", ["--version"])
        let full = try await run("handoff-cli", ["--version"])
        #expect(version.status == 0 && version.output == full.output && !full.output.isEmpty, "\(version) against \(full)")
        let help = try await run("handoff", ["--help"])
        #expect(help.status == 0 && help.output.contains("USAGE: handoff <subcommand>"), "\(help)")
        let mistake = try await run("handoff", ["continue"])
        #expect(mistake.status == 64 && mistake.errors.contains("name an activity's id, or give --latest"), "\(mistake)")
        let socket = folder.appendingPathComponent("none.sock").path
        let status = try await run("handoff", ["status", "--socket", socket])
        #expect(status.status == 3 && status.errors.contains("no Handoff agent is running at \(socket)"), "\(status)")
        let quick = try await run("handoff", ["continue", "--latest", "--socket", socket])
        #expect(quick.status == 3 && quick.errors.contains("no Handoff agent is running at \(socket)"), "\(quick)")
    }

    @Test("handoff-programs, the one binary the Debian package ships, is each program by the name it is started by, and through the front; another name is refused")
    func sharedBinaryByName() async throws {
        let shared = try #require(builtExecutable("handoff-programs"))
        let front = try #require(builtExecutable("handoff"))
        let libexec = folder.appendingPathComponent("libexec/handoff", isDirectory: true)
        let bin = folder.appendingPathComponent("bin", isDirectory: true)
        try FileManager.default.createDirectory(at: libexec, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.copyItem(at: shared, to: libexec.appendingPathComponent("handoff-programs"))
        for name in ["handoff-cli", "handoff-session", "handoff-browser-host"] {
            try FileManager.default.createSymbolicLink(atPath: libexec.appendingPathComponent(name).path, withDestinationPath: "handoff-programs")
        }
        try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent("handoffd").path, withDestinationPath: "../libexec/handoff/handoff-programs")
        try FileManager.default.copyItem(at: front, to: bin.appendingPathComponent("handoff"))
        let version = try await run("handoff-cli", ["--version"]).output
        #expect(!version.isEmpty)
        let daemon = try runToEnd(bin.appendingPathComponent("handoffd"), ["--version"], environment: [:])
        #expect(daemon.status == 0 && daemon.output == version, "\(daemon)")
        let viaFront = try runToEnd(bin.appendingPathComponent("handoff"), ["devices", "--help"], environment: [:])
        #expect(viaFront.status == 0 && viaFront.output.contains("USAGE: handoff devices"), "\(viaFront)")
        let session = try runToEnd(libexec.appendingPathComponent("handoff-session"), ["--help"], environment: [:])
        #expect(session.status == 0 && session.output.contains("usage: handoff-session"), "\(session)")
        let other = try runToEnd(libexec.appendingPathComponent("handoff-programs"), ["--version"], environment: [:])
        #expect(other.status == 64 && other.output.contains("start it by one of its names"), "\(other)")
    }

    @Test("handoff finds handoff-cli beside it, beside the link it was called through, in ../libexec/handoff or on PATH; without it, a plain continue still runs and anything else names what is missing and exits 127")
    func frontWithoutTheFullCommandLine() async throws {
        let front = try #require(builtExecutable("handoff"))
        let full = try #require(builtExecutable("handoff-cli"))
        let bin = folder.appendingPathComponent("bin", isDirectory: true)
        let libexec = folder.appendingPathComponent("libexec/handoff", isDirectory: true)
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let alone = bin.appendingPathComponent("handoff")
        try FileManager.default.copyItem(at: front, to: alone)
        let socket = folder.appendingPathComponent("none.sock").path

        let missing = try await onThread { try runToEnd(alone, ["status", "--socket", socket], environment: ["PATH": "/usr/bin:/bin"]) }
        #expect(missing.status == 127, "\(missing)")
        #expect(missing.errors.contains("cannot run the full command line, handoff-cli"), "\(missing.errors)")
        #expect(missing.errors.contains("not found beside \(bin.path)/handoff, in ../libexec/handoff, or on PATH"), "\(missing.errors)")
        let quick = try await onThread { try runToEnd(alone, ["continue", "--latest", "--socket", socket], environment: [:]) }
        #expect(quick.status == 3, "a plain continue needs nothing else: \(quick)")

        try FileManager.default.createDirectory(at: libexec, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: libexec.appendingPathComponent("handoff-cli"), withDestinationURL: full)
        let found = try await onThread { try runToEnd(alone, ["status", "--socket", socket], environment: ["PATH": "/usr/bin:/bin"]) }
        #expect(found.status == 3 && found.errors.contains("no Handoff agent is running at \(socket)"), "\(found)")
        try FileManager.default.removeItem(at: libexec.appendingPathComponent("handoff-cli"))

        // Called through a symbolic link whose folder holds handoff-cli (a link into a build).
        let linked = folder.appendingPathComponent("linked", isDirectory: true)
        try FileManager.default.createDirectory(at: linked, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: linked.appendingPathComponent("handoff"), withDestinationURL: alone)
        try FileManager.default.createSymbolicLink(at: linked.appendingPathComponent("handoff-cli"), withDestinationURL: full)
        let throughLink = try await onThread { try runToEnd(linked.appendingPathComponent("handoff"), ["status", "--socket", socket], environment: ["PATH": "/usr/bin:/bin"]) }
        #expect(throughLink.status == 3 && throughLink.errors.contains("no Handoff agent is running at \(socket)"), "\(throughLink)")

        // Or on PATH only.
        let onPath = try await onThread {
            try runToEnd(alone, ["status", "--socket", socket], environment: ["PATH": "\(full.deletingLastPathComponent().path):/usr/bin:/bin"])
        }
        #expect(onPath.status == 3 && onPath.errors.contains("no Handoff agent is running at \(socket)"), "\(onPath)")
    }

    @Test("A bad flag is named, and handoffd exits with status 2")
    func badFlag() async throws {
        let result = try await run("handoffd", ["--state-dir", folder.path, "--listen", "nowhere", "--interface", "lo"])
        #expect(result.status == 2)
        #expect(result.errors.contains("--listen: 'nowhere' is not HOST:PORT"), "\(result.errors)")
    }

    @Test("A configuration file that is missing or wrong is named, with the line")
    func badConfigFile() async throws {
        let missing = try await run("handoffd", ["--config", folder.appendingPathComponent("nope.conf").path])
        #expect(missing.status == 2)
        #expect(missing.errors.contains("cannot read the configuration file \(folder.path)/nope.conf"), "\(missing.errors)")

        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("handoffd.conf")
        try "name = desk\nlisten 127.0.0.1:1\n".write(to: file, atomically: true, encoding: .utf8)
        let wrong = try await run("handoffd", ["--config", file.path])
        #expect(wrong.status == 2)
        #expect(wrong.errors.contains("\(file.path):2: expected 'key = value'"), "\(wrong.errors)")
    }

    @Test("A damaged state file is named, and handoffd does not start")
    func corruptState() async throws {
        let state = folder.appendingPathComponent("state", isDirectory: true)
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("{\"id\": 5".utf8).write(to: state.appendingPathComponent("device.json"))
        let result = try await run("handoffd", ["--state-dir", state.path, "--socket", folder.appendingPathComponent("s").path, "--listen", "127.0.0.1:0", "--interface", "lo"])
        #expect(result.status == 1)
        #expect(result.errors.contains("\(state.path)/device.json"), "\(result.errors)")
    }

    @Test("handoffd stamps where each call is into the file HANDOFF_HOP_TRACE names (Benchmarks/hops.sh); a file it cannot open stops nothing")
    func hopTrace() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let binary = try #require(builtExecutable("handoffd"))
        let trace = folder.appendingPathComponent("hops.trace").path
        // The second names a file in a folder that does not exist: no stamps, and the agent works.
        let unwritable = folder.appendingPathComponent("missing/hops.trace").path
        for traced in [true, false] {
            let socket = folder.appendingPathComponent(traced ? "traced.sock" : "plain.sock").path
            let process = ChildProcess()
            process.executableURL = binary
            process.arguments = [
                "--state-dir", folder.appendingPathComponent(traced ? "traced" : "plain").path, "--socket", socket, "--listen", "127.0.0.1:0",
                "--interface", "none", "--log-level", "error",
            ]
            var environment = ProcessInfo.processInfo.environment
            environment["HANDOFF_HOP_TRACE"] = traced ? trace : unwritable
            process.environment = environment
            try process.run()
            let up = await eventually { (try? await run("handoff", ["status", "--socket", socket]).status) == 0 }
            #expect(up, "handoffd did not answer")
            #expect(try await run("handoff", ["status", "--socket", socket]).status == 0)
            process.terminate()
            process.waitUntilExit()
            let lines = ((try? String(contentsOfFile: trace, encoding: .utf8)) ?? "").split(separator: "\n")
            let reads = lines.filter { $0.hasPrefix("\(process.processIdentifier) ") && $0.hasSuffix(" read call") }
            if traced {
                // Each status call after its hello (read with the connection), stamped as it was
                // read, with this process's id, a time and the processor it ran on.
                #expect(reads.count >= 2, "\(lines)")
                #expect(reads.allSatisfy { Int($0.split(separator: " ")[1]) != nil }, "\(reads)")
                #expect(reads.allSatisfy { (Int($0.split(separator: " ")[2]) ?? -1) >= 0 }, "\(reads)")
            } else {
                #expect(reads.isEmpty, "\(reads)")
                #expect(!FileManager.default.fileExists(atPath: unwritable))
            }
        }
    }

    @Test("handoffd stops gracefully on SIGTERM and removes its socket; handoff then says no agent runs, with status 3")
    func gracefulStop() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let socket = folder.appendingPathComponent("agent.sock").path
        let process = ChildProcess()
        let binary = try #require(builtExecutable("handoffd"))
        process.executableURL = binary
        process.arguments = ["--state-dir", folder.appendingPathComponent("state").path, "--socket", socket, "--listen", "127.0.0.1:0", "--interface", "none", "--log-level", "error"]
        try process.run()
        let up = await eventually { (try? await run("handoff", ["status", "--socket", socket]).status) == 0 }
        #expect(up, "handoffd did not answer")
        let status = try await run("handoff", ["status", "--json", "--socket", socket])
        #expect(status.output.contains("\"version\""))
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(!FileManager.default.fileExists(atPath: socket))
        let after = try await run("handoff", ["status", "--socket", socket])
        #expect(after.status == 3)
        #expect(after.errors.contains("no Handoff agent is running at \(socket)"))
    }

    /// handoffd (`binary`, else the one built) with its socket and state in `folder`, logging at
    /// debug level to a file there, giving back memory after `idleRelease`.
    func startAgent(idleRelease: String, binary: URL? = nil) throws -> (process: ChildProcess, socket: String, log: URL) {
        let socket = folder.appendingPathComponent("agent.sock").path
        let log = folder.appendingPathComponent("handoffd.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = ChildProcess()
        if let binary {
            process.executableURL = binary
        } else {
            let built = try #require(builtExecutable("handoffd"))
            process.executableURL = built
        }
        process.arguments = [
            "--state-dir", folder.appendingPathComponent("state").path, "--socket", socket, "--listen", "127.0.0.1:0", "--interface", "none",
            "--idle-release", idleRelease, "--log-level", "debug",
        ]
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
        return (process, socket, log)
    }

    /// The first line of `log` that says `what`.
    func logLine(_ log: URL, _ what: String) -> Substring? {
        (try? String(contentsOf: log, encoding: .utf8))?.split(separator: "\n").first { $0.contains(what) }
    }

    /// The resident memory before and after a release, from its log line (`residentKB=A → B`).
    func resident(_ line: Substring) throws -> (before: Int, after: Int) {
        let field = try #require(line.firstRange(of: /residentKB=(\d+) → (\d+)/), "\(line)")
        let numbers = line[field].split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        try #require(numbers.count == 2, "\(line)")
        return (numbers[0], numbers[1])
    }

    @Test("An idle handoffd gives back memory and code pages, then works on as before")
    func idleRelease() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (process, socket, log) = try startAgent(idleRelease: "1s")
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(await eventually { (try? await run("handoff", ["status", "--socket", socket]).status) == 0 })
        let created = try await run("handoff", ["account", "create", "--name", "home", "--socket", socket])
        #expect(created.status == 0, "account create: \(created.status), \(created.errors)")
        // The agent reports what it gave back once it has been idle for a second.
        var line: Substring?
        _ = await eventually(within: .seconds(15)) {
            line = logLine(log, "idle: gave back memory")
            return line != nil
        }
        let released = try #require(line, "handoffd never reported giving back memory")
        let (before, after) = try resident(released)
        #expect(after < before, "resident memory did not shrink: \(released)")
        // The code comes back as it runs: the agent still answers, and does a new thing.
        #expect(try await run("handoff", ["status", "--socket", socket]).status == 0)
        let invitation = try await run("handoff", ["device", "invite", "--token", "--socket", socket])
        #expect(invitation.status == 0, "\(invitation.errors)")
    }

    @Test("A handoffd kept busy from its start still gives back what starting touched, once, about 2 s in, and works on")
    func startupRelease() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // A copy written just now, as an upgrade or a build leaves it: its pages are dirty in the
        // page cache until they reach the disk, which once kept the agent from dropping them.
        let binary = folder.appendingPathComponent("handoffd")
        try FileManager.default.copyItem(at: try #require(builtExecutable("handoffd")), to: binary)
        // The idle release is far off: only the one after starting can give anything back.
        let (process, socket, log) = try startAgent(idleRelease: "10m", binary: binary)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(await eventually { (try? await run("handoff", ["status", "--socket", socket]).status) == 0 })
        // Busy throughout: a client asks something at least every 100 ms, as a benchmark or a
        // busy desktop would, so no idle spell ever begins.
        var line: Substring?
        let until = ContinuousClock.now + .seconds(20)
        while line == nil, ContinuousClock.now < until {
            #expect(try await run("handoff", ["status", "--socket", socket]).status == 0)
            line = logLine(log, "started: gave back memory")
        }
        let released = try #require(line, "handoffd, kept busy, never gave back what starting touched")
        let (before, after) = try resident(released)
        #expect(after < before, "resident memory did not shrink: \(released)")
        // Its own code is what starting mapped most of (64 KB around every page it ran).
        // `code=handoffd libc.so.6 ...`, up to the next field.
        let words = released.split(separator: " ").drop { !$0.hasPrefix("code=") }
        let files = words.prefix(1).map { $0.dropFirst(5) } + words.dropFirst().prefix { !$0.contains("=") && !$0.hasPrefix("[") }
        #expect(files.contains("handoffd"), "the executable's code was not given back: \(released)")
        #expect(try await run("handoff", ["status", "--socket", socket]).status == 0)
        #expect(try await run("handoff", ["account", "create", "--name", "home", "--socket", socket]).status == 0)
        let invitation = try await run("handoff", ["device", "invite", "--token", "--socket", socket])
        #expect(invitation.status == 0, "\(invitation.errors)")
        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.components(separatedBy: "started: gave back memory").count == 2, "given back once")
        #expect(!text.contains("idle: gave back memory"), "the idle release is 10 minutes off")
    }

    @Test("handoff doctor with no agent says so, with what to do, and exits with 3; with --json too")
    func doctorWithoutAgent() async throws {
        let socket = folder.appendingPathComponent("none.sock").path
        let text = try await run("handoff", ["doctor", "--socket", socket])
        #expect(text.status == 3)
        #expect(text.output.contains("PROBLEM  agent: no Handoff agent is running at \(socket)"), "\(text.output)")
        #expect(text.output.contains("systemctl --user start handoffd"))
        let json = try await run("handoff", ["doctor", "--json", "--socket", socket])
        #expect(json.status == 3)
        let checks = try JSONDecoder().decode([LocalCheck].self, from: Data(json.output.utf8))
        #expect(checks.first?.area == "agent" && checks.first?.status == .problem)
    }

    @Test("Every exit code in docs/agent.md's table is the one handoff gives, against a real agent")
    func exitCodes() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let socket = folder.appendingPathComponent("agent.sock").path
        let documented = try Self.documentedExitCodes()
        #expect(documented == [0, 1, 3, 4, 5, 6, 7, 8, 64, 127], "docs/agent.md's table changed: \(documented)")
        // 127 (handoff-cli missing) is checked by frontWithoutTheFullCommandLine.
        func expect(_ arguments: [String], _ code: Int32, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let result = try await run("handoff", arguments + ["--socket", socket])
            #expect(result.status == code, "handoff \(arguments.joined(separator: " ")): \(result.status), \(result.errors)", sourceLocation: sourceLocation)
        }
        // 3: no agent at the socket, for a call and for doctor alike.
        try await expect(["status"], 3)
        try await expect(["list"], 3)
        try await expect(["continue", "--latest"], 3)
        // 64: bad arguments, refused before the agent is asked.
        try await expect(["continue", "not-an-id"], 64)
        try await expect(["continue", UUID().uuidString, "--latest"], 64)
        try await expect(["no-such-command"], 64)

        let process = ChildProcess()
        let binary = try #require(builtExecutable("handoffd"))
        process.executableURL = binary
        process.arguments = [
            "--name", "this-one", "--state-dir", folder.appendingPathComponent("state").path, "--socket", socket, "--listen", "127.0.0.1:0",
            "--interface", "none", "--log-level", "error",
        ]
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(await eventually { (try? await run("handoff", ["status", "--socket", socket]).status) == 0 })
        // 0: done.
        try await expect(["status"], 0)
        // 7: no account yet; then one already.
        try await expect(["device", "invite"], 7)
        try await expect(["account", "create", "--name", "home"], 0)
        try await expect(["account", "create", "--name", "again"], 7)
        // 4: no such activity, device or app.
        try await expect(["continue", UUID().uuidString], 4)
        try await expect(["continue", "--latest"], 4)
        try await expect(["device", "remove", "nobody"], 4)
        try await expect(["apps", "remove", "com.example.none"], 4)
        // 6: not allowed (a device cannot remove itself).
        try await expect(["device", "remove", "this-one"], 6)
        // 1: failed, the message says why (an app folder that does not exist).
        try await expect(["apps", "install", folder.appendingPathComponent("missing.app").path], 1)
        // 8: doctor found something that keeps devices apart (no interface to look on).
        try await expect(["doctor"], 8)
        // 5 (a continuation that failed) needs another device: ExitCodeTests checks its mapping.
    }

    /// The codes in docs/agent.md's exit code table.
    static func documentedExitCodes() throws -> [Int32] {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/agent.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let table = try #require(text.range(of: "| code | meaning |"))
        return text[table.upperBound...].split(separator: "\n").dropFirst().prefix { $0.hasPrefix("|") }
            .compactMap { Int32($0.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) ?? "") }
    }

    @Test("handoff refuses bad arguments before asking the agent")
    func badArguments() async throws {
        let result = try await run("handoff", ["continue", "not-an-id", "--socket", "/tmp/none.sock"])
        #expect(result.status != 0)
        #expect(result.errors.contains("'not-an-id' is not an activity id"), "\(result.errors)")
    }

    /// The context switches (voluntary: a thread went to sleep) of every thread of `pid`, so far.
    private func contextSwitches(of pid: Int32) -> Int {
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return threads.reduce(0) { total, thread in
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8)) ?? ""
            let line = text.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") }
            return total + (line.flatMap { Int($0.split(separator: "\t").last ?? "") } ?? 0)
        }
    }

    /// Starts handoffd with `environment`, makes `calls` local calls on one connection, and
    /// returns how many times its threads went to sleep per call.
    private func sleepsPerCall(environment: [String: String], calls: Int) async throws -> Double {
        try await sleepsPerCallAndLoops(environment: environment, calls: calls).sleeps
    }

    /// The same, and how many event-loop threads the agent runs.
    private func sleepsPerCallAndLoops(environment: [String: String], calls: Int) async throws -> (sleeps: Double, loops: Int) {
        let home = folder.appendingPathComponent(UUID().uuidString.prefix(6).description, isDirectory: true)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let socket = home.appendingPathComponent("agent.sock").path
        let binary = try #require(builtExecutable("handoffd"))
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = [
            "--state-dir", home.appendingPathComponent("state").path, "--socket", socket, "--listen", "127.0.0.1:0", "--interface", "none",
            "--idle-release", "off", "--log-level", "error",
        ]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(await eventually { (try? await LocalClient.connect(path: socket, role: .control))?.close() != nil })
        let client = try await LocalClient.connect(path: socket, role: .control)
        defer { client.close() }
        for _ in 0..<20 { _ = try await client.call(.devices) }
        let before = contextSwitches(of: process.processIdentifier)
        for _ in 0..<calls { _ = try await client.call(.devices) }
        let sleeps = Double(contextSwitches(of: process.processIdentifier) - before) / Double(calls)
        // Each loop's thread has a name of its own; a thread a loop starts (the local socket's
        // acceptor) takes its name too, so names are counted, not threads.
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/task")) ?? []
        let names = Set(tasks.compactMap { try? String(contentsOfFile: "/proc/\(process.processIdentifier)/task/\($0)/comm", encoding: .utf8) })
        return (sleeps, names.filter { $0.hasPrefix("NIO-SGLTN-") }.count)
    }

    @Test("handoffd runs its tasks on its event loops: a local call wakes the thread that reads it, and no other")
    func tasksOnEventLoops() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // One event loop, so that no call can land on a second one by chance: a call is then one
        // wake-up (the loop's, for the call's bytes), while with Swift's own threads the actor's
        // work wakes a pool thread too, and the answer's write the loop again.
        let loops = try await sleepsPerCall(environment: ["HANDOFF_EXECUTOR": "1"], calls: 150)
        let swiftPool = try await sleepsPerCall(environment: ["HANDOFF_EXECUTOR": "swift"], calls: 150)
        #expect(loops < 1.5, "\(loops) sleeps per call on the event loops")
        #expect(swiftPool > 2, "\(swiftPool) sleeps per call with Swift's pool: the comparison shows nothing")
        // The default is one loop, whatever the number of cores: a continuation's connections
        // then share its thread (docs/agent.md, Performance).
        let standard = try await sleepsPerCallAndLoops(environment: [:], calls: 150)
        #expect(standard.sleeps < 1.5, "\(standard.sleeps) sleeps per call by default")
        #expect(standard.loops == 1, "\(standard.loops) event-loop threads by default")
        let two = try await sleepsPerCallAndLoops(environment: ["HANDOFF_EXECUTOR": "2"], calls: 20)
        #expect(two.loops == 2, "HANDOFF_EXECUTOR=2 runs \(two.loops) event-loop threads")
    }
}
