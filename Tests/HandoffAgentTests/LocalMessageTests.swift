import Foundation
import HandoffLocalAPI
import Testing

@Suite("Local API messages")
struct LocalMessageTests {
    @Test("Every message survives its frame")
    func roundTrip() throws {
        let activity = LocalActivity(id: UUID(), activityType: "com.example.notes.editing", title: "Groceries", teamIdentifier: "TEAM1", hasWebpageURL: true, expirationDate: Date(timeIntervalSince1970: 2_000_000_000))
        let record = LocalRecord(activity: activity, webpageURL: "https://example.com/notes/1", keywords: ["a"], requiredUserInfoKeys: ["k"], userInfo: Data([0x48, 1, 2, 3]))
        let origin = LocalOrigin(device: UUID(), deviceName: "desk", activity: activity.id)
        let messages: [LocalMessage] = [
            .call(request: 1, .hello(version: 1, role: .app, bundleIdentifier: "com.example.notes")),
            .call(request: 2, .status), .call(request: 3, .devices), .call(request: 4, .nearby),
            .call(request: 5, .continue(activity: activity.id)), .call(request: 6, .continue(activity: nil)),
            .call(request: 7, .watch), .call(request: 8, .apps), .call(request: 9, .installApp(directory: "/apps/notes")),
            .call(request: 10, .removeApp(bundleIdentifier: "com.example.notes")), .call(request: 11, .createAccount(name: "home")),
            .call(request: 12, .invite(token: true, host: "10.0.0.1", lifetime: 60)), .call(request: 13, .awaitJoin(invitation: UUID())),
            .call(request: 14, .confirmJoin(invitation: UUID(), accept: false)), .call(request: 15, .join(code: "ABCD")),
            .call(request: 16, .awaitJoinResult), .call(request: 17, .removeDevice(name: "old")),
            .becameCurrent(activity), .resigned(activity: activity.id), .invalidated(activity: activity.id),
            .saved(request: 18, record), .saveFailed(request: 19, LocalError(.continuation, code: 4610, "slow")),
            .reply(request: 20, LocalReply(account: "home")), .reply(request: 21, .failure(LocalError(.notFound, "no"))),
            .save(request: 22, activity: activity.id), .willContinue(continuation: UUID(), activityType: activity.activityType),
            .deliver(continuation: UUID(), record: record, origin: origin),
            .fail(continuation: UUID(), activityType: activity.activityType, error: LocalError(.continuation, code: 4609, "gone")),
            .wasContinued(activity: activity.id),
            .event(LocalEvent(change: .gone, device: UUID(), deviceName: "desk", activity: nil)),
            .prove(nonce: Data(repeating: 7, count: 16)), .proof(nonce: Data(repeating: 7, count: 16)),
        ]
        for message in messages {
            let frame = message.frame
            #expect(frame.kind == LocalMessage.frameKind)
            #expect(try LocalMessage(frame: frame) == message)
        }
    }

    @Test("A bad message is refused with what is wrong, never a crash")
    func badMessages() {
        let cases: [(String, String)] = [
            ("{not json", "not valid JSON"),
            ("[1,2]", "not a JSON object"),
            (#"{"type":"hello","request":1,"role":"app"}"#, "lacks 'version'"),
            (#"{"type":"continue","request":"one"}"#, "'request' should be a number"),
            (#"{"type":"frobnicate","request":5}"#, "unknown message type 'frobnicate'"),
            (#"{"type":"becameCurrent","activity":{"id":"not-a-uuid","activityType":"x"}}"#, "'activity.id'"),
        ]
        for (text, expected) in cases {
            do {
                _ = try LocalMessage(frame: Frame(kind: LocalMessage.frameKind, payload: Array(text.utf8)))
                Issue.record("accepted \(text)")
            } catch {
                #expect(error.kind == .badRequest)
                #expect(error.message.contains(expected), "\(text): \(error.message)")
            }
        }
        #expect(throws: LocalError.self) { try LocalMessage(frame: Frame(kind: 1, payload: [])) }
    }

    @Test("Random bytes never crash the decoder")
    func randomBytes() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0..<64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? LocalMessage(frame: Frame(kind: LocalMessage.frameKind, payload: bytes))
        }
    }

    @Test("The client says clearly when no agent runs")
    func noAgent() {
        #expect {
            _ = try LocalClient(path: "/tmp/no-such-handoff-\(UUID().uuidString.prefix(6)).sock", role: .control)
        } throws: { error in
            guard let error = error as? LocalError else { return false }
            return error.kind == .notFound && error.message.contains("no Handoff agent is running")
        }
    }
}
