import Foundation
import Testing

@testable import HandoffWire

@Suite("Clipboard offers in beacons and links")
struct ClipboardOfferTests {
    let key = BeaconKey.generate()
    let now = Date(timeIntervalSince1970: 1_795_000_000.123)

    func offer(_ types: [ClipboardType]) -> ClipboardOffer {
        ClipboardOffer(generation: 1_795_000_000_100, copiedAt: now.addingTimeInterval(-3), lifetimeSeconds: 120, types: types)
    }

    func content(activity: ActivityAnnouncement? = nil, clipboard: ClipboardOffer?) -> BeaconContent {
        BeaconContent(sender: UUID(), sequence: 7, timestamp: now, linkPort: 47_170, activity: activity, refreshSeconds: 19, clipboard: clipboard)
    }

    static let usual = [
        ClipboardType(name: "text/plain;charset=utf-8", size: 11), ClipboardType(name: "UTF8_STRING", size: 11),
        ClipboardType(name: "text/html", size: 2_000_000), ClipboardType(name: "application/x-example-notes", size: 300_000_000_000),
    ]

    @Test("A beacon carries what a device offers to paste, types and sizes, and opens to it; the content is nowhere in it")
    func roundTrip() throws {
        let activity = ActivityAnnouncement(id: UUID(), activityType: "com.example.notes.editing", title: "Groceries", teamIdentifier: "TEAM1")
        for carried in [nil, activity] {
            let sent = content(activity: carried, clipboard: offer(Self.usual))
            let sealed = try Beacon.seal(sent, with: key)
            #expect(sealed.count == Beacon.size)
            #expect(Beacon.open(sealed, with: [key]) == sent)
            #expect(try Beacon.encode(sent).first == 3)
        }
    }

    @Test("A beacon without a clipboard offer is still written as version 2, which agents from before the clipboard read")
    func olderAgentsStillRead() throws {
        #expect(try Beacon.encode(content(clipboard: nil)).first == 2)
        // What a version 2 reader refused: a version byte other than 1 or 2 (its check).
        let old = try Beacon.encode(content(clipboard: nil))
        #expect(old.first == 1 || old.first == 2)
    }

    @Test("Beside an activity with the longest type and team, the types that fit are carried in order and the title keeps its first 24 bytes")
    func roomIsShared() throws {
        let longest = ActivityAnnouncement(
            id: UUID(), activityType: String(repeating: "t", count: Beacon.maximumActivityTypeBytes), title: String(repeating: "x", count: 300),
            teamIdentifier: String(repeating: "T", count: Beacon.maximumTeamBytes))
        let spelled = (0..<16).map { ClipboardType(name: "application/x-example-\($0)-" + String(repeating: "n", count: 60), size: 1) }
        let sent = content(activity: longest, clipboard: offer([ClipboardType(name: "text/plain;charset=utf-8", size: 5)] + spelled))
        let opened = try #require(Beacon.open(try Beacon.seal(sent, with: key), with: [key]))
        let types = try #require(opened.clipboard?.types)
        #expect(types.first?.name == "text/plain;charset=utf-8")
        #expect(types.count >= 2 && types.count < 17, "\(types.count) types carried")
        #expect(types.map(\.name) == Array(sent.clipboard!.types.map(\.name).prefix(types.count)))
        #expect((opened.activity?.title?.utf8.count ?? 0) >= Beacon.titleRoomKept)
    }

    @Test("What no sender writes is refused: over 16 types, a name that is not printable ASCII or too long, the same type twice, an unknown code")
    func refused() throws {
        func sealedWithSection(_ section: [UInt8]) throws -> [UInt8] {
            // A version 3 beacon whose clipboard section is written by hand.
            var plain = try Beacon.encode(content(clipboard: offer([])))
            let start = Beacon.headerSize
            let headerEnd = start + ClipboardOffer.sectionHeaderSize
            plain.replaceSubrange((headerEnd - 1)..<headerEnd, with: section)
            plain = Array(plain.prefix(Beacon.plaintextSize))
            plain += [UInt8](repeating: 0, count: Beacon.plaintextSize - plain.count)
            return plain
        }
        let good = try sealedWithSection([1, 9, 5])
        #expect(Beacon.decode(good)?.clipboard?.types == [ClipboardType(name: "image/png", size: 5)])
        let tooMany = try sealedWithSection([17] + (0..<17).flatMap { [UInt8($0 + 1), 1] })
        #expect(Beacon.decode(tooMany) == nil)
        let control = try sealedWithSection([1, 0, 3] + Array("a\nb".utf8) + [1])
        #expect(Beacon.decode(control) == nil)
        let long = try sealedWithSection([1, 0, 101] + [UInt8](repeating: 0x61, count: 101) + [1])
        #expect(Beacon.decode(long) == nil)
        let twice = try sealedWithSection([2, 9, 1, 9, 2])
        #expect(Beacon.decode(twice) == nil)
        let unknown = try sealedWithSection([1, 200, 1])
        #expect(Beacon.decode(unknown) == nil)
        // The clipboard's bit without version 3, or version 3 without the bit.
        var wrongVersion = good
        wrongVersion[0] = 2
        #expect(Beacon.decode(wrongVersion) == nil)
        var noBit = try Beacon.encode(content(clipboard: nil))
        noBit[0] = 3
        #expect(Beacon.decode(noBit) == nil)
    }

    @Test("The sealing side carries at most 16 types, never one with a name it would refuse, and each once")
    func sealingKeepsTheLimits() throws {
        let many = (0..<40).map { ClipboardType(name: "x/\($0)", size: UInt64($0)) } + [ClipboardType(name: "bad\u{7}", size: 1), ClipboardType(name: "x/1", size: 9)]
        let opened = try #require(Beacon.open(try Beacon.seal(content(clipboard: offer(many)), with: key), with: [key]))
        #expect(opened.clipboard?.types.count == ClipboardOffer.maximumTypes)
        #expect(opened.clipboard?.types.map(\.name) == (0..<16).map { "x/\($0)" })
    }

    @Test("A paste's stream opens with the generation and one type; a type name that is not valid is refused as the frame is read")
    func clipboardOpen() throws {
        let message = LinkMessage.clipboardOpen(stream: 3, generation: 1_795_000_000_100, type: "image/png", window: 1 << 20)
        #expect(try LinkMessage(frame: message.frame) == message)
        #expect(LinkMessage.isStreamFrame(message.frame))
        for bad in ["", "a\u{0}b", String(repeating: "a", count: 101), " text/plain"] {
            let frame = LinkMessage.clipboardOpen(stream: 3, generation: 1, type: bad, window: 1 << 20).frame
            #expect(throws: LinkMessageError.self) { try LinkMessage(frame: frame) }
        }
    }
}
