import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "watch", abstract: "Show activities as they appear nearby, until interrupted.",
        discussion: withExamples([
                ("handoff watch", "Print each activity as it appears, changes or goes away."),
                ("handoff watch --notify", "Also show each as a desktop notification with a Continue button."),
            ]))
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Flag(help: "Also show a desktop notification for each activity, whose Continue button continues it here (needs a desktop session).")
    var notify = false

    func run() async throws {
        let json = output.json
        let notifications = notify ? await Notifications.start(socket: connection.path) : nil
        let (events, sink) = AsyncStream<LocalEvent>.makeStream()
        let client = try connection.connect { message in
            if case .event(let event) = message { sink.yield(event) }
        }
        let current = await call(client, .watch).activities ?? []
        // What each device offered last, to say what went away when it goes.
        var shown: [UUID: LocalNearbyActivity] = [:]
        for offer in current { shown[offer.device] = offer }
        for offer in current {
            if json {
                printJSON(LocalEvent(change: .appeared, device: offer.device, deviceName: offer.deviceName, activity: offer))
            } else {
                print("offered  \(offer.deviceName): \(offer.activity.title ?? offer.activity.activityType)  [\(offer.handler ?? "no app here")]  \(offer.activity.id.uuidString)")
            }
        }
        // What is offered already reaches a pipe at once, not at the first change.
        fflush(nil)
        for offer in current { await notifications?.show(offer) }
        for await event in events {
            if let offer = event.activity {
                await notifications?.show(offer)
            } else {
                await notifications?.gone(event.device)
            }
            let before = shown[event.device]
            shown[event.device] = event.activity
            if json {
                printJSON(event)
            } else if let offer = event.activity {
                print("\(event.change == .changed ? "changed" : "offered")  \(event.deviceName): \(offer.activity.title ?? offer.activity.activityType)  [\(offer.handler ?? "no app here")]  \(offer.activity.id.uuidString)")
            } else if let before {
                // Which activity went away, as it was shown.
                print("gone     \(event.deviceName): \(before.activity.title ?? before.activity.activityType)  [\(before.handler ?? "no app here")]  \(before.activity.id.uuidString)")
            } else {
                print("gone     \(event.deviceName)")
            }
            fflush(nil)
        }
    }
}
