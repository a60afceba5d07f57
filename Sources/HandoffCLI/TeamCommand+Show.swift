import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffApp
import HandoffSigning
import HandoffWire

extension TeamCommand {
    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Print the team identifier of a team key.",
            discussion: withExamples([
                ("handoff team show --key ~/team.key", "Print the identifier, for $(DEVELOPMENT_TEAM) or the entitlements."),
            ]))
        @Option(help: ArgumentHelp("The team key.", valueName: "FILE")) var key: String

        func run() async throws {
            print(readTeamKey(key).teamIdentifier)
        }
    }
}
