import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffApp
import HandoffSigning
import HandoffWire

extension TeamCommand {
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Make a new team key (kept owner-only) and print the team identifier it gives.",
            discussion: withExamples([
                ("handoff team create --key ~/team.key", "Make a team key; its identifier goes into your apps' entitlements."),
            ]))
        @Option(help: ArgumentHelp("Where to write the key; an existing file is never replaced.", valueName: "FILE")) var key: String

        func run() async throws {
            guard !FileManager.default.fileExists(atPath: key) else {
                failWith("\(key) exists; a team key is never replaced (the apps it signed would lose their team)")
            }
            let team = TeamKey.generate()
            // Made owner-only from the start, and never over a file that appeared meanwhile.
            let fd = open(key, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
            guard fd >= 0 else { failWith("cannot create \(key): \(String(cString: strerror(errno)))") }
            let bytes = Array(team.pemRepresentation.utf8)
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            close(fd)
            guard written == bytes.count else { failWith("cannot write \(key)") }
            print("Team \(team.teamIdentifier): its key is in \(key). Keep it secret; set com.apple.developer.team-identifier to \(team.teamIdentifier) in your apps' entitlements.")
        }
    }
}
