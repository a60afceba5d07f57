import Foundation
import Testing

/// Tests wait on events, not on a clock, and the agent's timers are its behaviour (protocol
/// periods, backoff, rate limits). Every `Task.sleep` left in the agent, the test library and
/// the tests says why its time is what it is: a comment on its line or just above it.
@Suite("Timed waits")
struct TimedWaitTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL

    /// The `Task.sleep` calls in `folder`'s Swift files with no comment on their line or on
    /// one of the three lines above.
    static func unexplained(in folder: String) throws -> [String] {
        let base = root.appendingPathComponent(folder)
        let files = try #require(FileManager.default.enumerator(atPath: base.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        var found: [String] = []
        for file in files where !file.hasSuffix("TimedWaitTests.swift") {
            let lines = try String(contentsOf: base.appendingPathComponent(file), encoding: .utf8).components(separatedBy: "\n")
            for (index, line) in lines.enumerated() where line.contains("Task.sleep(") && !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                let context = lines[max(0, index - 3)...index]
                if !context.contains(where: { $0.contains("//") }) { found.append("\(folder)/\(file):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))") }
            }
        }
        return found
    }

    @Test("Every Task.sleep in the agent, HandoffTesting and the tests says why it waits that long", arguments: ["Sources/HandoffAgent", "Sources/HandoffTesting", "Tests"])
    func everySleepIsExplained(folder: String) throws {
        let found = try Self.unexplained(in: folder)
        #expect(found.isEmpty, "sleeps with no reason given:\n\(found.joined(separator: "\n"))")
    }

    @Test("The agent starts no loose task: each is held by its owner (OwnedTasks, or a handle it cancels), or says why it needs no owner")
    func noLooseTasks() throws {
        let base = Self.root.appendingPathComponent("Sources/HandoffAgent")
        let files = try #require(FileManager.default.enumerator(atPath: base.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        var loose: [String] = []
        for file in files {
            let lines = try String(contentsOf: base.appendingPathComponent(file), encoding: .utf8).components(separatedBy: "\n")
            for (index, line) in lines.enumerated() {
                let code = line.trimmingCharacters(in: .whitespaces)
                // A statement that starts a task and keeps nothing of it.
                guard code.hasPrefix("Task {") || code.hasPrefix("Task(") || code.hasPrefix("Task.detached") || code.hasPrefix("Task.immediate") else { continue }
                if !lines[max(0, index - 3)..<index].contains(where: { $0.contains("//") }) { loose.append("\(file):\(index + 1): \(code)") }
            }
        }
        #expect(loose.isEmpty, "tasks nobody holds:\n\(loose.joined(separator: "\n"))")
    }

    @Test("The tests wait for a condition one way: HandoffTesting's eventually (no helper of their own polls)")
    func oneWaitHelper() throws {
        let base = Self.root.appendingPathComponent("Tests")
        let files = try #require(FileManager.default.enumerator(atPath: base.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        var helpers: [String] = []
        for file in files where !file.hasSuffix("TimedWaitTests.swift") {
            let text = try String(contentsOf: base.appendingPathComponent(file), encoding: .utf8)
            for name in ["func waitUntil(", "func eventually(", "func waitFor("] where text.contains(name) { helpers.append("\(file): \(name)") }
        }
        #expect(helpers.isEmpty, "wait helpers of the tests' own: \(helpers)")
    }
}
