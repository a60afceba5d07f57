import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The activities your other devices offer now.",
        discussion: withExamples([
                ("handoff list", "Each activity with its id, title, app and device."),
                ("handoff list --json", "The same, as JSON."),
            ]))
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        let client = try connection.connect()
        let activities = await call(client, .nearby).activities ?? []
        if output.json { return printJSON(activities) }
        if activities.isEmpty { return print("No activity is offered nearby.") }
        table(
            ["DEVICE", "APP", "TITLE", "AGE", "ID"],
            activities.map { offer in
                [
                    offer.deviceName, offer.handler ?? "(none here)", offer.activity.title ?? offer.activity.activityType, age(offer.age),
                    offer.activity.id.uuidString,
                ]
            })
    }
}
