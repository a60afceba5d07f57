import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "account", abstract: "This device's account.", subcommands: [Create.self])
}
