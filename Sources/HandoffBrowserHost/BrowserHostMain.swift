// handoff-browser-host: the native-messaging host of Handoff's browser extension
// (Extensions/Browser). The browser starts it and talks to it on standard input and output:
// each message a 4-byte length (native byte order, little-endian here) and that many bytes of
// UTF-8 JSON. The active tab's http(s) page becomes this device's current
// NSUserActivityTypeBrowsingWeb activity, through the Handoff library and the local agent.
//
// Messages from the extension:
//   {"type": "page", "tab": 12, "url": "https://example.com/a", "title": "A"}   the active tab's page
//   {"type": "resign"}                                                          no page is current (focus left the browser)
//   {"type": "closed", "tab": 12}                                               a tab closed
//   {"type": "time", "tab": 12, "seconds": 83}                                  where the page's video is (video sites)
// Each gets one answer, in order: {"ok": true} or {"ok": false, "error": "…"}. A message over
// 64 KiB (a page with a huge URL) is skipped with an error answer. When a page is fetched by
// another device, its address gets the last time its tab said, as the site writes one
// (`PageTime`); when it was continued there, the host tells the extension
// {"type": "pause", "tab": 12}, and the page's media pauses.
// `handoff browser install` writes the manifests that let browsers start it. See docs/web.md.
import Foundation
import Handoff
import HandoffLocalAPI
import Logging

/// The host's log, on standard error (standard output is the browser's); made on first use,
/// after `BrowserHostMain.main` set the logging system up.
let logger = Logger(label: "handoff-browser-host")

/// The largest message taken from the browser; a page's URL and title are far smaller.
let maximumMessage = 64 * 1024

/// Reads exactly `count` bytes from standard input; nil at its end.
func readExactly(_ count: Int) -> [UInt8]? {
    var bytes: [UInt8] = []
    while bytes.count < count {
        let chunk = FileHandle.standardInput.readData(ofLength: count - bytes.count)
        if chunk.isEmpty { return nil }
        bytes += chunk
    }
    return bytes
}

/// Skips `count` bytes of standard input; false at its end.
func skip(_ count: Int) -> Bool {
    var left = count
    while left > 0 {
        let chunk = FileHandle.standardInput.readData(ofLength: min(left, 64 * 1024))
        if chunk.isEmpty { return false }
        left -= chunk.count
    }
    return true
}

/// Writes one answer; called on the main queue only, so answers go out whole and in order.
func answer(_ object: [String: Any]) {
    guard let json = try? JSONSerialization.data(withJSONObject: object) else { return }
    var length = UInt32(json.count).littleEndian
    let header = withUnsafeBytes(of: &length) { Data($0) }
    FileHandle.standardOutput.write(header + json)
}

/// The browser's activities, one per tab, on the main actor as activities are.
@MainActor
final class Tabs: UserActivityDelegate {
    let center: ActivityCenter
    var activities: [Int: UserActivity] = [:]
    /// Each tab's page as the extension gave it, and where its media is (video sites).
    var pages: [Int: URL] = [:]
    var times: [Int: Int] = [:]

    init() {
        let link = SocketAgentConnection(path: LocalSocket.defaultPath(), bundleIdentifier: nil, logger: logger)
        center = ActivityCenter(connection: link, bundleIdentifier: nil, teamIdentifier: nil, deviceName: ProcessInfo.processInfo.hostName, logger: logger)
    }

    /// Handles one message; nil on success, else what is wrong.
    func handle(_ message: [String: Any]) -> String? {
        switch message["type"] as? String {
        case "page":
            guard let text = message["url"] as? String, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
                scheme == "http" || scheme == "https", url.host?.isEmpty == false
            else { return "'url' must be an http or https URL" }
            let tab = (message["tab"] as? Int) ?? 0
            let activity = activities[tab] ?? ActivityCenter.$current.withValue(center) { UserActivity(activityType: NSUserActivityTypeBrowsingWeb) }
            activities[tab] = activity
            activity.delegate = self
            if pages[tab] != url { times[tab] = nil }
            pages[tab] = url
            activity.webpageURL = url
            activity.title = (message["title"] as? String).map { String($0.prefix(256)) }
            activity.becomeCurrent()
            return nil
        case "resign":
            center.currentActivity?.resignCurrent()
            return nil
        case "closed":
            guard let tab = message["tab"] as? Int else { return "'closed' needs the tab's number" }
            activities.removeValue(forKey: tab)?.invalidate()
            pages[tab] = nil
            times[tab] = nil
            return nil
        case "time":
            guard let tab = message["tab"] as? Int, let activity = activities[tab] else { return "'time' needs the tab of a page given before" }
            guard let seconds = message["seconds"] as? Int, seconds >= 0, seconds < 10_000_000 else { return "'seconds' must be a whole number of seconds from 0" }
            // Written into the address when the page is fetched, not announced each time.
            times[tab] = seconds
            activity.needsSave = true
            return nil
        case let other:
            return "unknown message type \(other.map { "'\($0.prefix(64))'" } ?? "(none)"); the types are page, resign, closed and time"
        }
    }

    /// The page is fetched by another device: its address gets its media's time.
    func userActivityWillSave(_ userActivity: UserActivity) {
        guard let tab = activities.first(where: { $0.value === userActivity })?.key, let page = pages[tab], let seconds = times[tab] else { return }
        userActivity.webpageURL = PageTime.url(page, at: seconds)
    }

    /// The page was continued on another device: its media pauses here, as a player's does.
    func userActivityWasContinued(_ userActivity: UserActivity) {
        guard let tab = activities.first(where: { $0.value === userActivity })?.key, times[tab] != nil else { return }
        answer(["type": "pause", "tab": tab])
    }
}

/// handoff-browser-host's entry, for its program and the programs' shared binary (handoff-programs).
public enum BrowserHostMain {
    public static func main() -> Never {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        let tabs = MainActor.assumeIsolated { Tabs() }
        serve(tabs)
        dispatchMain()
    }
}

/// Reads the browser's messages on a thread of their own and answers each on the main queue.
func serve(_ tabs: Tabs) {
    Thread.detachNewThread {
        while true {
            guard let header = readExactly(4) else { exit(0) }
            let length = Int(UInt32(littleEndian: header.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }))
            guard length <= maximumMessage else {
                guard skip(length) else { exit(0) }
                DispatchQueue.main.async { answer(["ok": false, "error": "a message of \(length) bytes is over the limit of \(maximumMessage); skipped"]) }
                continue
            }
            guard let body = readExactly(length) else { exit(0) }
            guard let message = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
                DispatchQueue.main.async { answer(["ok": false, "error": "a message is not a JSON object"]) }
                continue
            }
            let box = UncheckedMessage(message: message)
            DispatchQueue.main.async {
                let failure = MainActor.assumeIsolated { tabs.handle(box.message) }
                answer(failure.map { ["ok": false, "error": $0] } ?? ["ok": true])
            }
        }
    }
}

/// A JSON object from `JSONSerialization`, handed to the main queue once.
struct UncheckedMessage: @unchecked Sendable {
    // @unchecked: the dictionary is made by one thread and only read after it is handed over;
    // nobody keeps or changes it meanwhile (JSONSerialization's values are immutable types).
    let message: [String: Any]
}
