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
        discussion: withExamples([
                ("handoff apps", "List the installed apps."),
                ("handoff apps install ~/MapViewer.app", "Install an app folder."),
            ]),
        subcommands: [ListApps.self, Install.self, Remove.self, Sign.self, Verify.self], defaultSubcommand: ListApps.self)
}
