import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffTesting
import Synchronization
import Testing

@testable import HandoffAgent

/// A tray for a test: the StatusNotifierWatcher of a session bus, as KDE Plasma's (or GNOME's
/// AppIndicator extension) is; it records the items that register, and reads and drives them
/// over the bus as a tray does.
final class TestWatcher: Sendable {
    let bus: DBusConnection
    private let items = Mutex<[String]>([])

    var registered: [String] { items.withLock { $0 } }

    init(address: String) async throws {
        bus = try DBusConnection(address: address)
        bus.onCall { [self] call in
            guard call.member == "RegisterStatusNotifierItem", let service = call.body.first?.string else {
                try? bus.send(.error(to: call, "org.freedesktop.DBus.Error.UnknownMethod", "not here"))
                return
            }
            items.withLock { $0.append(service) }
            try? bus.send(.reply(to: call))
        }
        try await bus.hello()
        try #require(try await bus.requestName("org.kde.StatusNotifierWatcher"))
    }

    /// Whether `item` still owns its name (a tray drops an item whose name went).
    func isOnBus(_ item: String) async -> Bool { (try? await bus.listNames().contains(item)) ?? false }

    func properties(of item: String) async throws -> [String: DBusValue] {
        try await bus.properties(of: "org.kde.StatusNotifierItem", at: "/StatusNotifierItem", on: item, timeout: .seconds(5))
    }

    /// The item's menu: each entry's id and properties, as `GetLayout` gives them.
    func menu(of item: String) async throws -> [(id: Int32, properties: [String: DBusValue])] {
        let path = try #require(try await properties(of: item)["Menu"]?.string)
        let reply = try await bus.call(DBusMessage(
            kind: .methodCall, path: path, interface: "com.canonical.dbusmenu", member: "GetLayout", destination: item,
            body: [.int32(0), .int32(-1), .strings([])]))
        guard reply.body.count == 2, case .structure(let root) = reply.body[1], root.count == 3, let children = root[2].elements else {
            throw DBusError("GetLayout answered \(reply.body)")
        }
        return children.compactMap { child in
            guard case .structure(let fields) = child.unwrapped, fields.count == 3, let id = fields[0].integer, let properties = fields[1].dictionary else { return nil }
            return (Int32(id), properties)
        }
    }

    /// Chooses a menu entry, as a click in the tray's menu does.
    func click(_ id: Int32, of item: String) async throws {
        _ = try await bus.call(DBusMessage(
            kind: .methodCall, path: "/MenuBar", interface: "com.canonical.dbusmenu", member: "Event", destination: item,
            body: [.int32(id), .string("clicked"), .variant(.int32(0)), .uint32(0)]))
    }
}

@Suite("The desktop's Handoff icon: a StatusNotifierItem with the activities nearby in its menu", .serialized)
struct TrayTests {
    @Test(
        "Nothing is in the tray while nothing is nearby; alpha's document appears in beta's tray with its icon and 'alpha: title' in the menu; choosing it opens it on beta; when alpha withdraws it, the item goes",
        .enabled(if: hasDBusDaemon && DesktopKind.x11.missing.isEmpty, "needs dbus-daemon and Xvfb; skipped"))
    func trayShowsAndContinues() async throws {
        let setup = try DocumentHosts()
        defer { setup.remove() }
        let (onA, onB, opened) = (setup.onA, setup.onB, setup.opened)
        for folder in [onA, onB] { try Data("the plan".utf8).write(to: folder.appendingPathComponent("plan_three.txt")) }
        try await withDesktops(.x11, containers: [onA, onB], environments: setup.environments, sessionBuses: true) { devices, desktops in
            let (a, b, onBeta) = (devices[0], devices[1], desktops[1])
            #expect(await eventually { onBeta.logText.contains("the tray shows what is nearby") }, "beta's service: \(onBeta.logText)")
            // The tray starts after the service, as a panel may.
            let tray = try await TestWatcher(address: onBeta.busAddress)
            // A moment in which an item, were one shown, would register with the new tray.
            try await Task.sleep(for: .milliseconds(300))
            #expect(tray.registered.isEmpty, "an item registered with nothing nearby")
            #expect(try await tray.bus.listNames().allSatisfy { !$0.hasPrefix("org.kde.StatusNotifierItem-") })

            let document = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "plan_three.txt")
            let userInfo = try UserInfoCoding.encode(UserInfoValue.dictionary([
                .string("url"): .url(onA.appendingPathComponent("plan_three.txt")), .string("mimeType"): .string("text/plain"),
                .string("application"): .string("org.example.Notes"),
            ]))
            let publisher = try await a.offer(document, answering: .answer(ActivityRecord(activity: document, userInfo: userInfo)), seenBy: b)
            #expect(await eventually { !tray.registered.isEmpty }, "beta's service: \(onBeta.logText)")
            let item = try #require(tray.registered.first)
            let properties = try await tray.properties(of: item)
            #expect(properties["Status"]?.string == "Active")
            #expect(properties["IconName"]?.string == "x-office-document")
            #expect(properties["ItemIsMenu"]?.boolean == true)
            let menu = try await tray.menu(of: item)
            #expect(menu.count == 1)
            let entry = try #require(menu.first)
            // The label's underscore is doubled: dbusmenu takes a single one as a mnemonic.
            #expect(entry.properties["label"]?.string == "alpha: plan__three.txt")
            #expect(entry.properties["enabled"]?.boolean == true)

            try await tray.click(entry.id, of: item)
            let expected = onB.appendingPathComponent("plan_three.txt").resolvingSymlinksInPath().path
            #expect(
                await eventually { (try? String(contentsOf: opened, encoding: .utf8)) == "--open\n\(expected)\n" },
                "opened: \((try? String(contentsOf: opened, encoding: .utf8)) ?? "nothing"); beta's service: \(onBeta.logText)")

            try publisher.client.send(.invalidated(activity: document.id))
            #expect(await eventually { await !tray.isOnBus(item) }, "beta's service: \(onBeta.logText)")
        }
    }
}

@Suite("D-Bus calls on a real bus: each has a deadline, and one timer serves them all")
struct DBusConnectionTests {
    @Test(
        "A call nobody answers fails at its deadline saying who did not answer; calls answered meanwhile are not disturbed",
        .enabled(if: hasDBusDaemon, "needs dbus-daemon; skipped"))
    func deadlines() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("dbus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (daemon, address) = try await privateSessionBus(in: folder.appendingPathComponent("bus"))
        defer { kill(daemon.processIdentifier, SIGKILL) }
        // A program on the bus that takes calls and never answers them.
        let silent = try DBusConnection(address: address, calls: { _ in })
        try await silent.hello()
        #expect(try await silent.requestName("org.example.Silent"))
        let caller = try DBusConnection(address: address)
        try await caller.hello()
        let clock = ContinuousClock()
        let started = clock.now
        async let unanswered: DBusMessage = caller.call(
            DBusMessage(kind: .methodCall, path: "/", interface: "org.example.Silent", member: "Wait", destination: "org.example.Silent"), timeout: .milliseconds(400))
        // Answered calls with longer deadlines, in between: theirs must not fire later.
        for _ in 0..<20 { _ = try await caller.listNames() }
        do {
            _ = try await unanswered
            Issue.record("a call nobody answered returned")
        } catch let error as DBusError {
            #expect(error.name == "org.freedesktop.DBus.Error.NoReply")
            #expect(error.message.contains("org.example.Silent did not answer Wait"), "\(error)")
        }
        // Ours, not the bus's own NoReply (after 25 s): its message names the call; on a machine
        // busy with the whole suite the 400 ms were seen to take 9 s.
        let waited = clock.now - started
        #expect(waited >= .milliseconds(400) && waited < .seconds(25), "\(waited)")
        // The connection goes on.
        #expect(try await caller.listNames().contains("org.example.Silent"))
    }

    @Test(
        "A connection that serves nothing answers a call at once (no such method; a Ping is answered), not after the bus's 25 s",
        .enabled(if: hasDBusDaemon, "needs dbus-daemon; skipped"))
    func nothingServed() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("dbus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (daemon, address) = try await privateSessionBus(in: folder.appendingPathComponent("bus"))
        defer { kill(daemon.processIdentifier, SIGKILL) }
        let quiet = try DBusConnection(address: address)
        let name = try await quiet.hello()
        let caller = try DBusConnection(address: address)
        try await caller.hello()
        _ = try await caller.call(DBusMessage(kind: .methodCall, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping", destination: name), timeout: .seconds(5))
        do {
            _ = try await caller.call(DBusMessage(kind: .methodCall, path: "/", interface: "org.example.I", member: "M", destination: name), timeout: .seconds(5))
            Issue.record("a call to a connection serving nothing returned")
        } catch let error as DBusError {
            #expect(error.name == "org.freedesktop.DBus.Error.UnknownMethod", "\(error)")
        }
    }
}
