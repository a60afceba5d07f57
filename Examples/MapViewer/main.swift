// MapViewer, the seeds' map sample as a Linux app without a window: it reads commands on
// standard input and prints what its map screen does. Install it with
// `handoff apps install DIR` (DIR holding App/Info.plist, App/MapViewer.entitlements and the
// built executable); the agent starts it when a continuation arrives. This is the app
// delegate form; Examples/MapViewerScenes is the same app with a scene delegate.
//
// Commands: show LAT LON [SPAN] | edit STORE | favorite on|off | close | status | quit
import Foundation
import Handoff
import HandoffApp
import MapViewerKit

@MainActor
final class MapViewerMain {
    let console = MapConsole()
    let delegate: MapViewerAppDelegate
    let application: Application

    init() {
        delegate = MapViewerAppDelegate(mapViewController: console.controller)
        application = Application(delegate: delegate)
        delegate.onEvent = { [console] in console.say($0) }
    }
}

let app = MainActor.assumeIsolated { MapViewerMain() }
MainActor.assumeIsolated {
    app.console.say("ready (data in \(app.console.dataDirectory.path))")
    app.console.readCommands()
}
dispatchMain()
