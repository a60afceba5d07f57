import Foundation
import Testing

@testable import HandoffAgent

/// `AccountHistory`: the changes kept for members that were away, and how often one is caught up.
@Suite struct AccountHistoryTests {
    func change(_ revision: UInt64) -> Agent.RecordedChange {
        Agent.RecordedChange(revision: revision, signer: UUID(), state: Data(), signature: Data())
    }

    @Test func keepsTheNewestAndReplacesARevisionAgain() {
        var changes: [Agent.RecordedChange] = []
        for revision in UInt64(1)...5 { changes = AccountHistory.recording(change(revision), in: changes, keeping: 3) }
        #expect(changes.map(\.revision) == [3, 4, 5])
        // A change made again at revision 4 (another member's, after a conflict) replaces 4 and 5.
        changes = AccountHistory.recording(change(4), in: changes, keeping: 3)
        #expect(changes.map(\.revision) == [3, 4])
        #expect(AccountHistory.missed(after: 3, in: changes).map(\.revision) == [4])
    }

    @Test func aMemberIsCaughtUpAtMostEveryInterval() {
        var history = AccountHistory()
        let member = UUID(), other = UUID()
        let start = ContinuousClock.now
        #expect(history.mayCatchUp(member, now: start))
        history.caughtUp(member, at: start)
        #expect(!history.mayCatchUp(member, now: start + .seconds(4)))
        #expect(history.mayCatchUp(other, now: start + .seconds(4)))
        #expect(history.mayCatchUp(member, now: start + AccountHistory.catchUpInterval))
    }
}
