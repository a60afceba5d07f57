import Foundation
import HandoffWire
import Synchronization

/// The origin's save, begun as a link connection is accepted.
///
/// A device that opens a link to continue an activity sends its fetch inside its membership
/// proof, and the origin can ask its app to save only once it has accepted that proof: after
/// quiet the app then takes 0.3 to 1.0 ms to wake, save and answer, while the device that
/// asked waits. But the link's opening (TCP, TLS, the proofs) takes longer than that, and the
/// activity that will be asked for is almost always the one this device offers. So when a link
/// connection between members is accepted, the app is asked to save the offered activity at
/// once, and the connection's first fetch of that activity, if it comes within
/// `EarlySaves.window`, is answered with that save.
///
/// What a stranger can do with it: make the app save, at most `EarlySaves.limit` times in
/// `EarlySaves.period`, and learn nothing (the save is only ever sent on the connection that
/// began it, to a proven member that asks for that activity). A save a proven member's fetch
/// took no longer counts against the limit: strangers cannot take one, and a person who
/// continues again and again (more than `limit` links in `period`) keeps the early save. A save
/// begun for one connection never answers another's fetch, nor a later one on the same
/// connection: each fetch that is not its connection's first, within the window, asks the app
/// as before. `HANDOFF_EARLY_SAVE=off` turns it off (for comparison).
final class EarlySaves: Sendable {
    /// How long after its connection was accepted an early save may answer a fetch: a link
    /// opens in a few milliseconds, and the state must be the app's at the time it was asked.
    static let window: Duration = .seconds(2)
    /// At most `limit` early saves begin in any `period`, not counting those a member's fetch
    /// has taken.
    static let limit = 4
    static let period: Duration = .seconds(10)

    /// What an early save made: the activity it saved and how that went; nil when none was made
    /// (nothing offered, or the agent stopping).
    typealias Made = (activity: UUID, result: Result<FetchedActivity, ContinuationFailure>)?
    typealias Outcome = FirstOutcome<Made>

    private struct State {
        var entries: [UInt64: (began: ContinuousClock.Instant, outcome: Outcome)] = [:]
        /// When the early saves of the last `period` that no fetch took began.
        var begun: [ContinuousClock.Instant] = []
        /// How many a fetch took, ever (for tests).
        var taken = 0

        mutating func forgetOld(now: ContinuousClock.Instant) {
            begun.removeAll { now - $0 >= EarlySaves.period }
            entries = entries.filter { now - $0.value.began < EarlySaves.window }
        }
    }

    private let state = Mutex(State())

    /// Records an early save for `connection` as it is accepted, unless `limit` began in the
    /// last `period`: the caller makes it and settles the outcome returned (nil: none).
    func begin(_ connection: UInt64, now: ContinuousClock.Instant) -> Outcome? {
        state.withLock { state in
            state.forgetOld(now: now)
            guard state.begun.count < Self.limit else { return nil }
            state.begun.append(now)
            let outcome = Outcome()
            state.entries[connection] = (now, outcome)
            return outcome
        }
    }

    /// The early save begun for `connection`, taken (it answers one fetch, the first), if it
    /// began within `window`; nil otherwise. The caller is a proven member's fetch: the save no
    /// longer counts against the limit.
    func take(_ connection: UInt64, now: ContinuousClock.Instant) -> Outcome? {
        state.withLock { state in
            state.forgetOld(now: now)
            guard let entry = state.entries.removeValue(forKey: connection) else { return nil }
            state.taken += 1
            if let counted = state.begun.firstIndex(of: entry.began) { state.begun.remove(at: counted) }
            return entry.outcome
        }
    }

    /// How many began in the last `period` that no fetch took, how many wait for a fetch, and
    /// how many a fetch took (for tests).
    var counts: (begun: Int, waiting: Int, taken: Int) { state.withLock { ($0.begun.count, $0.entries.count, $0.taken) } }
}

extension Agent {
    static let earlySavesOn = ProcessInfo.processInfo.environment["HANDOFF_EARLY_SAVE"] != "off"

    /// A link connection between members was accepted (on an event loop, before anything is
    /// known of who made it): the offered activity's app is asked to save now, for that
    /// connection's first fetch.
    nonisolated func linkAccepted(_ connection: UInt64) {
        guard Self.earlySavesOn, let outcome = earlySaves.begin(connection, now: .now) else { return }
        guard tasks.start("early save", { await self.earlySave(outcome) }) else { return outcome.settle(nil) }
    }

    private func earlySave(_ outcome: EarlySaves.Outcome) async {
        guard let offered = activities.offered, let owner = activities.owner(of: offered.id), sessions[owner] != nil else {
            return outcome.settle(nil)
        }
        HopTrace.stamp("early save begins")
        let saved = await save(offered.id)
        HopTrace.stamp("early save settled")
        outcome.settle((offered.id, saved))
    }

    /// The save that answers `peer`'s fetch of `activityID`: the early one begun for its
    /// connection, if that was of this activity, else one asked now. An early save that failed
    /// answers with its failure: the app was asked, and had its deadline (asking again would make
    /// the fetch wait two save deadlines, past the other side's fetch deadline).
    func save(_ activityID: UUID, for peer: LinkPeer) async -> Result<FetchedActivity, ContinuationFailure> {
        // Settled already (the app answered during the handshake), it is used without a
        // suspension: the answer goes out in the same turn of the event loop.
        if let connection = peer.connection, let early = earlySaves.take(connection, now: .now) {
            let made: EarlySaves.Made
            if let settled = early.settled {
                made = settled
            } else {
                HopTrace.stamp("fetch waited")
                made = await early.value()
            }
            if let made, made.activity == activityID { return made.result }
        }
        HopTrace.stamp("fetch waited")
        return await save(activityID)
    }
}
