import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "account", abstract: "This device's account.",
        discussion: withExamples([
                ("handoff account create --name home", "Make an account with this device in it."),
                ("handoff devices", "List the account's devices."),
            ]),
        subcommands: [Create.self])
}
