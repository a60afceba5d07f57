import HandoffWire
import Testing

@testable import HandoffAgent

/// Each transition of one stream's machine, with no link, no tasks and no time.
@Suite("Link stream state machine")
struct LinkStreamStateMachineTests {
    typealias Machine = LinkStreamStateMachine

    /// A stream this side opened, accepted by the other side with `peerWindow`.
    func opened(window: UInt32 = 1_024, peerWindow: UInt32 = 1_024) -> Machine {
        var machine = Machine(id: 7, window: window, peerWindow: nil)
        _ = machine.accepted(window: peerWindow)
        return machine
    }

    @Test("This side's open: writers wait until the other side accepts, which gives its window as credit; a second acceptance is refused")
    func openingThenAccepted() {
        var machine = Machine(id: 7, window: 1_024, peerWindow: nil)
        #expect(machine.state == .opening)
        #expect(machine.writerWaits)
        #expect(machine.takeCredit(upTo: 10) == .wait)
        let (first, effects) = machine.accepted(window: 300)
        #expect(first && effects == Machine.Effects(wakeWriter: true))
        #expect(machine.state == .open(.writing(credit: 300), .reading(.init())))
        #expect(machine.accepted(window: 300).0 == false)
        #expect(machine.takeCredit(upTo: 500) == .send(300))
        #expect(machine.takeCredit(upTo: 1) == .wait)
    }

    @Test("The other side's open: nothing is written before this side accepts; accepting sends this side's window")
    func offeredThenAccepted() {
        var machine = Machine(id: 9, window: 4_096, peerWindow: 100)
        #expect(machine.state == .offered(peerWindow: 100))
        #expect(machine.takeCredit(upTo: 10) == .wait)
        #expect(machine.accept() == Machine.Effects(send: [.streamAccepted(stream: 9, window: 4_096)], wakeWriter: true))
        #expect(machine.accept() == .none)
        #expect(machine.takeCredit(upTo: 10) == .send(10))
        #expect(machine.state == .open(.writing(credit: 90), .reading(.init())))
    }

    @Test("Credit from the other side lets a waiting writer go on; credit for a stream not writing is ignored")
    func credit() {
        var machine = opened(peerWindow: 0)
        #expect(machine.writerWaits)
        #expect(machine.received(.streamCredit(stream: 7, bytes: 64)) == Machine.Effects(wakeWriter: true))
        #expect(!machine.writerWaits)
        #expect(machine.takeCredit(upTo: 100) == .send(64))
        _ = machine.finish()
        #expect(machine.received(.streamCredit(stream: 7, bytes: 64)) == .none)
        #expect(machine.takeCredit(upTo: 1) == .refused("the stream was closed for writing"))
    }

    @Test("Data within the window reaches the reader; a quarter window consumed is granted back, less is kept")
    func dataAndGrants() {
        var machine = opened(window: 1_000)
        #expect(machine.received(.streamData(stream: 7, bytes: [1, 2, 3])) == Machine.Effects(events: [.data([1, 2, 3])]))
        #expect(machine.received(.streamData(stream: 7, bytes: [UInt8](repeating: 0, count: 997))).events.count == 1)
        #expect(machine.consumed(200) == .none)
        #expect(machine.consumed(50) == Machine.Effects(send: [.streamCredit(stream: 7, bytes: 250)]))
        // 250 granted back: 250 more fit, one more byte does not.
        #expect(machine.received(.streamData(stream: 7, bytes: [UInt8](repeating: 0, count: 250))).events.count == 1)
        let over = machine.received(.streamData(stream: 7, bytes: [0]))
        #expect(over.send.first.map { if case .streamReset = $0 { true } else { false } } == true)
        #expect(over.finish && machine.isFinished)
    }

    @Test("Data before acceptance, beyond the window or after the end resets the stream, telling both sides", arguments: [0, 1, 2])
    func violations(kind: Int) {
        var machine: Machine
        switch kind {
        case 0:
            machine = Machine(id: 7, window: 1_024, peerWindow: nil)
        case 1:
            machine = opened(window: 16)
            _ = machine.received(.streamData(stream: 7, bytes: [UInt8](repeating: 0, count: 16)))
        default:
            machine = opened()
            _ = machine.received(.streamEnd(stream: 7))
        }
        let effects = machine.received(.streamData(stream: 7, bytes: [1]))
        let reason = "the other device sent data before the stream was accepted, beyond its window, or after its end"
        #expect(effects == Machine.Effects(send: [.streamReset(stream: 7, reason: reason)], events: [.failed(reason)], finish: true, wakeWriter: true))
        #expect(machine.failure == reason)
        #expect(machine.takeCredit(upTo: 1) == .refused(reason))
    }

    @Test("Ending this side's writing, then the other side's end, finishes the stream")
    func endBothWays() {
        var machine = opened()
        #expect(machine.finish() == Machine.Effects(send: [.streamEnd(stream: 7)]))
        #expect(machine.finish() == .none)
        #expect(machine.state == .open(.ended, .reading(.init())))
        #expect(machine.received(.streamEnd(stream: 7)) == Machine.Effects(events: [.end], finish: true, wakeWriter: true))
        #expect(machine.state == .finished)
        // Nothing moves a finished stream.
        #expect(machine.received(.streamReset(stream: 7, reason: "late")) == .none)
        #expect(machine.reset("late") == .none)
        #expect(machine.close() == Machine.Effects(finish: true, wakeWriter: true))
    }

    @Test("A reader that stops: the stop is sent, bytes already on their way are dropped and granted back, and the other side's end finishes it without an event")
    func stopReading() {
        var machine = opened(window: 400)
        _ = machine.received(.streamData(stream: 7, bytes: [UInt8](repeating: 0, count: 60)))
        #expect(machine.stopReading() == Machine.Effects(send: [.streamStop(stream: 7)]))
        #expect(machine.stopReading() == .none)
        // Dropped bytes count as consumed: a quarter window (100) of them is granted back.
        #expect(machine.received(.streamData(stream: 7, bytes: [UInt8](repeating: 0, count: 99))) == .none)
        #expect(machine.received(.streamData(stream: 7, bytes: [0])) == Machine.Effects(send: [.streamCredit(stream: 7, bytes: 100)]))
        // The window still binds: 60 never consumed, and 341 more is one byte over.
        #expect(machine.received(.streamData(stream: 7, bytes: [UInt8](repeating: 0, count: 341))).finish)
        var other = opened(window: 400)
        _ = other.stopReading()
        _ = other.finish()
        #expect(other.isFinished)
        var third = opened()
        _ = third.stopReading()
        #expect(third.received(.streamEnd(stream: 7)) == .none)
        #expect(third.state == .open(.writing(credit: 1_024), .ended))
    }

    @Test("The other side stops reading: its reader hears it, writers are refused at once (a waiting one is woken), and this side's end finishes the stream")
    func stoppedByTheOtherSide() {
        var machine = opened(peerWindow: 0)
        #expect(machine.received(.streamStop(stream: 7)) == Machine.Effects(events: [.stop], wakeWriter: true))
        #expect(!machine.writerWaits)
        #expect(machine.takeCredit(upTo: 1) == .refused("the app on the other device closed its input stream"))
        #expect(machine.received(.streamStop(stream: 7)) == .none)
        #expect(machine.finish() == .none)
        #expect(machine.received(.streamEnd(stream: 7)) == Machine.Effects(events: [.end], finish: true, wakeWriter: true))
    }

    @Test("A reset from the other side fails the stream without a frame back; a reset here tells the other side; either one only once")
    func resets() {
        var machine = opened()
        #expect(machine.received(.streamReset(stream: 7, reason: "gone")) == Machine.Effects(events: [.failed("the other device ended the stream: gone")], finish: true, wakeWriter: true))
        #expect(machine.received(.streamReset(stream: 7, reason: "again")) == .none)
        var other = opened()
        #expect(other.reset("mine") == Machine.Effects(send: [.streamReset(stream: 7, reason: "mine")], events: [.failed("mine")], finish: true, wakeWriter: true))
        #expect(other.reset("mine") == .none)
        #expect(other.fail("link dropped") == .none)
        var third = Machine(id: 7, window: 1_024, peerWindow: nil)
        #expect(third.fail("refused") == Machine.Effects(events: [.failed("refused")], finish: true, wakeWriter: true))
        #expect(third.accepted(window: 10).0 == false)
    }

    @Test("Closing a stream not over both ways resets it for the other side; closing one that is over sends nothing", arguments: [false, true])
    func close(finishedFirst: Bool) {
        var machine = opened()
        if finishedFirst {
            _ = machine.finish()
            _ = machine.received(.streamEnd(stream: 7))
        }
        let effects = machine.close()
        if finishedFirst {
            #expect(effects == Machine.Effects(finish: true, wakeWriter: true))
        } else {
            #expect(effects.send.count == 1 && effects.finish)
            #expect(machine.failure?.contains("let go of its streams before ending them both ways") == true)
        }
    }

    /// Two machines back to back, each frame delivered in order per direction but the two
    /// directions, the writer, the reader and the ends interleaved at random: whatever the
    /// order, no machine that follows the rules is reset, the receiver never holds more than
    /// its window, and the reader gets exactly the bytes written, then the end.
    @Test("Any interleaving of writes, reads, grants and ends between two machines delivers every byte in order, within the window, with no reset")
    func randomInterleavings() {
        var generator = SeededGenerator(seed: 0x5eed)
        for round in 0..<300 {
            let window = UInt32.random(in: 4...64, using: &generator)
            var opener = Machine(id: 1, window: window, peerWindow: nil)
            var acceptor = Machine(id: 1, window: window, peerWindow: window)
            var toAcceptor: [LinkMessage] = []
            var toOpener: [LinkMessage] = []
            let total = Int.random(in: 0...300, using: &generator)
            var written = 0
            var unread: [UInt8] = []
            var received: [UInt8] = []
            var sawEnd = false
            var failures: [String] = []
            var ended = false
            func apply(_ effects: Machine.Effects, from opener: Bool) {
                if opener { toAcceptor += effects.send } else { toOpener += effects.send }
                for event in effects.events {
                    switch event {
                    case .data(let bytes) where !opener: unread += bytes
                    case .end where !opener: sawEnd = true
                    case .failed(let reason): failures.append(reason)
                    default: break
                    }
                }
            }
            toAcceptor.append(.streamOpen(stream: 1, activityID: .init(), window: window))
            apply(acceptor.accept(), from: false)
            toAcceptor.removeAll()
            var steps = 0
            while steps < 100_000 {
                steps += 1
                var choices: [Int] = []
                if !toAcceptor.isEmpty { choices.append(0) }
                if !toOpener.isEmpty { choices.append(1) }
                if written < total, case .send = { var copy = opener; return copy.takeCredit(upTo: 1) }() { choices.append(2) }
                if !unread.isEmpty { choices.append(3) }
                if written == total, !ended, case .open = opener.state { choices.append(4) }
                guard let choice = choices.randomElement(using: &generator) else { break }
                switch choice {
                case 0: apply(acceptor.received(toAcceptor.removeFirst()), from: false)
                case 1:
                    // The link hands an acceptance to the stream it answers, other frames as they come.
                    switch toOpener.removeFirst() {
                    case .streamAccepted(_, let peerWindow): apply(opener.accepted(window: peerWindow).1, from: true)
                    case let message: apply(opener.received(message), from: true)
                    }
                case 2:
                    let wanted = min(Int.random(in: 1...20, using: &generator), total - written)
                    guard case .send(let count) = opener.takeCredit(upTo: wanted) else { break }
                    toAcceptor.append(.streamData(stream: 1, bytes: (written..<written + count).map { UInt8(truncatingIfNeeded: $0) }))
                    written += count
                case 3:
                    let count = Int.random(in: 1...unread.count, using: &generator)
                    received += unread.prefix(count)
                    unread.removeFirst(count)
                    apply(acceptor.consumed(count), from: false)
                default:
                    apply(opener.finish(), from: true)
                    apply(acceptor.finish(), from: false)
                    ended = true
                }
                if case .open(_, .reading(let held)) = acceptor.state {
                    #expect(held.outstanding <= Int(window), "round \(round): \(held.outstanding) held past a window of \(window)")
                }
            }
            received += unread
            #expect(failures.isEmpty, "round \(round): \(failures)")
            #expect(received == (0..<total).map { UInt8(truncatingIfNeeded: $0) }, "round \(round): \(received.count) of \(total) bytes")
            #expect(sawEnd, "round \(round): no end")
            #expect(opener.isFinished && acceptor.isFinished, "round \(round): \(opener.state) / \(acceptor.state)")
        }
    }
}

/// SplitMix64: the same sequence for the same seed, so a failing interleaving comes back.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
