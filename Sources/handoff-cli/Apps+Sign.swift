import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffApp
import HandoffSigning
import HandoffWire

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
}
