import Foundation
import HandoffModel
import Testing

@testable import HandoffAgent

/// `LocalActivities`: which of this device's activities it offers, from its clients' events.
@Suite struct LocalActivitiesTests {
    let app = UUID(), script = UUID()

    func activity(_ type: String, expires: Date? = nil) -> ActivityAnnouncement {
        ActivityAnnouncement(id: UUID(), activityType: type, expirationDate: expires)
    }

    @Test func theNewestCurrentActivityIsOffered() {
        var activities = LocalActivities()
        var changed = false
        activities.opened(app)
        activities.opened(script)
        let editing = activity("editing"), playing = activity("playing")
        activities.becameCurrent(editing, in: app)
        changed = activities.updateOffer(at: Date())
        #expect(changed)
        #expect(activities.offered == editing)
        activities.becameCurrent(playing, in: script)
        changed = activities.updateOffer(at: Date())
        #expect(changed)
        #expect(activities.offered == playing)
        changed = activities.updateOffer(at: Date())
        #expect(!changed, "nothing changed")
        // The script resigns: the app's, still current there, is offered again.
        activities.resigned(playing.id, in: script)
        changed = activities.updateOffer(at: Date())
        #expect(changed)
        #expect(activities.offered == editing)
        #expect(activities.owner(of: playing.id) == script, "resigned is not forgotten")
        activities.invalidated(playing.id, in: script)
        #expect(activities.owner(of: playing.id) == nil)
        activities.ended(app)
        changed = activities.updateOffer(at: Date())
        #expect(changed)
        #expect(activities.offered == nil)
        #expect(activities.announcement(editing.id, in: app) == nil)
    }

    @Test func anExpiredActivityIsNotOffered() {
        var activities = LocalActivities()
        var changed = false
        let now = Date()
        let lasting = activity("lasting"), brief = activity("brief", expires: now.addingTimeInterval(10))
        activities.becameCurrent(lasting, in: app)
        activities.becameCurrent(brief, in: script)
        changed = activities.updateOffer(at: now)
        #expect(changed)
        #expect(activities.offered == brief)
        changed = activities.updateOffer(at: now.addingTimeInterval(10))
        #expect(changed)
        #expect(activities.offered == lasting)
    }

    /// A client keeps at most 64 activities: past that, one that is not current goes; the
    /// current one never does.
    @Test func aClientKeepsAtMost64() {
        var activities = LocalActivities()
        let made = (0..<LocalActivities.perSession).map { activity("a\($0)") }
        for one in made { activities.becameCurrent(one, in: app) }
        #expect(activities.bySession[app]?.count == 64)
        let last = activity("last")
        activities.becameCurrent(last, in: app)
        #expect(activities.bySession[app]?.count == 64)
        #expect(activities.announcement(last.id, in: app) == last)
        #expect(activities.announcement(made[63].id, in: app) != nil, "the one current before is not the one dropped")
        // Announcing one it already has again drops nothing.
        activities.becameCurrent(last, in: app)
        #expect(activities.bySession[app]?.count == 64)
        #expect(activities.sessions(holding: last.id) == [app])
    }
}
