import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "This device, its account, and what the agent is doing.",
        discussion: withExamples([
                ("handoff status", "This device's name, its account, the devices nearby and the current activity."),
            ]))
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        let client = try connection.connect()
        guard let status = await call(client, .status).status else { fail(LocalError(.failed, "the agent sent no status")) }
        if output.json { return printJSON(status) }
        print("device:     \(status.device.name) (\(status.device.id.uuidString))")
        print("account:    \(status.account.map { "\($0), \(status.members) device\(status.members == 1 ? "" : "s")" } ?? status.removed.map { "none: " + removedText($0) } ?? "none yet: 'handoff account create --name NAME', or join one")")
        print("nearby:     \(status.nearby) device\(status.nearby == 1 ? "" : "s")")
        print("links:      port \(status.linkPort)")
        print("interfaces: \(status.interfaces.isEmpty ? "none (no multicast)" : status.interfaces.joined(separator: ", "))")
        if !status.staticPeers.isEmpty { print("peers:      \(status.staticPeers.joined(separator: ", "))") }
        print("apps:       \(status.apps) installed")
        if let counters = status.discovery {
            print("beacons:    \(counters.accepted) accepted, \(counters.unopened) not for this account, \(counters.replayed) replayed, \(counters.outsideWindow) outside the time window")
        }
        if let current = status.currentActivity {
            print("offering:   \(current.title ?? current.activityType) (\(current.activityType))")
        }
        if status.clipboardOn == false {
            print("clipboard:  off (--clipboard off)")
        } else if let clipboard = status.clipboard {
            let types = clipboard.types.map { "\($0.name) (\($0.size) bytes)" }.joined(separator: ", ")
            let left = max(0, Int(clipboard.expires.timeIntervalSinceNow.rounded()))
            print("clipboard:  copied on \(clipboard.local ? "this device" : "'\(clipboard.deviceName)'") \(age(-clipboard.copiedAt.timeIntervalSinceNow)), offered \(left)s more: \(types)")
        }
        print("agent:      handoffd \(status.version), socket \(client.path)")
    }
}

/// What `status` and `devices` say of a device removed from its account.
func removedText(_ removed: LocalRemoval) -> String {
    let when = removed.at.formatted(date: .abbreviated, time: .shortened)
    return "it was removed from '\(removed.account)' by '\(removed.by)' (\(when)); to join again, make a code on a member with 'handoff device invite', then 'handoff join CODE' here"
}
