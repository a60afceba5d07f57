import Foundation
import HandoffLocalAPI
import Testing

@Suite("Local API messages")
struct LocalMessageTests {
    @Test("Every message survives its frame")
    func roundTrip() throws {
        let activity = ActivityAnnouncement(id: UUID(), activityType: "com.example.notes.editing", title: "Groceries", teamIdentifier: "TEAM1", hasWebpageURL: true, expirationDate: Date(timeIntervalSince1970: 2_000_000_000))
        let record = ActivityRecord(activity: activity, webpageURL: "https://example.com/notes/1", keywords: ["a"], requiredUserInfoKeys: ["k"], userInfo: Data([0x48, 1, 2, 3]))
        let origin = LocalOrigin(device: UUID(), deviceName: "desk", activity: activity.id)
        let messages: [LocalMessage] = [
            .call(request: 1, .hello(version: 1, role: .app, bundleIdentifier: "com.example.notes")),
            .call(request: 2, .status), .call(request: 3, .devices), .call(request: 4, .nearby),
            .call(request: 5, .continue(activity: activity.id)), .call(request: 6, .continue(activity: nil)),
            .call(request: 7, .watch), .call(request: 8, .apps), .call(request: 9, .installApp(directory: "/apps/notes")),
            .call(request: 9, .installApp(directory: "/apps/notes", settings: ["PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes", "DEVELOPMENT_TEAM": "T"])),
            .call(request: 9, .siteAssociation(host: "example.com", url: "https://example.com/a")), .call(request: 9, .siteAssociation(host: "example.com", url: nil)),
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

@Suite("Random UUIDs")
struct RandomUUIDTests {
    @Test("UUID.random is a version 4 UUID of the RFC 4122 variant, and never the same twice in 10,000")
    func versionAndVariant() {
        // Checked once at the end, not 10,000 times: a long synchronous test holds one of the
        // few threads the other tests' agents share.
        var seen = Set<UUID>()
        var mismarked = 0
        for _ in 0..<10_000 {
            let id = UUID.random()
            if id.uuid.6 >> 4 != 4 || id.uuid.8 >> 6 != 0b10 { mismarked += 1 }
            seen.insert(id)
        }
        #expect(mismarked == 0)
        #expect(seen.count == 10_000)
        // Its text is what Foundation reads back.
        let id = UUID.random()
        #expect(UUID(uuidString: id.uuidString) == id)
        #expect(id.uuidString.split(separator: "-")[2].first == "4")
    }

    @Test("UUID.random draws from all 122 of its random bits: each bit is set in about half of 4,000")
    func everyBitVaries() {
        var counts = [Int](repeating: 0, count: 128)
        for _ in 0..<4_000 {
            let id = UUID.random()
            withUnsafeBytes(of: id.uuid) { bytes in
                for bit in 0..<128 where bytes[bit / 8] & (0x80 >> UInt8(bit % 8)) != 0 { counts[bit] += 1 }
            }
        }
        let fixed: Set<Int> = [48, 49, 50, 51, 64, 65]  // the version's and the variant's bits
        let uneven = (0..<128).filter { !fixed.contains($0) && !(1_700...2_300).contains(counts[$0]) }
        #expect(uneven.isEmpty, "bits set too rarely or too often in 4,000: \(uneven.map { "\($0): \(counts[$0])" })")
    }
}

@Suite("The local client's hello timeout")
struct HelloTimeoutTests {
    @Test("15 seconds unless HANDOFF_HELLO_TIMEOUT says otherwise; a value out of 1...3600 is held to it, one that is not a number ignored")
    func setting() {
        #expect(LocalSocketIO.helloTimeout(setting: nil) == 15)
        #expect(LocalSocketIO.helloTimeout(setting: "90") == 90)
        #expect(LocalSocketIO.helloTimeout(setting: "0") == 1)
        #expect(LocalSocketIO.helloTimeout(setting: "-5") == 1)
        #expect(LocalSocketIO.helloTimeout(setting: "99999") == 3600)
        #expect(LocalSocketIO.helloTimeout(setting: "soon") == 15)
        #expect(LocalSocketIO.helloTimeout(setting: "") == 15)
    }
}
