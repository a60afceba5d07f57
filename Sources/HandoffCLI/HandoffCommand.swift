import ArgumentParser
import CHandoffVersion
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

/// The program: `handoff continue` in its plain forms goes straight to the agent
/// (`QuickContinue`); everything else through the argument parser. The entry of the
/// `handoff-cli` program and of the programs' shared binary (handoff-programs).
public enum HandoffMain {
    public static func main() async {
        if let quick = QuickContinue(arguments: Array(CommandLine.arguments.dropFirst())) { quick.run() }
        await HandoffCommand.main()
    }
}

struct HandoffCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff",
        abstract: "See and continue the activities of your other devices, and manage this device's Handoff agent.",
        discussion: withExamples([
                ("handoff list", "The activities your other devices offer now."),
                ("handoff continue --latest", "Continue the newest of them here."),
                ("handoff account create --name home", "Start an account on your first device."),
                ("handoff doctor", "Find out why a device is not seen."),
            ]),
        version: handoffCLIVersion,
        subcommands: [
            Status.self, Devices.self, List.self, Continue.self, Watch.self, Publish.self, Apps.self, TeamCommand.self, AccountCommand.self,
            DeviceCommand.self, Join.self, Probe.self, Doctor.self, BrowserCommand.self, Copy.self, Paste.self,
        ])
}

/// The version, the agent's (written once, in Sources/CHandoffVersion).
let handoffCLIVersion = String(cString: handoff_version())
