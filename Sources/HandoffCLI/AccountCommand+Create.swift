import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

extension AccountCommand {
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Make a new account with this device as its first member.",
            discussion: withExamples([
                ("handoff account create --name home", "Make the account 'home'; then 'handoff device invite' adds your other devices."),
            ]))
        @OptionGroup var connection: Connection
        @Option(help: "The account's name.") var name: String

        func run() async throws {
            let client = try connection.connect()
            _ = await call(client, .createAccount(name: name))
            print("Made the account '\(name)'. Add your other devices with 'handoff device invite'.")
        }
    }
}
