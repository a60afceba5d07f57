import Foundation
import Handoff
import HandoffApp
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

/// Continuing another device's activity, and what this device reports of those nearby.
extension Agent {
    // MARK: Continuing another device's activity

    func continueActivity(_ wanted: UUID?, logger: Logger) async -> LocalReply {
        let started = ContinuousClock.now
        let nearby = await discovery?.nearby ?? []
        let candidates = nearby.filter { $0.activity != nil }
        let chosen: NearbyDevice?
        if let wanted {
            chosen = candidates.first { $0.activity?.id == wanted }
        } else {
            chosen = candidates.max { $0.lastHeard < $1.lastHeard }
        }
        guard let device = chosen, let offer = device.activity else {
            let what = wanted.map { "activity \($0) is not offered by any device nearby" } ?? "no device nearby offers an activity"
            return .failure(LocalError(.notFound, "\(what); 'handoff list' shows what is offered"))
        }
        let origin = memberName(device.sender)
        let announced = LocalActivity(
            id: offer.id, activityType: offer.activityType, title: offer.title, teamIdentifier: offer.teamIdentifier,
            hasWebpageURL: offer.hasWebpageURL, supportsContinuationStreams: offer.supportsContinuationStreams)
        var logger = logger
        logger[metadataKey: "from"] = "\(origin)"
        logger[metadataKey: "type"] = "\(offer.activityType)"

        let route = self.route(offer, webpageURL: offer.hasWebpageURL ? URL(string: "https://example.invalid/") : nil)
        switch route {
        case .nowhere(let reason):
            return .failure(LocalError(.notFound, "nothing on this device can continue it: \(reason)"))
        case .webBrowser:
            let fetched = await fetch(offer.id, from: device)
            guard case .success(let record) = fetched, let page = record.webpageURL else {
                let failure = (try? fetched.get()).map { _ in FetchFailure(code: FetchFailure.handoffFailed, message: "the activity arrived without its web page") } ?? fetched.failureValue!
                return .failure(LocalError(.continuation, code: failure.code, failure.message))
            }
            // The page comes from another device: only an http or https URL with a host is opened.
            guard let url = URL(string: page), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                url.host?.isEmpty == false, !page.hasPrefix("-")
            else {
                return .failure(LocalError(.continuation, code: FetchFailure.handoffFailed, "the activity's web page is not an http or https URL, so it is not opened"))
            }
            link(to: device)?.send(.continued(activityID: offer.id))
            do {
                try openWebPage(page)
            } catch {
                return .failure(LocalError(.failed, error.message))
            }
            logger.notice("opened the activity's web page", metadata: ["url": "\(page)"])
            return LocalReply(continued: LocalContinued(continuation: UUID(), device: origin, activity: announced, app: nil, webpageURL: page, seconds: (ContinuousClock.now - started).seconds))
        case .app(let manifest, let reason):
            logger.info("continuing in '\(manifest.bundleIdentifier)': \(reason)")
            let continuation = UUID()
            let session: Session
            switch await runningSession(of: manifest.bundleIdentifier, continuation: continuation) {
            case .success(let found): session = found
            case .failure(let error): return .failure(error)
            }
            session.peer.send(.willContinue(continuation: continuation, activityType: offer.activityType))
            switch await fetch(offer.id, from: device) {
            case .failure(let failure):
                let error = LocalError(.continuation, code: failure.code, failure.message)
                session.peer.send(.fail(continuation: continuation, activityType: offer.activityType, error: error))
                logger.notice("the continuation failed: \(failure)")
                return .failure(error)
            case .success(let wire):
                var record = LocalRecord(wire)
                if let bytes = record.userInfo {
                    do {
                        _ = try UserInfoCoding.decodeUserInfo(bytes)
                    } catch {
                        let error = LocalError(.continuation, code: FetchFailure.handoffFailed, "the activity from '\(origin)' could not be read: \(error)")
                        session.peer.send(.fail(continuation: continuation, activityType: offer.activityType, error: error))
                        logger.error("the continuation failed: \(error.message)")
                        return .failure(error)
                    }
                }
                // The type the app was told in willContinue is the one it gets.
                record.activity.activityType = offer.activityType
                session.peer.send(.deliver(continuation: continuation, record: record, origin: LocalOrigin(device: device.sender, deviceName: origin, activity: offer.id)))
                link(to: device)?.send(.continued(activityID: offer.id))
                let seconds = (ContinuousClock.now - started).seconds
                logger.notice("continued", metadata: ["app": "\(manifest.bundleIdentifier)", "ms": "\(Int(seconds * 1000))"])
                return LocalReply(continued: LocalContinued(continuation: continuation, device: origin, activity: record.activity, app: manifest.bundleIdentifier, webpageURL: nil, seconds: seconds))
            }
        }
    }

    func route(_ offer: BeaconActivity, webpageURL: URL?) -> ActivityRoute {
        ActivityRouter.route(
            IncomingActivity(teamIdentifier: offer.teamIdentifier, activityType: offer.activityType, webpageURL: webpageURL),
            installed: apps.map(\.manifest))
    }

    func fetch(_ activityID: UUID, from device: NearbyDevice) async -> Result<WireActivityRecord, FetchFailure> {
        switch await openLink(to: device) {
        case .success(let link): return await link.fetch(activityID, deadline: configuration.fetchDeadline)
        case .failure(let failure): return .failure(failure)
        }
    }

    /// The link to a nearby device: the open one, or a new one.
    func openLink(to device: NearbyDevice) async -> Result<any PeerLinking, FetchFailure> {
        let link: any PeerLinking
        if let existing = links[device.sender], existing.isOpen, existing.host == device.address, existing.port == Int(device.linkPort) {
            link = existing
        } else {
            links[device.sender]?.close()
            do {
                link = try await network.open(
                    host: device.address, port: Int(device.linkPort), identity: identity, pins: { [pins] in pins.value },
                    deadline: configuration.fetchDeadline)
            } catch {
                return .failure(FetchFailure(code: error.code, message: "'\(memberName(device.sender))': \(error.message)"))
            }
            guard link.device == device.sender else {
                link.close()
                return .failure(FetchFailure(code: FetchFailure.connectionUnavailable, message: "the device at \(device.address):\(device.linkPort) is not '\(memberName(device.sender))'"))
            }
            links[device.sender] = link
        }
        return .success(link)
    }

    func link(to device: NearbyDevice) -> (any PeerLinking)? {
        links[device.sender].flatMap { $0.isOpen ? $0 : nil }
    }

    /// A connected process of the app, the most recent; else the app is started and waited for.
    func runningSession(of bundleIdentifier: String, continuation: UUID) async -> Result<Session, LocalError> {
        if let running = newestSession(of: bundleIdentifier) { return .success(running) }
        guard let app = apps.first(where: { $0.manifest.bundleIdentifier == bundleIdentifier }) else {
            return .failure(LocalError(.notFound, "the app '\(bundleIdentifier)' is not installed"))
        }
        let data = configuration.stateDirectory.appendingPathComponent("data/\(bundleIdentifier)", isDirectory: true)
        try? FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // What the app prints goes to its log beside the agent's state, not to the agent's terminal.
        let logs = configuration.stateDirectory.appendingPathComponent("logs", isDirectory: true)
        try? FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let launched: any LaunchedApp
        do {
            launched = try await launcher.launch(
                AppLaunch(
                    app: app, continuation: continuation, socketPath: configuration.socketPath, dataDirectory: data,
                    logFile: logs.appendingPathComponent("\(bundleIdentifier).log")))
        } catch {
            return .failure(LocalError(.failed, error.message))
        }
        logger.info("started '\(bundleIdentifier)' for a continuation")
        let deadline = ContinuousClock.now + configuration.launchDeadline
        while ContinuousClock.now < deadline {
            if let running = newestSession(of: bundleIdentifier) { return .success(running) }
            if let ended = launched.ended {
                return .failure(LocalError(.failed, "'\(bundleIdentifier)' ended before it connected to the agent: \(ended)"))
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return .failure(LocalError(.failed, "'\(bundleIdentifier)' started but did not connect to the agent within \(configuration.launchDeadline); does it make an Application?"))
    }

    func newestSession(of bundleIdentifier: String) -> Session? {
        sessions.values.filter { $0.app?.manifest.bundleIdentifier == bundleIdentifier }.max { $0.connected < $1.connected }
    }

    func openWebPage(_ page: String) throws(AgentError) {
        guard let command = configuration.browserCommand.first else { throw AgentError("no browser command is configured") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [command] + configuration.browserCommand.dropFirst() + [page]
        do {
            try process.run()
        } catch {
            throw AgentError("could not run the browser command '\(command)': \(error.localizedDescription)")
        }
    }

    // MARK: What is nearby

    func discovered(_ change: DiscoveryEvent) async {
        let events: [LocalEvent]
        switch change {
        case .heard(let device):
            let before = knownNearby[device.sender]
            knownNearby[device.sender] = device.activity
            switch (before, device.activity) {
            case (nil, let now?):
                events = [LocalEvent(change: .appeared, device: device.sender, deviceName: memberName(device.sender), activity: nearbyActivity(device, now))]
            case (let was?, let now?) where was != now:
                events = [LocalEvent(change: was.id == now.id ? .changed : .appeared, device: device.sender, deviceName: memberName(device.sender), activity: nearbyActivity(device, now))]
            case (_?, nil):
                events = [LocalEvent(change: .gone, device: device.sender, deviceName: memberName(device.sender), activity: nil)]
            default:
                events = []
            }
        case .gone(let sender):
            let before = knownNearby.removeValue(forKey: sender)
            events = before == nil ? [] : [LocalEvent(change: .gone, device: sender, deviceName: memberName(sender), activity: nil)]
        case .stale(let device):
            Task { await catchUp(device.sender, address: device.address, linkPort: device.linkPort, revision: device.accountRevision) }
            return
        }
        if case .heard(let device) = change, device.accountRevision < (account?.revision ?? 0) {
            Task { await catchUp(device.sender, address: device.address, linkPort: device.linkPort, revision: device.accountRevision) }
        }
        for event in events {
            for watcher in watchers.values { watcher.send(.event(event)) }
        }
    }

    func nearbyActivity(_ device: NearbyDevice, _ activity: BeaconActivity) -> LocalNearbyActivity {
        let handler: String?
        let reason: String
        switch route(activity, webpageURL: activity.hasWebpageURL ? URL(string: "https://example.invalid/") : nil) {
        case .app(let manifest, let why):
            handler = manifest.bundleIdentifier
            reason = why
        case .webBrowser(_, let why):
            handler = "browser"
            reason = why
        case .nowhere(let why):
            handler = nil
            reason = why
        }
        return LocalNearbyActivity(
            device: device.sender, deviceName: memberName(device.sender),
            activity: LocalActivity(
                id: activity.id, activityType: activity.activityType, title: activity.title, teamIdentifier: activity.teamIdentifier,
                hasWebpageURL: activity.hasWebpageURL, supportsContinuationStreams: activity.supportsContinuationStreams),
            age: Date().timeIntervalSince(device.lastHeard), handler: handler, reason: reason)
    }

    func nearbyActivities() async -> [LocalNearbyActivity] {
        let nearby = await discovery?.nearby ?? []
        return nearby.compactMap { device in device.activity.map { nearbyActivity(device, $0) } }.sorted { $0.age < $1.age }
    }

    func memberName(_ id: UUID) -> String {
        account?.members.first { $0.id == id }?.name ?? "an unnamed device"
    }

    var thisDevice: LocalDevice {
        LocalDevice(id: identity.id, name: deviceName, isThisDevice: true, isNearby: true, fingerprint: identity.fingerprint)
    }

    func devices() async -> [LocalDevice] {
        let nearby = await discovery?.nearby ?? []
        return (account?.members ?? []).map { member in
            if member.id == identity.id { return thisDevice }
            let heard = nearby.first { $0.sender == member.id }
            return LocalDevice(
                id: member.id, name: member.name, isThisDevice: false, isNearby: heard != nil, address: heard?.address,
                lastHeard: heard.map { Date().timeIntervalSince($0.lastHeard) },
                fingerprint: member.certificate.map { DeviceIdentity.fingerprint(ofCertificate: Array($0)) })
        }
    }

    /// Tries a link to `host:port`, telling a closed port from a device that refuses this one.
    func probe(host: String, port: Int) async -> LocalProbe {
        do {
            let link = try await network.open(host: host, port: port, identity: identity, pins: { [pins] in pins.value }, deadline: .seconds(3))
            link.close()
            let name = memberName(link.device)
            return LocalProbe(reachable: true, member: true, device: name, message: "'\(name)' answers at \(host):\(port) and accepts this device")
        } catch {
            if error.message.contains("cannot be reached") || error.message.contains("did not answer") {
                return LocalProbe(reachable: false, member: false, device: nil, message: "nothing answers at \(host):\(port): \(error.message)")
            }
            return LocalProbe(reachable: true, member: false, device: nil, message: "something answers at \(host):\(port), but the link was refused: it is not a device of this account, or it does not accept this one")
        }
    }

    func status() async -> LocalStatus {
        let nearby = await discovery?.nearby ?? []
        let counters = await discovery?.statistics
        return LocalStatus(
            version: handoffVersion, device: thisDevice, account: account?.name, members: account?.members.count ?? 0, nearby: nearby.count,
            linkPort: linkPort, interfaces: configuration.interfaces ?? Self.multicastInterfaces(),
            staticPeers: configuration.staticPeers.map(\.description), apps: apps.count, currentActivity: offered,
            discovery: counters.map {
                LocalDiscoveryCounters(datagrams: $0.datagrams, unopened: $0.unopened, replayed: $0.replayed, outsideWindow: $0.outsideWindow, accepted: $0.accepted)
            })
    }

    func localApp(_ app: InstalledApp) -> LocalApp {
        LocalApp(
            bundleIdentifier: app.manifest.bundleIdentifier, teamIdentifier: app.manifest.teamIdentifier, executable: app.executable.path,
            activityTypes: app.manifest.continuableActivityTypes.sorted(),
            running: sessions.values.filter { $0.app?.manifest.bundleIdentifier == app.manifest.bundleIdentifier }.count)
    }
}
