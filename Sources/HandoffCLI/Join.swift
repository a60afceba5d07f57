import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI

struct Join: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "join", abstract: "Join the account of another device with the code 'handoff device invite' printed there.",
        discussion: withExamples([
                ("handoff join 6Q0A-G08M-0K8G-R6RD-AH6K-8XGN", "Join with the code the other device printed; compare the number both show, and confirm there."),
            ]))
    @OptionGroup var connection: Connection
    @Argument(help: "The invitation code or token.") var code: String

    func run() async throws {
        let client = try connection.connect()
        let started = await call(client, .join(code: code))
        if let verification = started.verification {
            print("Verification number: \(verification)")
            print("Check that the inviting device shows the same number, and confirm there. Waiting...")
            fflush(nil)
        }
        guard let account = await call(client, .awaitJoinResult).account else { return }
        print("Joined the account '\(account)'. 'handoff devices' lists its members.")
    }
}
