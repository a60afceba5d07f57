import Foundation
import Glibc
import HandoffLocalAPI
import HandoffTesting
import HandoffWire
import Testing

@testable import HandoffAgent

/// Values a local client may send that decode as JSON but lie outside what the agent can act on.
@Suite("Local API values out of range")
struct LocalRangeTests {
    /// Sends `messages` (JSON objects) on a raw connection after the hello and its proof, and
    /// returns the agent's replies to them, until one to request `last` came.
    static func exchange(_ socket: String, _ messages: [String], last: UInt64) async throws -> [LocalMessage] {
        try await onThread {
            guard let (fd, nonce) = rawLocalClient(socket) else { return [] }
            defer { Glibc.close(fd) }
            var bytes = LocalMessage.proof(nonce: nonce).frame.encoded
            for message in messages { bytes += Frame(kind: LocalMessage.frameKind, payload: Array(message.utf8)).encoded }
            _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            var replies: [LocalMessage] = []
            var decoder = FrameDecoder()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
                if got <= 0 { return replies }
                decoder.append(buffer[..<got])
                while let frame = try? decoder.next() {
                    guard let message = try? LocalMessage(frame: frame), case .reply(let request, _) = message, request != 1 else { continue }
                    replies.append(message)
                    if request == last { return replies }
                }
            }
        }
    }

    static func error(_ replies: [LocalMessage], request: UInt64) -> String? {
        for case .reply(request, let reply) in replies { return reply.error?.message ?? "no error" }
        return nil
    }

    @Test("S9: A probe of port 65536 or -1, an invitation of 1e300 seconds and an activity expiring in 1e20 seconds are refused naming the field, and the agent goes on")
    func outOfRangeValuesRefused() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            try await a.call(.createAccount(name: "home"))
            var activity = ActivityAnnouncement(id: UUID(), activityType: "com.example.far", title: "Far")
            activity.expirationDate = Date(timeIntervalSince1970: 1_234_567)
            let announced = String(decoding: LocalMessage.becameCurrent(activity).frame.payload, as: UTF8.self)
            let farOff = announced.replacingOccurrences(of: "1234567", with: "1e20")
            try #require(farOff != announced, "the announcement's date is not where the test looks: \(announced)")
            let replies = try await Self.exchange(
                a.socket,
                [
                    #"{"type":"probe","request":2,"host":"127.0.0.1","port":65536}"#,
                    #"{"type":"probe","request":3,"host":"127.0.0.1","port":-1}"#,
                    #"{"type":"invite","request":4,"token":true,"lifetime":1e300}"#,
                    farOff,
                    #"{"type":"status","request":5}"#,
                ], last: 5)
            #expect(Self.error(replies, request: 2)?.contains("'port' should be an integer from 1 to 65535") == true, "\(replies)")
            #expect(Self.error(replies, request: 3)?.contains("'port'") == true, "\(replies)")
            #expect(Self.error(replies, request: 4)?.contains("'lifetime'") == true, "\(replies)")
            // The announcement has no request number: its refusal comes as request 0.
            #expect(Self.error(replies, request: 0)?.contains("'expirationDate'") == true, "\(replies)")
            #expect(Self.error(replies, request: 5) == "no error", "\(replies)")
            #expect(try await a.call(.status).status?.currentActivity == nil)
        }
    }

    @Test("A JSON message whose request number is not one is answered saying so, not as JSON that cannot be read", arguments: ["-1", "1.5", "\"two\"", "18446744073709551616", "true"])
    func badRequestNumber(request: String) async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let replies = try await Self.exchange(a.socket, [#"{"type":"status","request":"# + request + "}", #"{"type":"status","request":5}"#], last: 5)
            let said = Self.error(replies, request: 0) ?? "no answer"
            #expect(said.contains("'request'") && !said.contains("not valid JSON"), "\(request): \(said)")
        }
    }

    @Test("An activity that expires at Date.distantFuture is offered, and the agent goes on")
    func distantFutureOffered() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            try await a.call(.createAccount(name: "home"))
            var activity = ActivityAnnouncement(id: UUID(), activityType: "com.example.forever", title: "Forever")
            activity.expirationDate = .distantFuture
            let app = try await RawApp(socket: a.socket, behaviour: .neverAnswer)
            try app.client.send(.becameCurrent(activity))
            #expect(await eventually { (try? await a.call(.status).status?.currentActivity?.id) == activity.id })
            app.client.close()
        }
    }
}

/// What an agent refuses or cleans up so that nothing depends on where it was started or how
/// it last ended.
@Suite("Local paths and leftovers")
struct LocalPathTests {
    @Test("An app folder given as a relative path is refused, saying to give an absolute one; nothing is read from the agent's working folder")
    func relativeInstallPathRefused() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let reply = try await a.attempt(.installApp(directory: "Examples/MapViewer/App", settings: [:]))
            #expect(reply.error?.message.contains("relative path") == true && reply.error?.message.contains("absolute") == true, "\(reply)")
            #expect(try await a.call(.apps).apps?.isEmpty == true)
        }
    }

    @Test("A file paste killed with the agent leaves no part file after the next start; a finished paste's files stay their hour")
    func killedPasteCleanedAtStart() async throws {
        try await withHarness { harness in
            let pastes = harness.root.appendingPathComponent("alpha/clipboard-files", isDirectory: true)
            let killed = pastes.appendingPathComponent(UUID().uuidString).appendingPathComponent("0", isDirectory: true)
            let finished = pastes.appendingPathComponent(UUID().uuidString).appendingPathComponent("0", isDirectory: true)
            for folder in [killed, finished] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
            try Data("half of a file".utf8).write(to: killed.appendingPathComponent(".report.pdf.handoff-part"))
            try Data("a whole file".utf8).write(to: finished.appendingPathComponent("notes.txt"))
            // A copied file may be named like a browser's partial download: that is no sign.
            try Data("a copied file".utf8).write(to: finished.appendingPathComponent(".video.mp4.part"))
            _ = try await harness.start("alpha")
            #expect(!FileManager.default.fileExists(atPath: killed.deletingLastPathComponent().path), "the killed paste's folder is still there")
            #expect(FileManager.default.fileExists(atPath: finished.appendingPathComponent("notes.txt").path))
        }
    }
}
