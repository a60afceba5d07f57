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
    var madeDuringRestore: UserActivity?

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
        madeDuringRestore = UserActivity(activityType: "com.example.r.follow-up")
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
    func makeApp(_ delegate: (any ApplicationDelegate)? = nil) async throws -> Application {
        let device = HandoffFabric().addDevice("solo")
        return try await device.launch(AppManifest(bundleIdentifier: "com.example.r", teamIdentifier: "T")) { delegate }
    }

    @Test("Saving clears userInfo, asks every sharing responder, then tells the app delegate")
    func update() async throws {
        let delegate = UpdateCountingDelegate()
        let app = try await makeApp(delegate)
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
    func lastLetsGo() async throws {
        let app = try await makeApp()
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
    func deinitLetsGo() async throws {
        let app = try await makeApp()
        let activity = app.perform { UserActivity(activityType: "com.example.r.view") }
        var responder: PartResponder? = PartResponder(key: "a")
        responder?.userActivity = activity
        responder = nil
        #expect(activity.isInvalidated)
    }

    @Test("The restoration handler restores each object once, even when called twice")
    func twice() async throws {
        let delegate = KeepingDelegate()
        let a = PartResponder(key: "a")
        delegate.onContinue = { handler in
            handler([a, a])
            handler([a])
        }
        try await continueOnce(into: delegate)
        #expect(a.restores == 1)
    }

    @Test("A restoration handler kept and called later from another thread restores once, as the app")
    func laterFromAnotherThread() async throws {
        let delegate = KeepingDelegate()
        let app = try await continueOnce(into: delegate)
        let handler = try #require(delegate.kept)
        let a = PartResponder(key: "a")
        let box = UncheckedSendableBox((handler, [a] as [UserActivityRestoring]))
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                box.value.0(box.value.1)
                box.value.0(box.value.1)
                done.resume()
            }.start()
        }
        #expect(await eventually { a.restores == 1 })
        // An activity the restore made belongs to the app, not to the process's default.
        #expect(a.madeDuringRestore?.center === app.center)
    }

    @Test("A restoration handler that is never called restores nothing and breaks nothing")
    func never() async throws {
        let delegate = KeepingDelegate()
        try await continueOnce(into: delegate)
        #expect(delegate.kept != nil)
    }

    /// Continues one activity from another device into an app with `delegate`; returns the app.
    @discardableResult
    func continueOnce(into delegate: KeepingDelegate) async throws -> Application {
        let fabric = HandoffFabric()
        let origin = fabric.addDevice("origin"), target = fabric.addDevice("target")
        let manifest = AppManifest(bundleIdentifier: "com.example.r", teamIdentifier: "T", activityTypes: ["com.example.r.view"])
        let originApp = try await origin.launch(manifest)
        let activity = originApp.perform { UserActivity(activityType: "com.example.r.view") }
        activity.becomeCurrent()
        let app = try await target.launch(manifest) { delegate }
        let offer = try await target.nearbyActivity(ofType: "com.example.r.view")
        #expect(await target.continueActivity(offer) == .continued(bundleIdentifier: "com.example.r"))
        return app
    }
}

/// Keeps the restoration handler it is given, and may call it at once.
@MainActor
final class KeepingDelegate: ApplicationDelegate {
    var kept: (([UserActivityRestoring]?) -> Void)?
    var onContinue: ((([UserActivityRestoring]?) -> Void) -> Void)?

    func application(
        _ application: Application, continue userActivity: UserActivity,
        restorationHandler: @escaping ([UserActivityRestoring]?) -> Void
    ) -> Bool {
        kept = restorationHandler
        onContinue?(restorationHandler)
        return true
    }
}


struct UncheckedSendableBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

@MainActor
@Suite("The process's application")
struct ProcessApplicationTests {
    @Test("An Application made by the app is Application.shared and keeps its continuations")
    func madeAppIsShared() {
        let delegate = UpdateCountingDelegate()
        let app = Application(delegate: delegate)
        #expect(Application.shared === app)
        #expect(app.center.receiver === app)
    }
}
