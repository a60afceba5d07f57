import Crypto
import Foundation
import Handoff
import HandoffLocalAPI
import HandoffTesting
import Testing

@testable import HandoffAgent

@Suite("The examples, end to end across two agents", .serialized)
struct ExampleTests {
    @Test("MailCompose: a draft with a 3 MB attachment continues on the other device; the attachment comes over continuation streams, whole; the origin closes its draft")
    func mailCompose() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            try await harness.installExample("MailCompose", on: a)
            try await harness.installExample("MailCompose", on: b)
            let photo = harness.root.appendingPathComponent("photo.jpg")
            let bytes = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) })
            try bytes.write(to: photo)
            let expected = SHA256.hash(data: bytes).prefix(8).map { String(format: "%02x", $0) }.joined()

            let mail = try harness.runExample("MailCompose", bundle: "com.example.handoff.MailCompose", on: a)
            mail.send("compose Trip photos")
            mail.send("type See the attached photo.")
            mail.send("attach \(photo.path)")
            #expect(await eventually { mail.log.contains { $0.hasPrefix("attached") } }, "\(mail.log)")
            let listed = await eventually { (try? await b.nearby().first?.activity.title) == "Composing 'Trip photos'" }
            try #require(listed, "beta never listed the draft; alpha's app: \(mail.log)")

            try await b.call(.continue(activity: nil))
            let events = b.state.appendingPathComponent("data/com.example.handoff.MailCompose/events.log")
            #expect(await eventually(within: .seconds(20)) { logLines(events).contains("received attachment photo.jpg (\(3 << 20) bytes, sha256 \(expected))") }, "beta's app: \(logLines(events))")
            #expect(logLines(events).contains("continued draft 'Trip photos': See the attached photo."))
            #expect(await eventually { mail.log.contains("draft closed: continued on another device") }, "alpha's app: \(mail.log)")
            #expect(mail.log.contains("sent the attachment (\(3 << 20) bytes)"))
        }
    }
}

extension ExampleTests {
    @Test("Shapes: the shape being made continues on the other device through the responder's own update and restore; a userInfo of a newer layout is declined with a message")
    func shapes() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            try await harness.installExample("Shapes", on: a)
            try await harness.installExample("Shapes", on: b)
            let shapes = try harness.runExample("Shapes", bundle: "com.example.handoff.Shapes", on: a)
            shapes.send("shape triangle")
            let listed = await eventually { (try? await b.nearby().first?.activity.activityType) == "com.example.handoff.Shapes.create-shape" }
            try #require(listed, "beta never listed the shape; alpha's app: \(shapes.log)")
            try await b.call(.continue(activity: nil))
            let events = b.state.appendingPathComponent("data/com.example.handoff.Shapes/events.log")
            #expect(await eventually(within: .seconds(15)) { logLines(events).contains("created a triangle from another device (activity-version 1)") }, "beta's app: \(logLines(events))")

            // An app of a newer version on alpha writes activity-version 2.
            shapes.process.terminate()
            let newer = ActivityAnnouncement(id: UUID(), activityType: "com.example.handoff.Shapes.create-shape", title: "Creating a shape", teamIdentifier: "EXAMPLETEAM")
            let state = try UserInfoCoding.encode(["shape-type": "hexagon", "activity-version": 2] as [AnyHashable: Any])
            _ = try await a.offer(newer, answering: .answer(ActivityRecord(activity: newer, userInfo: state)), seenBy: b)
            try await b.call(.continue(activity: newer.id))
            #expect(await eventually(within: .seconds(15)) { logLines(events).contains("made by a newer version (activity-version 2); update Shapes to continue it") }, "beta's app: \(logLines(events))")
        }
    }
}
