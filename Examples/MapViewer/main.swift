// MapViewer, the seeds' map sample as a Linux app without a window: it reads commands on
// standard input and prints what its map screen does. Install it with
// `handoff apps install DIR` (DIR holding App/Info.plist, App/MapViewer.entitlements and the
// built executable); the agent starts it when a continuation arrives.
//
// Commands: show LAT LON [SPAN] | edit STORE | favorite on|off | close | status | quit
import Foundation
import Handoff
import HandoffApp
import MapViewerKit

/// Where the app keeps its own data (favorites, the last region, its event log): the folder
/// the agent gives it, else $XDG_DATA_HOME/MapViewer.
let dataDirectory: URL = {
    let environment = ProcessInfo.processInfo.environment
    if let given = environment["HANDOFF_APP_DATA"], !given.isEmpty { return URL(fileURLWithPath: given, isDirectory: true) }
    let base = environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent(".local/share")
    return base.appendingPathComponent("MapViewer", isDirectory: true)
}()
try? FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
let eventLog = dataDirectory.appendingPathComponent("events.log")

/// Prints a line and appends it to the event log, so a person and a test both see it.
@MainActor
func say(_ line: String) {
    // Written straight to the descriptor: fflush(NULL) would wait on the stdin reader's lock.
    FileHandle.standardOutput.write(Data("MapViewer: \(line)\n".utf8))
    let data = Data((line + "\n").utf8)
    if let handle = try? FileHandle(forWritingTo: eventLog) {
        handle.seekToEndOfFile()
        handle.write(data)
        try? handle.close()
    } else {
        try? data.write(to: eventLog)
    }
}

@MainActor
final class MapViewerMain {
    let controller: MapViewController
    let delegate: MapViewerAppDelegate
    let application: Application

    init() {
        let favorites = FavoritesStore(file: dataDirectory.appendingPathComponent("favorites.json"))
        controller = MapViewController(region: MapRegion(latitude: 37.7749, longitude: -122.4194, latitudeSpan: 0.1, longitudeSpan: 0.1), favorites: favorites)
        delegate = MapViewerAppDelegate(mapViewController: controller)
        application = Application(delegate: delegate)
        controller.onLog = { say($0) }
        delegate.onEvent = { say($0) }
    }

    func run(_ line: String) {
        let words = line.split(separator: " ").map(String.init)
        switch words.first {
        case "show":
            guard words.count >= 3, let latitude = Double(words[1]), let longitude = Double(words[2]) else {
                return say("usage: show LAT LON [SPAN]")
            }
            let span = words.count > 3 ? Double(words[3]) ?? 0.02 : 0.02
            controller.show(MapRegion(latitude: latitude, longitude: longitude, latitudeSpan: span, longitudeSpan: span))
            say("showing \(controller.region)")
        case "edit":
            guard words.count == 2, let store = bundledStores.first(where: { $0.identifier == words[1] }) else {
                return say("usage: edit STORE, one of \(bundledStores.map(\.identifier).joined(separator: ", "))")
            }
            controller.openEditor(for: store)
            say("editing \(store.name)")
        case "favorite":
            guard words.count == 2, words[1] == "on" || words[1] == "off" else { return say("usage: favorite on|off") }
            controller.setFavorite(words[1] == "on")
            say("favorite \(words[1])")
        case "close":
            controller.closeEditor()
            say("editor closed")
        case "status":
            say("region \(controller.region); editing \(controller.editingStore?.name ?? "nothing"); favorites \(controller.favorites.favorites.sorted())")
        case "quit":
            say("bye")
            exit(0)
        case nil:
            break
        default:
            say("unknown command '\(words[0])'; commands: show, edit, favorite, close, status, quit")
        }
    }
}

let app = MainActor.assumeIsolated { MapViewerMain() }
MainActor.assumeIsolated { say("ready (data in \(dataDirectory.path))") }

// Standard input is read on a thread of its own; an app started by the agent may have none.
Thread.detachNewThread {
    while let line = readLine() {
        DispatchQueue.main.async { MainActor.assumeIsolated { app.run(line) } }
    }
}
dispatchMain()
