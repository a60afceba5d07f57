import Foundation
import Testing

/// `HandoffWire` is bytes in and values out (docs/architecture.md): its sources use no files,
/// sockets or threads, and import nothing that does.
@Suite("Layering")
struct LayeringTests {
    static func sources(_ module: String) -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/\(module)").standardizedFileURL
    }

    @Test("HandoffWire's sources touch no file, socket or thread, and import only Foundation, Crypto, HandoffFraming and HandoffModel")
    func wireIsPure() throws {
        try checkPure("HandoffWire", allowedImports: ["Foundation", "Crypto", "HandoffFraming", "HandoffModel"])
    }

    @Test("HandoffModel, below the app library, the local API and the wire, imports only Foundation and does no I/O")
    func modelIsPure() throws {
        try checkPure("HandoffModel", allowedImports: ["Foundation"])
    }

    @Test("The agent never imports the app library or the UIKit/AppKit-shaped layer; what it shares with them is HandoffCore's")
    func agentSharesOnlyTheCore() throws {
        let folder = Self.sources("HandoffAgent")
        let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        #expect(files.count > 20, "no sources found at \(folder.path)")
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ").map(String.init)
                guard let index = words.firstIndex(of: "import"), index + 1 < words.count else { continue }
                #expect(!["Handoff", "HandoffApp"].contains(words[index + 1]), "\(file): \(line)")
            }
        }
        let core = Self.sources("HandoffCore")
        for file in try FileManager.default.contentsOfDirectory(atPath: core.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: core.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("import ") {
                #expect(line == "import Foundation", "HandoffCore/\(file): \(line)")
            }
        }
    }

    /// What `handoffd` (or another program embedding an agent) needs; the rest of the agent is
    /// `package`, for the package's own programs, tests and HandoffTesting.
    @Test("The agent's public surface is the agent, its configuration and its executor: nothing else")
    func agentPublicSurface() throws {
        let allowed: Set<String> = [
            "Agent", "AgentError", "AgentConfiguration", "AgentSettings", "ConfigurationError", "ConfigurationFile", "EventLoopExecutor", "handoffVersion",
        ]
        let folder = Self.sources("HandoffAgent")
        let files = try #require(FileManager.default.enumerator(atPath: folder.path)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        var found: Set<String> = []
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where line.hasPrefix("public ") {
                let words = line.split(separator: " ").map(String.init)
                let kinds: Set<String> = ["struct", "enum", "actor", "class", "protocol", "let", "var", "func", "typealias", "extension"]
                guard let kind = words.firstIndex(where: kinds.contains), kind + 1 < words.count else { continue }
                let name = String(words[kind + 1].prefix { $0.isLetter || $0.isNumber })
                found.insert(name)
                #expect(allowed.contains(name), "\(file): \(line) is public; make it package")
            }
        }
        #expect(found == allowed, "public top-level declarations: \(found.sorted())")
    }

    func checkPure(_ module: String, allowedImports: Set<String>) throws {
        let folder = Self.sources(module)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty, "no sources found at \(folder.path)")
        let forbidden = [
            "FileManager", "FileHandle", "Data(contentsOf", "String(contentsOf", "Thread.", "Thread(", "DispatchQueue", "NSLock", "NSCondition",
            "Glibc", "socket(", "fopen(", "read(fd", "write(fd",
        ]
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                for word in forbidden where line.contains(word) {
                    Issue.record("\(file): '\(word)' in \(line.trimmingCharacters(in: .whitespaces))")
                }
                let words = line.split(separator: " ")
                if let index = words.firstIndex(where: { $0 == "import" }), index + 1 < words.count, !allowedImports.contains(String(words[index + 1])) {
                    Issue.record("\(file) imports \(words[index + 1])")
                }
            }
        }
    }
}
