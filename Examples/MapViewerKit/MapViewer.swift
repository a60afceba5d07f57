// A port of the seeds' map sample to Linux, written for Handoff: a store map with two
// activities, viewing a map region and editing one store's "favorite" flag. The map itself is
// a plain region value; what matters here is how the activities travel.
import Foundation
import Handoff
import HandoffApp

/// The sample's activity types, declared in the app's NSUserActivityTypes.
public enum MapViewerActivity {
    public static let mapViewing = "com.example.handoff.MapViewer.map-viewing"
    public static let storeEditing = "com.example.handoff.MapViewer.store-editing"
}

/// The visible part of the map.
public struct MapRegion: Sendable, Hashable, CustomStringConvertible {
    public var latitude: Double
    public var longitude: Double
    public var latitudeSpan: Double
    public var longitudeSpan: Double

    public init(latitude: Double, longitude: Double, latitudeSpan: Double, longitudeSpan: Double) {
        self.latitude = latitude
        self.longitude = longitude
        self.latitudeSpan = latitudeSpan
        self.longitudeSpan = longitudeSpan
    }

    public var description: String {
        String(format: "center %.4f, %.4f  span %.3f x %.3f", latitude, longitude, latitudeSpan, longitudeSpan)
    }
}

/// A store on the map.
public struct Store: Sendable, Hashable {
    public var identifier: String
    public var name: String
    public var latitude: Double
    public var longitude: Double
}

/// The bundled list of stores.
public let bundledStores: [Store] = [
    Store(identifier: "union-square", name: "Union Square", latitude: 37.7887, longitude: -122.4075),
    Store(identifier: "stonestown", name: "Stonestown", latitude: 37.7285, longitude: -122.4767),
    Store(identifier: "palo-alto", name: "Palo Alto", latitude: 37.4438, longitude: -122.1610),
]

/// Favorites persist outside Handoff, as the sample keeps them in a key-value store: here a
/// small JSON file, so that the app has them when started without Handoff.
public final class FavoritesStore {
    public let file: URL?
    public private(set) var favorites: Set<String>

    public init(file: URL?) {
        self.file = file
        if let file, let data = try? Data(contentsOf: file), let list = try? JSONDecoder().decode([String].self, from: data) {
            favorites = Set(list)
        } else {
            favorites = []
        }
    }

    public func set(_ storeIdentifier: String, favorite: Bool) {
        if favorite { favorites.insert(storeIdentifier) } else { favorites.remove(storeIdentifier) }
        guard let file else { return }
        try? JSONEncoder().encode(favorites.sorted()).write(to: file, options: .atomic)
    }
}

extension UserActivity {
    static let latitudeKey = "region.center.latitude"
    static let longitudeKey = "region.center.longitude"
    static let latitudeSpanKey = "region.span.latitude"
    static let longitudeSpanKey = "region.span.longitude"
    static let storeKey = "store.identifier"
    static let favoriteKey = "store.favorite"

    /// Writes a region into `userInfo`.
    public func updateViewingRegion(_ region: MapRegion) {
        addUserInfoEntries(from: [
            Self.latitudeKey: region.latitude, Self.longitudeKey: region.longitude,
            Self.latitudeSpanKey: region.latitudeSpan, Self.longitudeSpanKey: region.longitudeSpan,
        ])
    }

    /// Reads a region back from `userInfo`, or nil if a key is missing.
    public func viewingRegion() -> MapRegion? {
        guard let latitude = userInfo?[Self.latitudeKey] as? Double,
            let longitude = userInfo?[Self.longitudeKey] as? Double,
            let latitudeSpan = userInfo?[Self.latitudeSpanKey] as? Double,
            let longitudeSpan = userInfo?[Self.longitudeSpanKey] as? Double
        else { return nil }
        return MapRegion(latitude: latitude, longitude: longitude, latitudeSpan: latitudeSpan, longitudeSpan: longitudeSpan)
    }
}

/// The map screen: it owns both activities and restores either one.
@MainActor
public final class MapViewController: Responder, UserActivityDelegate {
    public private(set) var region: MapRegion
    /// The store whose editor is open, if any.
    public private(set) var editingStore: Store?
    public let favorites: FavoritesStore
    /// What the screen did, for a person watching the demo and for tests.
    public private(set) var log: [String] = [] {
        didSet { if log.count > oldValue.count, let line = log.last { onLog?(line) } }
    }
    /// Called with each new line of `log`.
    public var onLog: (@MainActor (String) -> Void)?

    // The framework invalidates an activity once no responder holds it, so a screen that
    // switches between activities makes a fresh one when it switches back.
    private var mapViewingActivity: UserActivity?
    private var storeEditingActivity: UserActivity?

    public init(region: MapRegion, favorites: FavoritesStore) {
        self.region = region
        self.favorites = favorites
        super.init()
    }

    /// The person moved the map.
    public func show(_ newRegion: MapRegion) {
        region = newRegion
        let activity = mapViewingActivity ?? UserActivity(activityType: MapViewerActivity.mapViewing)
        activity.title = "Viewing the store map"
        mapViewingActivity = activity
        userActivity = activity
        activity.needsSave = true
        activity.becomeCurrent()
    }

    /// The person opened a store's editor.
    public func openEditor(for store: Store) {
        editingStore = store
        let activity = UserActivity(activityType: MapViewerActivity.storeEditing)
        activity.title = "Editing \(store.name)"
        activity.delegate = self
        activity.needsSave = true
        storeEditingActivity = activity
        mapViewingActivity = nil
        userActivity = activity
        activity.becomeCurrent()
    }

    /// The person toggled the favorite flag in the editor.
    public func setFavorite(_ favorite: Bool) {
        guard let store = editingStore else { return }
        favorites.set(store.identifier, favorite: favorite)
        storeEditingActivity?.needsSave = true
    }

    public func closeEditor() {
        editingStore = nil
        storeEditingActivity = nil
        userActivity = nil
    }

    public override func updateUserActivityState(_ activity: UserActivity) {
        switch activity.activityType {
        case MapViewerActivity.mapViewing:
            activity.updateViewingRegion(region)
        case MapViewerActivity.storeEditing:
            guard let store = editingStore else { return }
            activity.updateViewingRegion(region)
            activity.addUserInfoEntries(from: [
                UserActivity.storeKey: store.identifier, UserActivity.favoriteKey: favorites.favorites.contains(store.identifier),
            ])
        default:
            break
        }
    }

    public override func restoreUserActivityState(_ activity: UserActivity) {
        if let restored = activity.viewingRegion() {
            region = restored
            log.append("map shows \(restored)")
        }
        if activity.activityType == MapViewerActivity.storeEditing,
            let identifier = activity.userInfo?[UserActivity.storeKey] as? String,
            let store = bundledStores.first(where: { $0.identifier == identifier })
        {
            if let favorite = activity.userInfo?[UserActivity.favoriteKey] as? Bool {
                favorites.set(identifier, favorite: favorite)
            }
            openEditor(for: store)
            log.append("editor open for \(store.name), favorite: \(favorites.favorites.contains(identifier))")
        }
    }

    /// The editing continued elsewhere: close this editor so the two do not both edit.
    public func userActivityWasContinued(_ userActivity: UserActivity) {
        guard userActivity.activityType == MapViewerActivity.storeEditing, let store = editingStore else { return }
        log.append("editor for \(store.name) closed: continued on another device")
        closeEditor()
    }
}

/// The app delegate: hands a continued activity to the map screen.
@MainActor
public final class MapViewerAppDelegate: ApplicationDelegate {
    public let mapViewController: MapViewController
    public private(set) var events: [String] = [] {
        didSet { if events.count > oldValue.count, let line = events.last { onEvent?(line) } }
    }
    /// Called with each new line of `events`.
    public var onEvent: (@MainActor (String) -> Void)?

    public init(mapViewController: MapViewController) {
        self.mapViewController = mapViewController
    }

    public func application(_ application: Application, willContinueUserActivityWithType userActivityType: String) -> Bool {
        events.append("will continue \(userActivityType)")
        return true
    }

    public func application(
        _ application: Application, continue userActivity: UserActivity,
        restorationHandler: @escaping ([UserActivityRestoring]?) -> Void
    ) -> Bool {
        events.append("continue \(userActivity.activityType)")
        restorationHandler([mapViewController])
        return true
    }

    public func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        events.append("failed \(userActivityType): \(error)")
    }
}

/// The sample's manifest: both activity types, one team.
public func mapViewerManifest(team: String = "EXAMPLETEAM") -> AppManifest {
    AppManifest(
        bundleIdentifier: "com.example.handoff.MapViewer", executable: "MapViewer", teamIdentifier: team,
        activityTypes: [MapViewerActivity.mapViewing, MapViewerActivity.storeEditing])
}
