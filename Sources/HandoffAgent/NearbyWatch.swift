import Foundation
import HandoffLocalAPI

/// The local clients watching what is nearby (`handoff watch`, the browser host), and each
/// nearby device's activity as they were last told it: from what discovery hears, it decides
/// which change (if any) they are told. A pure value apart from the watchers' connections.
///
///     nothing ──heard(a)──▶ a ──heard(a′), same id──▶ a′ (changed)
///        ▲                  │  heard(b), another id ─▶ b (appeared)
///        └─heard(nil) / gone┘
struct NearbyWatch: Sendable {
    /// What the watchers are told about one device.
    enum Change: Sendable, Equatable {
        case appeared(ActivityAnnouncement)
        case changed(ActivityAnnouncement)
        case gone
    }

    /// Each watching session's connection.
    private(set) var watchers: [UUID: LocalPeer] = [:]
    /// Each device's activity as the watchers know it.
    private var known: [UUID: ActivityAnnouncement] = [:]

    mutating func watch(_ session: UUID, through peer: LocalPeer) { watchers[session] = peer }

    mutating func unwatch(_ session: UUID) { watchers[session] = nil }

    /// A device was heard with `activity` (nil: none).
    mutating func heard(_ device: UUID, activity: ActivityAnnouncement?) -> Change? {
        let before = known[device]
        known[device] = activity
        switch (before, activity) {
        case (nil, let now?): return .appeared(now)
        case (let was?, let now?) where was != now: return was.id == now.id ? .changed(now) : .appeared(now)
        case (_?, nil): return .gone
        default: return nil
        }
    }

    /// A device was not heard for long enough.
    mutating func gone(_ device: UUID) -> Change? {
        known.removeValue(forKey: device) == nil ? nil : .gone
    }
}
