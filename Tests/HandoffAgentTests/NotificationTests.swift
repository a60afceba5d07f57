import Foundation
import HandoffDesktop
import HandoffLocalAPI
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent
import HandoffProcess

let hasDBusDaemon = FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon")

/// A notification server for a test, on a private session bus: it records each notification
/// and presses its "Continue" button at once.
final class FakeNotificationServer: Sendable {
    private let state = State()

    final class State: Sendable {
        let shown = Mutex<[String]>([])
        let connection = Mutex<DBusConnection?>(nil)
    }

    var shown: [String] { state.shown.withLock { $0 } }

    init(address: String) async throws {
        let state = self.state
        let bus = try DBusConnection(address: address, calls: { call in
            guard call.member == "Notify", let server = state.connection.withLock({ $0 }) else { return }
            let summary = call.body.count > 3 ? call.body[3].string ?? "" : ""
            state.shown.withLock { $0.append(summary) }
            var reply = DBusMessage(kind: .methodReturn, destination: call.sender, body: [.uint32(7)])
            reply.replySerial = call.serial
            try? server.send(reply)
            try? server.send(DBusMessage(
                kind: .signal, path: "/org/freedesktop/Notifications", interface: "org.freedesktop.Notifications", member: "ActionInvoked",
                body: [.uint32(7), .string("continue")]))
        })
        state.connection.withLock { $0 = bus }
        _ = try await bus.hello()
        _ = try await bus.call(DBusMessage(
            kind: .methodCall, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "RequestName",
            destination: "org.freedesktop.DBus", body: [.string("org.freedesktop.Notifications"), .uint32(0)]))
    }
}

/// A session bus of a test's own (dbus-daemon, on a socket at `socket`), and its address.
func privateSessionBus(in socket: URL, namespace: String? = nil, services: URL? = nil) async throws -> (ChildProcess, String) {
    let daemon = ChildProcess()
    var arguments = ["--session", "--nofork", "--address=unix:path=\(socket.path)"]
    if let services {
        // A session bus that starts the services of `services` (D-Bus activation) and no others.
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let configuration = socket.deletingLastPathComponent().appendingPathComponent("\(socket.lastPathComponent).conf")
        try Data("""
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig><type>session</type><listen>unix:path=\(socket.path)</listen><servicedir>\(services.path)</servicedir>
            <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
            """.utf8).write(to: configuration)
        arguments = ["--nofork", "--config-file=\(configuration.path)"]
    }
    if let namespace {
        // In the host's network namespace, as the host's session bus is.
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        daemon.arguments = ["ip", "netns", "exec", namespace, "/usr/bin/dbus-daemon"] + arguments
    } else {
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        daemon.arguments = arguments
    }
    daemon.standardOutput = FileHandle.nullDevice
    daemon.standardError = FileHandle.nullDevice
    try daemon.run()
    // The socket's file appears when dbus-daemon binds it, a moment before it listens: a client
    // that connects in between is refused. Wait until a connection is taken.
    let started = await eventually { acceptsConnections(socket.path) }
    try #require(started, "dbus-daemon did not start")
    return (daemon, "unix:path=\(socket.path)")
}

/// Whether something listens on the Unix socket at `path` (a connection is made and closed).
private func acceptsConnections(_ path: String) -> Bool {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    return result == 0
}

@Suite("Desktop notifications", .serialized)
struct NotificationTests {
    @Test("handoff watch --notify: an activity nearby becomes a desktop notification on the session bus, and its Continue button continues it here", .enabled(if: hasDBusDaemon, "needs dbus-daemon for a private session bus; skipped"))
    func continueFromNotification() async throws {
        try await withHarness { harness in
            let (daemon, address) = try await privateSessionBus(in: harness.root.appendingPathComponent("bus"))
            defer { kill(daemon.processIdentifier, SIGKILL) }
            let server = try await FakeNotificationServer(address: address)

            let opened = harness.root.appendingPathComponent("opened.txt")
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") { $0.browserCommand = ["sh", "-c", "printf %s \"$0\" > \(opened.path)"] }
            try await harness.pair([a, b])
            let page = ActivityAnnouncement(id: UUID(), activityType: "com.example.news.reading", title: "An article", teamIdentifier: "NEWSTEAM", hasWebpageURL: true)
            _ = try await a.offer(page, answering: .answer(ActivityRecord(activity: page, webpageURL: "https://news.example.com/1")), seenBy: b)

            let handoff = try #require(builtExecutable("handoff"))
            var environment = ProcessInfo.processInfo.environment
            environment["DBUS_SESSION_BUS_ADDRESS"] = address
            let watch = try RunningCommand(handoff, ["watch", "--notify", "--socket", b.socket], environment: environment)
            #expect(await eventually { server.shown.contains("alpha: An article") }, "notifications: \(server.shown); watch: \(watch.output)")
            #expect(await eventually { (try? String(contentsOf: opened, encoding: .utf8)) == "https://news.example.com/1" }, "watch: \(watch.output)")
        }
    }

    @Test("Without a desktop session, handoff watch --notify says so once and goes on watching")
    func noDesktop() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            let page = ActivityAnnouncement(id: UUID(), activityType: "com.example.news.reading", title: "Quiet", teamIdentifier: "NEWSTEAM")
            _ = try await a.offer(page, answering: .neverAnswer, seenBy: b)
            let handoff = try #require(builtExecutable("handoff"))
            var environment = ProcessInfo.processInfo.environment
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            let watch = try RunningCommand(handoff, ["watch", "--notify", "--socket", b.socket], environment: environment)
            #expect(await eventually { watch.output.contains("offered  alpha: Quiet") }, "\(watch.output)")
            #expect(watch.output.contains("no desktop notifications: no desktop session"))
            #expect(watch.isRunning)
        }
    }
}

extension NotificationTests {
    @Test("The agent itself, with a session bus: an activity appearing nearby becomes a notification, and Continue continues it here", .enabled(if: hasDBusDaemon, "needs dbus-daemon for a private session bus; skipped"))
    func agentNotifies() async throws {
        try await withHarness { harness in
            let (daemon, address) = try await privateSessionBus(in: harness.root.appendingPathComponent("agent-bus"))
            defer { kill(daemon.processIdentifier, SIGKILL) }
            let server = try await FakeNotificationServer(address: address)

            let opened = harness.root.appendingPathComponent("opened.txt")
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") {
                $0.desktopBus = address
                $0.browserCommand = ["sh", "-c", "printf %s \"$0\" > \(opened.path)"]
            }
            try await harness.pair([a, b])
            let page = ActivityAnnouncement(id: UUID(), activityType: "com.example.news.reading", title: "Shown by the agent", teamIdentifier: "NEWSTEAM", hasWebpageURL: true)
            _ = try await a.offer(page, answering: .answer(ActivityRecord(activity: page, webpageURL: "https://news.example.com/2")), seenBy: b)
            #expect(await eventually { server.shown.contains("alpha: Shown by the agent") }, "notifications: \(server.shown)")
            #expect(await eventually { (try? String(contentsOf: opened, encoding: .utf8)) == "https://news.example.com/2" })
        }
    }

    @Test("--notifications on|off: off means none even with a session bus; a wrong value is named")
    func setting() throws {
        var flags = AgentSettings()
        flags.notifications = "off"
        #expect(try AgentConfiguration.resolve(flags: flags, file: nil, environment: ["HOME": "/h", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"]).desktopBus == nil)
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: ["HOME": "/h", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/x"]).desktopBus == "unix:path=/x")
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: ["HOME": "/h"]).desktopBus == nil)
        flags.notifications = "loud"
        #expect(throws: ConfigurationError.self) { try AgentConfiguration.resolve(flags: flags, file: nil, environment: ["HOME": "/h"]) }
    }
}
