import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

extension Apps {
    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "install", abstract: "Install an app: a directory with Info.plist, its entitlements and the executable.",
            discussion: withExamples([
                ("handoff apps install ~/MapViewer.app", "Install a signed app (or, in development mode, an unsigned one)."),
                ("handoff apps install ~/Notes.app --xcconfig Release.xcconfig", "Install an unsigned app whose Info.plist names $(VARIABLES) that file sets."),
            ]))
        @OptionGroup var connection: Connection
        @OptionGroup var output: Output
        @OptionGroup var build: BuildSettingOptions
        @Argument(help: "The app's directory.") var directory: String

        func run() async throws {
            let client = try connection.connect()
            let absolute = URL(fileURLWithPath: directory, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).standardizedFileURL.path
            let reply = await call(client, .installApp(directory: absolute, settings: build.resolved().values))
            for warning in reply.warnings ?? [] { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
            guard let app = reply.app else { return }
            if output.json { return printJSON(app) }
            let signed = app.signedBy.map { "signed by team \($0)" } ?? "not signed"
            let source = app.teamSource.map { " from \($0)" } ?? ""
            print("Installed \(app.bundleIdentifier) (team \(app.teamIdentifier ?? "none")\(source), \(signed)): \(app.activityTypes.joined(separator: ", "))")
        }
    }
}
