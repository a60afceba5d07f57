import Foundation
import Handoff

/// An object that restores its state from a continued activity: responders, documents, or
/// anything an app hands to the restoration handler.
@MainActor
public protocol UserActivityRestoring: AnyObject {
    func restoreUserActivityState(_ userActivity: UserActivity)
}

/// The app delegate's part in continuing activities. Every method is optional and is called
/// on the main actor.
///
/// For each `willContinueUserActivityWithType`, exactly one `continue` or one
/// `didFailToContinueUserActivityWithType` follows, for the same type.
@MainActor
public protocol ApplicationDelegate: AnyObject {
    /// A continuation started: show that the activity is on its way. The activity object is
    /// not there yet.
    func application(_ application: Application, willContinueUserActivityWithType userActivityType: String) -> Bool

    /// The activity arrived: set the app up to continue it. Pass the objects that should
    /// restore themselves to `restorationHandler` (now, later, or not at all); each gets
    /// `restoreUserActivityState(_:)` once. Return false if the app did not handle it.
    func application(
        _ application: Application, continue userActivity: UserActivity,
        restorationHandler: @escaping ([UserActivityRestoring]?) -> Void
    ) -> Bool

    /// The same call in the AppKit form, whose handler takes a non-optional array. Implement
    /// either form; the UIKit form is tried first and, when unimplemented, calls this one.
    func application(
        _ application: Application, continue userActivity: UserActivity,
        restorationHandler: @escaping ([UserActivityRestoring]) -> Void
    ) -> Bool

    /// The activity could not be continued; `error` is a `CocoaError` with the reason.
    func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error)

    /// The framework brought a responder-managed activity up to date.
    func application(_ application: Application, didUpdate userActivity: UserActivity)

    /// The app started; called once, before any scene connects or continuation is delivered.
    func application(_ application: Application, didFinishLaunchingWithOptions launchOptions: [Application.LaunchOptionsKey: Any]?) -> Bool

    /// The configuration of a scene about to connect, in an app that uses scenes. The default
    /// gives the Info.plist's configuration for the session's role.
    func application(
        _ application: Application, configurationForConnecting connectingSceneSession: SceneSession, options: Scene.ConnectionOptions
    ) -> SceneConfiguration

    /// Sessions the app will not show again.
    func application(_ application: Application, didDiscardSceneSessions sceneSessions: Set<SceneSession>)
}

extension ApplicationDelegate {
    public func application(_ application: Application, willContinueUserActivityWithType userActivityType: String) -> Bool {
        false
    }

    public func application(
        _ application: Application, continue userActivity: UserActivity,
        restorationHandler: @escaping ([UserActivityRestoring]?) -> Void
    ) -> Bool {
        let appKitForm: ([UserActivityRestoring]) -> Void = { restorationHandler($0) }
        return self.application(application, continue: userActivity, restorationHandler: appKitForm)
    }

    public func application(
        _ application: Application, continue userActivity: UserActivity,
        restorationHandler: @escaping ([UserActivityRestoring]) -> Void
    ) -> Bool {
        false
    }

    public func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        application.logger.error("could not continue '\(userActivityType)': \(error)")
    }

    public func application(_ application: Application, didUpdate userActivity: UserActivity) {}

    public func application(_ application: Application, didFinishLaunchingWithOptions launchOptions: [Application.LaunchOptionsKey: Any]?) -> Bool {
        true
    }

    public func application(
        _ application: Application, configurationForConnecting connectingSceneSession: SceneSession, options: Scene.ConnectionOptions
    ) -> SceneConfiguration {
        SceneConfiguration(name: nil, sessionRole: connectingSceneSession.role)
    }

    public func application(_ application: Application, didDiscardSceneSessions sceneSessions: Set<SceneSession>) {}
}

extension ApplicationDelegate where Self: UIResponder {
    /// Runs the app, as `UIApplicationMain` does: makes the delegate and the `Application`,
    /// then runs the main queue for ever. So an app delegate marked `@main`, as Xcode's
    /// template writes it, starts the app unchanged.
    public static func main() {
        let delegate = Self()
        let application = Application(delegate: delegate)
        withExtendedLifetime(application) { dispatchMain() }
    }
}

/// UIKit's and AppKit's names, so code written for Apple platforms compiles unchanged.
public typealias UIApplication = Application
public typealias NSApplication = Application
public typealias UIApplicationDelegate = ApplicationDelegate
public typealias NSApplicationDelegate = ApplicationDelegate
public typealias UIUserActivityRestoring = UserActivityRestoring
public typealias NSUserActivityRestoring = UserActivityRestoring
public typealias NSResponder = UIResponder
public typealias UIDocument = Document
public typealias NSDocument = Document
