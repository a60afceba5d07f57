import Foundation
import HandoffTesting
import Testing

@testable import HandoffAgent
import HandoffProcess

@Suite("The state directory")
struct StateStoreTests {
    func temporaryStore() throws -> StateStore {
        try StateStore(directory: FileManager.default.temporaryDirectory.appendingPathComponent("handoff-state-\(UUID())"))
    }

    let account = AccountState(name: "home", members: [.init(id: UUID(), name: "laptop")], beaconKeys: [Data(repeating: 1, count: 32)])

    @Test("State written is read back, and files are the owner's only")
    func roundTrip() throws {
        let store = try temporaryStore()
        try store.save(account, to: AccountState.fileName)
        #expect(try store.load(AccountState.self, from: AccountState.fileName) == account)
        let file = try FileManager.default.attributesOfItem(atPath: store.url(AccountState.fileName).path)
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let folder = try FileManager.default.attributesOfItem(atPath: store.directory.path)
        #expect((folder[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    @Test("A missing file is no state, not an error")
    func missing() throws {
        #expect(try temporaryStore().load(AccountState.self, from: "nothing.json") == nil)
    }

    @Test("A damaged state file is refused with its path and what is wrong")
    func damaged() throws {
        let store = try temporaryStore()
        try store.write(AccountState.fileName, Data("{ not json".utf8))
        #expect(throws: StateError.self) { try store.load(AccountState.self, from: AccountState.fileName) }
        do {
            _ = try store.load(AccountState.self, from: AccountState.fileName)
        } catch {
            #expect(error.description.contains(store.url(AccountState.fileName).path))
            #expect(error.description.contains("not valid JSON"))
        }
        try store.write(AccountState.fileName, Data(#"{"id": "6C1E1B0C-79A4-4F4D-9C8E-2B4A2D8F1A11", "members": [], "beaconKeys": [], "revision": 1}"#.utf8))
        do {
            _ = try store.load(AccountState.self, from: AccountState.fileName)
            Issue.record("a state without a name loaded")
        } catch {
            #expect(error.description.contains("missing 'name'"))
        }
    }

    @Test("A beacon key of the wrong length is refused by name")
    func damagedKey() throws {
        let store = try temporaryStore()
        var broken = account
        broken.beaconKeys = [Data(count: 5)]
        #expect(throws: StateError.corrupt(path: store.url(AccountState.fileName).path, reason: "beaconKeys[0]: a beacon key is 32 bytes; this one has 5")) {
            try broken.keys(in: store)
        }
    }

    @Test("A state directory that cannot be made is named in the error")
    func unwritable() {
        #expect(throws: StateError.self) { try StateStore(directory: URL(fileURLWithPath: "/dev/null/handoff")) }
    }

    @Test("S12: Killed with SIGKILL in the middle of writes, again and again, the state always loads")
    func killNine() async throws {
        let binary = try #require(Self.tortureBinary(), "handoff-state-torture was not built next to the tests")
        let store = try temporaryStore()
        var lastRevision: UInt64 = 0
        for round in 0..<15 {
            let process = ChildProcess()
            process.executableURL = binary
            process.arguments = [store.directory.path]
            try process.run()
            // Let it write a while (until the revision moves), then kill it mid-stream.
            let advanced = await eventually(within: .seconds(4)) {
                ((try? store.load(AccountState.self, from: AccountState.fileName))?.revision ?? 0) > lastRevision + 5
            }
            // Killed at a random moment of its writing: the moment is what the test varies.
            try await Task.sleep(for: .microseconds(Int.random(in: 0..<3_000)))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(advanced, "round \(round): the writer made no progress")
            let state = try #require(try store.load(AccountState.self, from: AccountState.fileName), "round \(round)")
            #expect(state.revision >= lastRevision)
            #expect(state.members.count == Int(state.revision % 50))
            lastRevision = state.revision
            store.sweep()
        }
    }

    @Test("The torture writer stops once the process that started it is gone (a crashed test run leaves no writer behind)", arguments: ["account", "keys"])
    func tortureStopsWithItsParent(_ mode: String) async throws {
        let binary = try #require(Self.tortureBinary(), "handoff-state-torture was not built next to the tests")
        let store = try temporaryStore()
        // A shell starts the writer and ends: the writer loses its parent, as it would if the
        // test run that started it crashed.
        let shell = ChildProcess()
        let output = Pipe()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "\"$0\" \"$1\" \"$2\" >/dev/null 2>&1 & echo $!; sleep 0.5", binary.path, mode, store.directory.path]
        shell.standardOutput = output
        try shell.run()
        shell.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let writer = try #require(Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), "no pid in \(text)")
        // Gone, or a zombie left for whoever took it in.
        func running() -> Bool {
            guard let stat = try? String(contentsOfFile: "/proc/\(writer)/stat", encoding: .utf8) else { return false }
            return !stat.contains(") Z ")
        }
        let stopped = await eventually(within: .seconds(10)) { !running() }
        if !stopped { kill(writer, SIGKILL) }
        #expect(stopped, "the \(mode) writer went on after its parent ended")
        store.sweep()
    }

    /// Runs the torture writer with `arguments` and kills it with SIGKILL after a random moment,
    /// `rounds` times, calling `check` after each kill.
    func killRepeatedly(_ arguments: [String], rounds: Int, check: (Int) throws -> Void) async throws {
        let binary = try #require(Self.tortureBinary(), "handoff-state-torture was not built next to the tests")
        for round in 0..<rounds {
            let process = ChildProcess()
            process.executableURL = binary
            process.arguments = arguments
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Killed at a random moment of its writing: the moment is what the test varies.
            try await Task.sleep(for: .microseconds(Int.random(in: 20_000..<120_000)))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try check(round)
        }
    }

    @Test("S12: Killed with SIGKILL while writing the device's keys, again and again, the identity always loads")
    func killNineKeys() async throws {
        let store = try temporaryStore()
        try DeviceIdentity.generate(name: "first").save(to: store)
        try await killRepeatedly(["keys", store.directory.path], rounds: 15) { round in
            let identity = try #require(try DeviceIdentity.load(from: store), "round \(round): no identity")
            #expect(identity.name.hasPrefix("device") || identity.name == "first")
        }
    }

    @Test("S12: Killed with SIGKILL while reinstalling an app, again and again, the app is always installed, and no half-made folder is left once the agent starts")
    func killNineInstalls() async throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-install-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        let source = try Self.appSource(in: state)
        // Files of some size, so that a kill often lands in the middle of a copy.
        for index in 0..<20 { try Data(repeating: UInt8(index), count: 64 * 1024).write(to: source.appendingPathComponent("resource-\(index)")) }
        let registry = AppRegistry(stateDirectory: state, allowsUnsignedApps: true)
        try registry.install(from: source)
        var leftovers = 0
        try await killRepeatedly(["install", state.path, source.path], rounds: 40) { round in
            let names = (try? FileManager.default.contentsOfDirectory(atPath: registry.directory.path)) ?? []
            leftovers += names.filter { $0.hasPrefix(".") }.count
            // What an agent does when it starts.
            registry.recoverInterruptedInstalls()
            let (apps, problems) = registry.load()
            #expect(apps.map(\.manifest.bundleIdentifier) == ["com.example.handoff.MapViewer"], "round \(round): installed \(apps.map(\.manifest.bundleIdentifier)), problems \(problems)")
            let after = (try? FileManager.default.contentsOfDirectory(atPath: registry.directory.path)) ?? []
            #expect(after == ["com.example.handoff.MapViewer"], "round \(round): the apps folder holds \(after) after loading")
        }
        #expect(leftovers > 0, "no kill landed mid-install: the test proved nothing")
    }

    @Test("A state folder other users may write in is refused, naming its mode and the fix; a link to a folder too")
    func unsafeFolder() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-unsafe-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for mode in [0o777, 0o775, 0o722] as [mode_t] {
            chmod(folder.path, mode)
            #expect {
                _ = try StateStore(directory: folder)
            } throws: { error in
                let text = "\(error)"
                return text.contains(String(format: "%04o", mode)) && text.contains("chmod 700 \(folder.path)")
            }
        }
        chmod(folder.path, 0o755)
        #expect(throws: Never.self) { _ = try StateStore(directory: folder) }
        let link = folder.appendingPathExtension("link")
        defer { try? FileManager.default.removeItem(at: link) }
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: folder)
        #expect(throws: StateError.self) { _ = try StateStore(directory: link) }
    }

    @Test("An app an older agent moved aside mid-install and never replaced is put back when the agent starts")
    func movedAsideIsPutBack() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-aside-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: state) }
        let source = try Self.appSource(in: state)
        let registry = AppRegistry(stateDirectory: state, allowsUnsignedApps: true)
        try registry.install(from: source)
        let installed = registry.directory.appendingPathComponent("com.example.handoff.MapViewer")
        try FileManager.default.moveItem(at: installed, to: registry.directory.appendingPathComponent(".com.example.handoff.MapViewer.old-\(UUID())"))
        registry.recoverInterruptedInstalls()
        #expect(registry.load().apps.map(\.manifest.bundleIdentifier) == ["com.example.handoff.MapViewer"])
        #expect((try FileManager.default.contentsOfDirectory(atPath: registry.directory.path)) == ["com.example.handoff.MapViewer"])
    }

    @Test("S12: A state write is flushed to disk before it replaces the old file, and the folder after it (strace)")
    func writesAreFlushed() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/strace") else {
            print("skipped: needs strace (apt-get install strace)")
            return
        }
        let binary = try #require(Self.tortureBinary(), "handoff-state-torture was not built next to the tests")
        let store = try temporaryStore()
        let trace = store.directory.appendingPathComponent("trace.txt")
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        process.arguments = ["-f", "-e", "trace=openat,fsync,fdatasync,rename,renameat,renameat2", "-o", trace.path, binary.path, "account", store.directory.path, "30"]
        process.standardError = FileHandle.nullDevice
        try process.run()
        try await onThread { process.waitUntilExit() }
        #expect(try store.load(AccountState.self, from: AccountState.fileName)?.revision == 30)
        let lines = try String(contentsOf: trace, encoding: .utf8).split(separator: "\n").map(String.init)
        // Each rename onto account.json comes after an fsync of the file written, and is
        // followed by an fsync of a descriptor opened on the folder.
        let renames = lines.indices.filter { lines[$0].contains("rename") && lines[$0].contains("account.json\"") && !lines[$0].contains("= -1") }
        try #require(renames.count > 5, "no renames traced: \(lines.prefix(20))")
        for index in renames.dropLast() {
            #expect(lines[..<index].last { $0.contains("fsync(") || $0.contains("fdatasync(") } != nil)
            let before = lines[max(0, index - 3)..<index]
            #expect(before.contains { $0.contains("fsync(") }, "no fsync right before: \(before)")
            let after = lines[(index + 1)..<min(lines.count, index + 4)]
            #expect(after.contains { $0.contains("O_DIRECTORY") } && after.contains { $0.contains("fsync(") }, "the folder was not flushed after: \(after)")
        }
    }

    /// An unsigned app folder in `state/source`: MapViewer's manifest with a copy of sleep as
    /// its executable.
    static func appSource(in state: URL) throws -> URL {
        let source = state.appendingPathComponent("source", isDirectory: true)
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Examples/MapViewer/App").standardizedFileURL
        for file in ["Info.plist", "MapViewer.entitlements"] {
            try FileManager.default.copyItem(at: sources.appendingPathComponent(file), to: source.appendingPathComponent(file))
        }
        try FileManager.default.copyItem(at: URL(fileURLWithPath: "/bin/sleep"), to: source.appendingPathComponent("MapViewer"))
        return source
    }

    /// The torture writer, built beside the test bundle.
    static func tortureBinary() -> URL? {
        var folder = Bundle.main.bundleURL
        for _ in 0..<3 {
            let candidate = folder.appendingPathComponent("handoff-state-torture")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            folder.deleteLastPathComponent()
        }
        return nil
    }
}
