import Foundation
import Handoff
import HandoffLocalAPI
import Testing

@testable import HandoffAgent

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
            let answered = await waitUntil(15) { impostor.output.contains("\"type\": \"reply\"") || impostor.output.contains("CLOSED") }
            try #require(answered, "the impostor's hello got no answer: \(impostor.output)")
            #expect(!impostor.output.contains("\"app\": {"), "the impostor was taken for the app: \(impostor.output)")

            // A continuation for that app, with a secret in its state.
            let activity = mapActivity()
            var record = LocalRecord(activity: activity)
            record.userInfo = try UserInfoCoding.encode(["secret": "the person's notes"] as [AnyHashable: Any])
            let origin = try await a.offer(activity, answering: .answer(record), seenBy: b)
            defer { origin.client.close() }
            let reply = try await b.attempt(.continue(activity: activity.id))
            #expect(reply.error != nil, "the continuation went to the impostor")
            #expect(!impostor.output.contains("\"deliver\""), "the impostor received the activity: \(impostor.output)")
            #expect(!impostor.output.contains("willContinue"), "the impostor heard of the continuation: \(impostor.output)")
        }
    }
}
