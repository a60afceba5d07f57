import Foundation
import Testing

@testable import HandoffWire

@Suite("Link messages")
struct LinkMessageTests {
    let full = FetchedActivity(ActivityRecord(
        activity: ActivityAnnouncement(
            id: UUID(), activityType: "com.example.notes.editing", title: "Groceries ✓", bundleIdentifier: "com.example.notes",
            teamIdentifier: "TEAM1", hasWebpageURL: true, supportsContinuationStreams: true,
            expirationDate: Date(timeIntervalSinceReferenceDate: 800_000_000.25)),
        webpageURL: "https://notes.example.com/n/1", referrerURL: "https://example.com", keywords: ["milk", "eggs"],
        requiredUserInfoKeys: ["note"], persistentIdentifier: "p-1", targetContentIdentifier: "note-1",
        isEligibleForSearch: true, isEligibleForPublicIndexing: false, isEligibleForPrediction: true, userInfo: Data([0x48, 1, 0x0C, 0])))

    static func activity(_ type: String, expirationDate: Date? = nil, userInfo: Data? = nil) -> ActivityRecord {
        ActivityRecord(activity: ActivityAnnouncement(id: UUID(), activityType: type, expirationDate: expirationDate), userInfo: userInfo)
    }

    var messages: [LinkMessage] {
        [
            .hello(version: LinkMessage.version, device: UUID()),
            .fetch(request: 42, activityID: UUID()),
            .fetched(request: 42, full),
            .fetched(request: UInt64.max, FetchedActivity(Self.activity("t"))),
            .fetched(request: 3, FetchedActivity(
                Self.activity("t", userInfo: Data([0x48, 1, 0x0C, 0])),
                fileReferences: [WireFileReference(url: "file:///a/b.txt", container: "notes", path: "b.txt")])),
            .fetchFailed(request: 7, code: 4610, message: "the app did not save in time"),
            .continued(activityID: UUID()),
            .accountUpdate([SignedChange(signer: UUID(), state: Array("{}".utf8), signature: [1, 2, 3]), SignedChange(signer: UUID(), state: [], signature: [])]),
            .joinRequest(version: 1, name: "desk", certificate: [0x30, 0x82], proof: [UInt8](repeating: 9, count: 32)),
            .joinAccepted(SignedChange(signer: UUID(), state: Array("{\"revision\":2}".utf8), signature: [4])),
            .joinRefused(reason: "the code is wrong"), .joinConfirmed,
            .removed(SignedChange(signer: UUID(), state: Array("{}".utf8), signature: [1, 2])),
            .streamOpen(stream: 1, activityID: UUID(), window: 1 << 20),
            .streamAccepted(stream: 1, window: UInt32.max),
            .streamRefused(stream: 300, code: 4610, message: "the app did not take the streams"),
            .streamData(stream: 1, bytes: [0, 1, 2, 255]),
            .streamCredit(stream: 1, bytes: 262_144),
            .streamEnd(stream: UInt64.max),
            .streamStop(stream: 2),
            .streamReset(stream: 2, reason: "the app crashed"),
        ]
    }

    @Test("An expiration date that is not a finite number is refused")
    func nonFiniteDate() throws {
        // The record cannot hold such a date, so the bytes of a finite one are overwritten.
        let finite = 1.5
        let frame = LinkMessage.fetched(request: 1, FetchedActivity(Self.activity("t", expirationDate: Date(timeIntervalSinceReferenceDate: finite)))).frame
        let pattern = withUnsafeBytes(of: finite.bitPattern.littleEndian) { Array($0) }
        let at = try #require((0...(frame.payload.count - 8)).first { Array(frame.payload[$0..<$0 + 8]) == pattern })
        #expect(throws: Never.self) { try LinkMessage(frame: frame) }
        for bad in [Double.nan, .infinity, -.infinity] {
            var changed = frame
            changed.payload.replaceSubrange(at..<at + 8, with: withUnsafeBytes(of: bad.bitPattern.littleEndian) { Array($0) })
            #expect(throws: LinkMessageError.self) { try LinkMessage(frame: changed) }
        }
    }

    @Test("An account update that claims more changes than its bytes could hold is refused before reading them")
    func lyingCount() {
        var payload: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]
        payload += [UInt8](repeating: 0, count: 20)
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: Frame(kind: 0x20, payload: payload)) }
    }

    @Test("Stream frames are told apart from requests; empty data, a zero credit or an oversized window are refused")
    func streamFrames() {
        #expect(LinkMessage.isStreamFrame(LinkMessage.streamData(stream: 1, bytes: [1]).frame))
        #expect(!LinkMessage.isStreamFrame(LinkMessage.fetch(request: 1, activityID: UUID()).frame))
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: Frame(kind: 0x43, payload: [1])) }
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: Frame(kind: 0x44, payload: [1, 0])) }
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: Frame(kind: 0x41, payload: [1, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F])) }
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: Frame(kind: 0x45, payload: [1, 0])) }
    }

    @Test("Every message comes back from its frame as it was")
    func roundTrip() throws {
        for message in messages {
            #expect(try LinkMessage(frame: message.frame) == message)
        }
    }

    @Test("Every shortened message is refused, never a crash (stream data, whose bytes run to the frame's end, only without its bytes)")
    func truncated() {
        for message in messages {
            let frame = message.frame
            // A shorter data frame is shorter data; only cutting into its stream number is wrong.
            let shortest = frame.kind == 0x43 ? 2 : frame.payload.count
            for length in 0..<shortest {
                #expect(throws: LinkMessageError.self) {
                    try LinkMessage(frame: Frame(kind: frame.kind, payload: Array(frame.payload.prefix(length))))
                }
            }
        }
    }

    @Test("Extra bytes after a message, an unknown kind, and bad UTF-8 are refused")
    func refused() {
        let frame = LinkMessage.continued(activityID: UUID()).frame
        #expect(throws: LinkMessageError.malformed("unexpected bytes after the message")) {
            try LinkMessage(frame: Frame(kind: frame.kind, payload: frame.payload + [0]))
        }
        #expect(throws: LinkMessageError.unknownKind(0x7F)) { try LinkMessage(frame: Frame(kind: 0x7F, payload: [])) }
        #expect(throws: LinkMessageError.self) {
            try LinkMessage(frame: Frame(kind: 0x12, payload: [1, 0x80, 0x20, 2, 0xFF, 0xFE]))
        }
    }

    @Test("A declared length beyond the frame is refused without allocating it")
    func hugeLength() {
        // fetchFailed: request 1, code 4608, then a message that claims 2^40 bytes.
        let payload: [UInt8] = [1, 0x80, 0x24, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20]
        #expect(throws: LinkMessageError.truncated) { try LinkMessage(frame: Frame(kind: 0x12, payload: payload)) }
    }

    @Test("Random mutations of valid messages decode or are refused, never a crash")
    func mutations() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3_000 {
            var frame = messages.randomElement(using: &generator)!.frame
            guard !frame.payload.isEmpty else { continue }
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                frame.payload[Int.random(in: 0..<frame.payload.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            _ = try? LinkMessage(frame: frame)
        }
    }
}
