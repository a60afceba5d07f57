import Foundation
import Handoff
import HandoffApp
import HandoffTesting
import Testing

@MainActor
@Suite("What a device offers")
struct OfferTests {
    @Test("Making an ineligible activity current withdraws the one it replaced")
    func ineligibleReplacement() async throws {
        let devices = try await TwoDevices()
        _ = try await devices.offer()
        let secret = devices.originApp.perform { UserActivity(activityType: "com.example.notes.private") }
        secret.isEligibleForHandoff = false
        secret.becomeCurrent()
        try await devices.target.waitUntil("the replaced offer to be withdrawn") { $0.nearbyActivities.isEmpty }
    }

    @Test("A device that joins later sees what the others already offer")
    func lateJoiner() async throws {
        let devices = try await TwoDevices()
        _ = try await devices.offer()
        let tablet = devices.fabric.addDevice("tablet")
        let offer = try await tablet.nearbyActivity(ofType: notesType)
        #expect(offer.device == "laptop")
    }

    @Test("When the most recent app resigns, the other app's current activity is offered again")
    func fallsBack() async throws {
        let devices = try await TwoDevices()
        let (_, first) = try await devices.offer()
        let other = try await devices.origin.launch(AppManifest(bundleIdentifier: "com.example.maps", teamIdentifier: "TEAM1"))
        let maps = other.perform { UserActivity(activityType: "com.example.maps.viewing") }
        maps.becomeCurrent()
        _ = try await devices.target.nearbyActivity(ofType: "com.example.maps.viewing")
        maps.resignCurrent()
        let again = try await devices.target.nearbyActivity(ofType: notesType)
        #expect(again.announcement.id == first.announcement.id)
    }

    @Test("An app launched while a continuation starts it keeps reaching its device")
    func launchDuringContinuation() async throws {
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer()
        let target = devices.target
        let delegate = devices.targetDelegate
        async let outcome = target.continueActivity(nearby)
        let app = try await target.launch(notesManifest()) { delegate }
        #expect(await outcome == .continued(bundleIdentifier: "com.example.notes"))
        // The app's own activity still reaches the other device.
        let reply = app.perform { UserActivity(activityType: "com.example.notes.reply") }
        reply.becomeCurrent()
        _ = try await devices.origin.nearbyActivity(ofType: "com.example.notes.reply")
    }

    @Test("A web page from a browser continues in the app its site approves, and in the browser otherwise")
    func webToApp() async throws {
        let fabric = HandoffFabric()
        let laptop = fabric.addDevice("laptop"), phone = fabric.addDevice("phone")
        let browser = try await laptop.launch(AppManifest(bundleIdentifier: "org.example.browser", teamIdentifier: "BROWSER", activityTypes: [NSUserActivityTypeBrowsingWeb]))
        let page = browser.perform { UserActivity(activityType: NSUserActivityTypeBrowsingWeb) }
        page.webpageURL = URL(string: "https://shop.example.com/item/7")
        page.userInfo = ["open-tabs": 12]
        page.becomeCurrent()

        let shopDelegate = RecordingAppDelegate()
        let shop = AppManifest(
            bundleIdentifier: "com.example.shop", teamIdentifier: "SHOP",
            associatedDomains: [try AssociatedDomain(parsing: "activitycontinuation:shop.example.com")])
        try await phone.install(shop) { shopDelegate }
        let offer = try await phone.nearbyActivity(ofType: NSUserActivityTypeBrowsingWeb)

        #expect(await phone.continueActivity(offer) == .openedInBrowser(URL(string: "https://shop.example.com/item/7")!))
        await phone.approve("SHOP.com.example.shop", forSite: "shop.example.com")
        #expect(await phone.continueActivity(offer) == .continued(bundleIdentifier: "com.example.shop"))
        let received = try #require(shopDelegate.continued.first)
        #expect(received.activityType == NSUserActivityTypeBrowsingWeb)
        #expect(received.webpageURL == URL(string: "https://shop.example.com/item/7"))
        // Nothing of the browser's state reaches an app of another team.
        #expect(received.userInfo == nil || received.userInfo?.isEmpty == true)
    }
}
