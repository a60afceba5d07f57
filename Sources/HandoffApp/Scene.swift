import Foundation
import Handoff

/// One instance of the app's user interface, as UIKit's `UIScene`: apps written since iOS 13
/// continue activities in their scene delegate rather than the app delegate.
///
/// An app uses scenes when its Info.plist has `UIApplicationSceneManifest`, as on iOS. The
/// framework connects one scene when the app starts: if a continuation launched the app, once
/// the activity has arrived, with it in `ConnectionOptions.userActivities` (and the scene
/// delegate's `scene(_:continue:)` is not called for it); otherwise at once. A continuation
/// arriving while a scene is connected goes to that scene's delegate:
/// `scene(_:willContinueUserActivityWithType:)`, then exactly one of `scene(_:continue:)` and
/// `scene(_:didFailToContinueUserActivityWithType:error:)`. The app delegate's continuation
/// methods are not called in an app that uses scenes.
@MainActor
open class Scene: Responder {
    /// The session the scene shows.
    public let session: SceneSession
    /// Receives the scene's calls. Held strongly, as UIKit holds a scene's delegate.
    open var delegate: (any SceneDelegate)?
    /// Whether the scene is on screen and taking input. Linux has no background state for an
    /// app: a connected scene is active until it disconnects.
    public internal(set) var activationState: ActivationState = .unattached
    /// The scene's title, for window switchers.
    open var title: String = ""
    /// When the scene connected, among the app's scenes.
    var connectionOrder = 0

    /// Made by the framework when it connects a scene; a subclass named in the scene
    /// configuration (`sceneClass`) must keep this initializer.
    public required init(session: SceneSession, connectionOptions: ConnectionOptions) {
        self.session = session
        super.init()
    }

    /// The activity the scene manages. Set while the scene is active, it becomes the current
    /// activity, as UIKit makes the active scene's activity current.
    open override var userActivity: UserActivity? {
        didSet {
            if activationState == .foregroundActive, let userActivity, userActivity !== oldValue {
                userActivity.becomeCurrent()
            }
        }
    }

    /// UIKit's activation states.
    public enum ActivationState: Int, Sendable {
        case unattached = -1
        case foregroundActive = 0
        case foregroundInactive = 1
        case background = 2
    }

    /// What led to a scene's connection: the activities it is to continue.
    @MainActor
    public final class ConnectionOptions {
        /// The continued activity, when a continuation launched the app.
        public let userActivities: Set<UserActivity>
        /// The type of that activity.
        public let handoffUserActivityType: String?
        /// The bundle identifier of the app that asked for the scene; `nil` on Linux.
        public let sourceApplication: String?

        public init(userActivities: Set<UserActivity> = [], handoffUserActivityType: String? = nil, sourceApplication: String? = nil) {
            self.userActivities = userActivities
            self.handoffUserActivityType = handoffUserActivityType
            self.sourceApplication = sourceApplication
        }
    }
}

/// A scene with windows, as UIKit's `UIWindowScene`: the kind the framework connects.
@MainActor
open class WindowScene: Scene {
    /// The scene's windows, as the app adds them.
    public internal(set) var windows: [Window] = []
}

/// A window of a scene, as UIKit's `UIWindow`, so that a scene delegate's `window` property
/// compiles. Linux apps draw with their own toolkit: this only keeps the scene's list.
@MainActor
open class Window: Responder {
    /// The scene that shows the window.
    public private(set) weak var windowScene: WindowScene?
    /// The responder at the root of the window (a view controller, on Apple platforms).
    open var rootViewController: Responder?
    /// Whether the window is its scene's key window.
    public private(set) var isKeyWindow = false

    public init(windowScene: WindowScene) {
        self.windowScene = windowScene
        super.init()
        windowScene.windows.append(self)
    }

    /// Makes the window its scene's key window.
    open func makeKeyAndVisible() {
        for window in windowScene?.windows ?? [] { window.isKeyWindow = false }
        isKeyWindow = true
    }
}

/// A scene's session: what persists of it, as UIKit's `UISceneSession`.
@MainActor
public final class SceneSession: Hashable {
    /// A session's role, as UIKit's `UISceneSession.Role`.
    public struct Role: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The role of the app's main windows (`UIWindowSceneSessionRoleApplication`).
        public static let windowApplication = Role(rawValue: "UIWindowSceneSessionRoleApplication")
    }

    /// Unique to the session, for the app's own records.
    public let persistentIdentifier: String
    public let role: Role
    /// The configuration the scene was made with.
    public internal(set) var configuration: SceneConfiguration
    /// The scene showing the session, while one is connected.
    public internal(set) weak var scene: Scene?
    /// The activity to restore the session's state from: what the scene delegate's
    /// `stateRestorationActivity(for:)` returned when the scene last disconnected.
    public internal(set) var stateRestorationActivity: UserActivity?
    /// The app's own data about the session.
    public var userInfo: [String: Any]?

    init(role: Role, configuration: SceneConfiguration) {
        persistentIdentifier = UUID().uuidString
        self.role = role
        self.configuration = configuration
    }

    public nonisolated static func == (lhs: SceneSession, rhs: SceneSession) -> Bool { lhs === rhs }
    public nonisolated func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// Which scene and delegate classes a session gets, as UIKit's `UISceneConfiguration`.
///
/// Classes not set here come from the Info.plist's `UIApplicationSceneManifest` entry of the
/// same name (or the role's first entry), looked up by name. A delegate class the framework
/// makes by name must subclass `UIResponder` (as Xcode's template does), whose `init()` it calls.
@MainActor
public final class SceneConfiguration {
    public let name: String?
    public let role: SceneSession.Role
    /// The scene delegate's class.
    public var delegateClass: AnyClass?
    /// The scene's class: `WindowScene` or a subclass.
    public var sceneClass: AnyClass?

    public init(name: String?, sessionRole: SceneSession.Role) {
        self.name = name
        self.role = sessionRole
    }
}

/// The scene's part in continuing activities and in its life, as UIKit's `UISceneDelegate`.
/// Every method is optional and is called on the main actor.
@MainActor
public protocol SceneDelegate: AnyObject {
    /// The scene connects. When a continuation launched the app, `connectionOptions.userActivities`
    /// holds the continued activity, and `scene(_:continue:)` is not called for it.
    func scene(_ scene: Scene, willConnectTo session: SceneSession, options connectionOptions: Scene.ConnectionOptions)
    func sceneDidDisconnect(_ scene: Scene)
    func sceneWillEnterForeground(_ scene: Scene)
    func sceneDidBecomeActive(_ scene: Scene)
    func sceneWillResignActive(_ scene: Scene)
    func sceneDidEnterBackground(_ scene: Scene)

    /// A continuation started: show that the activity is on its way.
    func scene(_ scene: Scene, willContinueUserActivityWithType userActivityType: String)
    /// The activity arrived while the scene was connected: continue it.
    func scene(_ scene: Scene, continue userActivity: UserActivity)
    /// The activity could not be continued; `error` is a `CocoaError` with the reason.
    func scene(_ scene: Scene, didFailToContinueUserActivityWithType userActivityType: String, error: any Error)
    /// The framework brought an activity the scene manages up to date.
    func scene(_ scene: Scene, didUpdate userActivity: UserActivity)
    /// The activity that restores the scene's state; asked when the scene disconnects.
    func stateRestorationActivity(for scene: Scene) -> UserActivity?
}

extension SceneDelegate {
    public func scene(_ scene: Scene, willConnectTo session: SceneSession, options connectionOptions: Scene.ConnectionOptions) {}
    public func sceneDidDisconnect(_ scene: Scene) {}
    public func sceneWillEnterForeground(_ scene: Scene) {}
    public func sceneDidBecomeActive(_ scene: Scene) {}
    public func sceneWillResignActive(_ scene: Scene) {}
    public func sceneDidEnterBackground(_ scene: Scene) {}
    public func scene(_ scene: Scene, willContinueUserActivityWithType userActivityType: String) {}
    public func scene(_ scene: Scene, continue userActivity: UserActivity) {}
    public func scene(_ scene: Scene, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        Application.shared.logger.error("could not continue '\(userActivityType)': \(error)")
    }
    public func scene(_ scene: Scene, didUpdate userActivity: UserActivity) {}
    public func stateRestorationActivity(for scene: Scene) -> UserActivity? { nil }
}

/// A scene delegate with windows, as UIKit's `UIWindowSceneDelegate`.
@MainActor
public protocol WindowSceneDelegate: SceneDelegate {}

/// UIKit's names, so a scene delegate written for iOS compiles unchanged.
public typealias UIScene = Scene
public typealias UIWindowScene = WindowScene
public typealias UIWindow = Window
public typealias UISceneSession = SceneSession
public typealias UISceneConfiguration = SceneConfiguration
public typealias UISceneDelegate = SceneDelegate
public typealias UIWindowSceneDelegate = WindowSceneDelegate
