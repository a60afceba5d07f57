import Foundation
import Handoff
import HandoffLocalAPI
import HandoffSigning
import HandoffTesting
import Testing

@testable import HandoffAgent

#if canImport(Glibc)
import Glibc
#endif

/// S8 attacked the way a local attacker would: a process connects to the agent, then makes the
/// installed app's executable run behind the pid the socket names, and talks through the
/// socket itself (`impostor.py`).
@Suite("S8: app identity on the local socket", .serialized)
struct ImpostorTests {
    enum Trick: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Connect, fork; the parent execs the app, the child speaks.
        case forkExec = "fork-exec"
        /// Connect and send hello at once, fork; the parent execs the app, the child reads.
        case helloFirst = "hello-first"
        /// Connect, pass the socket to another process, exec the app; the other one speaks.
        case pass
        var testDescription: String { rawValue }
    }

    @Test("S8: A connection handed to the installed app's executable after connecting gets nothing of that app's", arguments: Trick.allCases)
    func connectThenExec(trick: Trick) async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") { $0.launchDeadline = .seconds(3) }
            try await harness.pair([a, b])
            // The installed app's executable is a copy of sleep: run, it stays put and never
            // talks to the agent, so only the impostor speaks for it.
            try await harness.installExample("MapViewer", on: b, executable: URL(fileURLWithPath: "/bin/sleep"))
            let executable = b.state.appendingPathComponent("apps/com.example.handoff.MapViewer/MapViewer").resolvingSymlinksInPath().path
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("impostor.py").path
            let impostor = try RunningCommand(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", script, b.socket, executable, "com.example.handoff.MapViewer", "\(LocalMessage.version)", trick.rawValue])
            let answered = await eventually(within: .seconds(15)) { impostor.output.contains("\"type\": \"reply\"") || impostor.output.contains("CLOSED") }
            try #require(answered, "the impostor's hello got no answer: \(impostor.output)")
            #expect(!impostor.output.contains("\"app\": {"), "the impostor was taken for the app: \(impostor.output)")

            // A continuation for that app, with a secret in its state.
            let activity = mapActivity()
            var record = ActivityRecord(activity: activity)
            record.userInfo = try UserInfoCoding.encode(["secret": "the person's notes"] as [AnyHashable: Any])
            let origin = try await a.offer(activity, answering: .answer(record), seenBy: b)
            defer { origin.client.close() }
            let reply = try await b.attempt(.continue(activity: activity.id))
            #expect(reply.error != nil, "the continuation went to the impostor")
            #expect(!impostor.output.contains("\"deliver\""), "the impostor received the activity: \(impostor.output)")
            #expect(!impostor.output.contains("willContinue"), "the impostor heard of the continuation: \(impostor.output)")
        }
    }

    @Test("S8: The installed app's own executable started with LD_PRELOAD or LD_AUDIT is not taken for the app, and is told why; started without, it is")
    func loaderInjection() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            // The installed app's executable is a copy of python3, so that it can speak for itself.
            let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath()
            try await harness.installExample("MapViewer", on: a, executable: python)
            let executable = a.state.appendingPathComponent("apps/com.example.handoff.MapViewer/MapViewer").resolvingSymlinksInPath().path
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("impostor.py").path
            func run(_ environment: [String]) async throws -> String {
                let app = try RunningCommand(
                    URL(fileURLWithPath: "/usr/bin/env"),
                    environment + [executable, script, a.socket, executable, "com.example.handoff.MapViewer", "\(LocalMessage.version)", "self"])
                let answered = await eventually(within: .seconds(15)) { app.output.contains("\"type\": \"reply\"") || app.output.contains("CLOSED") }
                try #require(answered, "the app's hello got no answer: \(app.output)")
                return app.output
            }
            // The control: the app as it is, taken for itself.
            let plain = try await run([])
            #expect(plain.contains("\"app\": {"), "the app itself was not taken for the app: \(plain)")
            // The same executable with a library preloaded (a harmless one: the agent cannot
            // tell harmless from hostile), or told to load libraries from elsewhere.
            for variable in ["LD_PRELOAD", "LD_AUDIT"] {
                let injected = try await run(["\(variable)=libm.so.6"])
                #expect(!injected.contains("\"app\": {"), "\(variable): taken for the app: \(injected)")
                // Refused, saying why, to the app itself.
                #expect(injected.contains("started with \(variable) set"), "\(variable): \(injected)")
            }
        }
    }

    /// How an attacker replaces an installed app's executable in the user's state folder.
    enum Replacement: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Bytes written over the file in place (same inode), its modification time set back.
        case writtenOver = "written over, time set back"
        /// Another file renamed over it (a new inode).
        case renamedOver = "renamed over"
        var testDescription: String { rawValue }
    }

    @Test("S8: A signed app's executable replaced after install is neither taken for the app at hello nor started for a continuation, and 'apps' says it changed", arguments: Replacement.allCases)
    func replacedExecutable(replacement: Replacement) async throws {
        try await withHarness { harness in
            let key = TeamKey.generate()
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") { $0.allowsUnsignedApps = false }
            try await harness.pair([a, b])
            // A signed app whose executable is a copy of python3, so that it can speak for itself.
            let app = try makeApp(in: harness.root, team: key.teamIdentifier)
            let python = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath()
            try FileManager.default.removeItem(at: app.appendingPathComponent("Notes"))
            try FileManager.default.copyItem(at: python, to: app.appendingPathComponent("Notes"))
            try AppSignature.sign(app, with: key)
            try await b.call(.installApp(directory: app.path))
            let installed = b.state.appendingPathComponent("apps/com.example.notes/Notes")
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("impostor.py").path
            func hello() async throws -> String {
                let run = try RunningCommand(installed, [script, b.socket, installed.path, "com.example.notes", "\(LocalMessage.version)", "self"])
                try #require(await eventually(within: .seconds(15)) { run.output.contains("\"type\": \"reply\"") || run.output.contains("CLOSED") }, "no answer: \(run.output)")
                return run.output
            }
            // The control: the installed executable is the app.
            #expect(try await hello().contains("\"app\": {"))
            #expect(try await b.call(.apps).apps?.first?.executableChanged == nil)

            // Still python, so it still runs and speaks: only its bytes differ.
            var bytes = try Data(contentsOf: installed)
            bytes.append(contentsOf: Array("# not what the team signed".utf8))
            switch replacement {
            case .writtenOver:
                var info = stat()
                stat(installed.path, &info)
                let handle = try FileHandle(forWritingTo: installed)
                try handle.write(contentsOf: bytes)
                try handle.close()
                var times = [info.st_atim, info.st_mtim]
                utimensat(AT_FDCWD, installed.path, &times, 0)
            case .renamedOver:
                let other = installed.deletingLastPathComponent().appendingPathComponent(".Notes.new")
                try bytes.write(to: other)
                chmod(other.path, 0o755)
                rename(other.path, installed.path)
            }
            let listed = try #require(try await b.call(.apps).apps?.first)
            #expect(listed.executableChanged == true, "\(listed)")
            let refused = try await hello()
            #expect(!refused.contains("\"app\": {") && refused.contains("changed since it was installed"), "taken for the app: \(refused)")

            // A continuation for it: the app is not started, and the reason is given.
            let activity = ActivityAnnouncement(id: UUID(), activityType: "com.example.notes.editing", title: "A note", teamIdentifier: key.teamIdentifier)
            let origin = try await a.offer(activity, answering: .answer(ActivityRecord(activity: activity)), seenBy: b)
            let continued = try await b.attempt(.continue(activity: activity.id))
            #expect(continued.error?.message.contains("changed since it was installed") == true, "\(continued)")
            origin.client.close()
        }
    }

    @Test("S8: Inside a user and pid namespace of its own, a process that names another's pid in its credentials is not taken for the app")
    func namespaceForgery() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            print("skipped: needs unshare (util-linux)")
            return
        }
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            try await harness.installExample("MapViewer", on: a, executable: URL(fileURLWithPath: "/bin/sleep"))
            let executable = a.state.appendingPathComponent("apps/com.example.handoff.MapViewer/MapViewer").resolvingSymlinksInPath().path
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("impostor.py").path
            let (status, probe) = try await runCommand(URL(fileURLWithPath: "/usr/bin/unshare"), ["--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "true"])
            guard status == 0 else {
                print("skipped: this system does not allow a user namespace (\(probe.prefix(200)))")
                return
            }
            let impostor = try RunningCommand(
                URL(fileURLWithPath: "/usr/bin/unshare"),
                ["--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "python3", script, a.socket, executable, "com.example.handoff.MapViewer", "\(LocalMessage.version)", "namespace"])
            let answered = await eventually(within: .seconds(15)) { impostor.output.contains("\"type\": \"reply\"") || impostor.output.contains("CLOSED") }
            try #require(answered, "the impostor's hello got no answer: \(impostor.output)")
            #expect(!impostor.output.contains("\"app\": {"), "the impostor was taken for the app: \(impostor.output)")
        }
    }

    @Test("S10: The local socket serves at most 256 clients; the next hears why, and memory stays bounded")
    func localClientCap() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            var clients: [LocalClient] = []
            var refusals: [String] = []
            for _ in 0..<300 {
                do {
                    clients.append(try await LocalClient.connect(path: a.socket, role: .control))
                } catch {
                    refusals.append("\(error)")
                }
            }
            defer { for client in clients { client.close() } }
            #expect(clients.count == LocalAPIServer.maximumClients, "\(clients.count) clients served")
            #expect(refusals.count == 300 - LocalAPIServer.maximumClients)
            #expect(refusals.allSatisfy { $0.contains("256 local clients already") }, "\(Set(refusals))")
            // Once one leaves, the next is served.
            clients.removeLast().close()
            #expect(await eventually { (try? await LocalClient.connect(path: a.socket, role: .control)).map { $0.close(); return true } ?? false })
        }
    }

    @Test("S10: A local client that starts a frame and never finishes it is disconnected")
    func halfFrame() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let ended = try await onThread { () -> Bool in
                let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                defer { close(fd) }
                var address = sockaddr_un()
                address.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(a.socket.utf8)) }
                guard withUnsafePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }) == 0 else { return false }
                var timeout = timeval(tv_sec: 30, tv_usec: 0)
                setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                // A control client's hello and its proof, as any client; then half a frame.
                func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
                send(LocalMessage.call(request: 1, .hello(version: LocalMessage.version, role: .control, bundleIdentifier: nil)).frame.encoded)
                var decoder = FrameDecoder()
                var buffer = [UInt8](repeating: 0, count: 65_536)
                var answered = false
                while !answered {
                    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    guard count > 0 else { return false }
                    decoder.append(buffer[..<count])
                    while let frame = try? decoder.next() {
                        switch try? LocalMessage(frame: frame) {
                        case .prove(let nonce)?: send(LocalMessage.proof(nonce: nonce).frame.encoded)
                        case .reply(1, _)?: answered = true
                        default: break
                        }
                    }
                }
                send(Array(LocalMessage.call(request: 2, .status).frame.encoded.prefix(12)))
                // The agent hangs up (rather than waiting for the rest forever).
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if count == 0 || (count < 0 && errno == ECONNRESET) { return true }
                    if count < 0 { return false }
                }
            }
            #expect(ended, "the agent kept a half-sent frame's connection open for 30 s")
        }
    }
}
