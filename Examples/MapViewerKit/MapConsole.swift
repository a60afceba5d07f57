// The part of MapViewer that stands in for a window: commands on standard input, and what the
// map screen does printed and kept in an event log. The app delegate form (Examples/MapViewer)
// and the scene delegate form (Examples/MapViewerScenes) share it.
import Foundation
import HandoffApp

/// The map screen of one process, driven by text commands:
/// `show LAT LON [SPAN] | edit STORE | favorite on|off | close | status | quit`.
@MainActor
public final class MapConsole {
    /// Where the app keeps its own data (favorites, its event log): the folder the agent gives
    /// it, else $XDG_DATA_HOME/MapViewer.
    public let dataDirectory: URL
    public let controller: MapViewController
    private let eventLog: URL

    public init() {
        let environment = ProcessInfo.processInfo.environment
        if let given = environment["HANDOFF_APP_DATA"], !given.isEmpty {
            dataDirectory = URL(fileURLWithPath: given, isDirectory: true)
        } else {
            let base = environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent(".local/share")
            dataDirectory = base.appendingPathComponent("MapViewer", isDirectory: true)
        }
        try? FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        eventLog = dataDirectory.appendingPathComponent("events.log")
        let favorites = FavoritesStore(file: dataDirectory.appendingPathComponent("favorites.json"))
        controller = MapViewController(region: MapRegion(latitude: 37.7749, longitude: -122.4194, latitudeSpan: 0.1, longitudeSpan: 0.1), favorites: favorites)
        controller.onLog = { [weak self] in self?.say($0) }
    }

    /// Prints a line and appends it to the event log, so a person and a test both see it.
    public func say(_ line: String) {
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

    /// Reads commands from standard input on a thread of its own (an app started by the agent
    /// may have none) and runs them on the main queue.
    public func readCommands() {
        Thread.detachNewThread {
            while let line = readLine() {
                DispatchQueue.main.async { MainActor.assumeIsolated { self.run(line) } }
            }
        }
    }

    /// Runs one command.
    public func run(_ line: String) {
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
