import Foundation
import Handoff
import HandoffApp
import HandoffTesting
import Testing

/// What a scene app's delegates hear, in order, for every scene app of a test.
@MainActor
final class SceneLog {
    enum Event: Equatable {
        case launched
        case connected(activities: [String], handoffType: String?)
        case foreground, active, resign, background, disconnected
        case willContinue(String)
        case continued(String)
        case failed(String, code: Int)
        case updated(String)
        case discarded(Int)
        case restorationAsked
    }

    var events: [Event] = []
    var activities: [UserActivity] = []
    var restorationActivity: UserActivity?
}

/// An app delegate in the iOS 13 form: it only configures scenes; the scene delegate continues.
@MainActor
final class SceneAppDelegate: UIResponder, UIApplicationDelegate {
    var log = SceneLog()
    /// Set in code, as apps that make their configuration programmatically do; else the Info.plist's.
    var delegateClass: AnyClass?

    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool {
        log.events.append(.launched)
        return true
    }

    func application(
        _ application: UIApplication, configurationForConnecting connectingSceneSession: UISceneSession, options: UIScene.ConnectionOptions
    ) -> UISceneConfiguration {
        let configuration = UISceneConfiguration(name: "Default Configuration", sessionRole: connectingSceneSession.role)
        if let delegateClass { configuration.delegateClass = delegateClass }
        return configuration
    }

    func application(_ application: UIApplication, didDiscardSceneSessions sceneSessions: Set<UISceneSession>) {
        log.events.append(.discarded(sceneSessions.count))
    }

    // Never called in an app with scenes.
    func application(_ application: UIApplication, willContinueUserActivityWithType userActivityType: String) -> Bool {
        Issue.record("the app delegate heard willContinue in a scene app")
        return false
    }
}

/// A scene delegate as Xcode's template writes it, recording into its app delegate's log.
@MainActor
final class RecordingSceneDelegate: UIResponder, UIWindowSceneDelegate {
    var window: UIWindow?
    private var log: SceneLog? { (UIApplication.shared.delegate as? SceneAppDelegate)?.log }

    func scene(_ scene: UIScene, willConnectTo session: UISceneSession, options connectionOptions: UIScene.ConnectionOptions) {
        guard let windowScene = scene as? UIWindowScene else { return }
        window = UIWindow(windowScene: windowScene)
        window?.makeKeyAndVisible()
        log?.events.append(.connected(activities: connectionOptions.userActivities.map(\.activityType), handoffType: connectionOptions.handoffUserActivityType))
        log?.activities += connectionOptions.userActivities
    }

    func sceneWillEnterForeground(_ scene: UIScene) { log?.events.append(.foreground) }
    func sceneDidBecomeActive(_ scene: UIScene) { log?.events.append(.active) }
    func sceneWillResignActive(_ scene: UIScene) { log?.events.append(.resign) }
    func sceneDidEnterBackground(_ scene: UIScene) { log?.events.append(.background) }
    func sceneDidDisconnect(_ scene: UIScene) { log?.events.append(.disconnected) }

    func scene(_ scene: UIScene, willContinueUserActivityWithType userActivityType: String) {
        log?.events.append(.willContinue(userActivityType))
    }

    func scene(_ scene: UIScene, continue userActivity: NSUserActivity) {
        log?.events.append(.continued(userActivity.activityType))
        log?.activities.append(userActivity)
    }

    func scene(_ scene: UIScene, didFailToContinueUserActivityWithType userActivityType: String, error: Error) {
        log?.events.append(.failed(userActivityType, code: (error as? CocoaError)?.code.rawValue ?? -1))
    }

    func scene(_ scene: UIScene, didUpdate userActivity: NSUserActivity) {
        log?.events.append(.updated(userActivity.activityType))
    }

    func stateRestorationActivity(for scene: UIScene) -> NSUserActivity? {
        let activity = NSUserActivity(activityType: notesType)
        activity.userInfo = ["restored": true]
        log?.restorationActivity = activity
        log?.events.append(.restorationAsked)
        return activity
    }
}

/// The notes app with `UIApplicationSceneManifest`, naming the scene delegate as Xcode does.
func sceneNotesManifest(delegateClassName: String? = "HandoffTestingTests.RecordingSceneDelegate") -> AppManifest {
    var manifest = notesManifest()
    manifest.sceneManifest = SceneManifest(configurations: [
        "UIWindowSceneSessionRoleApplication": [SceneManifest.Configuration(name: "Default Configuration", delegateClassName: delegateClassName)]
    ])
    return manifest
}

@MainActor
@Suite("Scene delegates")
struct SceneTests {
    /// Two devices; the desktop has the scene app installed, not running.
    func devices(_ manifest: AppManifest = sceneNotesManifest(), delegateClass: AnyClass? = nil) async throws -> (TwoDevices, SceneAppDelegate) {
        let appDelegate = SceneAppDelegate()
        appDelegate.delegateClass = delegateClass
        let devices = try await TwoDevices(targetManifest: nil)
        try await devices.target.install(manifest) { appDelegate }
        return (devices, appDelegate)
    }

    @Test("A continuation that launches a scene app reaches willConnectTo with the activity in its options, and not scene(_:continue:)")
    func launchConnectsWithActivity() async throws {
        let (devices, app) = try await devices()
        let (_, nearby) = try await devices.offer { $0.userInfo = ["note": "buy milk"] }
        let outcome = await devices.target.continueActivity(nearby)
        #expect(outcome == .continued(bundleIdentifier: "com.example.notes"))
        #expect(app.log.events == [.launched, .connected(activities: [notesType], handoffType: notesType), .foreground, .active])
        #expect(app.log.activities.first?.userInfo?["note"] as? String == "buy milk")
        let application = try #require(await devices.target.application("com.example.notes"))
        #expect(application.connectedScenes.count == 1)
        #expect(application.connectedScenes.first?.activationState == .foregroundActive)
    }

    @Test("A continuation arriving while a scene is connected reaches that scene: willContinue, then continue; the app delegate hears none of it")
    func connectedSceneContinues() async throws {
        var manifest = sceneNotesManifest()
        manifest.activityTypes.append("com.example.notes.other")
        let (devices, app) = try await devices(manifest)
        let (_, first) = try await devices.offer()
        _ = await devices.target.continueActivity(first)
        let (_, again) = try await devices.offer({ $0.userInfo = ["note": "again"] }, type: "com.example.notes.other")
        let outcome = await devices.target.continueActivity(again)
        #expect(outcome == .continued(bundleIdentifier: "com.example.notes"))
        #expect(Array(app.log.events.dropFirst(4)) == [.willContinue("com.example.notes.other"), .continued("com.example.notes.other")])
        #expect(app.log.activities.last?.userInfo?["note"] as? String == "again")
    }

    @Test("A continuation that fails while it launches the app connects the scene without an activity, then reports the failure to it, once")
    func launchFailure() async throws {
        let (devices, app) = try await devices()
        let (_, nearby) = try await devices.offer()
        await devices.origin.inject(.unreachable)
        let outcome = await devices.target.continueActivity(nearby)
        guard case .failed(let failure) = outcome else { Issue.record("expected a failure, got \(outcome)"); return }
        #expect(failure.code == 4609)
        #expect(
            app.log.events == [.launched, .connected(activities: [], handoffType: notesType), .foreground, .active, .failed(notesType, code: 4609)])
    }

    @Test("A continuation that fails while a scene is connected reaches that scene's didFailToContinue after its willContinue")
    func connectedFailure() async throws {
        let (devices, app) = try await devices()
        let (_, nearby) = try await devices.offer()
        _ = await devices.target.continueActivity(nearby)
        await devices.origin.inject(.unreachable)
        _ = await devices.target.continueActivity(nearby)
        #expect(Array(app.log.events.dropFirst(4)) == [.willContinue(notesType), .failed(notesType, code: 4609)])
    }

    @Test("A scene app started without a continuation connects its scene at once, with no activity")
    func startedByHand() async throws {
        let appDelegate = SceneAppDelegate()
        let devices = try await TwoDevices(targetManifest: nil)
        let application = try await devices.target.launch(sceneNotesManifest()) { appDelegate }
        #expect(appDelegate.log.events == [.launched, .connected(activities: [], handoffType: nil), .foreground, .active])
        #expect(application.openSessions.count == 1)
    }

    @Test("The scene delegate class may come from the app delegate's configuration instead of the Info.plist")
    func delegateClassInCode() async throws {
        let (devices, app) = try await devices(sceneNotesManifest(delegateClassName: nil), delegateClass: RecordingSceneDelegate.self)
        let (_, nearby) = try await devices.offer()
        _ = await devices.target.continueActivity(nearby)
        #expect(app.log.events.prefix(2) == [.launched, .connected(activities: [notesType], handoffType: notesType)])
    }

    @Test("The Info.plist's scene manifest, with $(PRODUCT_MODULE_NAME) as Xcode writes it, names the scene delegate the app gets")
    func infoPlistClassName() async throws {
        let info = """
            <plist version="1.0"><dict>
            <key>CFBundleIdentifier</key><string>com.example.notes</string>
            <key>NSUserActivityTypes</key><array><string>\(notesType)</string></array>
            <key>UIApplicationSceneManifest</key><dict>
              <key>UIApplicationSupportsMultipleScenes</key><false/>
              <key>UISceneConfigurations</key><dict>
                <key>UIWindowSceneSessionRoleApplication</key><array><dict>
                  <key>UISceneConfigurationName</key><string>Default Configuration</string>
                  <key>UISceneDelegateClassName</key><string>$(PRODUCT_MODULE_NAME).RecordingSceneDelegate</string>
                </dict></array>
              </dict>
            </dict>
            </dict></plist>
            """
        var manifest = try AppManifest(infoPlist: Data(info.utf8), settings: try BuildSettings(["PRODUCT_NAME": "HandoffTestingTests"]))
        manifest.teamIdentifier = "TEAM1"
        #expect(manifest.sceneManifest?.configurations["UIWindowSceneSessionRoleApplication"]?.first?.delegateClassName == "HandoffTestingTests.RecordingSceneDelegate")
        let (devices, app) = try await devices(manifest)
        let (_, nearby) = try await devices.offer()
        _ = await devices.target.continueActivity(nearby)
        #expect(app.log.events.prefix(2) == [.launched, .connected(activities: [notesType], handoffType: notesType)])
    }

    @Test("An activity the scene manages becomes current while the scene is active, and the scene delegate hears didUpdate when it is saved for a continuation")
    func sceneManagedActivity() async throws {
        let appDelegate = SceneAppDelegate()
        let fabric = HandoffFabric()
        let origin = fabric.addDevice("laptop")
        let target = fabric.addDevice("desktop")
        var manifest = sceneNotesManifest()
        manifest.activityTypes = ["com.example.notes.scene"]
        let application = try await origin.launch(manifest) { appDelegate }
        let scene = try #require(application.connectedScenes.first)
        let activity = application.perform { UserActivity(activityType: "com.example.notes.scene") }
        activity.needsSave = true
        application.perform { scene.userActivity = activity }
        let nearby = try await target.nearbyActivity(ofType: "com.example.notes.scene", from: "laptop")
        try await target.install(AppManifest(bundleIdentifier: "com.example.reader", teamIdentifier: "TEAM1", activityTypes: ["com.example.notes.scene"])) {
            RecordingAppDelegate()
        }
        let outcome = await target.continueActivity(nearby)
        #expect(outcome == .continued(bundleIdentifier: "com.example.reader"))
        #expect(appDelegate.log.events.contains(.updated("com.example.notes.scene")))
    }

    @Test("Closing a scene's session asks its delegate for the activity that restores it, keeps it in the session, and disconnects in UIKit's order")
    func closingKeepsRestorationActivity() async throws {
        let appDelegate = SceneAppDelegate()
        let devices = try await TwoDevices(targetManifest: nil)
        let application = try await devices.target.launch(sceneNotesManifest()) { appDelegate }
        let session = try #require(application.openSessions.first)
        application.requestSceneSessionDestruction(session, options: nil, errorHandler: nil)
        #expect(session.stateRestorationActivity === appDelegate.log.restorationActivity)
        #expect(session.stateRestorationActivity?.userInfo?["restored"] as? Bool == true)
        // Asked once the scene is in the background, as UIKit asks.
        #expect(Array(appDelegate.log.events.suffix(5)) == [.resign, .background, .restorationAsked, .disconnected, .discarded(1)])
        #expect(application.connectedScenes.isEmpty)
    }
}

/// An agent connection that carries nothing: for an app whose continuations a test drives itself.
final class SilentConnection: AgentConnection {
    func send(_ event: AppEvent) async {}
    func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        throw .connectionUnavailable("a silent connection opens no streams")
    }
}

/// An app delegate without scenes that records the order of what it hears.
@MainActor
final class LaunchOrderDelegate: ApplicationDelegate {
    var events: [String] = []
    func application(_ application: Application, didFinishLaunchingWithOptions launchOptions: [Application.LaunchOptionsKey: Any]?) -> Bool {
        events.append("launched")
        return true
    }
    func application(_ application: Application, willContinueUserActivityWithType userActivityType: String) -> Bool {
        events.append("will continue")
        return true
    }
    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        events.append("continue")
        return true
    }
}

extension SceneTests {
    func makeApp(_ manifest: AppManifest, delegate: any ApplicationDelegate) -> Application {
        let center = ActivityCenter(connection: SilentConnection(), bundleIdentifier: manifest.bundleIdentifier, teamIdentifier: "TEAM1", deviceName: "here")
        return Application(center: center, manifest: manifest, syncedContainers: [], delegate: delegate)
    }

    @Test("A continuation whose willContinue comes before the app finished launching still connects the scene with the activity, not an empty scene and then continue")
    func continuationBeforeLaunchFinished() async throws {
        let appDelegate = SceneAppDelegate()
        let application = makeApp(sceneNotesManifest(), delegate: appDelegate)
        let id = UUID()
        await application.willContinue(id, activityType: notesType)
        // The queued launch runs now, as it does once the main queue turns: it must wait.
        application.finishLaunching(awaitingContinuation: false)
        #expect(application.connectedScenes.isEmpty)
        let activity = application.perform { UserActivity(activityType: notesType) }
        await application.continueActivity(id, activity)
        #expect(appDelegate.log.events == [.launched, .connected(activities: [notesType], handoffType: notesType), .foreground, .active])
    }

    @Test("An app without scenes hears didFinishLaunching before a continuation that comes before its launch finished")
    func launchBeforeContinuation() async throws {
        let delegate = LaunchOrderDelegate()
        let application = makeApp(notesManifest(), delegate: delegate)
        let id = UUID()
        await application.willContinue(id, activityType: notesType)
        application.finishLaunching(awaitingContinuation: false)
        await application.continueActivity(id, application.perform { UserActivity(activityType: notesType) })
        #expect(delegate.events == ["launched", "will continue", "continue"])
    }
}
