import Foundation
import HandoffCore
import HandoffLocalAPI
import HandoffModel
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

/// A session service as the agent sees one on the receiving device: it opens system activities
/// and records what it is given.
final class SystemHandlerClient: Sendable {
    let client: LocalClient
    let reply: LocalReply
    private let delivered = Delivered()

    final class Delivered: Sendable {
        let records = Mutex<[ActivityRecord]>([])
    }

    var records: [ActivityRecord] { delivered.records.withLock { $0 } }

    init(on device: TestDevice, types: [String] = [SystemActivityType.document]) async throws {
        let delivered = self.delivered
        client = try await LocalClient.connect(path: device.socket, role: .control) { message in
            if case .deliver(_, let record, _) = message { delivered.records.withLock { $0.append(record) } }
        }
        reply = try await client.call(.handleSystemActivities(types: types))
    }
}

@Suite("System activities: the session service publishes them, the agents carry them, the receiving session opens them")
struct SystemActivityTests {
    @Test("A document of alpha's synced folder, published as a system activity, is listed on beta as the session service's, and continued there it reaches beta's session service at beta's own path; the origin hears it was continued")
    func documentTravels() async throws {
        try await withHarness { harness in
            let onA = harness.root.appendingPathComponent("a-sync", isDirectory: true), onB = harness.root.appendingPathComponent("b-sync", isDirectory: true)
            for folder in [onA, onB] {
                try FileManager.default.createDirectory(at: folder.appendingPathComponent("Notes"), withIntermediateDirectories: true)
                try Data("plan".utf8).write(to: folder.appendingPathComponent("Notes/plan.txt"))
            }
            let a = try await harness.start("alpha") { $0.containers = [ContainerFolder(identifier: "sync", folder: onA)] }
            let b = try await harness.start("beta") { $0.containers = [ContainerFolder(identifier: "sync", folder: onB)] }
            try await harness.pair([a, b])
            let document = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "plan.txt")
            let userInfo = try UserInfoCoding.encode(UserInfoValue.dictionary([
                .string("url"): .url(onA.appendingPathComponent("Notes/plan.txt").resolvingSymlinksInPath()), .string("mimeType"): .string("text/plain"),
                .string("application"): .string("Text Editor"), .string("exec"): .string("'gnome-text-editor %u'"),
            ]))
            let publisher = try await a.offer(document, answering: .answer(ActivityRecord(activity: document, userInfo: userInfo)), seenBy: b)
            _ = publisher

            // Without a session service on beta, nothing there opens it, and the listing says why.
            #expect(try await b.nearby().first?.handler == nil)
            #expect(try await b.nearby().first?.reason.contains("no session service here opens") == true)
            do {
                _ = try await b.call(.continue(activity: document.id))
                Issue.record("continued with no session service to open it")
            } catch {
                #expect("\(error)".contains("no session service here opens"), "\(error)")
            }

            let handler = try await SystemHandlerClient(on: b)
            #expect(handler.reply.containers == [LocalContainer(identifier: "sync", folder: onB.path)])
            #expect(try await b.nearby().first?.handler == "system")
            let continued = try await b.call(.continue(activity: document.id))
            #expect(continued.continued?.app == "system", "\(continued)")
            #expect(await eventually { handler.records.count == 1 })
            let record = try #require(handler.records.first)
            #expect(record.activity.activityType == SystemActivityType.document)
            let value = try UserInfoCoding.decode(try #require(record.userInfo))
            guard case .dictionary(let entries) = value else { Issue.record("userInfo is \(value)"); return }
            #expect(entries[.string("url")] == .url(onB.appendingPathComponent("Notes/plan.txt").resolvingSymlinksInPath()))
            #expect(entries[.string("exec")] == .string("'gnome-text-editor %u'"))
            #expect(record.untranslatedFileURLs == nil)
            #expect(await eventually { publisher.messages.contains { if case .wasContinued = $0 { true } else { false } } })
        }
    }

    @Test("A session that asks to open no type, or a type that is not a system activity's, is refused and opens nothing")
    func handlerRefusals() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            for types in [[], ["com.example.notes.editing"], [SystemActivityType.document, "org.handoff.system.unknown"]] {
                let reply = try await LocalClient.connect(path: a.socket, role: .control) { _ in }.call(.handleSystemActivities(types: types))
                #expect(reply.error?.kind == .badRequest, "\(types)")
            }
        }
    }
}
