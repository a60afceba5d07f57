import CHandoffVersion
import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

#if canImport(Glibc)
import Glibc
#endif

/// The version of Handoff this agent is (written once, in Sources/CHandoffVersion).
public let handoffVersion = String(cString: handoff_version())

/// Why the agent could not start or do what was asked.
public struct AgentError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One device's agent: what `handoffd` runs. It owns the device's identity and account, the
/// local socket its apps and the CLI use, discovery, the links to the account's other
/// devices, and the installed apps; it carries continuations between them.
///
/// Several agents can run in one process (tests do), each with its own state directory,
/// socket and ports.
public actor Agent {
    public nonisolated let configuration: AgentConfiguration
    /// What the agent works through and never replaces: the state folder, the network, how
    /// apps start. Read through the forwarding properties below (`store`, `network`, ...).
    nonisolated let collaborators: Collaborators

    var identity: DeviceIdentity!
    var account: AccountState?
    let pins = LockedValue<Set<String>>([])
    /// Each member's fingerprint, by device (as `pins`, made with them).
    var memberFingerprints: [UUID: String] = [:]
    /// The apps it starts and accepts, and the browser app that takes web pages itself.
    var installed = InstalledApps()
    /// When the agent last did something, and whether memory was given back since (`--idle-release`).
    var idle = IdleSpell()
    /// Continuations asked for here and saves asked of this device's apps
    /// (`ContinuationStateMachine`), with the deadlines it set.
    var continuations: ContinuationStateMachine<ReceivingContinuation, AwaitedSave>
    /// The timers of the deadlines the machines set, until they fire or are cancelled.
    var deadlines: [Deadline: LoopTimer] = [:]
    /// What it listens on: links, beacons by unicast, the local socket, joining devices.
    var endpoints = Endpoints()
    var discovery: Discovery?
    var sessions: [UUID: Session] = [:]
    /// The links this agent opened to the account's devices, one per device, reused.
    var links: [UUID: any OutgoingLink] = [:]
    /// Saves of the offered activity begun as a link connection was accepted, for that
    /// connection's first fetch (`Agent+EarlySave.swift`).
    nonisolated let earlySaves = EarlySaves()
    /// Who watches what is nearby, and what they were told of it.
    var nearbyWatch = NearbyWatch()
    /// Delivered continuations that may open streams, and streams waiting for an app here.
    var streams = ContinuationStreams()
    /// Desktop notifications of activities nearby (`--notifications`), once connected.
    var desktop = DesktopConnection.notTried
    /// This device's copy and the offers of the account's devices (`Agent+Clipboard.swift`),
    /// and the timer that looks again when the next one expires.
    var clipboardBoard = ClipboardBoard()
    var clipboardTimer: LoopTimer?
    /// Who hears when the clipboard here changes, and which clipboard they were told of last.
    var clipboardWatchers: [UUID: ClipboardWatcher] = [:]
    /// The sessions that open system activities continued here, and of which types.
    var systemHandlers: [UUID: SystemHandler] = [:]
    /// Joins a person let in, by invitation, until the joining device confirmed it saved the
    /// account (nil: it joined) or did not (why); `key` once it was answered (`Agent+Pairing`).
    var joinOutcomes: [UUID: (key: String?, member: UUID?, outcome: FirstOutcome<String?>)] = [:]
    /// Members that joined through this device and have not been heard since: a joiner
    /// stopped after it confirmed, before it heard the end, never takes the account up.
    var joinedUnheard: [UUID: (since: Date, heard: FirstOutcome<Void>)] = [:]
    /// System activities delivered to a session service, by continuation, until it says
    /// whether it opened them (`LocalMessage.delivered`).
    var systemDeliveries: [UUID: (session: UUID, opened: FirstOutcome<LocalError?>)] = [:]
    var clipboardTold: ClipboardBoard.Current?
    /// Pastes waiting for this device's clipboard provider to send the bytes.
    var clipboardReads: [UUID: ClipboardRead] = [:]
    /// The files of this device's copy, as its manifest lists them (ClipboardFiles), once a
    /// paste elsewhere asked for them.
    var clipboardFileList: (generation: UInt64, manifest: ClipboardFiles.Manifest, files: [URL?])?
    /// Not started, running (holding the state folder's lock), or stopped.
    var lifecycle = Lifecycle.notStarted
    /// The account's recent signed changes for members that missed them, and when each was
    /// last caught up.
    var history = AccountHistory()
    /// Invitations, guesses, answered joins, this device's own join and the account change
    /// under way (`PairingStateMachine`), with who waits on them.
    var pairing = Pairing()
    /// The work the agent started that is not the answer to one call (hops from callbacks,
    /// app starts, catch-ups, this device's join): cancelled and awaited when it stops.
    nonisolated let tasks: OwnedTasks

    /// The agent's fixed collaborators: set once by `init`, shared by every task it runs. They
    /// are one value so that the actor's stored properties are its state, which changes.
    struct Collaborators: Sendable {
        let logger: Logger
        /// The state folder: identity, account, installed apps.
        let store: StateStore
        let registry: AppRegistry
        let eventLoopGroup: any EventLoopGroup
        /// Sockets (TLS, UDP), or a test's in-memory network.
        let network: any AgentNetwork
        /// How an installed app that is not running starts, and how a web page opens.
        let launcher: any AppLauncher
        /// Which apps web sites approve for web-to-app continuation.
        let siteAssociations: any SiteAssociations
    }

    nonisolated var logger: Logger { collaborators.logger }
    nonisolated var store: StateStore { collaborators.store }
    nonisolated var registry: AppRegistry { collaborators.registry }
    nonisolated var eventLoopGroup: any EventLoopGroup { collaborators.eventLoopGroup }
    nonisolated var network: any AgentNetwork { collaborators.network }
    nonisolated var launcher: any AppLauncher { collaborators.launcher }
    nonisolated var siteAssociations: any SiteAssociations { collaborators.siteAssociations }

    /// A signed change with the revision it makes, as kept in `account-changes.json`.
    struct RecordedChange: Codable, Sendable {
        var revision: UInt64
        var signer: UUID
        var state: Data
        var signature: Data

        var change: SignedChange { SignedChange(signer: signer, state: Array(state), signature: Array(signature)) }
    }

    /// How many changes are kept for members that were away.
    static let keptChanges = 32

    typealias Pairing = PairingStateMachine<PairingWaiter>

    /// Who waits on pairing, as `PairingStateMachine` holds them.
    enum PairingWaiter: Sendable {
        case candidate(CheckedContinuation<LocalJoinRequest?, Never>)
        case decision(CheckedContinuation<Bool, Never>)
        case joinResult(CheckedContinuation<LocalReply, Never>)
        case accountTurn(CheckedContinuation<Void, Never>)
    }

    /// What the agent listens on, each closed when it stops.
    struct Endpoints {
        /// The link listener: the account's devices connect to it.
        var links: (any LinkListening)?
        /// The UDP sockets on the link port, held for the agent's life (static peers' beacons
        /// arrive there); discovery reads them while there is an account. None in memory.
        var unicast: [any Channel] = []
        /// The local socket apps and the CLI connect to.
        var local: LocalAPIServer?
        /// The listener joining devices connect to, while invitations are open.
        var pairing = PairingListener()
    }

    /// The listener joining devices connect to: open while invitations are, showing
    /// certificates of its own (pinned by the invitations), opened once however many ask.
    struct PairingListener {
        var listener: (any LinkListening)?
        var identity: DeviceIdentity?
        var opening: Task<Result<Void, LocalError>, Never>?
        /// What the person is told of this listener: that it is not on its usual port.
        var notice: String?
    }

    /// A deadline one of the agent's machines set.
    /// When the agent last did something, and whether its memory was given back since.
    struct IdleSpell {
        var lastBusy = ContinuousClock.now
        var released = false
        /// Whether the `idleRelease` deadline is set.
        var armed = false
        /// How many times memory was given back after an idle spell.
        var releases = 0
        /// Whether what starting touched was given back (`startupRelease`).
        var startupReleased = false
        /// Stream relays running now: an agent relaying a stream is not idle.
        var relays = 0
    }

    enum Deadline: Hashable, Sendable {
        case continuation(ContinuationDeadline)
        case pairing(PairingDeadline)
        /// The activity offered now expires.
        case offerExpiry
        /// The agent may have been idle for `--idle-release`.
        case idleRelease
        /// Starting is over: what it touched is given back (`startupRelease`).
        case startupRelease
    }

    /// A client of the local socket.
    final class Session: Sendable {
        let id = UUID.random()
        let peer: LocalPeer
        let role: LocalRole
        /// The installed app this process was verified to be, from its executable.
        let app: InstalledApp?
        let connected = Date()

        init(peer: LocalPeer, role: LocalRole, app: InstalledApp?) {
            self.peer = peer
            self.role = role
            self.app = app
        }
    }

    /// What each session has said about its activities, and the one this device offers (kept
    /// apart from `Session` so that the actor alone changes it).
    var activities = LocalActivities()

    /// - Parameters:
    ///   - network: how it reaches other devices: sockets (TLS, UDP), or an `InMemoryNetwork`
    ///     shared by agents in one process. The agent's logic is the same.
    ///   - launcher: how it starts an installed app that is not running, and opens a web
    ///     page: a process, or (in a test process) however the test runs its apps.
    ///   - siteAssociations: which apps web sites approve for web-to-app continuation.
    /// An agent for `configuration` on this machine's network, starting real apps: what
    /// `handoffd` runs.
    public init(configuration: AgentConfiguration, logger: Logger? = nil) throws(AgentError) {
        try self.init(configuration: configuration, logger: logger, eventLoopGroup: MultiThreadedEventLoopGroup.singleton)
    }

    package init(
        configuration: AgentConfiguration, logger: Logger? = nil, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        network: (any AgentNetwork)? = nil, launcher: any AppLauncher = ProcessLauncher(),
        siteAssociations: (any SiteAssociations)? = nil
    ) throws(AgentError) {
        self.configuration = configuration
        continuations = ContinuationStateMachine(launchDeadline: configuration.launchDeadline, saveDeadline: configuration.saveDeadline)
        let network = network ?? SocketNetwork(eventLoopGroup: eventLoopGroup, logger: logger ?? Logger(label: "handoffd"))
        let associations: any SiteAssociations
        if let siteAssociations {
            associations = siteAssociations
        } else {
            do {
                associations = try WebSiteAssociations(
                    additionalTrust: configuration.associationTrust, refresh: configuration.associationRefresh, eventLoopGroup: eventLoopGroup,
                    logger: logger ?? Logger(label: "handoffd"))
            } catch {
                throw AgentError("cannot set up TLS for web sites' association files: \(error)")
            }
        }
        installed.defaultBrowser = configuration.defaultBrowser
        let store: StateStore
        let upgraded: String?
        do {
            store = try StateStore(directory: configuration.stateDirectory)
            upgraded = try StateFormat.prepare(store)
        } catch {
            throw AgentError("\(error)")
        }
        var logger = logger ?? Logger(label: "handoffd")
        logger[metadataKey: "state"] = "\(configuration.stateDirectory.path)"
        if let upgraded { logger.notice("\(upgraded)") }
        collaborators = Collaborators(
            logger: logger, store: store,
            registry: AppRegistry(stateDirectory: configuration.stateDirectory, allowsUnsignedApps: configuration.allowsUnsignedApps),
            eventLoopGroup: eventLoopGroup, network: network, launcher: launcher, siteAssociations: associations)
        tasks = OwnedTasks(logger: logger)
    }

    // MARK: Starting and stopping

    /// Loads (or makes) the device's identity and account, then opens the link listener,
    /// discovery and the local socket. Every failure names the file, flag or port.
    public func start() async throws(AgentError) {
        guard case .notStarted = lifecycle else { return }
        // One agent per state folder: two would overwrite each other's account.
        let lockFile = open(store.url("agent.lock").path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard lockFile >= 0, flock(lockFile, LOCK_EX | LOCK_NB) == 0 else {
            if lockFile >= 0 { close(lockFile) }
            lifecycle = .stopped
            throw AgentError("another handoffd already uses the state folder \(configuration.stateDirectory.path); stop it first, or give this one another --state-dir")
        }
        lifecycle = .running(lockFile: lockFile)
        store.sweep()
        // Copies kept by an agent that did not stop (it was killed) are offered by no one.
        try? FileManager.default.removeItem(at: clipboardFolder)
        removeStaleClipboardFiles(unfinished: true)
        if configuration.allowsUnsignedApps {
            logger.warning("development mode: apps that are not signed are installed too (each with a warning); turn it off for everyday use")
        }
        do {
            if let loaded = try DeviceIdentity.load(from: store) {
                identity = loaded
            } else {
                let name = configuration.name ?? ProcessInfo.processInfo.hostName
                identity = try DeviceIdentity.generate(name: name)
                try identity.save(to: store)
                logger.info("made this device's identity", metadata: ["name": "\(name)", "fingerprint": "\(identity.fingerprint)"])
            }
            account = try store.load(AccountState.self, from: AccountState.fileName)
            // A join this device was killed in the middle of. With no account saved, its end
            // was never taken up: the inviting device may have added it on its confirmation.
            if FileManager.default.fileExists(atPath: store.url(AccountState.joiningFileName).path) {
                try? FileManager.default.removeItem(at: store.url(AccountState.joiningFileName))
                if account == nil {
                    logger.warning("a join was cut off when this agent last stopped; if the inviting device lists this device, remove it there, then join again")
                }
            }
            if let account { _ = try account.keys(in: store) }
            // Read only to refuse a damaged file now, with the rest of the state: the changes stay
            // on disk until a member is caught up (`keptChanges()`).
            _ = try store.load([RecordedChange].self, from: AccountState.changesFileName)
        } catch let error as StateError {
            throw AgentError("\(error)")
        } catch {
            throw AgentError("cannot make this device's identity: \(error)")
        }
        updatePins()
        // No install runs yet: what an interrupted one left can go.
        registry.recoverInterruptedInstalls()
        reloadApps()

        try await listenForLinks()
        do throws(AgentError) {
            try await startDiscovery()
            if configuration.servesLocalSocket {
                do {
                    endpoints.local = try await LocalAPIServer(
                        path: configuration.socketPath, eventLoopGroup: eventLoopGroup, logger: logger,
                        serveStream: { [weak self] client, inbound, outbound in
                            guard let self else { return }
                            await self.serveStream(client, &inbound, outbound)
                        }
                    ) { [weak self] peer, messages in
                        await self?.serve(peer, messages)
                    }
                } catch {
                    throw AgentError(error.message)
                }
            }
        } catch {
            await stop()
            throw error
        }
        busy()
        if configuration.idleRelease != nil { schedule(.startupRelease, after: configuration.startupRelease) }
        logger.notice(
            "handoffd is running",
            metadata: [
                "device": "\(deviceName)", "account": "\(account?.name ?? "none")", "socket": "\(configuration.socketPath)",
                "links": "\(configuration.listen.host):\(linkPort)",
            ])
    }

    /// Stops everything: apps are disconnected, links closed, the socket file removed.
    public func stop() async {
        // Apps and clients, on the socket or in this process, are disconnected.
        for session in sessions.values { session.peer.close() }
        await discovery?.stop()
        discovery = nil
        await endpoints.local?.close()
        endpoints.local = nil
        await endpoints.links?.close()
        endpoints.links = nil
        for channel in endpoints.unicast { try? await channel.close() }
        endpoints.unicast = []
        await endpoints.pairing.listener?.close()
        endpoints.pairing = PairingListener()
        run(pairing.expireAll())
        for link in links.values { link.close() }
        links = [:]
        if case .running(let lockFile) = lifecycle { close(lockFile) }
        if case .running = lifecycle { lifecycle = .stopped }
        run(continuations.stopped())
        for timer in deadlines.values { timer.cancel() }
        deadlines = [:]
        clipboardTimer?.cancel()
        clipboardTimer = nil
        // Pastes waiting for this device's provider end now, not at a timer the stop cancels.
        for read in Array(clipboardReads.keys) { await endRead(read, failure: "the agent on '\(deviceName)' stopped") }
        await tasks.end()
        // A copy is offered while the agent runs: its bytes go with it.
        removeClipboardContent(clipboardBoard.clear())
    }

    /// Opens the link listener and, on real networks, the UDP sockets on its port. A port the
    /// system chooses (0) is one whose UDP is free too: one where another program holds UDP
    /// is kept bound while the system is asked again, so that it hands out another.
    private func listenForLinks() async throws(AgentError) {
        var refused: [any LinkListening] = []
        let outcome = await takeLinkPort(refused: &refused)
        for listener in refused { await listener.close() }
        try outcome.get()
    }

    private func takeLinkPort(refused: inout [any LinkListening]) async -> Result<Void, AgentError> {
        var port = configuration.listen.port
        /// The default port is held (another user's agent on this machine, most often): take
        /// one the system chooses instead, and say so.
        func givesWay(_ error: any Error) -> Bool {
            guard configuration.listenFallsBack, port != 0, Self.isAddressInUse(error) else { return false }
            logger.notice("port \(port) is taken (another user's agent on this machine?); links use a port the system chooses")
            port = 0
            return true
        }
        for _ in 0..<64 {
            let made: any LinkListening
            do {
                made = try await network.listen(
                    identity: identity, trust: .members({ [pins] in pins.value.contains($0) }), host: listenHost,
                    port: port,
                    whenAccepted: { [weak self] connection in self?.linkAccepted(connection) },
                    acceptStream: { [weak self] target, stream, peer in
                        guard let self else { return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the agent stopped") }
                        switch target {
                        case .activity(let activityID): return await self.acceptStream(activityID, stream, from: peer)
                        case .clipboard(let generation, let type): return await self.acceptPaste(generation: generation, type: type, stream, from: peer)
                        }
                    }
                ) { [weak self] frame, peer in
                    await self?.answer(frame, from: peer)
                }
            } catch {
                if givesWay(error) { continue }
                return .failure(AgentError("cannot listen for links on \(configuration.listen): \(error); choose another --listen"))
            }
            guard network.beaconBus == nil else {
                endpoints.links = made
                return .success(())
            }
            do {
                endpoints.unicast = try await UnicastSockets.bind(host: listenHost, port: made.port, eventLoopGroup: eventLoopGroup)
                endpoints.links = made
                return .success(())
            } catch {
                let held = Self.isAddressInUse(error)
                if givesWay(error) {
                    await made.close()
                    continue
                }
                guard held, port == 0 else {
                    await made.close()
                    return .failure(AgentError(
                        "UDP port \(made.port) on \(listenHost), where static peers' beacons arrive, "
                            + (held ? "is held by another program" : "cannot be taken: \(error)") + "; choose another --listen"))
                }
                refused.append(made)
            }
        }
        return .failure(AgentError("no port on \(listenHost) was free for both TCP and UDP in 64 tries; choose one with --listen"))
    }

    /// Whether binding failed because another socket holds the address (EADDRINUSE), however
    /// the error came wrapped.
    static func isAddressInUse(_ error: any Error) -> Bool {
        if let io = error as? IOError { return io.errnoCode == EADDRINUSE }
        return "\(error)".contains("Address already in use") || "\(error)".contains("EADDRINUSE")
    }

    /// The port links listen on (and static peers send beacons to).
    package var linkPort: Int { endpoints.links?.port ?? configuration.listen.port }

    /// This device's name.
    package var deviceName: String { configuration.name ?? identity?.name ?? ProcessInfo.processInfo.hostName }

    package var deviceID: UUID { identity.id }

    /// This device as the account's members list it (its id, name and certificate).
    package var member: AccountState.Member {
        AccountState.Member(id: identity.id, name: deviceName, certificate: Data(identity.certificateDER))
    }

    func updatePins() {
        var fingerprints: [UUID: String] = [:]
        for member in account?.members ?? [] {
            if let certificate = member.certificate { fingerprints[member.id] = DeviceIdentity.fingerprint(ofCertificate: Array(certificate)) }
        }
        // Links prove membership sealed with the account's keys; retired ones open proofs (a
        // member that was away holds only those) and seal only where a link needs them.
        identity.links.useAccountKeys((account?.beaconKeys ?? []).map(Array.init), retired: (account?.retiredBeaconKeys ?? []).map(Array.init))
        memberFingerprints = fingerprints
        pins.value = Set(fingerprints.values)
        // A device that left the account (or this device, leaving it) offers nothing here.
        for device in clipboardBoard.remote.keys where fingerprints[device] == nil {
            clipboardBoard.gone(device)
            clipboardChanged()
        }
    }

    func reloadApps() {
        let (loaded, problems) = registry.load()
        installed.loaded(loaded)
        for problem in problems { logger.warning("an installed app cannot be used: \(problem)") }
    }

    /// Installs an app that runs in this process, for this run only: an in-process client
    /// (`connectInProcess`) naming its bundle identifier is it, and the launcher starts it
    /// when a continuation needs it. Installing a bundle again replaces its manifest.
    package func installInProcess(_ manifest: AppManifest) {
        let folder = configuration.stateDirectory.appendingPathComponent("in-process/\(manifest.bundleIdentifier)", isDirectory: true)
        installed.addInProcess(InstalledApp(manifest: manifest, directory: folder, executable: folder.appendingPathComponent("(in process)"), runsInProcess: true))
        reloadApps()
    }

    /// Chooses the browser app that receives web activities itself (nil: pages open with the
    /// browser command).
    package func setDefaultBrowser(_ bundleIdentifier: String?) {
        installed.defaultBrowser = bundleIdentifier
    }

    func startDiscovery() async throws(AgentError) {
        guard let account else { return }
        let keys: [BeaconKey]
        do {
            keys = try account.keys(in: store)
        } catch {
            throw AgentError("\(error)")
        }
        var discoveryConfiguration = DiscoveryConfiguration(
            port: configuration.discoveryPort, interfaces: configuration.interfaces ?? [],
            allMulticastInterfaces: configuration.interfaces == nil,
            // Beacons go out over the families links are taken on: their source is where a link is opened.
            ipv4: !listenHost.contains(":") || listenHost == "::", ipv6: listenHost.contains(":"),
            refreshInterval: configuration.refreshInterval, idleRefreshInterval: configuration.idleRefreshInterval,
            expiry: configuration.expiry, unicastListen: (listenHost, linkPort),
            staticPeers: configuration.staticPeers.map { ($0.host, $0.port) },
            serviceDiscoveryPort: configuration.serviceDiscoveryPort, nameRotation: configuration.nameRotation)
        discoveryConfiguration.unicastSockets = endpoints.unicast
        // The certificate handshakes show changes with the DNS-SD names, and at least as often.
        identity.links.lifetime = configuration.nameRotation
        discoveryConfiguration.namesRenewed = { [links = identity.links] in links.renew() }
        let made = Discovery(
            device: identity.id, keys: keys, retiredKeys: account.retiredKeys, accountRevision: account.revision,
            linkPort: UInt16(clamping: linkPort), configuration: discoveryConfiguration,
            eventLoopGroup: eventLoopGroup, logger: logger, bus: network.beaconBus.map { ($0, configuration.listen.host) })
        do {
            try await made.start()
        } catch {
            await made.stop()
            throw AgentError("discovery could not start: \(error)")
        }
        // The agent stopped while discovery started (a join ending as it stops): it keeps none.
        guard case .running = lifecycle else { return await made.stop() }
        discovery = made
        await made.forward { [weak self] change in await self?.discovered(change) }
        try? await made.announce(activities.offered)
    }

    /// Where links listen: the configured host, except that `::` means `0.0.0.0` on a host
    /// without IPv6.
    var listenHost: String {
        let host = configuration.listen.host
        guard host == "::" else { return host }
        let inet6 = (try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8)) ?? ""
        return inet6.isEmpty ? "0.0.0.0" : host
    }

    /// Every interface that is multicast-capable and has an IPv4 address (or, with
    /// `includingIPv6`, any address), loopback excepted.
    static func multicastInterfaces(includingIPv6: Bool = false) -> [String] {
        let devices = (try? System.enumerateDevices()) ?? []
        var names: [String] = []
        for device in devices where device.multicastSupported && !names.contains(device.name) {
            guard InterfaceFlags(name: device.name)?.isLoopback != true else { continue }
            switch device.address {
            case .v4(let address)? where !address.host.starts(with: "127."): names.append(device.name)
            case .v6? where includingIPv6: names.append(device.name)
            default: continue
            }
        }
        return names
    }

    // MARK: The local socket

    func serve(_ peer: LocalPeer, _ messages: LocalMessages) async {
        var iterator = messages.makeAsyncIterator()
        guard let first = await iterator.next() else { return }
        guard case .success(.call(let request, .hello(let version, let role, let claimed))) = first else {
            if case .success(.call(let request, _)) = first {
                peer.send(.reply(request: request, .failure(LocalError(.badRequest, "the first message must be 'hello'"))))
            }
            peer.close()
            return
        }
        guard version == LocalMessage.version else {
            peer.send(.reply(request: request, .failure(LocalError(.badRequest, "this agent speaks local API version \(LocalMessage.version), the client \(version)"))))
            peer.close()
            return
        }
        var app: InstalledApp?
        if role == .app {
            switch verify(peer, claimed: claimed) {
            case .success(let found): app = found
            case .failure(let error):
                logger.warning("refused a local client: \(error.message)", metadata: ["pid": "\(peer.pid)"])
                peer.send(.reply(request: request, .failure(error)))
                peer.close()
                return
            }
        }
        let session = Session(peer: peer, role: role, app: app)
        sessions[session.id] = session
        activities.opened(session.id)
        var logger = self.logger
        logger[metadataKey: "pid"] = "\(peer.pid)"
        logger[metadataKey: "client"] = "\(app?.manifest.bundleIdentifier ?? role.rawValue)"
        logger.debug("local client connected")
        peer.send(.reply(request: request, LocalReply(
            version: LocalMessage.version, device: thisDevice, app: app.map(localApp), account: account?.name,
            containers: configuration.containers.map { LocalContainer(identifier: $0.identifier, folder: $0.folder.path) })))
        // A continuation waiting for the app goes to it now, after the answer to its hello.
        if let bundleIdentifier = app?.manifest.bundleIdentifier {
            run(continuations.appConnected(bundleIdentifier, session: session.id))
        }

        while let next = await iterator.next() {
            switch next {
            case .success(let message):
                await handle(message, from: session, logger: logger)
            case .failure(let error):
                logger.warning("a local client sent a message that cannot be read: \(error.message)")
            }
        }
        ended(session)
        logger.debug("local client disconnected")
    }

    /// Connects a client in this process: it speaks the local API with no socket, and every
    /// message the agent sends it goes to `onMessage`, in order; `onClose` is called when the
    /// session ends (the client closed, or the agent hung up or stopped). Its first message
    /// must be `hello`, as on the socket.
    package func connectInProcess(
        onMessage: @escaping @Sendable (LocalMessage) -> Void, onClose: (@Sendable () -> Void)? = nil
    ) -> InProcessClient {
        // What the client sends waits for the agent however much it is, as calls into the same
        // process would: the client's own memory, and nothing it sends is dropped.
        let (incoming, inbox) = AsyncStream<Result<LocalMessage, LocalError>>.makeStream(bufferingPolicy: .unbounded)
        let closed = LockedValue(false)
        // Messages reach the client as the agent sends them, so that what the agent sent
        // before a reply has reached the client when the reply does.
        let peer = LocalPeer(inProcessDelivering: { message in
            if !closed.value { onMessage(message) }
        }, hangUp: {
            closed.value = true
            inbox.finish()
        })
        let serving = tasks.start("in-process client") { [weak self] in
            await self?.serve(peer, LocalMessages(incoming))
            closed.value = true
            onClose?()
        }
        if !serving {
            // A stopped agent serves no one: the client is told at once.
            closed.value = true
            inbox.finish()
            onClose?()
        }
        return InProcessClient(inbox: inbox, closed: closed)
    }

    /// Which installed app the process behind `peer` is: the one whose installed executable
    /// it runs. A process claiming an app it does not run is refused.
    func verify(_ peer: LocalPeer, claimed: String?) -> Result<InstalledApp?, LocalError> {
        if peer.isInProcess {
            guard let claimed, !claimed.isEmpty else { return .success(nil) }
            guard let app = installed.app(claimed) else {
                return .failure(LocalError(.notFound, "no app '\(claimed)' is installed on this device"))
            }
            return .success(app)
        }
        if let claimed, !claimed.isEmpty, let why = peer.notAnApp {
            return .failure(LocalError(.notAllowed, "\(why) ('\(claimed)')"))
        }
        let running = peer.executable.map { $0.resolvingSymlinksInPath().standardizedFileURL.path }
        let match = installed.all.first { app in !app.runsInProcess && app.executable.resolvingSymlinksInPath().standardizedFileURL.path == running }
        if let match, !match.executableIntact {
            logger.warning("refused a process as '\(match.manifest.bundleIdentifier)': its executable \(match.executable.path) changed since it was installed")
            return .failure(LocalError(.notAllowed, Self.changedExecutable(match)))
        }
        if let claimed, !claimed.isEmpty, match?.manifest.bundleIdentifier != claimed {
            if let copy = installed.app(claimed) {
                return .failure(LocalError(.notAllowed, "process \(peer.pid) (\(running ?? "unknown executable")) claims to be '\(claimed)', but that app's executable is \(copy.executable.path); start the installed app, or install this build with 'handoff apps install'"))
            }
            if let match {
                return .failure(LocalError(.notAllowed, "process \(peer.pid) runs the executable of '\(match.manifest.bundleIdentifier)' but claims to be '\(claimed)'"))
            }
        }
        return .success(match)
    }

    /// Why an app whose executable changed since install is neither started nor taken.
    static func changedExecutable(_ app: InstalledApp) -> String {
        "the executable of '\(app.manifest.bundleIdentifier)' (\(app.executable.path)) changed since it was installed: it is no longer the app \(app.signedBy.map { "team \($0) signed" } ?? "that was installed"); install the app again with 'handoff apps install'"
    }

    func handle(_ message: LocalMessage, from session: Session, logger: Logger) async {
        busy()
        switch message {
        case .call(let request, let call):
            await handle(call, request: request, from: session, logger: logger)
        case .becameCurrent(var activity):
            if let app = session.app {
                activity.bundleIdentifier = app.manifest.bundleIdentifier
                activity.teamIdentifier = app.manifest.teamIdentifier
            }
            // A system activity of a kind that is off here is not offered.
            if activity.activityType.hasPrefix(SystemActivityType.prefix), !isSystemActivityOn(activity.activityType) {
                logger.notice("a system activity was not offered: \(SystemActivityType.kind(of: activity.activityType) ?? activity.activityType) are off on this device (--system-activities)")
                return
            }
            // What a beacon cannot carry is refused here, not found out when sealing fails.
            guard activity.activityType.utf8.count <= Beacon.maximumActivityTypeBytes,
                (activity.teamIdentifier?.utf8.count ?? 0) <= Beacon.maximumTeamBytes, !activity.activityType.isEmpty
            else {
                logger.warning("an activity was not offered: its type must have 1 to \(Beacon.maximumActivityTypeBytes) bytes and its team at most \(Beacon.maximumTeamBytes)")
                return
            }
            activities.becameCurrent(activity, in: session.id)
            await offerChanged()
        case .resigned(let id):
            activities.resigned(id, in: session.id)
            await offerChanged()
        case .invalidated(let id):
            activities.invalidated(id, in: session.id)
            await offerChanged()
        case .saved(let request, let record):
            finishSave(request, session: session, .success(record))
        case .saveFailed(let request, let error):
            finishSave(request, session: session, .failure(error))
        case .streamRefused(let token, let error):
            guard streams.pending[token]?.session == session.id else { return }
            settleStream(token, ContinuationFailure(code: error.code ?? ContinuationFailure.Code.handoffFailed, message: error.message))
        case .delivered(let continuation, let error):
            guard let delivery = systemDeliveries[continuation], delivery.session == session.id else { return }
            delivery.opened.settle(error)
        case .clipboardRefused(let read, let error):
            guard clipboardReads[read]?.session == session.id else { return }
            await endRead(read, failure: "the clipboard's provider on '\(deviceName)' could not give it: \(error.message)")
        case .reply, .save, .willContinue, .deliver, .fail, .wasContinued, .event, .streamRequest, .prove, .proof, .clipboardRequest, .clipboardChanged:
            logger.warning("a local client sent a message only the agent sends")
        }
    }

    func ended(_ session: Session) {
        sessions[session.id] = nil
        run(continuations.sessionEnded(session.id))
        activities.ended(session.id)
        nearbyWatch.unwatch(session.id)
        endStreams(of: session.id)
        clipboardSessionEnded(session.id)
        systemHandlers[session.id] = nil
        for delivery in systemDeliveries.values where delivery.session == session.id {
            delivery.opened.settle(LocalError(.failed, "the session service ended before it said whether it opened it"))
        }
        tasks.start("offer after a session ended") { await self.offerChanged() }
    }

    func handle(_ call: LocalCall, request: UInt64, from session: Session, logger: Logger) async {
        let reply: LocalReply
        switch call {
        case .hello:
            reply = .failure(LocalError(.badRequest, "'hello' comes once, first"))
        case .status:
            reply = LocalReply(status: await status())
        case .devices:
            reply = LocalReply(devices: await devices())
        case .nearby:
            reply = LocalReply(activities: await nearbyActivities())
        case .apps:
            reply = LocalReply(apps: installed.all.map(localApp))
        case .installApp(let directory, _) where !directory.hasPrefix("/"):
            // Read from the agent's working folder, not the caller's: refused, not guessed.
            reply = .failure(LocalError(.badRequest, "'\(directory)' is a relative path: give the app's folder as an absolute path ('handoff apps install' does)"))
        case .installApp(let directory, let settings):
            do {
                // Copying, hashing and flushing an app to disk take a while: on a thread of their
                // own, not one of the few that async code shares.
                let registry = self.registry
                let outcome: Result<(app: InstalledApp, warning: String?), AppRegistryError> = await withCheckedContinuation { continuation in
                    Thread.detachNewThread {
                        do throws(AppRegistryError) {
                            continuation.resume(returning: .success(try registry.install(from: URL(fileURLWithPath: directory), settings: settings)))
                        } catch {
                            continuation.resume(returning: .failure(error))
                        }
                    }
                }
                let (added, warning) = try outcome.get()
                reloadApps()
                if let warning {
                    logger.warning("added app '\(added.manifest.bundleIdentifier)' unsigned: \(warning)", metadata: ["from": "\(directory)"])
                } else {
                    logger.notice(
                        "added app '\(added.manifest.bundleIdentifier)', signed by team \(added.signedBy ?? "?")", metadata: ["from": "\(directory)"])
                }
                var installedReply = LocalReply(app: localApp(added))
                let warnings = added.manifest.warnings.map(\.description) + (warning.map { [$0] } ?? [])
                installedReply.warnings = warnings.isEmpty ? nil : warnings
                reply = installedReply
            } catch {
                reply = .failure(LocalError(.failed, error.message))
            }
        case .removeApp(let bundleIdentifier):
            do {
                try registry.remove(bundleIdentifier)
                reloadApps()
                reply = LocalReply()
            } catch {
                reply = .failure(LocalError(.notFound, error.message))
            }
        case .createAccount(let name):
            reply = await createAccount(name: name)
        case .invite(let token, let host, let lifetime):
            reply = await invite(kind: token ? .token : .interactive, host: host, lifetime: lifetime)
        case .awaitJoin(let id):
            tasks.start("awaitJoin") {
                let reply = await self.awaitJoin(id)
                session.peer.send(.reply(request: request, reply))
            }
            return
        case .confirmJoin(let id, let accept):
            reply = await confirmJoin(id, accept: accept)
        case .join(let code):
            reply = join(code)
        case .awaitJoinResult:
            tasks.start("awaitJoinResult") {
                let reply = await self.awaitJoinResult()
                session.peer.send(.reply(request: request, reply))
            }
            return
        case .removeDevice(let name):
            reply = await removeDevice(named: name)
        case .probe(let host, let port):
            reply = LocalReply(probe: await probe(host: host, port: port))
        case .doctor:
            reply = LocalReply(checks: await doctor())
        case .siteAssociation(let host, let url):
            reply = await siteAssociationReport(host: host, url: url)
        case .openStream, .acceptStream, .copy, .paste, .provideClipboard:
            reply = .failure(LocalError(.badRequest, "'openStream', 'acceptStream', 'copy', 'paste' and 'provideClipboard' open a connection of their own: send one as the first message of a new connection"))
        case .offerClipboard(let types):
            reply = await offerClipboard(types, from: session)
        case .handleSystemActivities(let types):
            reply = handleSystemActivities(types, from: session)
        case .systemActivityStatus(let status):
            reply = systemActivityStatus(status, from: session)
        case .watchClipboard(let served):
            if let served, served.isEmpty || served.count > 200 || served.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                reply = .failure(LocalError(.badRequest, "'session' names the clipboard a service serves in 1 to 200 characters on one line"))
            } else {
                clipboardWatchers[session.id] = ClipboardWatcher(peer: session.peer, session: served)
                var watching = LocalReply()
                watching.clipboard = localClipboard()
                reply = watching
            }
        case .watch:
            nearbyWatch.watch(session.id, through: session.peer)
            reply = LocalReply(activities: await nearbyActivities())
        case .continue(let activity):
            // A continuation takes as long as the other device does: the session goes on meanwhile.
            tasks.start("continue") {
                var notice: (@Sendable () -> Void)?
                let reply = await self.continueActivity(activity, logger: logger, notice: &notice)
                HopTrace.stamp("replied")
                session.peer.send(.reply(request: request, reply))
                notice?()
            }
            return
        }
        session.peer.send(.reply(request: request, reply))
    }

    // MARK: Account

    func createAccount(name: String) async -> LocalReply {
        await changingAccount { await makeAccount(name: name) }
    }

    func makeAccount(name: String) async -> LocalReply {
        if let account {
            return .failure(LocalError(.account, "this device is already in the account '\(account.name)'"))
        }
        guard !name.trimmingCharacters(in: .whitespaces).isEmpty else {
            return .failure(LocalError(.badRequest, "an account needs a name"))
        }
        let made = AccountState(name: name, members: [member], beaconKeys: [Data(BeaconKey.generate().rawRepresentation)])
        do {
            try store.save(made, to: AccountState.fileName)
        } catch {
            return .failure(LocalError(.failed, "\(error)"))
        }
        account = made
        updatePins()
        do {
            try await startDiscovery()
        } catch {
            return .failure(LocalError(.failed, "the account was made, but \(error.message)"))
        }
        logger.notice("made the account '\(name)'")
        return LocalReply(account: name)
    }

    /// Installs an account made elsewhere (by pairing, or by a test that sets up devices).
    package func adopt(_ state: AccountState) async throws(AgentError) {
        do {
            try store.save(state, to: AccountState.fileName)
        } catch {
            throw AgentError("\(error)")
        }
        // In an account again: the record of an earlier removal is over.
        try? FileManager.default.removeItem(at: store.url(Self.removalFileName))
        let keysChanged = account?.beaconKeys != state.beaconKeys
        account = state
        updatePins()
        await discovery?.setAccountRevision(state.revision)
        guard keysChanged || discovery == nil else { return }
        await discovery?.stop()
        discovery = nil
        try await startDiscovery()
    }


    /// Runs `body` as the only change to the account under way: changes are made one after
    /// the other, each from the state the one before left, however their awaits interleave.
    func changingAccount<T>(_ body: () async -> T) async -> T {
        await withCheckedContinuation { run(pairing.beginAccountChange(.accountTurn($0))) }
        defer { run(pairing.accountChangeEnded()) }
        return await body()
    }

    /// Sets the timer of a machine's deadline; its firing goes back to that machine.
    func schedule(_ deadline: Deadline, after: Duration) {
        deadlines[deadline]?.cancel()
        deadlines[deadline] = LoopTimer(after: after) { [weak self] in
            self?.tasks.start("deadline") { await self?.deadlinePassed(deadline) }
        }
    }

    func deadlinePassed(_ deadline: Deadline) {
        guard deadlines.removeValue(forKey: deadline) != nil else { return }
        switch deadline {
        case .continuation(let deadline): run(continuations.deadlinePassed(deadline))
        case .pairing(let deadline): pairingDeadlinePassed(deadline)
        case .offerExpiry: tasks.start("offer expiry") { await self.offerChanged() }
        case .idleRelease: idleDeadlinePassed()
        case .startupRelease: startupDeadlinePassed()
        }
    }

    // MARK: Idle memory

    /// The agent did something for an app, a client or another device. With `--idle-release`,
    /// one deadline follows the idle spell: set when the agent is first busy after a release,
    /// not at every call (this one runs for every frame).
    func busy() {
        idle.lastBusy = ContinuousClock.now
        idle.released = false
        guard !idle.armed, let delay = configuration.idleRelease, lifecycle.hasStarted else { return }
        idle.armed = true
        schedule(.idleRelease, after: delay)
    }

    /// Once per idle spell: gives back free heap and code pages (`IdleMemory`). Busy since the
    /// deadline was set (or relaying a stream), it looks again when the spell could be long enough.
    func idleDeadlinePassed() {
        idle.armed = false
        guard let delay = configuration.idleRelease, lifecycle.hasStarted, !idle.released else { return }
        let quiet = ContinuousClock.now - idle.lastBusy
        guard quiet >= delay, idle.relays == 0 else {
            idle.armed = true
            schedule(.idleRelease, after: quiet >= delay ? delay : delay - quiet)
            return
        }
        idle.released = true
        idle.releases += 1
        let released = IdleMemory.release()
        logger.debug(
            "idle: gave back memory",
            metadata: ["residentKB": "\(released.residentBefore) → \(released.residentAfter)", "code": "\(released.code.joined(separator: " "))"])
    }

    /// Once, soon after starting: gives back free heap and code pages (`IdleMemory`) whether or
    /// not the agent is busy. What its work uses comes back with minor faults as it runs; what
    /// only starting ran (about 15 MB of mapped code in `handoffd`) does not. Relaying a stream,
    /// it waits for the relay to end.
    func startupDeadlinePassed() {
        guard configuration.idleRelease != nil, lifecycle.hasStarted else { return }
        guard idle.relays == 0 else {
            schedule(.startupRelease, after: .seconds(1))
            return
        }
        idle.startupReleased = true
        let released = IdleMemory.release()
        logger.debug(
            "started: gave back memory",
            metadata: ["residentKB": "\(released.residentBefore) → \(released.residentAfter)", "code": "\(released.code.joined(separator: " "))"])
    }

    // MARK: Offering this device's activity

    func offerChanged() async {
        guard activities.updateOffer(at: Date()) else { return }
        let now = activities.offered
        // An activity stops being offered when it expires, not only at the next change: one
        // timer, for the activity offered now.
        if let expiration = now?.expirationDate {
            // Within a century: a timer further off (`Date.distantFuture`) overflows the event loop's nanoseconds.
            let seconds = min(max(0, expiration.timeIntervalSinceNow), 100 * 365 * 86_400)
            schedule(.offerExpiry, after: .milliseconds(Int64(seconds * 1000) + 10))
        } else {
            deadlines.removeValue(forKey: .offerExpiry)?.cancel()
        }
        do {
            try await discovery?.announce(now)
        } catch {
            logger.warning("could not announce the current activity: \(error)")
        }
    }

    // MARK: Serving other devices

    /// Answers a frame from another device's link.
    func answer(_ frame: Frame, from peer: LinkPeer) async -> Frame? {
        busy()
        guard let message = try? LinkMessage(frame: frame) else { return nil }
        switch message {
        case .accountUpdate(let changes):
            await apply(changes, from: peer)
            return nil
        case .removed(let notice):
            await removedNotice(notice)
            return nil
        case .proof, .joinRequest, .joinAccepted, .joinRefused, .joinConfirmed:
            return nil
        case .hello, .fetch:
            return await FetchService.answer(message, device: identity.id) { await self.save($0, for: peer) }
        case .continued(let activityID):
            for sessionID in activities.sessions(holding: activityID) {
                sessions[sessionID]?.peer.send(.wasContinued(activity: activityID))
            }
            return nil
        case .fetched, .fetchFailed:
            return nil
        case .streamOpen, .streamAccepted, .streamRefused, .streamData, .streamCredit, .streamEnd, .streamStop, .streamReset, .clipboardOpen:
            // Stream frames are the link's own business (`LinkStreamMux`).
            return nil
        }
    }

    /// Asks the app that owns `activityID` to save it, within the deadline, and checks the size.
    func save(_ activityID: UUID) async -> Result<FetchedActivity, ContinuationFailure> {
        guard let owner = activities.owner(of: activityID), let session = sessions[owner] else {
            return .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the activity is no longer available on '\(deviceName)': its app closed it or quit"))
        }
        let appName = session.app?.manifest.bundleIdentifier ?? "the local client (process \(session.peer.pid))"
        let result: Result<ActivityRecord, LocalError> = await withCheckedContinuation { waiter in
            run(continuations.save(activityID, session: session.id, waiter: AwaitedSave(waiter: waiter, app: appName)))
        }
        switch result {
        case .failure(let error):
            return .failure(ContinuationFailure(code: error.code ?? ContinuationFailure.Code.handoffFailed, message: error.message))
        case .success(var record):
            let size = record.userInfo?.count ?? 0
            if size > configuration.maximumPayload {
                logger.warning("an activity's userInfo is over the limit", metadata: ["app": "\(appName)", "bytes": "\(size)"])
                return .failure(ContinuationFailure(code: ContinuationFailure.Code.userInfoTooLarge, message: "the activity's userInfo is \(size) bytes, over the limit of \(configuration.maximumPayload) bytes; move bulk data to continuation streams"))
            }
            // Bytes from a client in another language are checked here, so that the origin
            // logs the mistake and the continuing side is told, rather than the app there.
            var references: [WireFileReference] = []
            if let bytes = record.userInfo {
                do {
                    // Checked as the continuing side will (`checkForApp`: `decodeForApp`'s
                    // verdict, the model built only when the bytes hold a file URL).
                    if let value = try UserInfoCoding.checkForApp(bytes), !configuration.containers.isEmpty {
                        references = ContainerTranslation.references(in: value, containers: configuration.containers)
                    }
                } catch {
                    logger.error("an app's saved userInfo cannot be read: \(error)", metadata: ["app": "\(appName)"])
                    return .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the activity's userInfo from \(appName) on '\(deviceName)' cannot be read: \(error)"))
                }
            }
            // What other devices see of the app is what its verified manifest says.
            if let known = activities.announcement(activityID, in: session.id) {
                record.activity.bundleIdentifier = known.bundleIdentifier
                record.activity.teamIdentifier = known.teamIdentifier
            }
            record.activity.id = activityID
            return .success(FetchedActivity(record, fileReferences: references))
        }
    }

    func finishSave(_ request: UInt64, session: Session, _ result: Result<ActivityRecord, LocalError>) {
        run(continuations.saved(request, session: session.id, result))
    }

}

extension Result {
    var failureValue: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}

/// Where an agent is in its life. Holding the state folder's lock (flock) while running makes
/// a second agent on the same state refuse to start.
enum Lifecycle: Sendable {
    case notStarted
    case running(lockFile: Int32)
    case stopped

    /// Whether `start` has been called (an agent is started once).
    var hasStarted: Bool {
        if case .notStarted = self { return false }
        return true
    }
}
