import Foundation
import HandoffModel
import Testing

@testable import HandoffAgent

/// `NearbyWatch`: what watchers are told as discovery hears the account's devices.
@Suite struct NearbyWatchTests {
    let device = UUID()

    @Test func eachChangeIsToldOnce() {
        var watch = NearbyWatch()
        let editing = ActivityAnnouncement(id: UUID(), activityType: "editing", title: "Draft")
        var retitled = editing
        retitled.title = "Final"
        let playing = ActivityAnnouncement(id: UUID(), activityType: "playing")
        var told: [NearbyWatch.Change?] = []
        told.append(watch.heard(device, activity: nil))
        told.append(watch.heard(device, activity: editing))
        told.append(watch.heard(device, activity: editing))
        told.append(watch.heard(device, activity: retitled))
        told.append(watch.heard(device, activity: playing))
        told.append(watch.heard(device, activity: nil))
        told.append(watch.heard(device, activity: nil))
        told.append(watch.heard(device, activity: playing))
        told.append(watch.gone(device))
        told.append(watch.gone(device))
        #expect(told == [nil, .appeared(editing), nil, .changed(retitled), .appeared(playing), .gone, nil, .appeared(playing), .gone, nil])
    }
}
