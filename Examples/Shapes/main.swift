// Shapes: the guide's shape-creation activity, ported. A responder (a view controller, in an
// app with a window) manages the activity: it sets `requiredUserInfoKeys`, and puts the shape
// and the version of its userInfo's layout into the activity when asked
// (`updateUserActivityState`). The continuing app restores the shape only from a layout it
// understands: a newer version is declined with a message rather than misread.
//
// Install it with `handoff apps install DIR` (App/Info.plist, App/Shapes.entitlements and the
// built executable). Commands on standard input: shape circle|square|triangle | quit
import Foundation
import Handoff
import HandoffApp

let createShapeType = "com.example.handoff.Shapes.create-shape"
/// The layout of this app's userInfo; a newer app may write a newer one.
let activityVersion = 1

let dataDirectory: URL = {
    let environment = ProcessInfo.processInfo.environment
    if let given = environment["HANDOFF_APP_DATA"], !given.isEmpty { return URL(fileURLWithPath: given, isDirectory: true) }
    let base = environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent(".local/share")
    return base.appendingPathComponent("Shapes", isDirectory: true)
}()
try? FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
let eventLog = dataDirectory.appendingPathComponent("events.log")

func say(_ line: String) {
    FileHandle.standardOutput.write(Data("Shapes: \(line)\n".utf8))
    let data = Data((line + "\n").utf8)
    if let handle = try? FileHandle(forWritingTo: eventLog) {
        handle.seekToEndOfFile()
        handle.write(data)
        try? handle.close()
    } else {
        try? data.write(to: eventLog)
    }
}

/// The canvas's controller: it owns the shape being made and the activity describing it.
@MainActor
final class CanvasController: Responder {
    var shapeType: String?

    func startCreating(_ type: String) {
        shapeType = type
        if userActivity == nil {
            let activity = UserActivity(activityType: createShapeType)
            activity.requiredUserInfoKeys = ["shape-type"]
            activity.title = "Creating a shape"
            userActivity = activity
            activity.becomeCurrent()
        }
        userActivity?.needsSave = true
        say("creating a \(type)")
    }

    override func updateUserActivityState(_ activity: UserActivity) {
        guard activity.activityType == createShapeType, let shapeType else { return }
        activity.addUserInfoEntries(from: ["shape-type": shapeType, "activity-version": activityVersion])
    }

    override func restoreUserActivityState(_ activity: UserActivity) {
        super.restoreUserActivityState(activity)
        guard activity.activityType == createShapeType, let type = activity.userInfo?["shape-type"] as? String,
            let version = activity.userInfo?["activity-version"] as? Int, version >= 1
        else {
            return say("the activity holds no shape this app can read")
        }
        guard version <= activityVersion else {
            return say("made by a newer version (activity-version \(version)); update Shapes to continue it")
        }
        shapeType = type
        say("created a \(type) from another device (activity-version \(version))")
    }
}

@MainActor
final class ShapesDelegate: ApplicationDelegate {
    let canvas: CanvasController
    init(canvas: CanvasController) { self.canvas = canvas }

    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        restorationHandler([canvas])
        return true
    }

    func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        say("failed \(userActivityType): \((error as? CocoaError)?.code.rawValue ?? 0)")
    }
}

@MainActor
final class ShapesApp {
    let canvas = CanvasController()
    let delegate: ShapesDelegate
    let application: Application

    init() {
        delegate = ShapesDelegate(canvas: canvas)
        application = Application(delegate: delegate)
    }

    func run(_ line: String) {
        let words = line.split(separator: " ").map(String.init)
        switch words.first {
        case "shape":
            guard words.count == 2, ["circle", "square", "triangle"].contains(words[1]) else { return say("usage: shape circle|square|triangle") }
            canvas.startCreating(words[1])
        case "quit":
            exit(0)
        case nil:
            break
        default:
            say("unknown command '\(words[0])'; commands: shape, quit")
        }
    }
}

let app = MainActor.assumeIsolated { ShapesApp() }
say("ready")
Thread.detachNewThread {
    while let line = readLine() {
        DispatchQueue.main.async { MainActor.assumeIsolated { app.run(line) } }
    }
}
dispatchMain()
