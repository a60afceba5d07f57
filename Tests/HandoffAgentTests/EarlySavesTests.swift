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
