import Foundation
import Handoff
import HandoffApp
import HandoffTesting
import Testing

// Code written the way apps on Apple platforms write their Handoff part, with Apple's names:
// it compiles here with nothing changed but the imports (Handoff and HandoffApp instead of
// Foundation's NSUserActivity and UIKit or AppKit).

let compatibleType = "com.example.journal.writing"

@MainActor
final class JournalEntryController: UIResponder, NSUserActivityDelegate {
    var editorIsOpen = true
    var restoredEntry: Int?

    func startWriting() {
        let activity = NSUserActivity(activityType: compatibleType)
        activity.title = "Writing an entry"
        activity.isEligibleForHandoff = true
        activity.delegate = self
        activity.needsSave = true
        userActivity = activity
        activity.becomeCurrent()
    }

    override func updateUserActivityState(_ activity: NSUserActivity) {
        activity.addUserInfoEntries(from: ["entry": 42, "format": 1])
    }

    override func restoreUserActivityState(_ activity: NSUserActivity) {
        super.restoreUserActivityState(activity)
        restoredEntry = activity.userInfo?["entry"] as? Int
    }

    func userActivityWasContinued(_ userActivity: NSUserActivity) {
        DispatchQueue.main.async { [weak self] in
            self?.editorIsOpen = false
        }
    }
}

/// The AppKit form of the app delegate.
@MainActor
final class JournalMacDelegate: NSObject, NSApplicationDelegate {
    let controller = JournalEntryController()
    var willContinue: [String] = []
    var failures: [Error] = []

    func application(_ application: NSApplication, willContinueUserActivityWithType userActivityType: String) -> Bool {
        willContinue.append(userActivityType)
        return true
    }

    func application(
        _ application: NSApplication, continue userActivity: NSUserActivity,
        restorationHandler: @escaping ([NSUserActivityRestoring]) -> Void
    ) -> Bool {
        restorationHandler([controller])
        return true
    }

    func application(_ application: NSApplication, didFailToContinueUserActivityWithType userActivityType: String, error: Error) {
        failures.append(error)
    }
}

@MainActor
@Suite("Source compatibility with Apple's names")
struct SourceCompatibilityTests {
    let manifest = AppManifest(bundleIdentifier: "com.example.journal", teamIdentifier: "JOURNAL", activityTypes: [compatibleType])

    @Test("An AppKit-style delegate and an NSUserActivityDelegate responder continue an activity")
    func appKitForm() async throws {
        let fabric = HandoffFabric()
        let mac = fabric.addDevice("mac"), laptop = fabric.addDevice("laptop")
        let origin = try await mac.launch(manifest)
        let writer = origin.perform { JournalEntryController() }
        origin.perform { writer.startWriting() }

        let delegate = JournalMacDelegate()
        try await laptop.install(manifest) { delegate }
        let offer = try await laptop.nearbyActivity(ofType: compatibleType)
        #expect(await laptop.continueActivity(offer) == .continued(bundleIdentifier: "com.example.journal"))
        #expect(delegate.willContinue == [compatibleType])
        #expect(delegate.controller.restoredEntry == 42)
        #expect(delegate.failures.isEmpty)
        #expect(await eventually { !writer.editorIsOpen }, "the origin closes its editor from a main-queue block")
    }
}

/// The seeds' advice for a URL that came in a userInfo, as Apple's apps write it.
func openAttachment(_ activity: NSUserActivity) -> String? {
    guard let url = activity.userInfo?["attachment"] as? URL, url.startAccessingSecurityScopedResource() else { return nil }
    defer { url.stopAccessingSecurityScopedResource() }
    return try? String(contentsOf: url, encoding: .utf8)
}

@Suite("Security-scoped URLs")
struct SecurityScopedURLTests {
    @Test("startAccessingSecurityScopedResource compiles as on Apple platforms: true for a file here, false for one only on another device or a web URL")
    func scoped() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("scoped-\(UUID()).txt")
        try "hello".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let activity = NSUserActivity(activityType: compatibleType)
        activity.userInfo = ["attachment": file]
        #expect(openAttachment(activity) == "hello")
        activity.userInfo = ["attachment": URL(fileURLWithPath: "/nonexistent/\(UUID()).txt")]
        #expect(openAttachment(activity) == nil)
        #expect(!URL(string: "https://example.com/a.txt")!.startAccessingSecurityScopedResource())
    }
}
