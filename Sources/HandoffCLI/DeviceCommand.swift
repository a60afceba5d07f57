import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI

struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device", abstract: "Add devices to this device's account, or remove them.",
        discussion: withExamples([
                ("handoff device invite", "Print a code for 'handoff join' on the new device."),
                ("handoff device remove old-laptop", "Remove a device."),
            ]),
        subcommands: [Invite.self, Remove.self])
}

/// Reads `90s`, `10m`, `1h` or plain seconds.
func parseDuration(_ text: String) -> Double? {
    let units: [(String, Double)] = [("s", 1), ("m", 60), ("h", 3600)]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        if let number = Double(text.dropLast()), number > 0 { return number * scale }
    }
    return Double(text).flatMap { $0 > 0 ? $0 : nil }
}
