import Foundation
import Handoff
import HandoffTesting
import Testing

@testable import HandoffApp

@MainActor
final class PartResponder: Responder {
    let key: String
    var seenUserInfoAtUpdate: [AnyHashable: Any]?
    var restores = 0

    init(key: String) {
        self.key = key
        super.init()
    }

    override func updateUserActivityState(_ activity: UserActivity) {
        seenUserInfoAtUpdate = seenUserInfoAtUpdate ?? activity.userInfo
        activity.addUserInfoEntries(from: [key: true])
    }

    override func restoreUserActivityState(_ activity: UserActivity) {
        restores += 1
        MainActor.assertIsolated()
    }
}

@MainActor
final class UpdateCountingDelegate: ApplicationDelegate {
    var updates = 0
    func application(_ application: Application, didUpdate userActivity: UserActivity) { updates += 1 }
}

@MainActor
@Suite("Responders and the restoration handler")
struct ResponderTests {
    func makeApp(_ delegate: (any ApplicationDelegate)? = nil) async -> Application {
        let device = HandoffFabric().addDevice("solo")
        return await device.launch(AppManifest(bundleIdentifier: "com.example.r", teamIdentifier: "T")) { delegate }
    }

    @Test("Saving clears userInfo, asks every sharing responder, then tells the app delegate")
    func update() async {
        let delegate = UpdateCountingDelegate()
        let app = await makeApp(delegate)
        let activity = app.perform { UserActivity(activityType: "com.example.r.view") }
        activity.userInfo = ["stale": 1]
        let a = PartResponder(key: "a"), b = PartResponder(key: "b")
        a.userActivity = activity
        b.userActivity = activity
        activity.needsSave = true
        activity.saveIfNeeded()
        #expect(a.seenUserInfoAtUpdate?.isEmpty == true)
        #expect(Set(activity.userInfo!.keys.compactMap { $0.base as? String }) == ["a", "b"])
        #expect(delegate.updates == 1)
    }

    @Test("When the last responder lets go, the activity is invalidated")
    func lastLetsGo() async {
        let app = await makeApp()
        let activity = app.perform { UserActivity(activityType: "com.example.r.view") }
        let a = PartResponder(key: "a"), b = PartResponder(key: "b")
        a.userActivity = activity
        b.userActivity = activity
        a.userActivity = nil
        #expect(!activity.isInvalidated)
        b.userActivity = nil
        #expect(activity.isInvalidated)
    }

    @Test("A responder that goes away lets go of its activity")
    func deinitLetsGo() async {
        let app = await makeApp()
        let activity = app.perform { UserActivity(activityType: "com.example.r.view") }
        var responder: PartResponder? = PartResponder(key: "a")
        responder?.userActivity = activity
        responder = nil
        #expect(activity.isInvalidated)
    }

    @Test("The restoration handler restores each object once, even when called twice")
    func twice() async {
        let activity = UserActivity(activityType: "com.example.r.view")
        let handler = RestorationHandler(activity: activity)
        let a = PartResponder(key: "a")
        handler.restore([a, a])
        handler.restore([a])
        await handler.settle()
        #expect(a.restores == 1)
    }

    @Test("The restoration handler called from another thread restores on the main actor")
    func otherThread() async {
        let activity = UserActivity(activityType: "com.example.r.view")
        let handler = RestorationHandler(activity: activity)
        let a = PartResponder(key: "a")
        let box = UncheckedSendableBox([a] as [UserActivityRestoring])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                handler.restore(box.value)
                done.resume()
            }.start()
        }
        await handler.settle()
        #expect(a.restores == 1)
    }
}

struct UncheckedSendableBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
