import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "devices", abstract: "The devices of this device's account.",
        discussion: withExamples([
                ("handoff devices", "Each device of the account, and whether it is nearby now."),
                ("handoff devices --json", "The same, as JSON."),
            ]))
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        let client = try connection.connect()
        let devices = await call(client, .devices).devices ?? []
        if output.json { return printJSON(devices) }
        if devices.isEmpty {
            if let removed = await call(client, .status).status?.removed { return print("This device has no account: " + removedText(removed) + ".") }
            return print("No account yet: 'handoff account create --name NAME' on your first device.")
        }
        table(
            ["NAME", "STATE", "ADDRESS", "FINGERPRINT"],
            devices.map { device in
                [
                    device.name + (device.isThisDevice ? " (this device)" : ""),
                    device.isThisDevice ? "-" : device.isNearby ? "nearby, \(age(device.lastHeard ?? 0))" : "not seen",
                    device.address ?? "-", String((device.fingerprint ?? "-").prefix(16)),
                ]
            })
    }
}
