import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "The apps installed for Handoff on this device, and signing them.",
        subcommands: [ListApps.self, Install.self, Remove.self, Sign.self, Verify.self], defaultSubcommand: ListApps.self)

    struct ListApps: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the installed apps.")
        @OptionGroup var connection: Connection
        @OptionGroup var output: Output

        func run() async throws {
            let client = try connection.connect()
            let apps = await call(client, .apps).apps ?? []
            if output.json { return printJSON(apps) }
            if apps.isEmpty { return print("No app is installed; 'handoff apps install DIR' installs one.") }
            table(
                ["APP", "TEAM", "SIGNED", "RUNNING", "ACTIVITY TYPES"],
                apps.map {
                    [$0.bundleIdentifier, $0.teamIdentifier ?? "-", $0.signedBy == nil ? "no" : "yes", "\($0.running)", $0.activityTypes.joined(separator: ", ")]
                })
        }
    }

    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "install", abstract: "Install an app: a directory with Info.plist, its entitlements and the executable.")
        @OptionGroup var connection: Connection
        @OptionGroup var output: Output
        @Argument(help: "The app's directory.") var directory: String

        func run() async throws {
            let client = try connection.connect()
            let absolute = URL(fileURLWithPath: directory, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).standardizedFileURL.path
            let reply = await call(client, .installApp(directory: absolute))
            for warning in reply.warnings ?? [] { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
            guard let app = reply.app else { return }
            if output.json { return printJSON(app) }
            let signed = app.signedBy.map { "signed by team \($0)" } ?? "not signed"
            print("Installed \(app.bundleIdentifier) (team \(app.teamIdentifier ?? "none"), \(signed)): \(app.activityTypes.joined(separator: ", "))")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an installed app.")
        @OptionGroup var connection: Connection
        @Argument(help: "The app's bundle identifier.") var bundleIdentifier: String

        func run() async throws {
            let client = try connection.connect()
            _ = await call(client, .removeApp(bundleIdentifier: bundleIdentifier))
            print("Removed \(bundleIdentifier).")
        }
    }
}
