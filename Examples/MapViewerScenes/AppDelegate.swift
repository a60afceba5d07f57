// MapViewer in the iOS 13 form: an app delegate that only configures scenes, and a scene
// delegate that continues activities (SceneDelegate.swift). These two files are written as
// for iOS; only the imports and the console that stands in for a window are Linux's.
// App/ holds the Info.plist, entitlements and .xcconfig as an Xcode project would.
import Foundation
import Handoff
import HandoffApp

@main
class AppDelegate: UIResponder, UIApplicationDelegate {
    func application(_ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?) -> Bool {
        true
    }

    func application(
        _ application: UIApplication, configurationForConnecting connectingSceneSession: UISceneSession, options: UIScene.ConnectionOptions
    ) -> UISceneConfiguration {
        UISceneConfiguration(name: "Default Configuration", sessionRole: connectingSceneSession.role)
    }

    func application(_ application: UIApplication, didDiscardSceneSessions sceneSessions: Set<UISceneSession>) {}
}
