import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

/// The program: `handoff continue` in its plain forms goes straight to the agent
/// (`QuickContinue`); everything else through the argument parser.
@main
enum HandoffMain {
    static func main() async {
        if let quick = QuickContinue(arguments: Array(CommandLine.arguments.dropFirst())) { quick.run() }
        await HandoffCommand.main()
    }
}

struct HandoffCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff",
        abstract: "See and continue the activities of your other devices, and manage this device's Handoff agent.",
        version: handoffCLIVersion,
        subcommands: [
            Status.self, Devices.self, List.self, Continue.self, Watch.self, Publish.self, Apps.self, TeamCommand.self, AccountCommand.self,
            DeviceCommand.self, Join.self, Probe.self, Doctor.self, BrowserCommand.self, Copy.self, Paste.self,
        ])
}

let handoffCLIVersion = "0.3.0"
