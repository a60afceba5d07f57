import Foundation

/// The account's recent signed changes, kept for members that were away (the newest `kept`),
/// and when each member was last sent what it missed: a member is caught up at most every
/// `catchUpInterval`, however often it is heard behind.
///
/// The changes live on disk only (`Agent.keptChanges()`), and are read when a member is caught
/// up: each holds the whole member list, so in memory they would cost an agent the account's
/// size times the number kept for as long as it runs.
struct AccountHistory: Sendable {
    static var catchUpInterval: Duration { .seconds(5) }

    private var lastCatchUp: [UUID: ContinuousClock.Instant] = [:]

    /// `changes` (oldest first) with `change` kept: any kept for its revision or later replaced,
    /// and at most `kept` in all, the newest.
    static func recording(_ change: Agent.RecordedChange, in changes: [Agent.RecordedChange], keeping kept: Int) -> [Agent.RecordedChange] {
        var changes = changes.filter { $0.revision < change.revision }
        changes.append(change)
        return Array(changes.suffix(kept))
    }

    /// The changes in `changes` after `revision`, oldest first.
    static func missed(after revision: UInt64, in changes: [Agent.RecordedChange]) -> [Agent.RecordedChange] {
        changes.filter { $0.revision > revision }
    }

    /// Whether `member` may be caught up at `now`: not within `catchUpInterval` of the last time.
    func mayCatchUp(_ member: UUID, now: ContinuousClock.Instant) -> Bool {
        lastCatchUp[member].map { now - $0 >= Self.catchUpInterval } ?? true
    }

    mutating func caughtUp(_ member: UUID, at now: ContinuousClock.Instant) {
        lastCatchUp[member] = now
    }
}
