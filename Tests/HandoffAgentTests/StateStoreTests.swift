import Foundation
import Testing

@testable import HandoffAgent

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
            let process = Process()
            process.executableURL = binary
            process.arguments = [store.directory.path]
            try process.run()
            // Let it write a while (until the revision moves), then kill it mid-stream.
            var advanced = false
            for _ in 0..<2_000 {
                if let state = try? store.load(AccountState.self, from: AccountState.fileName), state.revision > lastRevision + 5 {
                    advanced = true
                    break
                }
                try await Task.sleep(for: .milliseconds(2))
            }
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
