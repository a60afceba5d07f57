import Foundation
import HandoffDesktop
import HandoffLocalAPI
import Synchronization

// handoff-session: the graphical session's service: the account's clipboard (docs/clipboard.md), the
// activities of apps that never link Handoff and the tray icon (docs/system-activities.md). It runs
// in the person's graphical session, next to the apps, and talks to the agent over its socket.

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("handoff-session: \(message)\n".utf8))
    exit(2)
}

/// handoff-session's entry, for its program and the programs' shared binary (handoff-programs).
public enum SessionServiceMain {
    @MainActor public static func main() -> Never {
        let environment = ProcessInfo.processInfo.environment
        var arguments = Array(CommandLine.arguments.dropFirst())
        var socket = environment["HANDOFF_SOCKET"] ?? LocalSocket.defaultPath()
        var displayName = environment["DISPLAY"]
        var waylandName = environment["WAYLAND_DISPLAY"]
        var backend = "auto"
        var verbose = false
        var keepPlaying = false
        var tray = true
        let sizeLimit: UInt64 = 256 << 20

        while !arguments.isEmpty {
            let argument = arguments.removeFirst()
            switch argument {
            case "--socket" where !arguments.isEmpty: socket = arguments.removeFirst()
            case "--display" where !arguments.isEmpty: displayName = arguments.removeFirst()
            case "--wayland-display" where !arguments.isEmpty: waylandName = arguments.removeFirst()
            case "--backend" where !arguments.isEmpty:
                backend = arguments.removeFirst()
                guard ["auto", "x11", "wayland", "none"].contains(backend) else { fail("--backend takes auto, x11, wayland or none, not '\(backend)'") }
            case "--verbose": verbose = true
            case "--keep-playing": keepPlaying = true
            case "--no-tray": tray = false
            case "--help", "-h":
                print("""
                    usage: handoff-session [--backend auto|x11|wayland|none] [--display NAME] [--wayland-display NAME]
                                             [--socket PATH] [--keep-playing] [--no-tray] [--verbose]

                    Offers what apps copy in this graphical session to the account's nearby devices, and
                    pastes their copies here when an app asks. On Wayland it needs the compositor's
                    data-control protocol (ext-data-control-v1 or wlr-data-control: sway and other
                    wlroots compositors, KDE Plasma); without it (GNOME) it uses XWayland's clipboard.
                    With no display (or --backend none) it serves no clipboard, and does the rest.

                    It also makes the activities of apps that never link Handoff: the newest document of
                    the recently-used list inside a synced container, and what a media player (MPRIS, on
                    the session bus) plays; and opens those continued here. A player here pauses when its
                    item is continued on another device, unless --keep-playing.

                    While another device offers an activity, a Handoff icon is in the desktop's tray
                    (StatusNotifierItem: KDE Plasma; GNOME with the AppIndicator extension); its menu
                    continues one here. --no-tray leaves the tray alone.
                    Runs until the session or the agent ends.
                    """)
                exit(0)
            default:
                fail("unknown argument '\(argument)'; see --help")
            }
        }

        // One service per agent: a desktop that starts it both from its systemd unit and from
        // the XDG autostart entry gets one. The lock lasts as long as this process.
        let lockFile = open(socket + ".session-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if lockFile >= 0 && flock(lockFile, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK {
            FileHandle.standardError.write(Data("handoff-session: another handoff-session serves the agent at \(socket) already; this one ends\n".utf8))
            exit(0)
        }

        // An app that stops reading a paste midway must not end the service.
        signal(SIGPIPE, SIG_IGN)

        let service = ClipboardService(socket: socket, sizeLimit: sizeLimit, verbose: verbose)

        /// The session's clipboard: Wayland's where the session is Wayland and the compositor lets a
        /// clipboard service in, else X11's (XWayland's, on a Wayland session without data control).
        func openClipboard() throws -> any SessionClipboard {
            let wayland = backend == "wayland" || (backend == "auto" && waylandName != nil)
            guard wayland else { return try X11Clipboard(display: displayName, service: service) }
            do {
                return try WaylandClipboard(display: waylandName, service: service)
            } catch {
                guard backend == "auto", displayName != nil else { throw error }
                FileHandle.standardError.write(Data("handoff-session: \(error); using XWayland's clipboard on \(displayName ?? "")\n".utf8))
                return try X11Clipboard(display: displayName, service: service)
            }
        }

        // The clipboard, where there is a display: without one (a media box, a headless session) the
        // service does the rest.
        var clipboard: (any SessionClipboard)?
        if backend == "none" || (backend == "auto" && displayName == nil && waylandName == nil) {
            do {
                try service.connect(session: nil) { _ in }
            } catch {
                service.exit("\(error)")
            }
            service.log("no clipboard here (\(backend == "none" ? "--backend none" : "no display: DISPLAY and WAYLAND_DISPLAY are unset")); documents, media and the tray still run")
        } else {
            do {
                let opened = try openClipboard()
                clipboard = opened
                try service.connect(session: opened.session) { opened.post(.changed($0)) }
            } catch {
                service.exit("\(error)")
            }
            service.log("watching the clipboard of \(clipboard!.session)")
        }
        // The session bus: media players, and apps started over D-Bus.
        var sessionBus: DBusConnection?
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty {
            do {
                let bus = try DBusConnection(address: address)
                try waitFor { try await bus.hello() }
                // Media and the tray live on it: without it the service starts again (systemd restarts it).
                bus.onClose { service.exit("the session bus closed the connection") }
                sessionBus = bus
            } catch {
                service.log("no session bus: \(error)")
            }
        }
        // Documents as system activities: offered from the recently-used list, opened when continued.
        do {
            let reply = try blockingCall(service.client, .handleSystemActivities(types: [SystemActivityType.document]))
            let documents = Documents(service: service, containers: reply.containers ?? [], bus: sessionBus)
            service.others.withLock { $0 = { documents.handle($0) } }
            documents.start()
            service.log("offering documents of \(reply.containers?.count ?? 0) synced container(s)")
        } catch {
            service.log("documents are not offered or opened: \(error)")
        }
        // Media as system activities, in a session of their own: the agent offers whichever of a
        // document and a media item became current last.
        if let bus = sessionBus {
            do {
                let forward = Forward()
                let client = try LocalClient(
                    path: socket, role: .control, onMessage: { forward($0) }, onClose: { service.exit("the agent closed the connection: \($0)") })
                let reply = try blockingCall(client, .handleSystemActivities(types: [SystemActivityType.media]))
                let media = Media(service: service, client: client, bus: bus, containers: reply.containers ?? [], keepPlaying: keepPlaying, environment: environment)
                forward.to.withLock { $0 = { media.handle($0) } }
                try waitFor { try await media.start() }
                service.log("watching media players on the session bus")
            } catch {
                service.log("media are not offered or played: \(error)")
            }
        } else {
            service.log("media are not offered or played: no session bus (DBUS_SESSION_BUS_ADDRESS)")
        }
        // The tray's icon, in a session of its own that watches what is nearby.
        if tray, let bus = sessionBus {
            do {
                let forward = Forward()
                let client = try LocalClient(
                    path: socket, role: .control, onMessage: { forward($0) }, onClose: { service.exit("the agent closed the connection: \($0)") })
                let icon = Tray(service: service, client: client, bus: bus, environment: environment)
                forward.to.withLock { $0 = { icon.handle($0) } }
                try waitFor { try await icon.start() }
                service.log("the tray shows what is nearby")
            } catch {
                service.log("no tray icon: \(error)")
            }
        }
        if let clipboard { clipboard.run() }
        // No clipboard: the other parts run on their own threads and tasks, until the agent goes.
        dispatchMain()
    }
}

/// Runs `body` and waits for it here (the display's thread has not started yet).
@discardableResult
func waitFor<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    // Waited for just below.
    Task {
        do {
            let value = try await body()
            result.withLock { $0 = .success(value) }
        } catch {
            result.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0 }!.get()
}

/// A call to the agent, waited for here; a failure reply is thrown.
func blockingCall(_ client: LocalClient, _ call: LocalCall) throws -> LocalReply {
    try waitFor {
        let reply = try await client.call(call)
        if let error = reply.error { throw error }
        return reply
    }
}

/// Where a session's messages go once the code that handles them exists.
final class Forward: Sendable {
    let to = Mutex<(@Sendable (LocalMessage) -> Void)?>(nil)
    func callAsFunction(_ message: LocalMessage) { to.withLock { $0 }?(message) }
}
