// The main job until the agent exists: a handoff between two simulated devices in this
// process, shown step by step with the map sample's two activities.
import Foundation
import Handoff
import HandoffApp
import HandoffTesting
import MapViewerKit

@MainActor
func step(_ number: Int, _ text: String) {
    print("\n[\(number)] \(text)")
}

@MainActor
func show(_ lines: [String], from: inout Int) {
    for line in lines.dropFirst(from) { print("      \(line)") }
    from = lines.count
}

@MainActor
func runDemo() async throws {
    print("Handoff demo: two devices of one account, in one process (no network yet).")
    let fabric = HandoffFabric()
    let laptop = fabric.addDevice("laptop")
    let desktop = fabric.addDevice("desktop")
    let manifest = mapViewerManifest()

    step(1, "On 'laptop', MapViewer shows the map around Union Square.")
    let laptopMap = MapViewController(region: MapRegion(latitude: 37.7887, longitude: -122.4075, latitudeSpan: 0.02, longitudeSpan: 0.02), favorites: FavoritesStore(file: nil))
    let laptopDelegate = MapViewerAppDelegate(mapViewController: laptopMap)
    let laptopApp = await laptop.launch(manifest) { laptopDelegate }
    laptopApp.perform {
        laptopMap.show(MapRegion(latitude: 37.7887, longitude: -122.4075, latitudeSpan: 0.02, longitudeSpan: 0.02))
    }
    print("      map-viewing activity is current on laptop: \(laptopMap.region)")

    step(2, "'desktop' sees the activity offered nearby.")
    var offer = try await desktop.nearbyActivity(ofType: MapViewerActivity.mapViewing, from: "laptop")
    print("      offered: \"\(offer.title ?? "")\" (\(offer.activityType)) from \(offer.device)")

    step(3, "The person continues it on 'desktop': MapViewer starts there and asks laptop for the state.")
    let desktopMap = MapViewController(region: MapRegion(latitude: 0, longitude: 0, latitudeSpan: 1, longitudeSpan: 1), favorites: FavoritesStore(file: nil))
    let desktopDelegate = MapViewerAppDelegate(mapViewController: desktopMap)
    await desktop.install(manifest) { desktopDelegate }
    var outcome = await desktop.continueActivity(offer)
    print("      outcome: \(outcome)")
    var seen = 0
    show(desktopDelegate.events, from: &seen)
    var shown = 0
    show(desktopMap.log, from: &shown)

    step(4, "Back on 'laptop', the person opens the editor of the Stonestown store and marks it a favorite.")
    laptopApp.perform {
        laptopMap.openEditor(for: bundledStores[1])
        laptopMap.setFavorite(true)
    }
    offer = try await desktop.nearbyActivity(ofType: MapViewerActivity.storeEditing, from: "laptop")
    print("      desktop now sees: \"\(offer.title ?? "")\"")

    step(5, "They continue the editing on 'desktop': its editor opens, and laptop's editor closes.")
    outcome = await desktop.continueActivity(offer)
    print("      outcome: \(outcome)")
    show(desktopDelegate.events, from: &seen)
    show(desktopMap.log, from: &shown)
    for line in laptopMap.log { print("      laptop: \(line)") }

    print("\nDone: the region and the store's favorite flag moved from laptop to desktop.")
}

try await runDemo()
