import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffModel
import HandoffSession
import Synchronization

/// Media players as system activities (docs/system-activities.md): while an MPRIS player on the
/// session bus plays an item that can travel, that item is this device's activity, and its
/// position is read when another device fetches it; an item continued here plays in this
/// device's player for it, at that position; and a player here that was continued elsewhere
/// pauses. Everything it knows of players comes from the bus's signals: nothing polls.
final class Media: Sendable {
    let service: ClipboardService
    let bus: DBusConnection
    let containers: [URL]
    let environment: [String: String]
    /// Whether a player here keeps playing when its item is continued elsewhere.
    let keepPlaying: Bool
    /// The agent, as a session of its own: its current activity is weighed against the
    /// documents' by which became current last.
    let client: LocalClient
    private let state = Mutex(State())
    private let events: AsyncStream<DBusMessage>.Continuation
    private let stream: AsyncStream<DBusMessage>

    /// A player on the bus, by what its properties and signals said.
    struct Player: Sendable {
        let busName: String
        let owner: String
        var pid: Int32?
        var desktopEntry: String?
        var identity: String?
        var status: PlaybackStatus = .stopped
        var metadata = MediaMetadata()
        /// When it last began to play (a count: the newest wins).
        var began: UInt64 = 0

        var name: String { identity ?? MPRIS.playerName(of: busName) ?? busName }
    }

    /// An item offered: its activity and the player that plays it.
    struct Offer: Sendable {
        let activity: ActivityAnnouncement
        let owner: String
        /// The player's bus name (`org.mpris.MediaPlayer2.vlc`) and its name for people.
        let busName: String
        let player: String
        let url: URL
    }

    /// A player's changed properties, of one interface.
    struct Change: Sendable {
        let interface: String
        let values: [String: DBusValue]
    }

    struct State: Sendable {
        /// By the player's unique name on the bus (its signals' sender).
        var players: [String: Player] = [:]
        var offered: Offer?
        /// The items offered lately, oldest first, to pause their player when one is continued
        /// elsewhere.
        var recent: [Offer] = []
        /// The players being asked what they play, by unique name: one that leaves meanwhile is
        /// taken out, and its answer dropped.
        var joining: Set<String> = []
        /// Changes heard from a joining player, applied after its answer.
        var early: [String: [Change]] = [:]
        var count: UInt64 = 0
        var status = ""
    }

    init(service: ClipboardService, client: LocalClient, bus: DBusConnection, containers: [LocalContainer], keepPlaying: Bool, environment: [String: String]) {
        self.service = service
        self.client = client
        self.bus = bus
        self.containers = containers.map { URL(fileURLWithPath: $0.folder, isDirectory: true) }
        self.keepPlaying = keepPlaying
        self.environment = environment
        (stream, events) = AsyncStream.makeStream(of: DBusMessage.self)
    }

    /// Hears the players' signals, then reads the players there are.
    func start() async throws {
        bus.onSignal { [events] signal in events.yield(signal) }
        for rule in MPRIS.matchRules { try await bus.addMatch(rule) }
        // The signals, one after the other, in the order the bus sent them.
        Task { [self] in
            for await signal in stream { await handle(signal) }
        }
        for name in try await bus.listNames() where name.hasPrefix(MPRIS.namePrefix) {
            guard let owner = try? await bus.owner(of: name) else { continue }
            var appeared = DBusMessage(kind: .signal, interface: "org.freedesktop.DBus", member: "NameOwnerChanged", body: [.string(name), .string(""), .string(owner)])
            appeared.sender = "org.freedesktop.DBus"
            events.yield(appeared)
        }
    }

    // MARK: Players

    private func handle(_ signal: DBusMessage) async {
        switch (signal.interface, signal.member) {
        case ("org.freedesktop.DBus", "NameOwnerChanged"):
            guard signal.sender == "org.freedesktop.DBus", signal.body.count == 3, let name = signal.body[0].string, name.hasPrefix(MPRIS.namePrefix),
                let old = signal.body[1].string, let new = signal.body[2].string
            else { return }
            if !old.isEmpty {
                state.withLock { state in
                    state.players[old] = nil
                    state.joining.remove(old)
                    state.early[old] = nil
                }
            }
            if !new.isEmpty {
                state.withLock { _ = $0.joining.insert(new) }
                // Asked on a task of its own: a player slow to answer holds up no other's signals.
                Task { [self] in
                    await add(name, owner: new)
                    await republish()
                }
            }
        case (DBusConnection.properties, "PropertiesChanged"):
            guard let sender = signal.sender, signal.body.count >= 2, let interface = signal.body[0].string, let changed = signal.body[1].dictionary else { return }
            // A player still being asked what it plays gets its changes after its answer.
            let known = state.withLock { state -> Bool in
                if state.joining.contains(sender) {
                    state.early[sender, default: []].append(Change(interface: interface, values: changed))
                    if state.early[sender]!.count > 64 { state.early[sender]!.removeFirst() }
                }
                return state.players[sender] != nil
            }
            guard known else { return }
            let invalidated = signal.body.count > 2 ? signal.body[2].strings ?? [] : []
            var changes = changed
            if interface == MPRIS.player, invalidated.contains(where: { $0 == "Metadata" || $0 == "PlaybackStatus" }),
                let values = try? await bus.properties(of: MPRIS.player, at: MPRIS.path, on: sender, timeout: .seconds(5))
            {
                changes = values
            }
            state.withLock { state in
                guard var player = state.players[sender] else { return }
                Self.apply(changes, of: interface, to: &player, count: &state.count)
                state.players[sender] = player
            }
        default:
            return
        }
        await republish()
    }

    /// A player that appeared on the bus: what it plays, and which app and process it is. A
    /// player busy starting (or a busy machine) gets three tries.
    private func add(_ name: String, owner: String) async {
        var player = Player(busName: name, owner: owner)
        // Given up, or answered: either way it is no longer joining.
        defer {
            state.withLock { state in
                state.joining.remove(owner)
                state.early[owner] = nil
            }
        }
        for attempt in 1...3 {
            do {
                let values = try await bus.properties(of: MPRIS.player, at: MPRIS.path, on: owner, timeout: .seconds(5))
                let root = (try? await bus.properties(of: MPRIS.root, at: MPRIS.path, on: owner, timeout: .seconds(5))) ?? [:]
                player.pid = try? await bus.processID(of: owner)
                state.withLock { state in
                    guard state.joining.remove(owner) != nil else { return }
                    Self.apply(root, of: MPRIS.root, to: &player, count: &state.count)
                    Self.apply(values, of: MPRIS.player, to: &player, count: &state.count)
                    for change in state.early.removeValue(forKey: owner) ?? [] {
                        Self.apply(change.values, of: change.interface, to: &player, count: &state.count)
                    }
                    state.players[owner] = player
                }
                return
            } catch {
                service.log("the player \(name) did not say what it plays (try \(attempt) of 3): \(error)")
                if (error as? DBusError)?.name == "org.freedesktop.DBus.Error.ServiceUnknown" { return }
                // A moment before asking again.
                try? await Task.sleep(for: .seconds(attempt))
            }
        }
    }

    /// Takes a player's changed properties in.
    static func apply(_ values: [String: DBusValue], of interface: String, to player: inout Player, count: inout UInt64) {
        if interface == MPRIS.root {
            if let entry = values["DesktopEntry"]?.string { player.desktopEntry = entry }
            if let identity = values["Identity"]?.string { player.identity = identity }
            return
        }
        guard interface == MPRIS.player else { return }
        if let metadata = values["Metadata"]?.dictionary { player.metadata = MediaMetadata(metadata) }
        if let status = values["PlaybackStatus"]?.string.flatMap(PlaybackStatus.init(rawValue:)) {
            if status == .playing, player.status != .playing {
                count += 1
                player.began = count
            }
            player.status = status
        }
    }

    /// Offers the item of the player that began playing last, if it can travel; else nothing,
    /// and the log (and `handoff doctor`) says why.
    private func republish() async {
        let containers = containers
        let (offer, retired, status) = state.withLock { state -> (Offer?, Offer?, String) in
            let newest = state.players.values.filter { $0.status == .playing }.max { $0.began < $1.began }
            var wanted: (Player, URL)?
            let status: String
            if let newest {
                switch MediaTravel.decide(newest.metadata, player: newest.busName, containers: containers) {
                case .travels(let url):
                    wanted = (newest, url)
                    status = "offering '\(newest.metadata.displayTitle)' from \(newest.name)"
                case .stays(let reason):
                    status = "\(newest.name) plays '\(newest.metadata.displayTitle)', not offered: \(reason)"
                }
            } else {
                status = "no media player is playing"
            }
            let changed = status != state.status
            state.status = status
            let current = state.offered
            if let (player, url) = wanted, current?.owner == player.owner, current?.url == url { return (nil, nil, changed ? status : "") }
            if wanted == nil, current == nil { return (nil, nil, changed ? status : "") }
            var offer: Offer?
            if let (player, url) = wanted {
                let activity = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.media, title: player.metadata.displayTitle)
                offer = Offer(activity: activity, owner: player.owner, busName: player.busName, player: player.name, url: url)
                state.recent.append(offer!)
                if state.recent.count > 16 { state.recent.removeFirst() }
            }
            state.offered = offer
            return (offer, current, changed ? status : "")
        }
        if !status.isEmpty {
            service.log("media: \(status)")
            service.report(status, on: client)
        }
        do {
            if let offer { try client.send(.becameCurrent(offer.activity)) }
            if let retired { try client.send(.invalidated(activity: retired.activity.id)) }
        } catch {
            service.log("the agent did not take the media item: \(error)")
        }
    }

    // MARK: The agent's messages

    func handle(_ message: LocalMessage) {
        switch message {
        case .save(let request, let activity):
            // Answered on a task: the player is asked where it is now.
            Task { [self] in await save(request, activity) }
        case .deliver(let continuation, let record, let origin) where record.activity.activityType == SystemActivityType.media:
            // Played on a task: the player may take a while to start.
            let answer = DeliveryAnswer(continuation, to: client)
            Task { [self] in await play(record, from: origin.deviceName, answer: answer) }
        case .wasContinued(let activity):
            Task { [self] in await pause(activity) }
        default:
            break
        }
    }

    /// Answers a fetch of the item offered: what the player plays, where it is now.
    private func save(_ request: UInt64, _ activity: UUID) async {
        guard let offer = state.withLock({ $0.offered?.activity.id == activity ? $0.offered : nil }) else {
            try? client.send(.saveFailed(request: request, LocalError(.notFound, "that media item is no longer playing here")))
            return
        }
        do {
            let values = try await bus.properties(of: MPRIS.player, at: MPRIS.path, on: offer.owner, timeout: .seconds(3))
            let metadata = MediaMetadata(values["Metadata"]?.dictionary ?? [:])
            guard case .travels(let url) = MediaTravel.decide(metadata, player: offer.busName, containers: containers) else {
                throw DBusError("\(offer.player) now plays something that does not travel")
            }
            var position = values["Position"]?.integer
            if position == nil { position = try await bus.property("Position", of: MPRIS.player, at: MPRIS.path, on: offer.owner, timeout: .seconds(3)).integer }
            let player = state.withLock { $0.players[offer.owner] }
            let media = MediaActivity(
                url: url, title: metadata.title, artists: metadata.artists, album: metadata.album, position: max(0, Double(position ?? 0) / 1e6),
                length: metadata.length.map { Double($0) / 1e6 }, desktopEntry: player?.desktopEntry, player: player?.identity,
                playing: values["PlaybackStatus"]?.string != PlaybackStatus.paused.rawValue)
            let record = ActivityRecord(activity: offer.activity, userInfo: try UserInfoCoding.encode(media.userInfo))
            try client.send(.saved(request: request, record))
        } catch {
            service.log("media: \(offer.player) did not say where it is: \(error)")
            try? client.send(.saveFailed(request: request, LocalError(.notFound, "the player \(offer.player) did not say where it is (\(error)); has it quit?")))
        }
    }

    /// A player here whose item was continued on another device pauses.
    private func pause(_ activity: UUID) async {
        guard let offer = state.withLock({ $0.recent.last { $0.activity.id == activity } }) else { return }
        guard !keepPlaying else { return service.log("media: '\(offer.activity.title ?? "")' continued elsewhere; \(offer.player) keeps playing (--keep-playing)") }
        do {
            _ = try await bus.call(DBusMessage(kind: .methodCall, path: MPRIS.path, interface: MPRIS.player, member: "Pause", destination: offer.owner), timeout: .seconds(5))
            service.log("media: paused \(offer.player): its item continued on another device")
        } catch {
            service.log("media: \(offer.player) did not pause: \(error)")
        }
    }

    /// Plays an item continued here: in the same player if it is installed here, else in the
    /// default one for its type; started if it is not running; then at the position, over MPRIS.
    private func play(_ record: ActivityRecord, from device: String, answer: DeliveryAnswer) async {
        let media: MediaActivity
        do {
            guard let bytes = record.userInfo else { throw MediaActivityError("it came without its userInfo") }
            media = try MediaActivity(userInfo: try UserInfoCoding.decode(bytes))
        } catch {
            return notPlayed("a media item", from: device, "it cannot be read: \(error)", answer)
        }
        let url = media.url
        let name = url.isFileURL ? url.lastPathComponent : url.absoluteString
        guard !(record.untranslatedFileURLs ?? []).contains(url.absoluteString) else {
            return notPlayed(name, from: device, "it is not in a container synced here: not played", answer)
        }
        let scheme = url.scheme?.lowercased() ?? ""
        guard url.isFileURL || scheme == "http" || scheme == "https" else {
            return notPlayed(name, from: device, "a \(scheme) address is not played here", answer)
        }
        if url.isFileURL, !FileManager.default.fileExists(atPath: url.path) {
            return notPlayed(name, from: device, "the file is not here (the container has not synced it yet)", answer)
        }
        let applications = DesktopApplications(environment: environment)
        let mimeType = applications.mimeType(forFileNamed: url.lastPathComponent) ?? (url.isFileURL ? nil : "x-scheme-handler/\(scheme)")
        // Only sound and video go to a player: another device names no other kind of file to open.
        guard let mimeType, Self.isMedia(mimeType) else {
            return notPlayed(name, from: device, "it is not a sound or video file (\(mimeType ?? "of no known type")): not played", answer)
        }
        // The player the other device named, when it is a player here; else the type's default.
        var entry = media.desktopEntry.flatMap { applications.entry(id: $0 + ".desktop") }.flatMap { $0.mimeTypes.contains(where: Self.isMedia) ? $0 : nil }
        if entry == nil { entry = applications.defaultEntry(for: mimeType) }
        guard let entry else { return notPlayed(name, from: device, "no app here plays \(mimeType)", answer) }
        let id = String(entry.id.dropLast(".desktop".count))
        let running = state.withLock { $0.players.values.first { $0.desktopEntry == id } }
        var launched: Launcher.Started?
        do {
            if let running {
                _ = try await bus.call(
                    DBusMessage(kind: .methodCall, path: MPRIS.path, interface: MPRIS.player, member: "OpenUri", destination: running.owner, body: [.string(url.absoluteString)]),
                    timeout: .seconds(5))
            } else {
                launched = try await Launcher.open([url], with: entry, environment: environment, bus: bus, folder: nil)
            }
        } catch {
            return notPlayed(name, from: device, "\(entry.id) did not open it: \(error)", answer)
        }
        // The player has it: what follows (its loading, the position) is only told, if it fails.
        answer()
        // The player says it has the item (a signal, or its properties when it appears).
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(20)
        var player: Player?
        while player == nil, clock.now < deadline {
            player = state.withLock { state in
                state.players.values.first { candidate in
                    let ours: Bool
                    if let running {
                        ours = candidate.owner == running.owner
                    } else if case .process(let pid) = launched {
                        ours = candidate.pid == pid || candidate.desktopEntry == id
                    } else {
                        ours = candidate.desktopEntry == id
                    }
                    // Loaded: playing, or knowing the item's length. (mpv names the item as soon as
                    // it is asked to open it, before it can seek in it; and mpv-mpris 0.7 goes on
                    // saying Stopped when an idle mpv opens an item, while it plays it.)
                    let loaded = candidate.status != .stopped || candidate.metadata.length != nil
                    return ours && loaded && Self.sameItem(candidate.metadata.url, url)
                }
            }
            // The signals update the players meanwhile; this waits for them, for one item.
            if player == nil { try? await Task.sleep(for: .milliseconds(25)) }
        }
        guard let player else {
            return service.log("media: \(entry.id) opened \(name) but says nothing of it over MPRIS: it plays from its start")
        }
        do {
            // MediaActivity caps the position at 10^7 s: its microseconds fit.
            let position = Int64((media.position * 1e6).rounded())
            // A player may say it has the item before it can seek in it (mpv, while it loads):
            // the position is checked, and asked for again, for up to 3 s.
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(3)
            var there = false
            repeat {
                if let track = player.metadata.trackID {
                    _ = try await bus.call(
                        DBusMessage(kind: .methodCall, path: MPRIS.path, interface: MPRIS.player, member: "SetPosition", destination: player.owner, body: [.objectPath(track), .int64(position)]),
                        timeout: .seconds(5))
                } else {
                    let now = try await bus.property("Position", of: MPRIS.player, at: MPRIS.path, on: player.owner, timeout: .seconds(5)).integer ?? 0
                    _ = try await bus.call(
                        DBusMessage(
                            kind: .methodCall, path: MPRIS.path, interface: MPRIS.player, member: "Seek", destination: player.owner,
                            body: [.int64(position.subtractingReportingOverflow(now).overflow ? 0 : position - now)]),
                        timeout: .seconds(5))
                }
                let reached = try await bus.property("Position", of: MPRIS.player, at: MPRIS.path, on: player.owner, timeout: .seconds(5)).integer
                // A player that does not report its position is taken at its word.
                there = reached.map { reached in
                    let (difference, overflow) = reached.subtractingReportingOverflow(position)
                    return !overflow && difference.magnitude <= 1_500_000
                } ?? true
                // A moment for the player to finish loading before it is asked again.
                if !there { try await Task.sleep(for: .milliseconds(100)) }
            } while !there && clock.now < deadline
            if !there { service.log("media: \(player.name) did not go to \(Int(media.position)) s within 3 s") }
            let member = media.playing ? "Play" : "Pause"
            _ = try await bus.call(DBusMessage(kind: .methodCall, path: MPRIS.path, interface: MPRIS.player, member: member, destination: player.owner), timeout: .seconds(5))
            service.log("media: \(media.playing ? "playing" : "paused at") \(name) at \(String(format: "%.1f", media.position)) s in \(entry.id), from '\(device)'")
        } catch {
            notPlayed(name, from: device, "\(player.name) opened it but did not go to \(Int(media.position)) s: \(error)", answer)
        }
    }

    /// Whether `mimeType` is sound or video, or an address a player may open.
    static func isMedia(_ mimeType: String) -> Bool {
        mimeType.hasPrefix("audio/") || mimeType.hasPrefix("video/") || mimeType == "application/ogg" || mimeType == "x-scheme-handler/http"
            || mimeType == "x-scheme-handler/https" || mimeType == "application/x-matroska" || mimeType == "application/vnd.apple.mpegurl"
    }

    /// Whether a player's item is the one asked for: the same file, or the same address.
    static func sameItem(_ playing: URL?, _ wanted: URL) -> Bool {
        guard let playing else { return false }
        if playing.isFileURL, wanted.isFileURL {
            return playing.standardizedFileURL.resolvingSymlinksInPath().path == wanted.standardizedFileURL.resolvingSymlinksInPath().path
        }
        return playing.absoluteString == wanted.absoluteString
    }

    private func notPlayed(_ item: String, from device: String, _ reason: String, _ answer: DeliveryAnswer) {
        answer(notOpened: "\(item): \(reason)")
        service.tell("Handoff could not play the media from '\(device)'", "\(item): \(reason)", environment: environment)
    }
}
