import Foundation
import Handoff
import HandoffApp
import MapViewerKit

class SceneDelegate: UIResponder, UIWindowSceneDelegate {
    var window: UIWindow?
    /// Stands in for the window's content on Linux: the map screen and its console.
    private var console: MapConsole?

    func scene(_ scene: UIScene, willConnectTo session: UISceneSession, options connectionOptions: UIScene.ConnectionOptions) {
        guard let windowScene = scene as? UIWindowScene else { return }
        let console = MapConsole()
        self.console = console
        window = UIWindow(windowScene: windowScene)
        window?.rootViewController = console.controller
        window?.makeKeyAndVisible()
        console.say("ready (data in \(console.dataDirectory.path))")
        console.readCommands()

        // Launched to continue an activity: it is here, not in scene(_:continue:).
        if let activity = connectionOptions.userActivities.first ?? session.stateRestorationActivity {
            console.say("connected with \(activity.activityType)")
            console.controller.restoreUserActivityState(activity)
        }
    }

    func scene(_ scene: UIScene, willContinueUserActivityWithType userActivityType: String) {
        console?.say("will continue \(userActivityType)")
    }

    func scene(_ scene: UIScene, continue userActivity: NSUserActivity) {
        console?.say("continue \(userActivity.activityType)")
        console?.controller.restoreUserActivityState(userActivity)
    }

    func scene(_ scene: UIScene, didFailToContinueUserActivityWithType userActivityType: String, error: Error) {
        console?.say("failed \(userActivityType): \(error)")
    }

    func stateRestorationActivity(for scene: UIScene) -> NSUserActivity? {
        console?.controller.userActivity
    }
}
