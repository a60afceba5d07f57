import Foundation
import HandoffLocalAPI
import HandoffTesting
import Testing

@testable import HandoffAgent

/// Every file under `folder` by relative path, with its bytes.
private func snapshot(_ folder: URL) -> [String: Data] {
    var files: [String: Data] = [:]
    let enumerator = FileManager.default.enumerator(atPath: folder.path)
    while let path = enumerator?.nextObject() as? String {
        var isDirectory: ObjCBool = false
        let full = folder.appendingPathComponent(path).path
        guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
        // The socket and the apps' logs are the running agent's, not its state.
        if path.hasSuffix(".sock") || path.hasPrefix("logs/") { continue }
        files[path] = FileManager.default.contents(atPath: full)
    }
    return files
}

@Suite("The state folder's format")
struct StateFormatTests {
    @Test("A fresh state folder is stamped with the current format")
    func freshFolder() throws {
        let folder = try makeFolder("state-fresh")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try StateStore(directory: folder)
        #expect(try StateFormat.prepare(store) == nil)
        #expect(try StateFormat.version(of: store) == StateFormat.current)
    }

    @Test("A state folder of the previous format (no format.json) is upgraded in place when the agent starts: account, devices and apps are still there and still continue; no copy is left")
    func upgradesPreviousFormat() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            try await harness.installMapViewer(on: a)
            try await harness.installMapViewer(on: b)
            let before = try await a.call(.status).status
            await a.agent?.stop()
            // What the previous format wrote: these very files, without a version.
            let format = a.state.appendingPathComponent(StateFormat.fileName)
            try FileManager.default.removeItem(at: format)
            let files = snapshot(a.state)

            let again = try await harness.start("alpha")
            let status = try #require(try await again.call(.status).status)
            #expect(status.account == "home")
            #expect(status.device.id == before?.device.id)
            #expect(try await again.call(.apps).apps?.map(\.bundleIdentifier) == ["com.example.handoff.MapViewer"])
            let stamp = try JSONDecoder().decode(StateFormat.Stamp.self, from: Data(contentsOf: format))
            #expect(stamp.format == StateFormat.current)
            #expect(!FileManager.default.fileExists(atPath: a.state.appendingPathComponent(StateFormat.backupFolder).path))
            // The files the previous format wrote are unchanged (the upgrade only adds its version).
            for (path, data) in files where !path.hasPrefix("data/") {
                #expect(FileManager.default.contents(atPath: a.state.appendingPathComponent(path).path) == data, "\(path) changed")
            }
            // And the devices still continue: beta takes alpha's map.
            let origin = try harness.runMapViewer(on: again)
            origin.send("show 37.7887 -122.4075 0.02")
            let offered = await eventually { (try? await b.nearby().first?.activity.activityType) == mapViewing }
            try #require(offered, "beta never listed the upgraded alpha's activity")
            let offer = try #require(try await b.nearby().first)
            #expect(try await b.call(.continue(activity: offer.activity.id)).continued?.app == "com.example.handoff.MapViewer")
        }
    }

    @Test("A state folder a newer Handoff wrote stops the agent and handoffd with a message that says so; nothing in it changes")
    func newerFormatRefused() async throws {
        let handoffd = try #require(builtExecutable("handoffd"))
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            try await a.call(.createAccount(name: "home"))
            await a.agent?.stop()
            try Data(#"{"format": 3, "writtenBy": "9.0.0"}"#.utf8).write(to: a.state.appendingPathComponent(StateFormat.fileName))
            let files = snapshot(a.state)

            let error = await #expect(throws: AgentError.self) { _ = try await harness.start("alpha") }
            #expect("\(error.map { "\($0)" } ?? "")".contains("written by a newer Handoff (state format 3; this handoffd \(handoffVersion) reads formats up to \(StateFormat.current))"))
            let (code, text) = try await runCommand(
                handoffd, ["--state-dir", a.state.path, "--socket", harness.root.appendingPathComponent("x.sock").path, "--interface", "lo"])
            #expect(code == 1, "\(text)")
            #expect(text.contains("was written by a newer Handoff"), "\(text)")
            #expect(snapshot(a.state) == files)
        }
    }

    @Test("An upgrade step that fails puts every file back as it was, the version included, and says why")
    func failedUpgradeRestores() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            try await a.call(.createAccount(name: "home"))
            await a.agent?.stop()
            let store = try StateStore(directory: a.state)
            let files = snapshot(a.state)
            // A step to a format 3 that rewrites the account, then fails.
            let broken = StateFormat.Migration(from: 2, touches: [AccountState.fileName]) { store throws(StateError) in
                try store.write(AccountState.fileName, Data("half written".utf8))
                throw .unwritable(path: store.url(AccountState.fileName).path, reason: "No space left on device")
            }
            let error = try #require(throws: StateError.self) { try StateFormat.prepare(store, current: 3, migrations: StateFormat.migrations + [broken]) }
            #expect("\(error)".contains("from format 2 to 3"))
            #expect("\(error)".contains("No space left on device"))
            #expect("\(error)".hasSuffix("the folder was put back as it was"))
            #expect(snapshot(a.state) == files)
            // The agent of this version still starts on it.
            let again = try await harness.start("alpha")
            #expect(try await again.call(.status).status?.account == "home")
        }
    }

    @Test("An upgrade a crash interrupted is put back from its copy at the next start, then run again")
    func interruptedUpgradeRecovers() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            try await a.call(.createAccount(name: "home"))
            await a.agent?.stop()
            let store = try StateStore(directory: a.state)
            let account = try Data(contentsOf: store.url(AccountState.fileName))
            let stamp = try Data(contentsOf: store.url(StateFormat.fileName))
            // What prepare leaves when the power goes mid-step: the copy and its record, and a
            // live file the step had begun to rewrite.
            let backup = store.url(StateFormat.backupFolder)
            try FileManager.default.createDirectory(at: backup, withIntermediateDirectories: false)
            try account.write(to: backup.appendingPathComponent(AccountState.fileName))
            try stamp.write(to: backup.appendingPathComponent(StateFormat.fileName))
            try Data("kept \(AccountState.fileName)\nkept \(StateFormat.fileName)\nabsent notes.json".utf8).write(to: backup.appendingPathComponent(StateFormat.recordName))
            try store.write(AccountState.fileName, Data("{ half".utf8))
            try store.write("notes.json", Data("made by the step".utf8))

            let step = StateFormat.Migration(from: 2, touches: [AccountState.fileName, "notes.json"]) { store throws(StateError) in
                // The step reads the account: it must find it whole.
                _ = try store.load(AccountState.self, from: AccountState.fileName)
            }
            let done = try StateFormat.prepare(store, current: 3, migrations: StateFormat.migrations + [step])
            #expect(done == "the state folder was upgraded from format 2 to 3")
            #expect(try Data(contentsOf: store.url(AccountState.fileName)) == account)
            #expect(!FileManager.default.fileExists(atPath: store.url("notes.json").path))
            #expect(try StateFormat.version(of: store) == 3)
            #expect(!FileManager.default.fileExists(atPath: backup.path))
        }
    }
}
