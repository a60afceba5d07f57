import ArgumentParser
import Foundation
import HandoffCommandLine

struct BrowserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browser", abstract: "Connect your web browsers to Handoff (the extension in Extensions/Browser).",
        discussion: withExamples([
                ("handoff browser install", "Let every supported browser of yours start the native host."),
            ]),
        subcommands: [BrowserInstall.self])
}
