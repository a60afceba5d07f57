import Foundation
import Testing

@testable import HandoffAgent

/// The bookkeeping of saves begun as link connections are accepted.
@Suite("Early saves")
struct EarlySavesTests {
    let start = ContinuousClock.now

    @Test("A save begun for a connection is taken once, by that connection, within the window")
    func takenOnceByItsConnection() {
        let saves = EarlySaves()
        let one = saves.begin(1, now: start), two = saves.begin(2, now: start)
        #expect(one != nil && two != nil)
        #expect(saves.take(3, now: start) == nil, "a connection that began none takes none")
        #expect(saves.take(1, now: start + .milliseconds(5)) === one)
        #expect(saves.take(1, now: start + .milliseconds(6)) == nil, "the second fetch on a connection asks the app")
        #expect(saves.take(2, now: start + EarlySaves.window) == nil, "past the window, the state is too old")
        #expect(saves.counts.waiting == 0)
    }

    @Test("At most 4 begin in any 10 s, whatever the connections; old ones are forgotten")
    func limited() {
        let saves = EarlySaves()
        for connection in 1...10 { _ = saves.begin(UInt64(connection), now: start + .milliseconds(connection)) }
        #expect(saves.counts.begun == EarlySaves.limit)
        #expect(saves.begin(11, now: start + .seconds(9)) == nil)
        #expect(saves.begin(12, now: start + EarlySaves.period + .milliseconds(2)) != nil, "one more once the first has aged out")
        #expect(saves.counts.waiting == 1, "entries past the window are dropped")
    }

    @Test("A save a member's fetch took does not count against the limit; one nobody took does, until it ages out")
    func takenSavesDoNotCount() {
        let saves = EarlySaves()
        // A person continuing six times in a second: each link's save is taken by its fetch.
        for connection in 1...6 {
            let now = start + .milliseconds(200 * connection)
            #expect(saves.begin(UInt64(connection), now: now) != nil, "link \(connection) made no early save")
            #expect(saves.take(UInt64(connection), now: now + .milliseconds(3)) != nil)
        }
        #expect(saves.counts.begun == 0)
        // Strangers' connections take none: the limit holds for them.
        for connection in 7...12 { _ = saves.begin(UInt64(connection), now: start + .seconds(2)) }
        #expect(saves.counts.begun == EarlySaves.limit)
        #expect(saves.begin(13, now: start + .seconds(3)) == nil)
        // Past the window a save cannot be taken, and it still counts until the period ends.
        #expect(saves.take(7, now: start + .seconds(2) + EarlySaves.window) == nil)
        #expect(saves.begin(14, now: start + .seconds(2) + EarlySaves.window) == nil)
        #expect(saves.begin(15, now: start + .seconds(2) + EarlySaves.period) != nil)
        #expect(saves.counts.taken == 6)
    }

    @Test("A member taking its save among strangers' frees its own place, not a stranger's")
    func takenAmongStrangers() {
        let saves = EarlySaves()
        _ = saves.begin(1, now: start)  // a stranger
        _ = saves.begin(2, now: start + .milliseconds(500))  // a member, whose fetch takes it
        _ = saves.begin(3, now: start + .seconds(1))  // a stranger
        #expect(saves.take(2, now: start + .milliseconds(510)) != nil)
        #expect(saves.counts.begun == 2)
        // The stranger at 0 s ages out at 10 s, the one at 1 s at 11 s: the member's place was freed.
        for connection in 4...5 { #expect(saves.begin(UInt64(connection), now: start + .seconds(2)) != nil) }
        #expect(saves.begin(6, now: start + .seconds(2)) == nil)
        #expect(saves.begin(7, now: start + EarlySaves.period) != nil, "the first stranger's save aged out")
        #expect(saves.begin(8, now: start + EarlySaves.period) == nil)
    }

    @Test("An outcome can be read without waiting once settled, and only the first settling counts")
    func settledWithoutWaiting() async {
        let outcome = FirstOutcome<Int>()
        #expect(outcome.settled == nil)
        outcome.settle(1)
        outcome.settle(2)
        #expect(outcome.settled == 1)
        #expect(await outcome.value() == 1)
    }
}
