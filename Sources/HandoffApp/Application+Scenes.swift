import Foundation
import Handoff

extension Application {
    /// Whether the app uses scenes: its Info.plist has `UIApplicationSceneManifest`, as on iOS.
    var usesScenes: Bool { manifest?.sceneManifest != nil }

    /// The scene continuations go to: the one the app connected first that is still connected.
    var activeScene: Scene? {
        connectedScenes.min { $0.connectionOrder < $1.connectionOrder }
    }

    /// How long a scene waits for the continuation that launched the app before it connects
    /// without it; the agent's own launch deadline is shorter, so this only guards against an
    /// agent that went away.
    static let sceneConnectionWait: Duration = .seconds(30)

    /// Tells the delegate the app started and, in an app with scenes, connects its scene, now
    /// or (launched for a continuation) when the activity arrives. Once.
    package func finishLaunching(awaitingContinuation: Bool) {
        launchIfNeeded()
        guard usesScenes, connectedScenes.isEmpty, !sceneAwaitsContinuation else { return }
        guard awaitingContinuation else {
            connectScene(options: Scene.ConnectionOptions())
            return
        }
        awaitContinuationForScene()
    }

    /// Holds the first scene back until a continuation's outcome, for a while at most.
    private func awaitContinuationForScene() {
        guard !sceneAwaitsContinuation else { return }
        sceneAwaitsContinuation = true
        // A bound on waiting: if the continuation's outcome never comes, the app still shows.
        Task { @MainActor [weak self] in
            try? await Task.sleep(for: Self.sceneConnectionWait)
            guard let self, self.sceneAwaitsContinuation, self.connectedScenes.isEmpty else { return }
            self.logger.warning("the continuation that started the app did not arrive within \(Self.sceneConnectionWait); showing the app without it")
            self.connectScene(options: Scene.ConnectionOptions())
        }
    }

    func launchIfNeeded() {
        guard !launched else { return }
        launched = true
        perform { _ = delegate?.application(self, didFinishLaunchingWithOptions: nil) }
    }

    /// What a continuation's step does in an app with scenes: the connected scene's delegate
    /// hears it; with no scene yet, the outcome connects one, with the activity in its options.
    func runInScene(_ action: ContinuationStateMachine<UserActivity>.Action) {
        switch action {
        case .willContinue(let type):
            if let scene = activeScene {
                scene.delegate?.scene(scene, willContinueUserActivityWithType: type)
            } else {
                // No scene yet: the outcome connects one, carrying the activity; launching must
                // not connect an empty one first.
                awaitContinuationForScene()
            }
        case .continue(let activity):
            if let scene = activeScene {
                scene.delegate?.scene(scene, continue: activity)
            } else {
                connectScene(options: Scene.ConnectionOptions(userActivities: [activity], handoffUserActivityType: activity.activityType))
            }
        case .didFail(let type, let failure):
            let scene = activeScene ?? connectScene(options: Scene.ConnectionOptions(handoffUserActivityType: type))
            if let delegate = scene.delegate {
                delegate.scene(scene, didFailToContinueUserActivityWithType: type, error: failure.cocoaError)
            } else {
                logger.error("could not continue '\(type)': \(failure.message)")
            }
        }
    }

    /// Connects a scene: its configuration from the app delegate (or the Info.plist), its
    /// classes made, then `willConnectTo`, `sceneWillEnterForeground`, `sceneDidBecomeActive`.
    @discardableResult
    func connectScene(options: Scene.ConnectionOptions) -> Scene {
        launchIfNeeded()
        sceneAwaitsContinuation = false
        let role = SceneSession.Role.windowApplication
        let session = SceneSession(role: role, configuration: SceneConfiguration(name: nil, sessionRole: role))
        let configuration = perform {
            delegate?.application(self, configurationForConnecting: session, options: options) ?? SceneConfiguration(name: nil, sessionRole: role)
        }
        resolveClasses(of: configuration)
        session.configuration = configuration

        let sceneType = (configuration.sceneClass as? Scene.Type) ?? WindowScene.self
        let scene = perform { sceneType.init(session: session, connectionOptions: options) }
        if let delegateClass = configuration.delegateClass {
            if let responderType = delegateClass as? UIResponder.Type, let made = perform({ responderType.init() }) as? any SceneDelegate {
                scene.delegate = made
            } else {
                logger.error(
                    "the scene delegate class \(delegateClass) cannot be made: it must subclass UIResponder (whose init() the framework calls) and adopt UISceneDelegate")
            }
        }
        Self.connections += 1
        scene.connectionOrder = Self.connections
        session.scene = scene
        openSessions.insert(session)
        connectedScenes.insert(scene)
        perform {
            scene.delegate?.scene(scene, willConnectTo: session, options: options)
            scene.activationState = .foregroundInactive
            scene.delegate?.sceneWillEnterForeground(scene)
            scene.activationState = .foregroundActive
            scene.delegate?.sceneDidBecomeActive(scene)
            scene.userActivity?.becomeCurrent()
        }
        return scene
    }

    /// Disconnects the session's scene, as UIKit does when the app's window closes: the scene
    /// delegate hears `sceneWillResignActive` and `sceneDidEnterBackground`, is asked for the
    /// activity that restores it (kept in the session), then hears `sceneDidDisconnect`; the
    /// app delegate hears `didDiscardSceneSessions`.
    public func requestSceneSessionDestruction(_ sceneSession: SceneSession, options: Any?, errorHandler: ((any Error) -> Void)?) {
        guard let scene = sceneSession.scene, connectedScenes.contains(scene) else {
            errorHandler?(CocoaError(.featureUnsupported))
            return
        }
        perform {
            scene.activationState = .foregroundInactive
            scene.delegate?.sceneWillResignActive(scene)
            scene.activationState = .background
            scene.delegate?.sceneDidEnterBackground(scene)
            // Asked once the scene is in the background, as UIKit asks: what it saved there counts.
            sceneSession.stateRestorationActivity = scene.delegate?.stateRestorationActivity(for: scene)
            connectedScenes.remove(scene)
            openSessions.remove(sceneSession)
            scene.activationState = .unattached
            scene.delegate?.sceneDidDisconnect(scene)
            sceneSession.scene = nil
            delegate?.application(self, didDiscardSceneSessions: [sceneSession])
        }
    }

    /// Fills the classes a configuration leaves unset from the Info.plist's entry of the same
    /// name (or the role's first), found by their names.
    private func resolveClasses(of configuration: SceneConfiguration) {
        guard let entry = manifest?.sceneManifest?.configuration(named: configuration.name, role: configuration.role.rawValue) else { return }
        func type(named name: String?, key: String) -> AnyClass? {
            guard let name else { return nil }
            guard let found = _typeByName(name) as? AnyClass else {
                logger.error(
                    "the Info.plist's UIApplicationSceneManifest names \(key) '\(name)', which is not a class of this program; write it as MODULE.ClassName, MODULE being your executable's module (Xcode's $(PRODUCT_MODULE_NAME))")
                return nil
            }
            return found
        }
        if configuration.delegateClass == nil {
            configuration.delegateClass = type(named: entry.delegateClassName, key: "UISceneDelegateClassName")
        }
        if configuration.sceneClass == nil {
            configuration.sceneClass = type(named: entry.sceneClassName, key: "UISceneClassName")
        }
    }

    /// Counts connections, so that the first scene connected stays the one continuations reach.
    private static var connections = 0
}

extension Scene: Hashable {
    public nonisolated static func == (lhs: Scene, rhs: Scene) -> Bool { lhs === rhs }
    public nonisolated func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
