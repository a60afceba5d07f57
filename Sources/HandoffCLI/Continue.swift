import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Continue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "continue", abstract: "Continue an activity from another device here.",
        discussion: withExamples([
                ("handoff continue --latest", "Continue the newest activity your other devices offer."),
                ("handoff continue 3F2A9C1E", "Continue the activity with that id, as 'handoff list' shows it."),
            ]))
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Argument(help: "The activity's id, as 'handoff list' shows it.") var id: String?
    @Flag(help: "Continue the most recent activity offered nearby.") var latest = false

    func validate() throws {
        if id == nil && !latest { throw ValidationError("name an activity's id, or give --latest") }
        if id != nil && latest { throw ValidationError("give an id or --latest, not both") }
        if let id, ActivityID.canonical(id) == nil { throw ValidationError("'\(id)' is not an activity id (a UUID, as 'handoff list' shows it)") }
    }

    func run() async throws {
        // The same call and report as the quick front's (`handoff continue` in its plain forms).
        QuickContinue(activity: id.flatMap(ActivityID.canonical), json: output.json, socket: connection.path).run()
    }
}
