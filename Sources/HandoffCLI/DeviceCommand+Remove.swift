import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI

extension DeviceCommand {
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract: "Remove a device from the account: every member nearby learns it at once, and the beacon key changes.",
            discussion: withExamples([
                ("handoff device remove old-laptop", "Remove the device named old-laptop, as 'handoff devices' lists it."),
            ]))
        @OptionGroup var connection: Connection
        @Argument(help: "The device's name, as 'handoff devices' shows it.") var name: String

        func run() async throws {
            let client = try connection.connect()
            _ = await call(client, .removeDevice(name: name))
            print("Removed '\(name)'. It can no longer see or continue this account's activities.")
        }
    }
}
