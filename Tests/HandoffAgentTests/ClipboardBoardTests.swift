import Foundation
import HandoffWire
import Testing

@testable import HandoffAgent

@Suite("The clipboard here: the newest offer of the account")
struct ClipboardBoardTests {
    let me = UUID()
    let other = UUID()
    let third = UUID()
    let start = ContinuousClock.now
    let text = [ClipboardType(name: "text/plain;charset=utf-8", size: 5)]
    let file = URL(fileURLWithPath: "/tmp/copy")

    func offer(copiedAt: Date, lifetime: UInt16 = 120, generation: UInt64 = 1) -> ClipboardOffer {
        ClipboardOffer(generation: generation, copiedAt: copiedAt, lifetimeSeconds: lifetime, types: text)
    }

    @Test("A copy here is the clipboard; another device's newer copy replaces it, and a copy here after that replaces that")
    func newestWins() {
        var board = ClipboardBoard()
        let t0 = Date()
        let (mine, _) = board.copied(text, content: .held(["text/plain;charset=utf-8": file]), at: t0, lifetime: .seconds(120), now: start)
        #expect(board.current(now: start, me: me) == .local(mine))
        let theirs = offer(copiedAt: t0.addingTimeInterval(1))
        let heard = board.heard(other, offer: theirs, sent: t0.addingTimeInterval(1), now: start)
        #expect(heard)
        #expect(board.current(now: start, me: me)?.offer == theirs)
        // An older offer from a third device changes nothing.
        board.heard(third, offer: offer(copiedAt: t0.addingTimeInterval(-5)), sent: t0, now: start)
        #expect(board.current(now: start, me: me)?.offer == theirs)
        let (again, replaced) = board.copied(text, content: .held(["text/plain;charset=utf-8": file]), at: t0.addingTimeInterval(2), lifetime: .seconds(120), now: start)
        #expect(replaced == .held(["text/plain;charset=utf-8": file]))
        #expect(board.current(now: start, me: me) == .local(again))
        #expect(again.generation > mine.generation)
    }

    @Test("Generations grow with every copy, even two in the same millisecond, and follow the clock across restarts")
    func generations() {
        var board = ClipboardBoard()
        let t = Date(timeIntervalSince1970: 1_795_000_000)
        let first = board.copied(text, content: .held([:]), at: t, lifetime: .seconds(1), now: start).offer.generation
        let second = board.copied(text, content: .held([:]), at: t, lifetime: .seconds(1), now: start).offer.generation
        #expect(first == 1_795_000_000_000)
        #expect(second == first + 1)
    }

    @Test("An offer expires its lifetime after it was copied, as old as its own device's clock says, whatever this clock says")
    func expiry() {
        var board = ClipboardBoard()
        // Copied 100 s before the beacon was sent, on a clock an hour off from this one.
        let copied = Date().addingTimeInterval(3600)
        board.heard(other, offer: offer(copiedAt: copied), sent: copied.addingTimeInterval(100), now: start)
        #expect(board.current(now: start + .seconds(19), me: me) != nil)
        #expect(board.current(now: start + .seconds(20), me: me) == nil)
        // To the millisecond the beacon keeps.
        let next = board.nextExpiry(now: start)
        #expect(next.map { $0 > start + .milliseconds(19_990) && $0 <= start + .seconds(20) } == true)
        // A local copy's own lifetime.
        _ = board.copied(text, content: .held([:]), at: Date(), lifetime: .seconds(2), now: start)
        #expect(board.localOffer(now: start + .seconds(1)) != nil)
        #expect(board.localOffer(now: start + .seconds(2)) == nil)
    }

    @Test("A copy time no sender writes is survived: one at the far end of the clock expires at once, one later than its beacon is not taken (it would win over every real copy)")
    func wildTimes() {
        var board = ClipboardBoard()
        let sent = Date()
        let ancient = ClipboardOffer(generation: 1, copiedAt: Date(timeIntervalSince1970: Double(Int64.min) / 1000), lifetimeSeconds: UInt16.max, types: text)
        board.heard(other, offer: ancient, sent: sent, now: start)
        #expect(board.current(now: start, me: me) == nil)
        let ahead = ClipboardOffer(generation: 2, copiedAt: sent.addingTimeInterval(3600), lifetimeSeconds: 120, types: text)
        let taken = board.heard(third, offer: ahead, sent: sent, now: start)
        #expect(board.current(now: start, me: me) == nil)
        #expect(!taken)
    }

    @Test("A device that goes, or stops offering, takes its offer with it; the same offer heard again changes nothing")
    func goneAndRepeated() {
        var board = ClipboardBoard()
        let theirs = offer(copiedAt: Date())
        let first = board.heard(other, offer: theirs, sent: Date(), now: start)
        let again = board.heard(other, offer: theirs, sent: Date(), now: start)
        let gone = board.gone(other)
        #expect(first && !again && gone)
        #expect(board.current(now: start, me: me) == nil)
        board.heard(other, offer: theirs, sent: Date(), now: start)
        let stopped = board.heard(other, offer: nil, sent: Date(), now: start)
        #expect(stopped)
        #expect(board.current(now: start, me: me) == nil)
    }

    @Test("A paste is served only for the copy's generation, before it expires, and a type it offered")
    func servable() {
        var board = ClipboardBoard()
        let (mine, _) = board.copied(text, content: .held(["text/plain;charset=utf-8": file]), at: Date(), lifetime: .seconds(10), now: start)
        #expect((try? board.servable(generation: mine.generation, type: "text/plain;charset=utf-8", now: start).get())?.1 == .held(["text/plain;charset=utf-8": file]))
        func refusal(_ result: Result<(ClipboardType, LocalClipboardContent), ClipboardRefusal>) -> ClipboardRefusal? {
            if case .failure(let why) = result { return why }
            return nil
        }
        #expect(refusal(board.servable(generation: mine.generation - 1, type: "text/plain;charset=utf-8", now: start)) == .replaced)
        #expect(refusal(board.servable(generation: mine.generation, type: "text/plain;charset=utf-8", now: start + .seconds(10))) == .expired)
        #expect(refusal(board.servable(generation: mine.generation, type: "image/png", now: start)) == .typeNotOffered("image/png", offered: ["text/plain;charset=utf-8"]))
    }

    @Test("A paste without a type gets the first text type, else the first type; one naming a type gets it or nothing")
    func pasteType() {
        let offer = ClipboardOffer(
            generation: 1, copiedAt: Date(), lifetimeSeconds: 1,
            types: [ClipboardType(name: "image/png", size: 9), ClipboardType(name: "UTF8_STRING", size: 3), ClipboardType(name: "text/plain", size: 3)])
        #expect(ClipboardBoard.pasteType(nil, in: offer)?.name == "UTF8_STRING")
        #expect(ClipboardBoard.pasteType("image/png", in: offer)?.size == 9)
        #expect(ClipboardBoard.pasteType("image/jpeg", in: offer) == nil)
        let image = ClipboardOffer(generation: 1, copiedAt: Date(), lifetimeSeconds: 1, types: [ClipboardType(name: "image/png", size: 9)])
        #expect(ClipboardBoard.pasteType(nil, in: image)?.name == "image/png")
    }
}
