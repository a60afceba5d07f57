import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

extension Apps {
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an installed app.",
            discussion: withExamples([
                ("handoff apps remove com.example.handoff.MapViewer", "Remove MapViewer; its data folder is kept."),
            ]))
        @OptionGroup var connection: Connection
        @Argument(help: "The app's bundle identifier.") var bundleIdentifier: String

        func run() async throws {
            let client = try connection.connect()
            _ = await call(client, .removeApp(bundleIdentifier: bundleIdentifier))
            print("Removed \(bundleIdentifier).")
        }
    }
}
