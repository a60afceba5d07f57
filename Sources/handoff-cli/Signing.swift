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
        commandName: "team", abstract: "A team's signing key, whose identifier its apps name as their team.", subcommands: [Create.self, Show.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Make a new team key (kept owner-only) and print the team identifier it gives.")
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

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Print the team identifier of a team key.")
        @Option(help: ArgumentHelp("The team key.", valueName: "FILE")) var key: String

        func run() async throws {
            print(readTeamKey(key).teamIdentifier)
        }
    }
}

extension Apps {
    struct Sign: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sign",
            abstract: "Sign an app directory with a team key: every file in it, so that any change after signing is refused at install.")
        @Option(help: ArgumentHelp("The team key ('handoff team create' makes one).", valueName: "FILE")) var key: String
        @Argument(help: "The app's directory.") var directory: String

        func run() async throws {
            let team = readTeamKey(key)
            let url = URL(fileURLWithPath: directory)
            let manifest: AppManifest
            do {
                manifest = try AppManifest(directory: url)
            } catch {
                failWith("\(error)")
            }
            guard manifest.teamIdentifier == team.teamIdentifier else {
                let named = manifest.teamIdentifier.map { "names team '\($0)'" } ?? "names no team"
                failWith(
                    "\(directory): the entitlements \(named), but this key is team '\(team.teamIdentifier)'; set com.apple.developer.team-identifier to '\(team.teamIdentifier)' and sign again")
            }
            do {
                let signature = try AppSignature.sign(url, with: team)
                print("Signed \(manifest.bundleIdentifier) as team \(team.teamIdentifier): \(signature.files.count) files.")
            } catch {
                failWith(error.message)
            }
        }
    }

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "verify", abstract: "Check an app directory's signature, as installing it would.")
        @Argument(help: "The app's directory.") var directory: String

        func run() async throws {
            let team: String
            do {
                team = try AppSignature.verify(URL(fileURLWithPath: directory))
            } catch {
                failWith(error.message)
            }
            let manifest: AppManifest
            do {
                manifest = try AppManifest(directory: URL(fileURLWithPath: directory))
            } catch {
                failWith("\(error)")
            }
            guard manifest.teamIdentifier == team else {
                failWith("\(directory): signed by team '\(team)', but its entitlements name \(manifest.teamIdentifier.map { "team '\($0)'" } ?? "no team")")
            }
            print("\(directory): \(manifest.bundleIdentifier), signed by team \(team); every file matches.")
        }
    }
}
