import Foundation
import HandoffWire

/// What this device's local clients (apps, scripts, the browser host) say about their
/// activities, and the one activity the device offers to the others: the one that became
/// current last and has not expired. A pure value: the agent tells it each client's events
/// and asks it what is offered.
///
///     opened ──▶ becameCurrent(a) ──▶ a is current in its session (newest session's wins)
///                   │      ▲                 │ resigned(a): not current, still known
///                   │      └─────────────────┘ invalidated(a): forgotten
///     ended: the session's activities are forgotten
struct LocalActivities: Sendable {
    /// How many live activities one client keeps: past it, one that is not current goes.
    static let perSession = 64

    /// Per session, the activities it announced and has not invalidated.
    private(set) var bySession: [UUID: [UUID: ActivityAnnouncement]] = [:]
    /// Each session's current activity, in the order they became current (newest last).
    private(set) var currentOrder: [(session: UUID, activity: UUID)] = []
    /// The activity offered now (see `updateOffer(at:)`).
    private(set) var offered: ActivityAnnouncement?

    mutating func opened(_ session: UUID) {
        bySession[session] = [:]
    }

    mutating func becameCurrent(_ activity: ActivityAnnouncement, in session: UUID) {
        var known = bySession[session] ?? [:]
        if known.count >= Self.perSession, known[activity.id] == nil {
            let current = Set(currentOrder.filter { $0.session == session }.map(\.activity))
            if let drop = known.keys.first(where: { !current.contains($0) }) { known[drop] = nil }
        }
        known[activity.id] = activity
        bySession[session] = known
        currentOrder.removeAll { $0.session == session }
        currentOrder.append((session, activity.id))
    }

    mutating func resigned(_ activity: UUID, in session: UUID) {
        currentOrder.removeAll { $0.session == session && $0.activity == activity }
    }

    mutating func invalidated(_ activity: UUID, in session: UUID) {
        bySession[session]?[activity] = nil
        resigned(activity, in: session)
    }

    mutating func ended(_ session: UUID) {
        bySession[session] = nil
        currentOrder.removeAll { $0.session == session }
    }

    /// Decides what is offered at `now`: the newest current activity that has not expired.
    /// Returns true when that changed.
    mutating func updateOffer(at now: Date) -> Bool {
        var newest: ActivityAnnouncement?
        for entry in currentOrder.reversed() {
            if let activity = bySession[entry.session]?[entry.activity], !activity.isExpired(at: now) {
                newest = activity
                break
            }
        }
        guard newest != offered else { return false }
        offered = newest
        return true
    }

    /// The session that announced `activity`, if one still has it.
    func owner(of activity: UUID) -> UUID? {
        bySession.first { $0.value[activity] != nil }?.key
    }

    /// Every session that has `activity`.
    func sessions(holding activity: UUID) -> [UUID] {
        bySession.filter { $0.value[activity] != nil }.map(\.key)
    }

    /// `activity` as `session` announced it.
    func announcement(_ activity: UUID, in session: UUID) -> ActivityAnnouncement? {
        bySession[session]?[activity]
    }
}
