import Foundation
import Handoff
import HandoffApp
import HandoffTesting
import MapViewerKit
import Testing

// Our own ports of the seeds' examples, run end to end through HandoffTesting.

let shapeType = "com.example.shapes.create-shape"

/// The guide's shape-creation screen: required keys and a versioned userInfo.
@MainActor
final class ShapesViewController: Responder {
    var shape = "circle"
    var created: [String] = []

    override func updateUserActivityState(_ activity: UserActivity) {
        guard activity.activityType == shapeType else { return }
        activity.addUserInfoEntries(from: ["shape-type": shape, "activity-version": 1])
    }

    override func restoreUserActivityState(_ activity: UserActivity) {
        super.restoreUserActivityState(activity)
        guard activity.activityType == shapeType,
            let type = activity.userInfo?["shape-type"] as? String,
            let version = activity.userInfo?["activity-version"] as? Int,
            version >= 1
        else { return }
        created.append(type)
    }
}

@MainActor
final class ShapesAppDelegate: UIApplicationDelegate {
    let shapes = ShapesViewController()

    func application(
        _ application: UIApplication, continue userActivity: NSUserActivity,
        restorationHandler: @escaping ([UIUserActivityRestoring]?) -> Void
    ) -> Bool {
        restorationHandler([shapes])
        return true
    }
}

@MainActor
@Suite("The seeds' examples, ported")
struct SeedPortTests {
    let shapesManifest = AppManifest(bundleIdentifier: "com.example.shapes", teamIdentifier: "SHAPES", activityTypes: [shapeType])

    @Test("The shape-creation activity continues with its required keys and version")
    func shapes() async throws {
        let fabric = HandoffFabric()
        let mac = fabric.addDevice("mac")
        let phone = fabric.addDevice("phone")
        let macApp = try await mac.launch(shapesManifest)
        let macShapes = macApp.perform { ShapesViewController() }
        macShapes.shape = "hexagon"
        let activity = macApp.perform {
            let activity = NSUserActivity(activityType: shapeType)
            activity.isEligibleForHandoff = true
            activity.requiredUserInfoKeys = ["shape-type"]
            activity.title = "Creating shape"
            return activity
        }
        macShapes.userActivity = activity
        activity.needsSave = true
        activity.becomeCurrent()

        let phoneDelegate = ShapesAppDelegate()
        try await phone.install(shapesManifest) { phoneDelegate }
        let offer = try await phone.nearbyActivity(ofType: shapeType)
        #expect(offer.title == "Creating shape")
        #expect(await phone.continueActivity(offer) == .continued(bundleIdentifier: "com.example.shapes"))
        #expect(phoneDelegate.shapes.created == ["hexagon"])
    }

    @Test("The map-viewing region is restored on the other device")
    func mapRegion() async throws {
        let fabric = HandoffFabric()
        let laptop = fabric.addDevice("laptop")
        let desktop = fabric.addDevice("desktop")
        let region = MapRegion(latitude: 37.7887, longitude: -122.4075, latitudeSpan: 0.02, longitudeSpan: 0.03)
        let laptopApp = try await laptop.launch(mapViewerManifest())
        let laptopMap = laptopApp.perform { MapViewController(region: region, favorites: FavoritesStore(file: nil)) }
        laptopApp.perform { laptopMap.show(region) }

        let desktopMap = MapViewController(region: MapRegion(latitude: 0, longitude: 0, latitudeSpan: 1, longitudeSpan: 1), favorites: FavoritesStore(file: nil))
        let desktopDelegate = MapViewerAppDelegate(mapViewController: desktopMap)
        try await desktop.install(mapViewerManifest()) { desktopDelegate }
        let offer = try await desktop.nearbyActivity(ofType: MapViewerActivity.mapViewing)
        #expect(await desktop.continueActivity(offer) == .continued(bundleIdentifier: "com.example.handoff.MapViewer"))
        #expect(desktopMap.region == region)
    }

    @Test("Continuing store editing opens the editor there and closes it on the origin")
    func storeEditing() async throws {
        let fabric = HandoffFabric()
        let laptop = fabric.addDevice("laptop")
        let desktop = fabric.addDevice("desktop")
        let region = MapRegion(latitude: 37.7285, longitude: -122.4767, latitudeSpan: 0.02, longitudeSpan: 0.02)
        let laptopApp = try await laptop.launch(mapViewerManifest())
        let laptopMap = laptopApp.perform { MapViewController(region: region, favorites: FavoritesStore(file: nil)) }
        laptopApp.perform {
            laptopMap.openEditor(for: bundledStores[1])
            laptopMap.setFavorite(true)
        }

        let desktopMap = MapViewController(region: region, favorites: FavoritesStore(file: nil))
        let desktopDelegate = MapViewerAppDelegate(mapViewController: desktopMap)
        try await desktop.install(mapViewerManifest()) { desktopDelegate }
        let offer = try await desktop.nearbyActivity(ofType: MapViewerActivity.storeEditing)
        #expect(await desktop.continueActivity(offer) == .continued(bundleIdentifier: "com.example.handoff.MapViewer"))
        #expect(desktopMap.editingStore == bundledStores[1])
        #expect(desktopMap.favorites.favorites.contains(bundledStores[1].identifier))
        #expect(await eventually { laptopMap.editingStore == nil })
    }

    @Test("Favorites persist outside Handoff")
    func favoritesPersist() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("favorites-\(UUID()).json")
        defer { try? FileManager.default.removeItem(at: file) }
        FavoritesStore(file: file).set("palo-alto", favorite: true)
        #expect(FavoritesStore(file: file).favorites == ["palo-alto"])
    }
}
