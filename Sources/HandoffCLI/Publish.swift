import ArgumentParser
import Foundation
import HandoffCommandLine
import Handoff
import HandoffLocalAPI
import Logging

struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Make an activity current on this device from a script; it stays current until interrupted.",
        discussion: withExamples(
            """
            The activity is offered to your other devices like an app's. Its team and bundle identifier are \
            what you give here: a script is not an installed app, so the agent cannot check them.
            """,
            [
                ("handoff publish --type com.example.notes.editing --title 'Shopping list' --info note=groceries", "Offer a note to your other devices until interrupted."),
                ("handoff publish --type NSUserActivityTypeBrowsingWeb --webpage-url https://example.com/ --exit-after 60", "Offer a web page for a minute."),
            ]))

    @OptionGroup var connection: Connection
    @Option(name: .customLong("type"), help: "The activity type, such as com.example.notes.editing.") var activityType: String
    @Option(help: "The title other devices show.") var title: String?
    @Option(name: .customLong("info"), help: ArgumentHelp("A userInfo entry, as a string; repeatable.", valueName: "KEY=VALUE")) var info: [String] = []
    @Option(name: .customLong("info-json"), help: ArgumentHelp("userInfo as a JSON object (numbers, booleans, arrays and objects keep their types).", valueName: "JSON")) var infoJSON: String?
    @Option(name: .customLong("webpage-url"), help: "The web page showing the same thing (http or https).") var webpageURL: String?
    @Option(help: "The team identifier the activity claims (apps of that team may continue it).") var team: String?
    @Option(name: .customLong("bundle-id"), help: "The bundle identifier the activity claims.") var bundleIdentifier: String?
    @Option(name: .customLong("exit-after"), help: ArgumentHelp("Stop after this many seconds.", valueName: "SECONDS")) var exitAfter: Double?

    func validate() throws {
        if activityType.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--type: an activity type cannot be empty") }
        for entry in info where !entry.contains("=") || entry.hasPrefix("=") {
            throw ValidationError("--info: '\(entry)' is not KEY=VALUE")
        }
        if let infoJSON {
            guard let object = try? JSONSerialization.jsonObject(with: Data(infoJSON.utf8)), object is [String: Any] else {
                throw ValidationError("--info-json: not a JSON object")
            }
        }
        if let webpageURL {
            guard let url = URL(string: webpageURL), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
                throw ValidationError("--webpage-url: '\(webpageURL)' is not an http or https URL")
            }
        }
    }

    func run() async throws {
        // The library's own notes (connecting, saving) are not the person's business here:
        // only warnings and errors, on standard error.
        var logger = Logger(label: "handoff", factory: { label in StreamLogHandler.standardError(label: label) })
        logger.logLevel = .warning
        // Fail early and clearly when no agent runs, rather than publishing into the void.
        try connection.connect().close()
        let link = SocketAgentConnection(path: connection.path, bundleIdentifier: bundleIdentifier, logger: logger)
        let center = ActivityCenter(connection: link, bundleIdentifier: bundleIdentifier, teamIdentifier: team, deviceName: ProcessInfo.processInfo.hostName, logger: logger)
        var userInfo: [AnyHashable: Any] = [:]
        if let infoJSON, let object = try JSONSerialization.jsonObject(with: Data(infoJSON.utf8)) as? [String: Any] {
            for (key, value) in object { userInfo[key] = value }
        }
        for entry in info {
            let parts = entry.split(separator: "=", maxSplits: 1)
            userInfo[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        let activity = ActivityCenter.$current.withValue(center) { UserActivity(activityType: activityType) }
        activity.title = title
        activity.userInfo = userInfo
        if let webpageURL { activity.webpageURL = URL(string: webpageURL) }
        activity.becomeCurrent()
        for _ in 0..<500 where !link.isConnected {
            try await Task.sleep(for: .milliseconds(10))
        }
        print("Offering \"\(title ?? activityType)\" (\(activity.activityType)) to your other devices; interrupt to stop.")
        fflush(nil)
        if let exitAfter {
            try await Task.sleep(for: .milliseconds(Int(exitAfter * 1000)))
        } else {
            while true { try await Task.sleep(for: .seconds(3600)) }
        }
        activity.invalidate()
        try await Task.sleep(for: .milliseconds(100))
        withExtendedLifetime(center) {}
    }
}
