import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI

extension DeviceCommand {
    struct Invite: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "invite",
            abstract: "Invite a device: prints a one-time code for 'handoff join' on the new device, then asks you to confirm.",
            discussion: withExamples(
                """
                With --token, prints a long one-time token for scripts instead: given to 'handoff join -' on \
                standard input (or with --file) on the new device, it joins with no prompt, so keep it secret and \
                short-lived, and never put it on a command line, where every user of the machine can read it.
                """,
                [
                    ("handoff device invite", "Print 'handoff join CODE', then ask you to compare the number the new device shows."),
                    ("handoff device invite --token --expires 2m", "Print a token that joins without a prompt, valid for two minutes."),
                ]))
        @OptionGroup var connection: Connection
        @Flag(help: "Make a token for scripts: the join needs no confirmation.") var token = false
        @Option(help: ArgumentHelp("The address the new device reaches this one at (default: this device's address on its discovery interface).", valueName: "HOST")) var address: String?
        @Option(help: ArgumentHelp("How long the invitation lasts, such as 10m (at most 24h).", valueName: "DURATION")) var expires: String = "10m"

        func run() async throws {
            guard let seconds = parseDuration(expires) else { throw ValidationError("--expires: '\(expires)' is not a duration such as 90s, 10m or 1h") }
            let client = try connection.connect()
            let made = await call(client, .invite(token: token, host: address, lifetime: seconds))
            guard let invitation = made.invitation else {
                fail(LocalError(.failed, "the agent made no invitation"))
            }
            // On standard error, so that a script reading the token from standard output gets it alone.
            for warning in made.warnings ?? [] { printToStandardError("handoff: note: \(warning)\n") }
            if token {
                print(invitation.code)
                return
            }
            print("On the new device, run:\n\n    handoff join \(invitation.code)\n")
            print("The code works once, until \(DateFormatter.localizedString(from: invitation.expires, dateStyle: .none, timeStyle: .short)). Waiting for the device to ask...")
            fflush(nil)
            let asked = await call(client, .awaitJoin(invitation: invitation.id))
            for warning in asked.warnings ?? [] { print("\nNote: \(warning).") }
            guard let request = asked.joinRequest else { return }
            print("\n'\(request.name)' asks to join. Its screen shows the verification number \(request.verification).")
            print("Does it show \(request.verification)? Type yes to let it in: ", terminator: "")
            fflush(nil)
            let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
            let accept = answer == "yes" || answer == "y"
            let confirmed = await call(client, .confirmJoin(invitation: invitation.id, accept: accept))
            print(accept ? "'\(request.name)' is now in the account." : "Turned '\(request.name)' away.")
            for warning in confirmed.warnings ?? [] { print("Note: \(warning).") }
            if !accept { throw ExitCode(Exit.account) }
        }
    }
}
