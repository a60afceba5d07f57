import ArgumentParser
import Foundation
import HandoffCommandLine

struct BrowserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browser", abstract: "Connect your web browsers to Handoff (the extension in Extensions/Browser).",
        subcommands: [BrowserInstall.self])
}
