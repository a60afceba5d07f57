import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffProcess
import HandoffTesting
import Testing

@testable import HandoffAgent

/// Whether the real player is here: mpv with Debian's MPRIS plugin (.ci/run installs both).
let hasMPV = FileManager.default.isExecutableFile(atPath: "/usr/bin/mpv") && FileManager.default.fileExists(atPath: "/etc/mpv/scripts/mpris.so")

/// A sound file of `seconds` of silence (WAV, 8 kHz, 8 bits, one channel).
func silence(seconds: Int) -> Data {
    let samples = 8000 * seconds
    var data = Data("RIFF".utf8)
    func le<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
    le(UInt32(36 + samples))
    data.append(contentsOf: Array("WAVEfmt ".utf8))
    le(UInt32(16)); le(UInt16(1)); le(UInt16(1)); le(UInt32(8000)); le(UInt32(8000)); le(UInt16(1)); le(UInt16(8))
    data.append(contentsOf: Array("data".utf8))
    le(UInt32(samples))
    data.append(Data(repeating: 128, count: samples))
    return data
}

/// A player of a test host, read and driven over its session bus as any MPRIS client does.
struct TestPlayer {
    let bus: DBusConnection
    let owner: String

    /// The first player on the bus at `address` whose name begins with `name`, once it appears.
    static func find(_ name: String, on address: String, within: Duration = .seconds(15)) async throws -> TestPlayer {
        let bus = try DBusConnection(address: address)
        try await bus.hello()
        var owner: String?
        let clock = ContinuousClock()
        let deadline = clock.now + within
        while owner == nil, clock.now < deadline {
            if let found = try await bus.listNames().first(where: { $0.hasPrefix(name) }) { owner = try? await bus.owner(of: found) }
            // Polled in a test only: it waits for a player another process starts.
            if owner == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        return TestPlayer(bus: bus, owner: try #require(owner, "no player \(name) appeared on \(address)"))
    }

    func properties() async throws -> [String: DBusValue] {
        try await bus.properties(of: MPRIS.player, at: MPRIS.path, on: owner, timeout: .seconds(5))
    }

    var status: String? { get async { try? await properties()["PlaybackStatus"]?.string } }
    var url: URL? { get async { try? await MediaMetadata(properties()["Metadata"]?.dictionary ?? [:]).url } }
    /// Where it plays, in seconds.
    var position: Double? {
        get async { (try? await bus.property("Position", of: MPRIS.player, at: MPRIS.path, on: owner, timeout: .seconds(5)).integer).flatMap { $0.map { Double($0) / 1e6 } } }
    }

    /// Asks the player to quit (MPRIS's `Quit`).
    func quit() async {
        _ = try? await bus.call(DBusMessage(kind: .methodCall, path: MPRIS.path, interface: MPRIS.root, member: "Quit", destination: owner), timeout: .seconds(2))
    }

    func seek(to seconds: Double) async throws {
        let track = try #require(MediaMetadata(try await properties()["Metadata"]?.dictionary ?? [:]).trackID)
        _ = try await bus.call(DBusMessage(
            kind: .methodCall, path: MPRIS.path, interface: MPRIS.player, member: "SetPosition", destination: owner,
            body: [.objectPath(track), .int64(Int64(seconds * 1e6))]))
    }
}

/// A player of a test's own on a session bus (PyGObject's Gio): it plays `url` as `title`, with
/// `extra` more metadata entries; with `vanish`, it quits when asked what it plays a second time
/// (the first is the session service meeting it, the second a fetch); with `lazyseek`, it starts
/// at 0 and drops the first seek asked of it.
let fakePlayer = """
    import os, sys
    from gi.repository import Gio, GLib
    url, title, extra, vanish = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "vanish"
    XML = '''<node>
    <interface name="org.mpris.MediaPlayer2">
    <property name="Identity" type="s" access="read"/><property name="DesktopEntry" type="s" access="read"/>
    </interface>
    <interface name="org.mpris.MediaPlayer2.Player">
    <method name="Play"/><method name="Pause"/>
    <method name="SetPosition"><arg type="o" direction="in"/><arg type="x" direction="in"/></method>
    <method name="OpenUri"><arg type="s" direction="in"/></method>
    <property name="PlaybackStatus" type="s" access="read"/>
    <property name="Metadata" type="a{sv}" access="read"/>
    <property name="Position" type="x" access="read"/>
    </interface>
    </node>'''
    node = Gio.DBusNodeInfo.new_for_xml(XML)
    metadata = {"xesam:url": GLib.Variant("s", url), "xesam:title": GLib.Variant("s", title), "mpris:trackid": GLib.Variant("o", "/1")}
    for i in range(extra):
        metadata["x-test:key%d" % i] = GLib.Variant("s", "value %d" % i)
    # Built once: a player in C builds its metadata fast; Python would take seconds on a busy machine.
    metadata = GLib.Variant("a{sv}", metadata)
    reads = [0]
    # "lazyseek": a player still loading, which drops the first seek asked of it (as mpv may).
    state = {"position": 0 if sys.argv[4] == "lazyseek" else 42000000, "seeks": 0}
    def get_property(connection, sender, path, interface, name):
        if interface == "org.mpris.MediaPlayer2":
            return GLib.Variant("s", "Fake Player" if name == "Identity" else "fake-player")
        if name == "Metadata":
            reads[0] += 1
            if vanish and reads[0] > 1:
                os._exit(0)
            return metadata
        if name == "PlaybackStatus":
            return GLib.Variant("s", "Playing")
        return GLib.Variant("x", state["position"])
    def method_call(connection, sender, path, interface, name, parameters, invocation):
        if name == "SetPosition":
            state["seeks"] += 1
            if not (sys.argv[4] == "lazyseek" and state["seeks"] == 1):
                state["position"] = parameters.unpack()[1]
        invocation.return_value(None)
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    for interface in node.interfaces:
        bus.register_object("/org/mpris/MediaPlayer2", interface, method_call, get_property, None)
    Gio.bus_own_name_on_connection(bus, "org.mpris.MediaPlayer2.fake", Gio.BusNameOwnerFlags.NONE, None, None)
    GLib.MainLoop().run()
    """

extension TestDesktop {
    /// The session bus's address the service was given.
    var busAddress: String { extra["DBUS_SESSION_BUS_ADDRESS"] ?? "" }

    /// Starts a program of this session (in its namespace), with its bus and `environment`.
    @discardableResult
    func start(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
        let app = ChildProcess()
        Self.command(app, namespace: namespace, executable, arguments)
        app.environment = self.environment.merging(["DBUS_SESSION_BUS_ADDRESS": busAddress]) { $1 }.merging(environment) { $1 }
        app.standardInput = FileHandle.nullDevice
        app.standardOutput = FileHandle.nullDevice
        app.standardError = FileHandle.nullDevice
        try app.run()
        return app
    }
}

@Suite("Media players as system activities, with the real mpv and its MPRIS plugin", .serialized)
struct MediaActivityTests {
    static let enabled = hasMPV && hasDBusDaemon && DesktopKind.x11.missing.isEmpty

    /// Two hosts, each with a copy of the sound file in its synced folder, and on beta the
    /// player's desktop entry (mpv with no sound or picture).
    static func hosts() throws -> (DocumentHosts, song: String, environments: [[String: String]]) {
        let setup = try DocumentHosts()
        let song = "Music/song one.wav"
        for folder in [setup.onA, setup.onB] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent("Music"), withIntermediateDirectories: true)
            try silence(seconds: 120).write(to: folder.appendingPathComponent(song))
        }
        let applications = setup.root.appendingPathComponent("b-share/applications")
        try Data("[Desktop Entry]\nType=Application\nName=mpv Media Player\nExec=/usr/bin/mpv --ao=null --vo=null -- %U\nMimeType=audio/x-wav;audio/wav;\n".utf8)
            .write(to: applications.appendingPathComponent("mpv.desktop"))
        // Beta knows file types from the system's shared-mime-info, after its own folder.
        var environments = setup.environments
        environments[1]["XDG_DATA_DIRS", default: ""] += ":/usr/share"
        return (setup, song, environments)
    }

    @Test(
        "mpv plays a file of alpha's synced folder and is seeked to 0:42; continued on beta, beta's session service starts mpv on beta's own copy at the position fetched (0:42, plus how long alpha played on), playing; alpha's mpv pauses there",
        .enabled(if: enabled, "needs mpv, mpv-mpris, dbus-daemon and Xvfb (.ci/run installs them); skipped"))
    func mpvContinuesOnBeta() async throws {
        let (setup, song, environments) = try Self.hosts()
        defer { setup.remove() }
        try await withDesktops(.x11, containers: [setup.onA, setup.onB], environments: environments, sessionBuses: true) { devices, desktops in
            let (b, onAlpha, onBeta) = (devices[1], desktops[0], desktops[1])
            #expect(await eventually { onAlpha.logText.contains("watching media players") }, "alpha's service: \(onAlpha.logText)")
            let file = setup.onA.appendingPathComponent(song)
            let mpv = try onAlpha.start("/usr/bin/mpv", ["--ao=null", "--vo=null", "--", file.path], environment: ["HOME": setup.root.path])
            defer { kill(mpv.processIdentifier, SIGKILL) }
            let onA = try await TestPlayer.find("org.mpris.MediaPlayer2.mpv", on: onAlpha.busAddress)
            #expect(await eventually { await onA.status == "Playing" })
            // Seeked once mpv has loaded the file (a seek before that is dropped), as a person would.
            // The clock starts before the first seek: alpha plays on from whichever seek took, and
            // the bound below must hold for the earliest (a full-suite run read 46.5 s, 3.9 s after
            // a clock started once the seeks were done).
            let clock = ContinuousClock()
            let seeked = clock.now
            #expect(await eventually {
                try? await onA.seek(to: 42)
                return (await onA.position ?? 0) >= 41.5
            }, "alpha's mpv did not go to 0:42")
            #expect(await eventually { onAlpha.logText.contains("offering 'song one.wav' from mpv") }, "alpha's service: \(onAlpha.logText)")
            #expect(await eventually { (try? await b.nearby())?.first?.activity.activityType == SystemActivityType.media })
            let listed = try #require(try await b.nearby().first)
            #expect(listed.activity.title == "song one.wav")
            #expect(listed.handler == "system", "\(listed.reason)")
            let checks = try await devices[0].call(.doctor).checks ?? []
            #expect(checks.contains { $0.subject == "media" && $0.finding.contains("offering 'song one.wav' from mpv") }, "\(checks.map(\.finding))")

            let asked = clock.now
            let continued = try await b.call(.continue(activity: listed.activity.id))
            let answered = clock.now
            #expect(continued.continued?.app == "system")
            let onB = try await TestPlayer.find("org.mpris.MediaPlayer2.mpv", on: onBeta.busAddress)
            // Beta's mpv was started by the service: it is asked to quit at the end.
            defer { Task { await onB.quit() } }
            #expect(await eventually { onBeta.logText.contains("playing song one.wav at ") }, "beta's service: \(onBeta.logText)")
            let here = setup.onB.appendingPathComponent(song).resolvingSymlinksInPath().path
            #expect(await onB.url?.resolvingSymlinksInPath().path == here)

            // Alpha played on from 0:42 until the fetch read its position: at most as long as the
            // test waited (a fraction of a second, more on a busy machine).
            let logged = try #require(onBeta.logText.components(separatedBy: "playing song one.wav at ").last?.split(separator: " ").first.flatMap { Double($0) })
            #expect(logged >= 41.5 && logged <= 42.5 + (answered - seeked).seconds, "fetched at \(logged) s, \((answered - seeked).seconds) s after the seek")
            // Beta plays from there: ahead of it by no more than the time since it was asked.
            #expect(await eventually { await onB.status == "Playing" })
            let position = try #require(await onB.position)
            let read = clock.now
            #expect(position >= logged - 0.5 && position <= logged + 0.5 + (read - asked).seconds, "beta's mpv is at \(position) s, fetched at \(logged) s")
            // Alpha paused where it was fetched, give or take the time the pause took to arrive.
            #expect(await eventually { await onA.status == "Paused" }, "alpha's service: \(onAlpha.logText)")
            let paused = try #require(await onA.position)
            #expect(paused >= logged - 0.5 && paused <= logged + 0.5 + (clock.now - asked).seconds, "alpha paused at \(paused) s, fetched at \(logged) s")
        }
    }

    @Test(
        "A player that quits while its item is fetched fails that continuation with the reason, and the service goes on; a file outside every synced container is not offered and doctor says why; a player whose metadata has 10,000 entries is offered and fetched",
        .enabled(if: enabled && hasGTK, "needs dbus-daemon, PyGObject and Xvfb; skipped"))
    func vanishingAndHugePlayers() async throws {
        let (setup, song, environments) = try Self.hosts()
        defer { setup.remove() }
        try await withDesktops(.x11, containers: [setup.onA, setup.onB], environments: environments, sessionBuses: true) { devices, desktops in
            let (b, onAlpha) = (devices[1], desktops[0])
            #expect(await eventually { onAlpha.logText.contains("watching media players") }, "alpha's service: \(onAlpha.logText)")
            let url = setup.onA.appendingPathComponent(song).absoluteString
            let vanishing = try onAlpha.start("/usr/bin/python3", ["-c", fakePlayer, url, "Vanishing", "0", "vanish"])
            defer { kill(vanishing.processIdentifier, SIGKILL) }
            #expect(await eventually { (try? await b.nearby())?.first?.activity.title == "Vanishing" }, "alpha's service: \(onAlpha.logText)")
            let first = try #require(try await b.nearby().first)
            do {
                _ = try await b.call(.continue(activity: first.activity.id))
                Issue.record("a continuation of a player that quit succeeded")
            } catch {
                #expect("\(error)".contains("did not say where it is"), "\(error)")
            }
            #expect(await eventually { (try? await b.nearby())?.isEmpty == true }, "alpha's service: \(onAlpha.logText)")

            // A player of a file outside every synced container: nothing is offered, and doctor says why.
            let outside = try onAlpha.start("/usr/bin/python3", ["-c", fakePlayer, "file:///etc/passwd", "Outside", "0", "stay"])
            defer { kill(outside.processIdentifier, SIGKILL) }
            #expect(await eventually {
                let checks = (try? await devices[0].call(.doctor).checks) ?? []
                return checks.contains { $0.subject == "media" && $0.finding.contains("passwd is outside every synced container") }
            }, "alpha's service: \(onAlpha.logText)")
            #expect(try await b.nearby().isEmpty)
            kill(outside.processIdentifier, SIGKILL)

            let huge = try onAlpha.start("/usr/bin/python3", ["-c", fakePlayer, url, "Ten thousand", "10000", "stay"])
            defer { kill(huge.processIdentifier, SIGKILL) }
            #expect(await eventually(within: .seconds(30)) { (try? await b.nearby())?.first?.activity.title == "Ten thousand" }, "alpha's service: \(onAlpha.logText)")
            let second = try #require(try await b.nearby().first)
            let continued = try await b.call(.continue(activity: second.activity.id))
            #expect(continued.continued?.app == "system")
            // Beta plays it in its default player for the type (mpv), which then quits.
            let onB = try await TestPlayer.find("org.mpris.MediaPlayer2.mpv", on: desktops[1].busAddress)
            #expect(await eventually { desktops[1].logText.contains("playing song one.wav at 42.0 s in mpv.desktop") }, "beta's service: \(desktops[1].logText)")
            await onB.quit()
        }
    }

    @Test(
        "With no display, the session service serves no clipboard and still offers what a player plays: a media box with no screen",
        .enabled(if: hasDBusDaemon && hasGTK, "needs dbus-daemon and PyGObject; skipped"))
    func noDisplay() async throws {
        let (setup, song, environments) = try Self.hosts()
        defer { setup.remove() }
        let executable = try #require(builtExecutable("handoff-session"), "handoff-session was not built next to the tests")
        try await withHosts(containers: [setup.onA, setup.onB]) { devices, namespaces in
            let (a, b) = (devices[0], devices[1])
            let (bus, address) = try await privateSessionBus(in: a.state.appendingPathComponent("session-bus"), namespace: namespaces[0])
            defer { kill(bus.processIdentifier, SIGKILL) }
            let log = a.state.appendingPathComponent("service.log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            // No DISPLAY and no WAYLAND_DISPLAY: nothing to serve a clipboard on.
            let environment = ["PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": address, "HOME": setup.root.path].merging(environments[0]) { $1 }
            let service = ChildProcess()
            TestDesktop.command(service, namespace: namespaces[0], executable.path, ["--socket", a.socket, "--verbose"])
            service.environment = environment
            service.standardError = try FileHandle(forWritingTo: log)
            try service.run()
            defer { kill(service.processIdentifier, SIGKILL) }
            let text = { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
            #expect(await eventually { text().contains("watching media players") }, "\(text())")
            #expect(text().contains("no clipboard here (no display"), "\(text())")
            let player = ChildProcess()
            TestDesktop.command(player, namespace: namespaces[0], "/usr/bin/python3", ["-c", fakePlayer, setup.onA.appendingPathComponent(song).absoluteString, "Headless", "0", "stay"])
            player.environment = environment
            try player.run()
            defer { kill(player.processIdentifier, SIGKILL) }
            #expect(await eventually { (try? await b.nearby())?.first?.activity.title == "Headless" }, "\(text())")
        }
    }

    @Test(
        "S15: A media item whose publisher names a file outside every container synced here, an address of another scheme, or a file that is no sound or video, is not played on beta (the log says why); one naming an app of beta's that is no player plays in beta's player, not in that app",
        .enabled(if: enabled, "needs mpv, mpv-mpris, dbus-daemon and Xvfb; skipped"))
    func foreignMediaNotPlayed() async throws {
        let (setup, _, environments) = try Self.hosts()
        defer { setup.remove() }
        try await withDesktops(.x11, containers: [setup.onA, setup.onB], environments: environments, sessionBuses: true) { devices, desktops in
            let (a, b, onBeta) = (devices[0], devices[1], desktops[1])
            #expect(await eventually { onBeta.logText.contains("watching media players") }, "beta's service: \(onBeta.logText)")
            for (url, reason) in [
                (URL(fileURLWithPath: "/etc/passwd"), "is not in a container synced here"), (URL(string: "smb://server/share/song.wav")!, "a smb address is not played here"),
            ] {
                let item = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.media, title: url.lastPathComponent)
                let media = MediaActivity(url: url, title: "x", artists: [], album: nil, position: 1, length: nil, desktopEntry: "mpv", player: "mpv", playing: true)
                let publisher = try await a.offer(item, answering: .answer(ActivityRecord(activity: item, userInfo: try UserInfoCoding.encode(media.userInfo))), seenBy: b)
                // Not "Continued": the person hears why it did not play.
                let refused = try await b.attempt(.continue(activity: item.id))
                #expect(refused.continued == nil && refused.error?.message.contains(reason) == true, "\(refused)")
                #expect(await eventually { onBeta.logText.contains(reason) }, "beta's service: \(onBeta.logText)")
                try publisher.client.send(.invalidated(activity: item.id))
            }
            // A file of the synced folder that is no sound or video is not opened at all.
            try Data("notes".utf8).write(to: setup.onA.appendingPathComponent("notes.txt"))
            try Data("notes".utf8).write(to: setup.onB.appendingPathComponent("notes.txt"))
            let text = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.media, title: "notes.txt")
            let textMedia = MediaActivity(
                url: setup.onA.appendingPathComponent("notes.txt"), title: nil, artists: [], album: nil, position: 1, length: nil, desktopEntry: "org.example.Notes", player: nil,
                playing: true)
            let textPublisher = try await a.offer(text, answering: .answer(ActivityRecord(activity: text, userInfo: try UserInfoCoding.encode(textMedia.userInfo))), seenBy: b)
            let notMedia = try await b.attempt(.continue(activity: text.id))
            #expect(notMedia.error?.message.contains("it is not a sound or video file") == true, "\(notMedia)")
            #expect(await eventually { onBeta.logText.contains("it is not a sound or video file") }, "beta's service: \(onBeta.logText)")
            try textPublisher.client.send(.invalidated(activity: text.id))
            #expect(!FileManager.default.fileExists(atPath: setup.opened.path), "beta's Notes app ran")
            let bus = try DBusConnection(address: onBeta.busAddress)
            try await bus.hello()
            #expect(try await bus.listNames().allSatisfy { !$0.hasPrefix(MPRIS.namePrefix) }, "a player started on beta")

            // A sound file naming an app of beta's that is no player (its Notes) plays in beta's player.
            let sound = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.media, title: "song")
            let soundMedia = MediaActivity(
                url: setup.onA.appendingPathComponent("Music/song one.wav"), title: nil, artists: [], album: nil, position: 5, length: nil, desktopEntry: "org.example.Notes",
                player: nil, playing: true)
            _ = try await a.offer(sound, answering: .answer(ActivityRecord(activity: sound, userInfo: try UserInfoCoding.encode(soundMedia.userInfo))), seenBy: b)
            _ = try await b.call(.continue(activity: sound.id))
            #expect(await eventually { onBeta.logText.contains("playing song one.wav at 5.0 s in mpv.desktop") }, "beta's service: \(onBeta.logText)")
            #expect(!FileManager.default.fileExists(atPath: setup.opened.path), "beta's Notes app ran")
            let played = try await TestPlayer.find("org.mpris.MediaPlayer2.mpv", on: onBeta.busAddress)
            await played.quit()
        }
    }

    @Test(
        "A player that drops the first seek while it loads (as mpv may) is asked again: the item continued on beta plays at its position all the same",
        .enabled(if: hasDBusDaemon && hasGTK && DesktopKind.x11.missing.isEmpty, "needs dbus-daemon, PyGObject and Xvfb; skipped"))
    func playerThatDropsASeek() async throws {
        let (setup, song, environments) = try Self.hosts()
        defer { setup.remove() }
        let script = setup.root.appendingPathComponent("fake-player.py")
        try Data(fakePlayer.utf8).write(to: script)
        try Data("[Desktop Entry]\nType=Application\nName=Fake Player\nExec=/usr/bin/python3 \(script.path) %U Lazy 0 lazyseek\nMimeType=audio/x-wav;\n".utf8)
            .write(to: setup.root.appendingPathComponent("b-share/applications/fake-player.desktop"))
        try await withDesktops(.x11, containers: [setup.onA, setup.onB], environments: environments, sessionBuses: true) { devices, desktops in
            let (a, b, onBeta) = (devices[0], devices[1], desktops[1])
            #expect(await eventually { onBeta.logText.contains("watching media players") }, "beta's service: \(onBeta.logText)")
            let item = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.media, title: song)
            let media = MediaActivity(
                url: setup.onA.appendingPathComponent(song), title: nil, artists: [], album: nil, position: 42, length: 120, desktopEntry: "fake-player", player: "Fake Player",
                playing: true)
            _ = try await a.offer(item, answering: .answer(ActivityRecord(activity: item, userInfo: try UserInfoCoding.encode(media.userInfo))), seenBy: b)
            #expect(try await b.call(.continue(activity: item.id)).continued?.app == "system")
            let player = try await TestPlayer.find("org.mpris.MediaPlayer2.fake", on: onBeta.busAddress)
            #expect(await eventually { onBeta.logText.contains("playing song one.wav at 42.0 s in fake-player.desktop") }, "beta's service: \(onBeta.logText)")
            #expect(await player.position == 42, "beta's service: \(onBeta.logText)")
            await player.quit()
            kill(Int32(try await player.bus.processID(of: player.owner)), SIGKILL)
        }
    }

    @Test(
        "When beta's player for the item is already running, it is given the item (OpenUri) rather than started again: beta's one idle mpv plays it at the position",
        .enabled(if: enabled, "needs mpv, mpv-mpris, dbus-daemon and Xvfb (.ci/run installs them); skipped"))
    func runningPlayerTakesTheItem() async throws {
        let (setup, song, environments) = try Self.hosts()
        defer { setup.remove() }
        try await withDesktops(.x11, containers: [setup.onA, setup.onB], environments: environments, sessionBuses: true) { devices, desktops in
            let (a, b, onBeta) = (devices[0], devices[1], desktops[1])
            #expect(await eventually { onBeta.logText.contains("watching media players") }, "beta's service: \(onBeta.logText)")
            // Beta's mpv, open with nothing to play.
            let idle = try onBeta.start("/usr/bin/mpv", ["--idle=yes", "--ao=null", "--vo=null"], environment: ["HOME": setup.root.path])
            defer { kill(idle.processIdentifier, SIGKILL) }
            let player = try await TestPlayer.find("org.mpris.MediaPlayer2.mpv", on: onBeta.busAddress)
            let item = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.media, title: song)
            let media = MediaActivity(
                url: setup.onA.appendingPathComponent(song), title: nil, artists: [], album: nil, position: 42, length: 120, desktopEntry: "mpv", player: "mpv", playing: true)
            _ = try await a.offer(item, answering: .answer(ActivityRecord(activity: item, userInfo: try UserInfoCoding.encode(media.userInfo))), seenBy: b)
            #expect(try await b.call(.continue(activity: item.id)).continued?.app == "system")
            #expect(await eventually { onBeta.logText.contains("playing song one.wav at 42.0 s in mpv.desktop") }, "beta's service: \(onBeta.logText)")
            #expect(await player.url?.resolvingSymlinksInPath().path == setup.onB.appendingPathComponent(song).resolvingSymlinksInPath().path)
            // It plays from the position: its position moves on from there. (mpv-mpris 0.7 goes on
            // saying Stopped when an idle mpv opens an item, so the status is not what tells.)
            let position = try #require(await player.position)
            #expect(position >= 41.5 && position <= 60, "beta's mpv is at \(position) s; beta's service: \(onBeta.logText)")
            #expect(await eventually { (await player.position ?? 0) > position + 0.2 }, "beta's mpv does not play")
            // The same mpv: no second one started.
            let names = try await player.bus.listNames().filter { $0.hasPrefix(MPRIS.namePrefix) }
            #expect(names.count == 1, "\(names)")
            await player.quit()
        }
    }
}
