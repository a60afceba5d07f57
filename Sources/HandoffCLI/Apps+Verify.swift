import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffApp
import HandoffSigning
import HandoffWire

extension Apps {
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "verify", abstract: "Check an app directory's signature, as installing it would.",
            discussion: withExamples([
                ("handoff apps verify ~/MapViewer.app", "Say whether the folder is signed, by which team, and whether anything changed since."),
            ]))
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
            printWarnings(manifest)
            let source = manifest.teamSource.map { " (from \($0))" } ?? ""
            guard manifest.teamIdentifier == team else {
                failWith("\(directory): signed by team '\(team)', but the app names \(manifest.teamIdentifier.map { "team '\($0)'\(source)" } ?? "no team")")
            }
            print("\(directory): \(manifest.bundleIdentifier), signed by team \(team)\(source); every file matches.")
        }
    }
}
