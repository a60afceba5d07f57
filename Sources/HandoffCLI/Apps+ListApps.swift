import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

extension Apps {
    struct ListApps: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the installed apps.",
            discussion: withExamples([
                ("handoff apps list", "The installed apps, with their teams and activity types."),
                ("handoff apps --json", "The same, as JSON."),
            ]))
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
                    [
                        $0.bundleIdentifier, $0.teamIdentifier ?? "-", $0.executableChanged == true ? "CHANGED" : $0.signedBy == nil ? "no" : "yes", "\($0.running)",
                        $0.activityTypes.joined(separator: ", "),
                    ]
                })
            if apps.contains(where: { $0.executableChanged == true }) {
                print("\nCHANGED: the executable is no longer the one installed (and signed): it is neither started nor taken for the app; install the app again.")
            }
        }
    }
}
