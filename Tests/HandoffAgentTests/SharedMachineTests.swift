import Foundation
import HandoffLocalAPI
import HandoffTesting
import Testing

@testable import HandoffAgent

/// Whether this machine can run a second local user's process: root, with setpriv and python3.
let canRunSecondUser =
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

/// Attacks by a second local user of the same machine: what one user's processes show the
/// other, and what one user's agent lets the other do (docs/security.md, S6).
@Suite("Attacks by a second local user of the machine", .serialized)
struct SharedMachineTests {
    /// The second user's process list watcher (process_watcher.py), started and ready.
    private func startWatcher(lookingFor secret: String) async throws -> RunningCommand {
        let user = try localUser("handoff-watcher").get()
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("process_watcher.py")
        let watcher = try RunningCommand(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            ["--reuid", "\(user.uid)", "--regid", "\(user.gid)", "--clear-groups", "/usr/bin/python3", "-c", try String(contentsOf: script, encoding: .utf8)])
        watcher.type(secret)
        try #require(await eventually(within: .seconds(60)) { watcher.output.contains("ready") }, "the watcher printed: \(watcher.output)")
        return watcher
    }

    @Test(
        "S6: A second local user polling the process list during a scripted join with a token gets nothing of it",
        .enabled(if: canRunSecondUser, "needs root, setpriv and python3 to run a second local user's process; skipped"))
    func scriptedJoinShowsNoToken() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await a.call(.createAccount(name: "home"))
            let token = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 60)).invitation).code
            let handoff = try #require(builtExecutable("handoff"))

            let watcher = try await startWatcher(lookingFor: token)
            // The join as the docs and `handoff join --help` script it: the token on standard input.
            let join = try RunningCommand(handoff, ["join", "-", "--socket", b.socket])
            join.type(token)
            join.closeInput()
            #expect(await eventually(within: .seconds(60)) { join.isFinished }, "the join did not end: \(join.output)")
            #expect(join.status == 0 && join.output.contains("Joined the account 'home'"), "the join printed: \(join.output)")
            watcher.closeInput()
            #expect(await eventually(within: .seconds(60)) { watcher.output.contains("passes") }, "the watcher printed: \(watcher.output)")
            #expect(!watcher.output.contains("seen"), "a second local user read the token: \(watcher.output)")
            #expect(try await a.call(.status).status?.members == 2)
        }
    }

    @Test(
        "S6: A token on the command line is refused before it goes anywhere, and the invitation still admits the device given it on standard input")
    func tokenArgumentRefused() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await a.call(.createAccount(name: "home"))
            let token = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 60)).invitation).code
            let handoff = try #require(builtExecutable("handoff"))

            let refused = try RunningCommand(handoff, ["join", token, "--socket", b.socket])
            #expect(await eventually(within: .seconds(60)) { refused.isFinished })
            #expect(refused.status != 0 && refused.output.contains("'ps'") && refused.output.contains("handoff join -"), "the join printed: \(refused.output)")
            #expect(try await b.call(.status).status?.account == nil)

            let join = try RunningCommand(handoff, ["join", "-", "--socket", b.socket])
            join.type(token)
            join.closeInput()
            #expect(await eventually(within: .seconds(60)) { join.isFinished })
            #expect(join.status == 0, "the join printed: \(join.output)")
            #expect(try await b.call(.status).status?.account == "home")
        }
    }

    @Test("S6: A code in a file other users can read is refused, naming the fix; in a file of mode 600 it joins")
    func tokenFileReadableByOthersRefused() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await a.call(.createAccount(name: "home"))
            let token = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 60)).invitation).code
            let handoff = try #require(builtExecutable("handoff"))
            let file = harness.root.appendingPathComponent("token")
            try Data((token + "\n").utf8).write(to: file)
            chmod(file.path, 0o644)

            let refused = try RunningCommand(handoff, ["join", "--file", file.path, "--socket", b.socket])
            #expect(await eventually(within: .seconds(60)) { refused.isFinished })
            #expect(refused.status != 0 && refused.output.contains("chmod 600"), "the join printed: \(refused.output)")
            #expect(try await b.call(.status).status?.account == nil)

            chmod(file.path, 0o600)
            let join = try RunningCommand(handoff, ["join", "--file", file.path, "--socket", b.socket])
            #expect(await eventually(within: .seconds(60)) { join.isFinished })
            #expect(join.status == 0, "the join printed: \(join.output)")
            #expect(try await b.call(.status).status?.account == "home")
        }
    }
}

/// A second local user on a shared machine, against the first user's agent on a real link.
@Suite(
    "A second local user on the link", .serialized,
    .enabled(if: canMakeNamespaces && canRunSecondUser, "needs root, iproute2, setpriv and python3 for namespaces and a second local user; skipped"))
struct SecondUserOnTheLinkTests {
    @Test("S6: A second local user holding the pairing port does not stop an invitation: it uses another port, says so, and a device joins with its code")
    func pairingPortTaken() async throws {
        try await Segment.with(hosts: ["a", "b"]) { segment in
            let user = try localUser("handoff-watcher").get()
            // The second user takes the pairing port (the link port plus one) on A's address first.
            let squat = """
                import socket, sys, time
                s = socket.socket(); s.bind((sys.argv[1], 47171)); s.listen(); print("bound", flush=True); time.sleep(600)
                """
            let squatter = try RunningCommand(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["ip", "netns", "exec", "\(segment.prefix)a", "/usr/bin/setpriv", "--reuid", "\(user.uid)", "--regid", "\(user.gid)", "--clear-groups",
                 "/usr/bin/python3", "-c", squat, segment.address("a")])
            try #require(await eventually(within: .seconds(30)) { squatter.output.contains("bound") }, "the squatter printed: \(squatter.output)")
            let a = try await segment.start("a", name: "alpha")
            let b = try await segment.start("b", name: "beta")
            try await a.call(.createAccount(name: "home"))
            let made = try await a.attempt(.invite(token: true, host: nil, lifetime: 60))
            let invitation = try #require(made.invitation, "no invitation: \(made)")
            #expect(invitation.port != 47_171)
            #expect(made.warnings?.first?.contains("pairing port 47171 is taken") == true, "\(made)")
            try await b.call(.join(code: invitation.code))
            #expect(try await b.call(.awaitJoinResult).account == "home")
        }
    }
}
