import Foundation
import Testing

/// `HandoffWire` is bytes in and values out (docs/architecture.md): its sources use no files,
/// sockets or threads, and import nothing that does.
@Suite("Layering")
struct LayeringTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources/HandoffWire").standardizedFileURL

    @Test("HandoffWire's sources touch no file, socket or thread, and import only Foundation, Crypto and HandoffFraming")
    func wireIsPure() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty, "no sources found at \(Self.sources.path)")
        let forbidden = [
            "FileManager", "FileHandle", "Data(contentsOf", "String(contentsOf", "Thread.", "Thread(", "DispatchQueue", "NSLock", "NSCondition",
            "Glibc", "socket(", "fopen(", "read(fd", "write(fd",
        ]
        let allowedImports: Set<String> = ["Foundation", "Crypto", "HandoffFraming"]
        for file in files {
            let text = try String(contentsOf: Self.sources.appendingPathComponent(file), encoding: .utf8)
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
