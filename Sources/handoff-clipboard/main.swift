import Foundation
import HandoffLocalAPI
import Synchronization

// handoff-clipboard: the session service of the account's clipboard (docs/clipboard.md). It runs
// in the person's graphical session, next to the apps, and talks to the agent over its socket.

let environment = ProcessInfo.processInfo.environment
var arguments = Array(CommandLine.arguments.dropFirst())
var socket = environment["HANDOFF_SOCKET"] ?? LocalSocket.defaultPath()
var displayName = environment["DISPLAY"]
var waylandName = environment["WAYLAND_DISPLAY"]
var backend = "auto"
var verbose = false
let sizeLimit: UInt64 = 256 << 20

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("handoff-clipboard: \(message)\n".utf8))
    exit(2)
}

while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--socket" where !arguments.isEmpty: socket = arguments.removeFirst()
    case "--display" where !arguments.isEmpty: displayName = arguments.removeFirst()
    case "--wayland-display" where !arguments.isEmpty: waylandName = arguments.removeFirst()
    case "--backend" where !arguments.isEmpty:
        backend = arguments.removeFirst()
        guard ["auto", "x11", "wayland"].contains(backend) else { fail("--backend takes auto, x11 or wayland, not '\(backend)'") }
    case "--verbose": verbose = true
    case "--help", "-h":
        print("""
            usage: handoff-clipboard [--backend auto|x11|wayland] [--display NAME] [--wayland-display NAME]
                                     [--socket PATH] [--verbose]

            Offers what apps copy in this graphical session to the account's nearby devices, and
            pastes their copies here when an app asks. On Wayland it needs the compositor's
            data-control protocol (ext-data-control-v1 or wlr-data-control: sway and other
            wlroots compositors, KDE Plasma); without it (GNOME) it uses XWayland's clipboard.
            Runs until the session or the agent ends.
            """)
        exit(0)
    default:
        fail("unknown argument '\(argument)'; see --help")
    }
}

// An app that stops reading a paste midway must not end the service.
signal(SIGPIPE, SIG_IGN)

let service = ClipboardService(socket: socket, sizeLimit: sizeLimit, verbose: verbose)

/// A call to the agent, waited for here (the display's thread has not started yet).
func blockingCall(_ client: LocalClient, _ call: LocalCall) throws -> LocalReply {
    let result = Mutex<Result<LocalReply, LocalError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    // Waited for just below.
    Task {
        do throws(LocalError) {
            let reply = try await client.call(call)
            result.withLock { $0 = reply.error.map { .failure($0) } ?? .success(reply) }
        } catch {
            result.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0 }!.get()
}

/// The session's clipboard: Wayland's where the session is Wayland and the compositor lets a
/// clipboard service in, else X11's (XWayland's, on a Wayland session without data control).
@MainActor func openClipboard() throws -> any SessionClipboard {
    let wayland = backend == "wayland" || (backend == "auto" && waylandName != nil)
    guard wayland else { return try X11Clipboard(display: displayName, service: service) }
    do {
        return try WaylandClipboard(display: waylandName, service: service)
    } catch {
        guard backend == "auto", displayName != nil else { throw error }
        FileHandle.standardError.write(Data("handoff-clipboard: \(error); using XWayland's clipboard on \(displayName ?? "")\n".utf8))
        return try X11Clipboard(display: displayName, service: service)
    }
}

let clipboard: any SessionClipboard
do {
    clipboard = try openClipboard()
    try service.connect(session: clipboard.session) { clipboard.post(.changed($0)) }
} catch {
    service.exit("\(error)")
}
service.log("watching the clipboard of \(clipboard.session)")
// Documents as system activities: offered from the recently-used list, opened when continued.
do {
    let reply = try blockingCall(service.client, .handleSystemActivities(types: [SystemActivityType.document]))
    let documents = Documents(service: service, containers: reply.containers ?? [])
    service.others.withLock { $0 = { documents.handle($0) } }
    documents.start()
    service.log("offering documents of \(reply.containers?.count ?? 0) synced container(s)")
} catch {
    service.log("documents are not offered or opened: \(error)")
}
clipboard.run()
