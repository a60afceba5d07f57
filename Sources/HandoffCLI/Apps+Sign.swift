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
            abstract: "Sign an app directory with a team key: every file in it, so that any change after signing is refused at install.",
            discussion: withExamples(
                """
                Build settings given with --setting and --xcconfig (the values Xcode would put in the \
                Info.plist's and entitlements' $(VARIABLES)) are written to the directory's \
                Handoff.xcconfig, which the signature covers; without them, the file the directory \
                has (if any) is kept.
                """,
                [
                    ("handoff apps sign ~/MapViewer.app --key ~/team.key", "Sign MapViewer with the team key whose identifier its entitlements name."),
                    ("handoff apps sign ~/Notes.app --key ~/team.key --xcconfig Release.xcconfig", "Sign with the build settings the Info.plist's $(VARIABLES) need."),
                ]))
        @Option(help: ArgumentHelp("The team key ('handoff team create' makes one).", valueName: "FILE")) var key: String
        @OptionGroup var build: BuildSettingOptions
        @Argument(help: "The app's directory.") var directory: String

        func run() async throws {
            let team = readTeamKey(key)
            let url = URL(fileURLWithPath: directory)
            let settingsFile = url.appendingPathComponent(AppManifest.buildSettingsFile)
            let previous = try? Data(contentsOf: settingsFile)
            if !build.isEmpty {
                let settings = build.resolved()
                do {
                    try Data(settings.xcconfigText(header: "Build settings the app's Info.plist and entitlements are expanded with (handoff apps sign).").utf8)
                        .write(to: settingsFile)
                } catch {
                    failWith("could not write \(settingsFile.path): \(error.localizedDescription)")
                }
            }
            // What the directory was before this command, when it cannot be signed.
            func restore() {
                guard !build.isEmpty else { return }
                if let previous { try? previous.write(to: settingsFile) } else { try? FileManager.default.removeItem(at: settingsFile) }
            }
            let manifest: AppManifest
            do {
                manifest = try AppManifest(directory: url)
            } catch {
                restore()
                failWith("\(error)")
            }
            printWarnings(manifest)
            guard manifest.teamIdentifier == team.teamIdentifier else {
                restore()
                guard let named = manifest.teamIdentifier else {
                    failWith(
                        "\(directory): the app names no team, but this key is team '\(team.teamIdentifier)'; set com.apple.developer.team-identifier to '\(team.teamIdentifier)' in its entitlements, or give --setting DEVELOPMENT_TEAM=\(team.teamIdentifier), and sign again")
                }
                let source = manifest.teamSource.map { " (from \($0))" } ?? ""
                failWith(
                    "\(directory): the app names team '\(named)'\(source), but this key is team '\(team.teamIdentifier)'; set com.apple.developer.team-identifier to '\(team.teamIdentifier)' and sign again")
            }
            do {
                let signature = try AppSignature.sign(url, with: team)
                let source = manifest.teamSource.map { " (the team from \($0))" } ?? ""
                print("Signed \(manifest.bundleIdentifier) as team \(team.teamIdentifier)\(source): \(signature.files.count) files.")
            } catch {
                restore()
                failWith(error.message)
            }
        }
    }
}
