import Foundation

/// The account's recent signed changes, kept for members that were away (the newest `kept`),
/// and when each member was last sent what it missed: a member is caught up at most every
/// `catchUpInterval`, however often it is heard behind.
struct AccountHistory: Sendable {
    static var catchUpInterval: Duration { .seconds(5) }

    /// Oldest first.
    private(set) var changes: [Agent.RecordedChange]
    private var lastCatchUp: [UUID: ContinuousClock.Instant] = [:]

    init(changes: [Agent.RecordedChange] = []) {
        self.changes = changes
    }

    /// Keeps `change`, replacing any kept for its revision or later, and at most `kept` in all.
    mutating func record(_ change: Agent.RecordedChange, keeping kept: Int) {
        changes.removeAll { $0.revision >= change.revision }
        changes.append(change)
        if changes.count > kept { changes.removeFirst(changes.count - kept) }
    }

    /// The changes after `revision`, oldest first.
    func missed(after revision: UInt64) -> [Agent.RecordedChange] {
        changes.filter { $0.revision > revision }
    }

    /// Whether `member` may be caught up at `now`: not within `catchUpInterval` of the last time.
    func mayCatchUp(_ member: UUID, now: ContinuousClock.Instant) -> Bool {
        lastCatchUp[member].map { now - $0 >= Self.catchUpInterval } ?? true
    }

    mutating func caughtUp(_ member: UUID, at now: ContinuousClock.Instant) {
        lastCatchUp[member] = now
    }

    /// The device left the account: its changes go.
    mutating func forgetChanges() {
        changes = []
    }
}
