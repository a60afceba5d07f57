import Foundation
import HandoffLocalAPI

// handoff-clipboard: the session service of the account's clipboard (docs/clipboard.md). It runs
// in the person's graphical session, next to the apps, and talks to the agent over its socket.

var arguments = Array(CommandLine.arguments.dropFirst())
var socket = ProcessInfo.processInfo.environment["HANDOFF_SOCKET"] ?? LocalSocket.defaultPath()
var displayName = ProcessInfo.processInfo.environment["DISPLAY"]
var verbose = false
var sizeLimit: UInt64 = 256 << 20
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--socket" where !arguments.isEmpty: socket = arguments.removeFirst()
    case "--display" where !arguments.isEmpty: displayName = arguments.removeFirst()
    case "--verbose": verbose = true
    case "--help", "-h":
        print("""
            usage: handoff-clipboard [--socket PATH] [--display NAME] [--verbose]

            Offers what apps copy in this X session to the account's nearby devices, and pastes
            their copies here when an app asks. Runs until the session or the agent ends.
            """)
        exit(0)
    default:
        FileHandle.standardError.write(Data("handoff-clipboard: unknown argument '\(argument)'; see --help\n".utf8))
        exit(2)
    }
}

let service = ClipboardService(socket: socket, sizeLimit: sizeLimit, verbose: verbose)
let clipboard: X11Clipboard
do {
    clipboard = try X11Clipboard(display: displayName, service: service)
    try service.connect { clipboard.post(.changed($0)) }
} catch {
    service.exit("\(error)")
}
service.log("watching the clipboard of \(displayName ?? "the display")")
clipboard.run()
