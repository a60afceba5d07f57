import Foundation
import HandoffCore
import HandoffLocalAPI
import HandoffModel
import HandoffProcess
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

/// A session service as the agent sees one on the receiving device: it opens system activities
/// and records what it is given.
final class SystemHandlerClient: Sendable {
    let client: LocalClient
    let reply: LocalReply
    private let delivered = Delivered()

    final class Delivered: Sendable {
        let records = Mutex<[ActivityRecord]>([])
    }

    var records: [ActivityRecord] { delivered.records.withLock { $0 } }

    /// A session service that answers each `deliver` as opened, or, with `refusing`, as not
    /// opened for that reason.
    init(on device: TestDevice, types: [String] = [SystemActivityType.document], refusing: String? = nil) async throws {
        let delivered = self.delivered
        let answering = Mutex<LocalClient?>(nil)
        let connected = try await LocalClient.connect(path: device.socket, role: .control) { message in
            guard case .deliver(let continuation, let record, _) = message else { return }
            delivered.records.withLock { $0.append(record) }
            try? answering.withLock { $0 }?.send(.delivered(continuation: continuation, error: refusing.map { LocalError(.failed, $0) }))
        }
        answering.withLock { $0 = connected }
        client = connected
        reply = try await client.call(.handleSystemActivities(types: types))
    }
}

@Suite("System activities: the session service publishes them, the agents carry them, the receiving session opens them")
struct SystemActivityTests {
    @Test("A document of alpha's synced folder, published as a system activity, is listed on beta as the session service's, and continued there it reaches beta's session service at beta's own path; the origin hears it was continued")
    func documentTravels() async throws {
        try await withHarness { harness in
            let onA = harness.root.appendingPathComponent("a-sync", isDirectory: true), onB = harness.root.appendingPathComponent("b-sync", isDirectory: true)
            for folder in [onA, onB] {
                try FileManager.default.createDirectory(at: folder.appendingPathComponent("Notes"), withIntermediateDirectories: true)
                try Data("plan".utf8).write(to: folder.appendingPathComponent("Notes/plan.txt"))
            }
            let a = try await harness.start("alpha") { $0.containers = [ContainerFolder(identifier: "sync", folder: onA)] }
            let b = try await harness.start("beta") { $0.containers = [ContainerFolder(identifier: "sync", folder: onB)] }
            try await harness.pair([a, b])
            let document = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "plan.txt")
            let userInfo = try UserInfoCoding.encode(UserInfoValue.dictionary([
                .string("url"): .url(onA.appendingPathComponent("Notes/plan.txt").resolvingSymlinksInPath()), .string("mimeType"): .string("text/plain"),
                .string("application"): .string("Text Editor"), .string("exec"): .string("'gnome-text-editor %u'"),
            ]))
            let publisher = try await a.offer(document, answering: .answer(ActivityRecord(activity: document, userInfo: userInfo)), seenBy: b)
            _ = publisher

            // Without a session service on beta, nothing there opens it, and the listing says why.
            #expect(try await b.nearby().first?.handler == nil)
            #expect(try await b.nearby().first?.reason.contains("no session service here opens") == true)
            do {
                _ = try await b.call(.continue(activity: document.id))
                Issue.record("continued with no session service to open it")
            } catch {
                #expect("\(error)".contains("no session service here opens"), "\(error)")
            }

            let handler = try await SystemHandlerClient(on: b)
            #expect(handler.reply.containers == [LocalContainer(identifier: "sync", folder: onB.path)])
            #expect(try await b.nearby().first?.handler == "system")
            let continued = try await b.call(.continue(activity: document.id))
            #expect(continued.continued?.app == "system", "\(continued)")
            #expect(await eventually { handler.records.count == 1 })
            let record = try #require(handler.records.first)
            #expect(record.activity.activityType == SystemActivityType.document)
            let value = try UserInfoCoding.decode(try #require(record.userInfo))
            guard case .dictionary(let entries) = value else { Issue.record("userInfo is \(value)"); return }
            #expect(entries[.string("url")] == .url(onB.appendingPathComponent("Notes/plan.txt").resolvingSymlinksInPath()))
            #expect(entries[.string("exec")] == .string("'gnome-text-editor %u'"))
            #expect(record.untranslatedFileURLs == nil)
            #expect(await eventually { publisher.messages.contains { if case .wasContinued = $0 { true } else { false } } })
        }
    }

    @Test("A system activity the session service does not open fails the continuation with the service's reason, not \"Continued\", and the origin is not told it was continued")
    func refusedSystemActivity() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            let document = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "plan.txt")
            let userInfo = try UserInfoCoding.encode(UserInfoValue.dictionary([.string("url"): .url(URL(fileURLWithPath: "/srv/plan.txt"))]))
            let publisher = try await a.offer(document, answering: .answer(ActivityRecord(activity: document, userInfo: userInfo)), seenBy: b)
            let handler = try await SystemHandlerClient(on: b, refusing: "plan.txt: no app here opens text/plain: not opened")
            _ = handler
            let answer = try await b.attempt(.continue(activity: document.id))
            #expect(answer.continued == nil, "continued: \(String(describing: answer.continued))")
            #expect(answer.error?.message.contains("no app here opens text/plain") == true, "\(String(describing: answer.error))")
            // Alpha is told only of what was opened (beta told it before answering, before).
            _ = try await publisher.client.call(.status)
            #expect(!publisher.messages.contains { if case .wasContinued = $0 { true } else { false } }, "alpha was told it was continued")
        }
    }

    @Test("--system-activities off for documents: a device offers none (the agent drops its session service's), and one that receives them opens none, saying why")
    func documentsOff() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha") { $0.systemActivities = ["media"] }
            let b = try await harness.start("beta") { $0.systemActivities = [] }
            let c = try await harness.start("gamma")
            try await harness.pair([a, b, c])
            // Alpha's documents are off: what its session service offers is not offered.
            let document = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "plan.txt")
            let publisher = try await RawApp(socket: a.socket, behaviour: .answer(ActivityRecord(activity: document)))
            try publisher.client.send(.becameCurrent(document))
            // A call on the same connection is answered after the message before it was handled.
            _ = try await publisher.client.call(.status)
            let agentA = try #require(a.agent)
            #expect(await agentA.activities.offered == nil)
            #expect(await agentA.activities.owner(of: document.id) == nil)
            // Beta's are off: its session service is refused, saying why.
            let refused = try await LocalClient.connect(path: b.socket, role: .control) { _ in }.call(.handleSystemActivities(types: [SystemActivityType.document]))
            #expect(refused.error?.kind == .notAllowed)
            #expect(refused.error?.message.contains("documents are off on this device") == true, "\(refused)")
            // Gamma's documents are on: beta lists its document, saying it does not open them.
            let other = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "other.txt")
            _ = try await c.offer(other, answering: .neverAnswer, seenBy: b)
            let listed = try #require(try await b.nearby().first { $0.activity.id == other.id })
            #expect(listed.handler == nil)
            #expect(listed.reason.contains("documents are off on this device"), "\(listed.reason)")
        }
    }

    @Test("A session that asks to open no type, or a type that is not a system activity's, is refused and opens nothing")
    func handlerRefusals() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            for types in [[], ["com.example.notes.editing"], [SystemActivityType.document, "org.handoff.system.unknown"]] {
                let reply = try await LocalClient.connect(path: a.socket, role: .control) { _ in }.call(.handleSystemActivities(types: types))
                #expect(reply.error?.kind == .badRequest, "\(types)")
            }
        }
    }
}

/// Two hosts' synced folders and data folders, and on beta an app (a desktop entry, `Notes`,
/// for text) whose program records what it was asked to open in `opened`, one argument a line.
struct DocumentHosts {
    let root: URL
    let onA: URL
    let onB: URL
    let opened: URL
    /// The session services' XDG folders: alpha's and beta's own.
    let environments: [[String: String]]

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("documents-\(UUID().uuidString.prefix(8))", isDirectory: true)
        onA = root.appendingPathComponent("a-sync", isDirectory: true)
        onB = root.appendingPathComponent("b-sync", isDirectory: true)
        for folder in [onA, onB] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        opened = root.appendingPathComponent("opened.txt")
        let recorder = root.appendingPathComponent("notes-app")
        try Data("#!/bin/sh\nprintf '%s\\n' \"$@\" > \(opened.path)\n".utf8).write(to: recorder)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: recorder.path)
        let share = root.appendingPathComponent("b-share/applications", isDirectory: true)
        try FileManager.default.createDirectory(at: share, withIntermediateDirectories: true)
        try Data("[Desktop Entry]\nType=Application\nName=Notes\nExec=\(recorder.path) --open %f\nMimeType=text/plain;\n".utf8)
            .write(to: share.appendingPathComponent("org.example.Notes.desktop"))
        let base = root
        environments = ["a", "b"].map { host in
            ["XDG_DATA_HOME": base.appendingPathComponent("\(host)-data").path, "XDG_DATA_DIRS": base.appendingPathComponent("\(host)-share").path]
        }
    }

    func remove() { try? FileManager.default.removeItem(at: root) }
}

/// Whether a real GTK program can write the recently-used list here (PyGObject and GTK 3's
/// introspection data, which .ci/run installs).
let hasGTK: Bool = {
    let probe = ChildProcess()
    probe.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    probe.arguments = ["-c", "import gi; gi.require_version('Gtk', '3.0'); from gi.repository import Gtk"]
    probe.standardOutput = FileHandle.nullDevice
    probe.standardError = FileHandle.nullDevice
    guard (try? probe.run()) != nil else { return false }
    probe.waitUntilExit()
    return probe.terminationStatus == 0
}()

/// A GTK program (PyGObject) that records `file` as used by `app` in the recently-used list, as
/// a GTK editor does when it opens a file: through `Gtk.RecentManager`, which writes the list.
let gtkRecorder = """
    import sys, gi
    gi.require_version("Gtk", "3.0")
    from gi.repository import Gtk, GLib
    Gtk.init([])
    data = Gtk.RecentData()
    data.display_name = sys.argv[1].rsplit("/", 1)[-1]
    data.mime_type = sys.argv[2]
    data.app_name = sys.argv[3]
    data.app_exec = sys.argv[4]
    if not Gtk.RecentManager.get_default().add_full(sys.argv[1], data):
        sys.exit(1)
    GLib.timeout_add(1000, Gtk.main_quit)
    Gtk.main()
    """

@Suite("Documents as system activities, with a real GTK program and the session service", .serialized)
struct DocumentActivityTests {
    @Test(
        "A document a GTK program opened in alpha's synced folder becomes alpha's activity; continued on beta, beta's session service opens beta's own copy with the app the list named, as its desktop entry says",
        .enabled(if: hasGTK, "needs PyGObject and GTK 3 (python3-gi, gir1.2-gtk-3.0); skipped"))
    func gtkDocumentOpensOnBeta() async throws {
        let setup = try DocumentHosts()
        defer { setup.remove() }
        let (onA, onB, opened, environments) = (setup.onA, setup.onB, setup.opened, setup.environments)
        for folder in [onA, onB] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent("Notes"), withIntermediateDirectories: true)
            try Data("the plan".utf8).write(to: folder.appendingPathComponent("Notes/plan one.txt"))
        }
        try await withDesktops(.x11, containers: [onA, onB], environments: environments) { devices, desktops in
            let (b, onAlpha, onBeta) = (devices[1], desktops[0], desktops[1])
            #expect(await eventually { onAlpha.logText.contains("offering documents of 1 synced container") }, "alpha's service: \(onAlpha.logText)")
            // The GTK program on alpha's display opens the file, and records it.
            let file = onA.appendingPathComponent("Notes/plan one.txt").resolvingSymlinksInPath()
            var gtk = onAlpha.environment
            gtk["XDG_DATA_HOME"] = environments[0]["XDG_DATA_HOME"]
            let recorded = try await runProcess(
                URL(fileURLWithPath: "/usr/bin/python3"), ["-c", gtkRecorder, file.absoluteString, "text/plain", "Notes", "notes %u"], input: [], environment: gtk)
            try #require(recorded.status == 0, "the GTK program failed: \(recorded.error)")
            #expect(await eventually { (try? await b.nearby())?.first?.activity.activityType == SystemActivityType.document }, "alpha's service: \(onAlpha.logText)")
            let listed = try #require(try await b.nearby().first)
            #expect(listed.activity.title == "plan one.txt")
            #expect(listed.handler == "system", "\(listed.reason)")
            let continued = try await b.call(.continue(activity: listed.activity.id))
            #expect(continued.continued?.app == "system")
            let expected = onB.appendingPathComponent("Notes/plan one.txt").resolvingSymlinksInPath().path
            #expect(
                await eventually { (try? String(contentsOf: opened, encoding: .utf8)) == "--open\n\(expected)\n" },
                "opened: \((try? String(contentsOf: opened, encoding: .utf8)) ?? "nothing"); beta's service: \(onBeta.logText)")
        }
    }

    @Test(
        "A document whose app is D-Bus activatable (DBusActivatable=true, no Exec) opens on beta as the desktop opens it: the session bus starts the app, and its org.freedesktop.Application.Open gets beta's own path",
        .enabled(if: hasGTK && hasDBusDaemon && DesktopKind.x11.missing.isEmpty, "needs PyGObject, dbus-daemon and Xvfb; skipped"))
    func dbusActivatableApp() async throws {
        let setup = try DocumentHosts()
        defer { setup.remove() }
        let (root, onA, onB) = (setup.root, setup.onA, setup.onB)
        for folder in [onA, onB] { try Data("the plan".utf8).write(to: folder.appendingPathComponent("plan two.txt")) }
        // Beta's app: a desktop entry with no Exec, and a GApplication the bus starts by name.
        let viewed = root.appendingPathComponent("viewed.txt")
        let viewer = root.appendingPathComponent("viewer.py")
        try Data("""
            import sys
            from gi.repository import Gio
            app = Gio.Application(application_id="org.example.Viewer", flags=Gio.ApplicationFlags.HANDLES_OPEN)
            def opened(app, files, count, hint):
                with open(sys.argv[1], "w") as out:
                    for file in files:
                        out.write(file.get_path() + "\\n")
            app.connect("open", opened)
            app.connect("activate", lambda app: None)
            app.run([sys.argv[0], "--gapplication-service"])
            """.utf8).write(to: viewer)
        try Data("[Desktop Entry]\nType=Application\nName=Viewer\nDBusActivatable=true\nMimeType=text/plain;\n".utf8)
            .write(to: root.appendingPathComponent("b-share/applications/org.example.Viewer.desktop"))
        try await withDesktops(.x11, containers: [onA, onB], environments: setup.environments, sessionBuses: true) { devices, desktops in
            let (a, b, onBeta) = (devices[0], devices[1], desktops[1])
            try Data("[D-BUS Service]\nName=org.example.Viewer\nExec=/usr/bin/python3 \(viewer.path) \(viewed.path)\n".utf8)
                .write(to: b.state.appendingPathComponent("session-bus-services/org.example.Viewer.service"))
            #expect(await eventually { onBeta.logText.contains("offering documents of 1 synced container") }, "beta's service: \(onBeta.logText)")
            let document = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "plan two.txt")
            let userInfo = try UserInfoCoding.encode(UserInfoValue.dictionary([
                .string("url"): .url(onA.appendingPathComponent("plan two.txt")), .string("mimeType"): .string("text/plain"),
                .string("application"): .string("org.example.Viewer"),
            ]))
            _ = try await a.offer(document, answering: .answer(ActivityRecord(activity: document, userInfo: userInfo)), seenBy: b)
            let continued = try await b.call(.continue(activity: document.id))
            #expect(continued.continued?.app == "system")
            let expected = onB.appendingPathComponent("plan two.txt").resolvingSymlinksInPath().path
            #expect(
                await eventually { (try? String(contentsOf: viewed, encoding: .utf8)) == expected + "\n" },
                "viewed: \((try? String(contentsOf: viewed, encoding: .utf8)) ?? "nothing"); beta's service: \(onBeta.logText)")
            // Logged once the app answered, which is after it opened the file.
            #expect(await eventually { onBeta.logText.contains("with org.example.Viewer.desktop") }, "beta's service: \(onBeta.logText)")
        }
    }

    @Test(
        "S15: A document whose file is outside every container synced here is not opened on beta, whatever alpha's publisher says (a file of beta's own, an app's command): beta runs only its own desktop entries, with its own paths, and a desktop notification says why nothing opened",
        .enabled(if: !DesktopKind.x11.programs.contains { !FileManager.default.isExecutableFile(atPath: $0) }, "needs Xvfb and xclip; skipped"))
    func foreignFileNotOpened() async throws {
        let setup = try DocumentHosts()
        defer { setup.remove() }
        let (root, onA, onB, opened) = (setup.root, setup.onA, setup.onB, setup.opened)
        var environments = setup.environments
        // Beta's session bus, with a notification server that records what it is shown.
        var notifications: FakeNotificationServer?
        var bus: ChildProcess?
        defer { if let bus { kill(bus.processIdentifier, SIGKILL) } }
        if hasDBusDaemon {
            let (daemon, address) = try await privateSessionBus(in: root.appendingPathComponent("bus"))
            bus = daemon
            notifications = try await FakeNotificationServer(address: address)
            environments[1]["DBUS_SESSION_BUS_ADDRESS"] = address
        }
        try await withDesktops(.x11, containers: [onA, onB], environments: environments) { devices, desktops in
            let (a, b, onBeta) = (devices[0], devices[1], desktops[1])
            #expect(await eventually { onBeta.logText.contains("offering documents of 1 synced container") }, "beta's service: \(onBeta.logText)")
            // A publisher on alpha that names a file outside its containers, and a command of its own.
            let document = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: "passwd")
            let userInfo = try UserInfoCoding.encode(UserInfoValue.dictionary([
                .string("url"): .url(URL(fileURLWithPath: "/etc/passwd")), .string("mimeType"): .string("text/plain"),
                .string("application"): .string("Notes"), .string("exec"): .string("sh -c 'touch \(root.path)/ran' %u"),
            ]))
            _ = try await a.offer(document, answering: .answer(ActivityRecord(activity: document, userInfo: userInfo)), seenBy: b)
            // Not "Continued": the person hears why nothing opened.
            let refused = try await b.attempt(.continue(activity: document.id))
            #expect(refused.continued == nil && refused.error?.message.contains("is not in a container synced here: not opened") == true, "\(refused)")
            #expect(await eventually { onBeta.logText.contains("is not in a container synced here: not opened") }, "beta's service: \(onBeta.logText)")
            #expect(!FileManager.default.fileExists(atPath: opened.path))
            #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("ran").path))
            // The person who continued it is told why nothing opened.
            if let notifications {
                #expect(await eventually { notifications.shown.contains("Handoff could not open the document from 'alpha'") }, "\(notifications.shown)")
            }
        }
    }
}
