import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffApp
import HandoffSigning
import HandoffWire

/// Reads a team key file, or exits saying why.
func readTeamKey(_ path: String) -> TeamKey {
    let text: String
    do {
        text = try String(contentsOfFile: path, encoding: .utf8)
    } catch {
        failWith("cannot read the team key \(path): \(error.localizedDescription) ('handoff team create --key \(path)' makes one)")
    }
    do {
        return try TeamKey(pemRepresentation: text, file: path)
    } catch {
        failWith(error.message)
    }
}

func failWith(_ message: String, code: Int32 = Exit.failed) -> Never {
    FileHandle.standardError.write(Data("handoff: \(message)\n".utf8))
    exit(code)
}

struct TeamCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "team", abstract: "A team's signing key, whose identifier its apps name as their team.",
        discussion: withExamples([
                ("handoff team create --key ~/team.key", "Make a team key."),
                ("handoff team show --key ~/team.key", "Print its identifier."),
            ]),
        subcommands: [Create.self, Show.self])
}
