import CHandoffWayland
import CHandoffX11
import Foundation
import HandoffLocalAPI
import HandoffProcess
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

/// The display servers a test host's graphical session can have.
enum DesktopKind: String, CustomStringConvertible, Sendable, CaseIterable {
    /// Xvfb, with xclip as the apps that copy and paste.
    case x11
    /// sway with its headless backend (wlroots: wlr-data-control), with wl-copy and wl-paste.
    case wayland

    var description: String { rawValue }

    var programs: [String] {
        switch self {
        case .x11: return ["/usr/bin/Xvfb", "/usr/bin/xclip"]
        case .wayland: return ["/usr/bin/sway", "/usr/bin/wl-copy", "/usr/bin/wl-paste", "/usr/bin/setpriv"]
        }
    }

    var missing: [String] { programs.filter { !FileManager.default.isExecutableFile(atPath: $0) } }
}

/// The unprivileged user a test's Wayland compositor runs as (sway refuses to run as root).
let desktopUser = localUser("handoff-desktop")

/// A graphical session of one test host: a display server of its own, the device's clipboard
/// service on it, and apps that copy and paste; each in the host's network namespace when the
/// test has one.
final class TestDesktop: Sendable {
    let kind: DesktopKind
    /// X: ":N"; Wayland: the compositor's socket (an absolute path, as WAYLAND_DISPLAY may be).
    let display: String
    let namespace: String?
    let server: ChildProcess
    let service: ChildProcess
    let log: URL
    /// The Wayland compositor's runtime folder (its socket's), removed at the end.
    let runtime: URL?
    /// What the service's environment has besides the test's (a session bus's address, XDG folders).
    let extra: [String: String]
    private let apps = Mutex<[ChildProcess]>([])

    init(_ kind: DesktopKind, for device: TestDevice, namespace: String?, service executable: URL, environment extra: [String: String] = [:]) async throws {
        self.kind = kind
        self.namespace = namespace
        self.extra = extra
        log = device.state.appendingPathComponent("clipboard-service.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        server = ChildProcess()
        server.standardOutput = FileHandle.nullDevice
        switch kind {
        case .x11:
            let number = try Self.freeDisplay()
            display = ":\(number)"
            runtime = nil
            Self.command(server, namespace: namespace, "/usr/bin/Xvfb", [display, "-nolisten", "tcp", "-screen", "0", "320x240x24"])
            server.standardError = FileHandle.nullDevice
            try server.run()
            let socket = "/tmp/.X11-unix/X\(number)"
            try #require(await eventually { FileManager.default.fileExists(atPath: socket) }, "Xvfb did not start on \(display)")
        case .wayland:
            let folder = URL(fileURLWithPath: "/tmp/handoff-wayland-\(UUID().uuidString.prefix(8))", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            runtime = folder
            let sway = ["/usr/bin/sway", "-c", "/dev/null"]
            if getuid() == 0 {
                // sway refuses root: it runs as an unprivileged user (setpriv replaces itself
                // with it, so the pid is sway's).
                let user = try desktopUser.get()
                guard chown(folder.path, user.uid, user.gid) == 0 else { throw LocalError(.failed, "cannot give \(folder.path) to the desktop user") }
                Self.command(server, namespace: namespace, "/usr/bin/setpriv", ["--reuid", "\(user.uid)", "--regid", "\(user.gid)", "--clear-groups"] + sway)
            } else {
                Self.command(server, namespace: namespace, sway[0], Array(sway.dropFirst()))
            }
            // Headless, drawing in memory, with no input devices and no configuration.
            server.environment = [
                "PATH": "/usr/bin:/bin", "HOME": folder.path, "XDG_RUNTIME_DIR": folder.path, "WLR_BACKENDS": "headless",
                "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman",
            ]
            let serverLog = device.state.appendingPathComponent("sway.log")
            _ = FileManager.default.createFile(atPath: serverLog.path, contents: nil)
            server.standardError = try FileHandle(forWritingTo: serverLog)
            try server.run()
            func socket() -> String? {
                ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [])
                    .first { $0.hasPrefix("wayland-") && !$0.hasSuffix(".lock") }
                    .map { folder.appendingPathComponent($0).path }
            }
            let started = await eventually { socket() != nil }
            try #require(started, "sway did not start: \((try? String(contentsOf: serverLog, encoding: .utf8)) ?? "")")
            display = socket()!
        }
        service = ChildProcess()
        let backend = kind == .x11 ? ["--backend", "x11", "--display", display] : ["--backend", "wayland", "--wayland-display", display]
        Self.command(service, namespace: namespace, executable.path, ["--socket", device.socket, "--verbose"] + backend)
        service.standardError = try FileHandle(forWritingTo: log)
        if !extra.isEmpty { service.environment = ProcessInfo.processInfo.environment.merging(extra) { $1 } }
        try service.run()
        try #require(await eventually { self.logText.contains("watching the clipboard") }, "the clipboard service did not start: \(logText)")
    }

    /// A display number no X server here uses: free, or left by one that was killed (its lock
    /// names a process that is gone: its socket and lock are removed). Killed servers leave both
    /// behind, and after enough runs every number had a socket (the search never ended).
    static func freeDisplay() throws -> Int {
        for number in (200..<900).shuffled() {
            let lock = "/tmp/.X\(number)-lock", socket = "/tmp/.X11-unix/X\(number)"
            guard FileManager.default.fileExists(atPath: lock) || FileManager.default.fileExists(atPath: socket) else { return number }
            let owner = (try? String(contentsOfFile: lock, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            if let owner, kill(owner, 0) == 0 || errno != ESRCH { continue }
            try? FileManager.default.removeItem(atPath: lock)
            try? FileManager.default.removeItem(atPath: socket)
            return number
        }
        throw LocalError(.failed, "every X display number from 200 to 899 is in use here")
    }

    /// Makes `process` run `executable` inside `namespace` (when there is one).
    static func command(_ process: ChildProcess, namespace: String?, _ executable: String, _ arguments: [String]) {
        if let namespace {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            // `ip netns exec` replaces itself with the program: the pid is the program's.
            process.arguments = ["ip", "netns", "exec", namespace, executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// What an app of this session finds in its environment.
    var environment: [String: String] {
        var environment = ["PATH": "/usr/bin:/bin"]
        switch kind {
        case .x11: environment["DISPLAY"] = display
        case .wayland:
            environment["WAYLAND_DISPLAY"] = display
            environment["XDG_RUNTIME_DIR"] = runtime!.path
        }
        return environment
    }

    /// An app copies `bytes` as `type` (nil: text), and stays the clipboard's owner (as xclip
    /// and `wl-copy --foreground` do) until it is killed or another app copies.
    @discardableResult
    func copy(_ bytes: [UInt8], type: String? = nil) throws -> ChildProcess {
        let app = ChildProcess()
        switch kind {
        case .x11:
            Self.command(app, namespace: namespace, "/usr/bin/xclip", ["-selection", "clipboard", "-i", "-quiet"] + (type.map { ["-t", $0] } ?? []))
        case .wayland:
            Self.command(app, namespace: namespace, "/usr/bin/wl-copy", ["--foreground"] + (type.map { ["--type", $0] } ?? []))
        }
        app.environment = environment
        let input = Pipe()
        app.standardInput = input
        app.standardOutput = FileHandle.nullDevice
        app.standardError = FileHandle.nullDevice
        try app.run()
        apps.withLock { $0.append(app) }
        input.fileHandleForWriting.write(Data(bytes))
        try input.fileHandleForWriting.close()
        return app
    }

    /// An app pastes the clipboard as `type`: what it got, and the app's status.
    func paste(type: String) async throws -> (status: Int32, bytes: [UInt8]) {
        let (program, arguments) =
            kind == .x11
            ? ("/usr/bin/xclip", ["-selection", "clipboard", "-o", "-t", type]) : ("/usr/bin/wl-paste", ["--no-newline", "--type", type])
        let probe = ChildProcess()
        Self.command(probe, namespace: namespace, program, arguments)
        let result = try await runProcess(probe.executableURL!, probe.arguments!, input: [], environment: environment)
        return (result.status, result.output)
    }

    /// An app that takes the clipboard offering text and `hint` (x-kde-passwordManagerHint's
    /// value, nil: none) and answers each read with `text`, or never answers (`text` nil).
    func app(text: String?, hint: String?) throws -> ClipboardApp {
        switch kind {
        case .x11: return try X11App(display: display, text: text, hint: hint)
        case .wayland: return try WaylandApp(display: display, text: text, hint: hint)
        }
    }

    /// Ends the apps, the service and the server: killed (a process Foundation starts from a
    /// test inherits the test's blocked SIGTERM), not waited for here (Foundation reaps them),
    /// so that a test that failed half-way still cleans up from a `defer`.
    func stop() {
        for app in apps.withLock({ $0 }) where app.isRunning { kill(app.processIdentifier, SIGKILL) }
        for process in [service, server] where process.isRunning { kill(process.processIdentifier, SIGKILL) }
        if let runtime { try? FileManager.default.removeItem(at: runtime) }
        // A killed X server leaves its socket and lock behind.
        if kind == .x11 {
            let number = display.dropFirst()
            try? FileManager.default.removeItem(atPath: "/tmp/.X\(number)-lock")
            try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(number)")
        }
    }
}

/// Paired agents named `names`: each host a network namespace of its own where the test may
/// make them (root), else all on this host; `body` gets the devices and their namespaces.
func withHosts(
    _ names: [String] = ["alpha", "beta"], expiry: Duration? = nil, containers: [URL]? = nil,
    _ body: ([TestDevice], [String?]) async throws -> Void
) async throws {
    if canMakeNamespaces {
        let hosts = Array(["a", "b", "c", "d"].prefix(names.count))
        try await Segment.with(hosts: hosts) { segment in
            var devices: [TestDevice] = []
            for (index, (host, name)) in zip(hosts, names).enumerated() {
                var arguments = expiry.map { ["--clipboard-expiry", "\($0.components.seconds)s"] } ?? []
                if let containers { arguments += ["--container", "sync=\(containers[index].path)"] }
                devices.append(try await segment.start(host, name: name, arguments: arguments))
            }
            try await segment.harness.pair(devices)
            try await body(devices, hosts.map { "\(segment.prefix)\($0)" })
        }
    } else {
        try await withHarness { harness in
            var devices: [TestDevice] = []
            for (index, name) in names.enumerated() {
                devices.append(try await harness.start(name) { configuration in
                    if let expiry { configuration.clipboardLifetime = expiry }
                    if let containers { configuration.containers = [ContainerFolder(identifier: "sync", folder: containers[index])] }
                })
            }
            try await harness.pair(devices)
            try await body(devices, names.map { _ in nil })
        }
    }
}

/// `withHosts`, each host with a graphical session of `kind` and its clipboard service. Skipped,
/// saying so, where the display server or apps are not installed.
func withDesktops(
    _ kind: DesktopKind, _ names: [String] = ["alpha", "beta"], expiry: Duration? = nil, containers: [URL]? = nil,
    environments: [[String: String]]? = nil, sessionBuses: Bool = false, _ body: ([TestDevice], [TestDesktop]) async throws -> Void
) async throws {
    guard kind.missing.isEmpty else {
        print("skipped: \(kind.missing.joined(separator: ", ")) not installed (.ci/run installs them)")
        return
    }
    let executable = try #require(builtExecutable("handoff-session"), "handoff-session was not built next to the tests")
    try await withHosts(names, expiry: expiry, containers: containers) { devices, namespaces in
        var desktops: [TestDesktop] = []
        var buses: [ChildProcess] = []
        defer {
            desktops.forEach { $0.stop() }
            for bus in buses { kill(bus.processIdentifier, SIGKILL) }
        }
        for (index, (device, namespace)) in zip(devices, namespaces).enumerated() {
            var environment = environments?[index] ?? [:]
            if sessionBuses {
                // The host's own session bus, in its namespace.
                // Its D-Bus activatable services are in `session-bus-services` of the device's state.
                let (bus, address) = try await privateSessionBus(
                    in: device.state.appendingPathComponent("session-bus"), namespace: namespace, services: device.state.appendingPathComponent("session-bus-services"))
                buses.append(bus)
                environment["DBUS_SESSION_BUS_ADDRESS"] = address
            }
            desktops.append(try await TestDesktop(kind, for: device, namespace: namespace, service: executable, environment: environment))
        }
        try await body(devices, desktops)
    }
}

@Suite("The clipboard of graphical sessions, with real display servers and apps", .serialized)
struct ClipboardDesktopTests {
    static let text = "text/plain;charset=utf-8"

    @Test(
        "Text and a picture copied in an app on alpha are pasted by an app on beta: fetched when pasted, whole, also after the copying app quit; a copy on beta then wins on alpha",
        arguments: DesktopKind.allCases)
    func copyInOneSessionPasteInAnother(_ kind: DesktopKind) async throws {
        try await withDesktops(kind) { devices, desktops in
            let (a, b, onA, onB) = (devices[0], devices[1], desktops[0], desktops[1])
            let words = Array("hello from alpha's session".utf8)
            try onA.copy(words)
            #expect(
                await eventually { (try? await b.clipboard())?.types.first == LocalClipboardType(name: Self.text, size: UInt64(words.count)) },
                "alpha's service: \(onA.logText)")
            #expect(await eventually { onB.logText.contains("holding the clipboard copied on 'alpha'") }, "beta's service: \(onB.logText)")
            for type in [Self.text, "UTF8_STRING", "text/plain"] {
                let pasted = try await onB.paste(type: type)
                #expect(pasted.status == 0)
                #expect(pasted.bytes == words, "\(type); beta's service: \(onB.logText)")
            }
            // Text as the older X targets: STRING in Latin-1 (ICCCM), TEXT as UTF-8.
            try onA.copy(Array("café ✓".utf8))
            #expect(await eventually { (try? await b.clipboard())?.types.first?.size == UInt64("café ✓".utf8.count) })
            #expect(await eventually { onB.logText.components(separatedBy: "holding the clipboard copied on 'alpha'").count == 3 })
            #expect(try await onB.paste(type: "STRING").bytes == [0x63, 0x61, 0x66, 0xE9, 0x20, 0x3F])
            #expect(try await onB.paste(type: "TEXT").bytes == Array("café ✓".utf8))

            // A picture larger than one X request (INCR both ways) and than a pipe's buffer.
            let picture = testPicture(700_000)
            let app = try onA.copy(picture, type: "image/png")
            #expect(
                await eventually { (try? await b.clipboard())?.types.contains(LocalClipboardType(name: "image/png", size: UInt64(picture.count))) == true },
                "alpha's service: \(onA.logText)")
            // The copying app is gone (killed): the snapshot taken at the copy still answers.
            kill(app.processIdentifier, SIGKILL)
            #expect(await eventually { onA.logText.contains("stays offered until it expires") }, "alpha's service: \(onA.logText)")
            #expect(await eventually { onB.logText.components(separatedBy: "holding the clipboard copied on 'alpha'").count == 4 })
            let image = try await onB.paste(type: "image/png")
            #expect(image.status == 0)
            #expect(image.bytes.count == picture.count)
            #expect(image.bytes == picture)

            // A copy on beta is the newest: alpha's session pastes it.
            try onB.copy(Array("from beta".utf8))
            #expect(await eventually { (try? await a.clipboard())?.deviceName == "beta" })
            #expect(await eventually { onA.logText.contains("holding the clipboard copied on 'beta'") }, "alpha's service: \(onA.logText)")
            #expect(try await onA.paste(type: "UTF8_STRING").bytes == Array("from beta".utf8))
        }
    }

    @Test("A copying app that never answers offers nothing: the other device's paste ends empty within a second or so, and nothing hangs", arguments: DesktopKind.allCases)
    func appThatNeverAnswers(_ kind: DesktopKind) async throws {
        try await withDesktops(kind) { devices, desktops in
            let (b, onA, onB) = (devices[1], desktops[0], desktops[1])
            try onA.copy(Array("first".utf8))
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let hung = try onA.app(text: nil, hint: nil)
            defer { hung.stop() }
            #expect(await eventually(within: .seconds(5)) { (try? await b.clipboard()) == nil }, "alpha's service: \(onA.logText)")
            #expect(onA.logText.contains("within 1000 ms"), "alpha's service: \(onA.logText)")
            let started = ContinuousClock.now
            let pasted = try await onB.paste(type: "UTF8_STRING")
            #expect(pasted.bytes.isEmpty)
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    @Test(
        "S14: A copy a password manager marks secret (x-kde-passwordManagerHint: secret, as KeePassXC and KDE's do) is never offered: the other device shows nothing and its paste gets nothing",
        arguments: DesktopKind.allCases)
    func secretNeverLeaves(_ kind: DesktopKind) async throws {
        try await withDesktops(kind) { devices, desktops in
            let (b, onA, onB) = (devices[1], desktops[0], desktops[1])
            try onA.copy(Array("an ordinary copy".utf8))
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let manager = try onA.app(text: "hunter2-correct-horse", hint: "secret")
            defer { manager.stop() }
            #expect(await eventually { onA.logText.contains("marked secret") }, "alpha's service: \(onA.logText)")
            #expect(await eventually { (try? await b.clipboard()) == nil })
            #expect(try await b.paste().bytes.isEmpty)
            #expect(try await onB.paste(type: "UTF8_STRING").bytes.isEmpty)
            #expect(!manager.asked.contains { $0 != "TARGETS" && $0 != ClipboardTypesForTests.kdeHint }, "the password was read: \(manager.asked)")
            // The hint with another value is an ordinary copy.
            let notSecret = try onA.app(text: "not a password", hint: "no")
            defer { notSecret.stop() }
            #expect(await eventually { (try? await b.clipboard())?.types.first?.size == UInt64("not a password".utf8.count) }, "alpha's service: \(onA.logText)")
        }
    }

    @Test(
        "S14: A secret copied on beta after alpha's copy stays beta's clipboard: beta's service does not take alpha's older copy back for it, though the agent offers that again",
        arguments: DesktopKind.allCases)
    func olderCopyNeverReplacesALaterSecret(_ kind: DesktopKind) async throws {
        try await withDesktops(kind) { devices, desktops in
            let (b, onA, onB) = (devices[1], desktops[0], desktops[1])
            try onA.copy(Array("from alpha".utf8))
            #expect(await eventually { onB.logText.contains("holding the clipboard copied on 'alpha'") }, "beta's service: \(onB.logText)")
            try onB.copy(Array("from beta".utf8))
            #expect(await eventually { (try? await b.clipboard())?.local == true }, "beta's service: \(onB.logText)")
            // The password manager on beta copies: beta's copy is withdrawn, nothing is offered,
            // and alpha's copy, older, is again the account's newest on beta.
            let manager = try onB.app(text: "hunter2-correct-horse", hint: "secret")
            defer { manager.stop() }
            #expect(await eventually { onB.logText.contains("marked secret") }, "beta's service: \(onB.logText)")
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            #expect(await eventually { onB.logText.contains("not holding the copy made on 'alpha': an app here copied since") }, "beta's service: \(onB.logText)")
            // An app on beta pasting gets the password manager's copy, from the password manager.
            #expect(try await onB.paste(type: "UTF8_STRING").bytes == Array("hunter2-correct-horse".utf8), "beta's service: \(onB.logText)")
        }
    }

    @Test("Across three devices the newest copy wins everywhere, whichever device made it", arguments: DesktopKind.allCases)
    func newestWinsAcrossThree(_ kind: DesktopKind) async throws {
        try await withDesktops(kind, ["alpha", "beta", "gamma"]) { devices, desktops in
            for (index, copier) in [0, 1, 2, 0].enumerated() {
                let words = Array("copy \(index) on \(devices[copier].name)".utf8)
                try desktops[copier].copy(words)
                for (device, desktop) in zip(devices, desktops) where device.name != devices[copier].name {
                    #expect(
                        await eventually { (try? await device.clipboard())?.types.first?.size == UInt64(words.count) },
                        "\(device.name) did not show copy \(index): \(desktop.logText)")
                    #expect(await eventually { (try? await desktop.paste(type: Self.text))?.bytes == words }, "\(device.name)'s service: \(desktop.logText)")
                }
            }
        }
    }

    @Test(
        "Files copied in a file manager on alpha paste in one on beta as beta's paths: the synced document as beta's own, the picture fetched whole",
        arguments: DesktopKind.allCases)
    func copiedFiles(_ kind: DesktopKind) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("desktop-files-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let files = try SyncedFiles(root: root)
        try await withDesktops(kind, containers: [files.onA, files.onB]) { devices, desktops in
            let (b, onA, onB) = (devices[1], desktops[0], desktops[1])
            // Nautilus offers both lists; xclip and wl-copy one type each: the URI list here.
            try onA.copy(files.list, type: ClipboardFiles.uriList)
            // (wl-copy offers the list as text too, as file managers do.)
            #expect(await eventually { (try? await b.clipboard())?.types.contains { $0.name == ClipboardFiles.uriList } == true }, "alpha's service: \(onA.logText)")
            #expect(await eventually { onB.logText.contains("holding the clipboard copied on 'alpha'") }, "beta's service: \(onB.logText)")
            let pasted = try await onB.paste(type: ClipboardFiles.uriList)
            #expect(pasted.status == 0, "beta's service: \(onB.logText)")
            try files.checkPasted(pasted.bytes, type: ClipboardFiles.uriList, on: b)
        }
    }

    @Test("An offer expires: after its lifetime the other device's session no longer holds it and its apps paste nothing", arguments: DesktopKind.allCases)
    func offersExpire(_ kind: DesktopKind) async throws {
        try await withDesktops(kind, expiry: .seconds(3)) { devices, desktops in
            let (b, onA, onB) = (devices[1], desktops[0], desktops[1])
            let words = Array("gone in three seconds".utf8)
            try onA.copy(words)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" }, "alpha's service: \(onA.logText)")
            #expect(await eventually { (try? await onB.paste(type: Self.text))?.bytes == words }, "beta's service: \(onB.logText)")
            #expect(await eventually(within: .seconds(8)) { (try? await b.clipboard()) == nil })
            #expect(await eventually { (try? await onB.paste(type: Self.text))?.bytes.isEmpty == true }, "beta's service: \(onB.logText)")
            #expect(try await b.paste().bytes.isEmpty)
        }
    }
}

/// A deterministic picture's bytes: no run of them repeats.
func testPicture(_ size: Int) -> [UInt8] {
    var picture = [UInt8](repeating: 0, count: size)
    for index in picture.indices { picture[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 11) }
    return picture
}

enum ClipboardTypesForTests {
    static let kdeHint = "x-kde-passwordManagerHint"
}

/// An app of a test's own that takes the clipboard, answering on a thread of its own until
/// stopped; `asked` lists the types read from it.
class ClipboardApp: @unchecked Sendable {
    let stopped = Mutex(false)
    let requests = Mutex<[String]>([])
    let done = DispatchSemaphore(value: 0)

    var asked: [String] { requests.withLock { $0 } }
    var running: Bool { !stopped.withLock { $0 } }

    /// Ends the thread, then the connection (`close`).
    func stop() {
        stopped.withLock { $0 = true }
        done.wait()
        close()
    }

    func close() {}
}

/// An X client that copies as `TestDesktop.app` says, answering requests on a thread of its own.
final class X11App: ClipboardApp, @unchecked Sendable {
    nonisolated(unsafe) private let display: OpaquePointer

    init(display name: String, text: String?, hint: String?) throws {
        var error = [CChar](repeating: 0, count: 256)
        guard let opened = hx_open(name, &error, error.count) else { throw AgentError("cannot open \(name)") }
        display = opened
        super.init()
        guard hx_own(opened) == 0 else { throw AgentError("cannot own the clipboard of \(name)") }
        let names = ["TARGETS", "UTF8_STRING"] + (hint == nil ? [] : [ClipboardTypesForTests.kdeHint])
        let atoms = names.map { hx_atom(opened, $0) }
        nonisolated(unsafe) let owner = opened
        Thread.detachNewThread { [self] in
            var event = hx_event()
            while running {
                guard hx_next_event(owner, &event, 100) == 1, UInt32(bitPattern: event.kind) == HX_EVENT_REQUEST.rawValue else { continue }
                let index = atoms.firstIndex(of: event.target)
                requests.withLock { $0.append(index.map { names[$0] } ?? "other") }
                // An app that never answers: the request is left.
                guard let text else { continue }
                switch index {
                case 0?: hx_answer_atoms(owner, [event], atoms, Int32(atoms.count))
                case 1?: _ = Array(text.utf8).withUnsafeBufferPointer { hx_answer(owner, [event], event.target, $0.baseAddress, $0.count, 1000) }
                case 2?: _ = Array((hint ?? "").utf8).withUnsafeBufferPointer { hx_answer(owner, [event], event.target, $0.baseAddress, $0.count, 1000) }
                default: hx_refuse(owner, [event])
                }
            }
            done.signal()
        }
    }

    override func close() { hx_close(display) }
}

/// A Wayland client that copies as `TestDesktop.app` says (through data control, as clipboard
/// managers and wl-copy do), answering reads on a thread of its own.
final class WaylandApp: ClipboardApp, @unchecked Sendable {
    nonisolated(unsafe) private let display: OpaquePointer

    init(display name: String, text: String?, hint: String?) throws {
        var error = [CChar](repeating: 0, count: 256)
        guard let opened = hw_open(name, &error, error.count) else { throw AgentError("cannot connect to \(name): \(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))") }
        display = opened
        super.init()
        let types = ["text/plain;charset=utf-8", "UTF8_STRING"] + (hint == nil ? [] : [ClipboardTypesForTests.kdeHint])
        let owning = withTestCStrings(types) { hw_own(opened, $0, Int32(types.count), 0) }
        guard owning == 0 else { throw AgentError("cannot take the clipboard of \(name)") }
        nonisolated(unsafe) let owner = opened
        Thread.detachNewThread { [self] in
            var event = hw_event(kind: 0, fd: -1, type: nil)
            // An app that never answers keeps each pipe open, unwritten, until it stops.
            var held: [Int32] = []
            while running {
                guard hw_next_event(owner, &event, 100) == 1 else { continue }
                defer { hw_event_clear(&event) }
                guard UInt32(bitPattern: event.kind) == HW_EVENT_SEND.rawValue, let type = event.type.map({ String(cString: $0) }) else { continue }
                requests.withLock { $0.append(type) }
                guard let text else {
                    held.append(event.fd)
                    event.fd = -1
                    continue
                }
                let bytes = Array((type == ClipboardTypesForTests.kdeHint ? hint ?? "" : text).utf8)
                _ = bytes.withUnsafeBytes { write(event.fd, $0.baseAddress, $0.count) }
            }
            held.forEach { Glibc.close($0) }
            done.signal()
        }
    }

    override func close() { hw_close(display) }
}

/// Calls `body` with `strings` as C strings, valid inside it.
func withTestCStrings<Result>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Result) -> Result {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
