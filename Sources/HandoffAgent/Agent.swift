import Foundation
import Handoff
import HandoffApp
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

/// The version of Handoff this agent is.
public let handoffVersion = "0.3.0"

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
    public let configuration: AgentConfiguration
    private let logger: Logger
    private let store: StateStore
    private let registry: AppRegistry
    private let eventLoopGroup: any EventLoopGroup

    private var identity: DeviceIdentity!
    private var account: AccountState?
    private let pins = LockedValue<Set<String>>([])
    private var apps: [InstalledApp] = []
    private var listener: LinkListener?
    private var discovery: Discovery?
    private var discoveryTask: Task<Void, Never>?
    private var localServer: LocalAPIServer?
    private var sessions: [UUID: Session] = [:]
    /// The apps' current activities, least recent first; the last one is offered.
    private var currentOrder: [(session: UUID, activity: UUID)] = []
    private var offered: LocalActivity?
    private var links: [UUID: PeerConnection] = [:]
    private var watchers: [UUID: LocalPeer] = [:]
    private var knownNearby: [UUID: BeaconActivity] = [:]
    private var pendingSaves: [UInt64: (session: UUID, continuation: CheckedContinuation<Result<LocalRecord, LocalError>, Never>)] = [:]
    private var nextSave: UInt64 = 1
    private var started = false
    /// The account's recent signed changes, oldest first, for members that missed them.
    private var changes: [RecordedChange] = []
    private var lastCatchUp: [UUID: ContinuousClock.Instant] = [:]
    private var accountChanging = false
    private var accountWaiters: [CheckedContinuation<Void, Never>] = []
    private var pairingListener: LinkListener?
    private var openingPairingListener = false
    private var invitations: [UUID: PendingInvitation] = [:]
    private var joining: Task<LocalReply, Never>?
    /// How the last join ended, for an `awaitJoinResult` that comes after it did.
    private var joinResult: LocalReply?

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

    /// An invitation this device made, until it is used or expires.
    private struct PendingInvitation {
        var invitation: Invitation
        var expires: Date
        var used = false
        var candidate: LocalJoinRequest?
        var waiters: [CheckedContinuation<LocalJoinRequest?, Never>] = []
        var decision: CheckedContinuation<Bool, Never>?
    }

    /// A client of the local socket.
    final class Session: Sendable {
        let id = UUID()
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

    /// What each session has said about its activities (kept apart from `Session` so that the
    /// actor alone changes it).
    private var activities: [UUID: [UUID: LocalActivity]] = [:]

    public init(configuration: AgentConfiguration, logger: Logger? = nil, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) throws(AgentError) {
        self.configuration = configuration
        self.eventLoopGroup = eventLoopGroup
        do {
            store = try StateStore(directory: configuration.stateDirectory)
        } catch {
            throw AgentError("\(error)")
        }
        registry = AppRegistry(stateDirectory: configuration.stateDirectory)
        var logger = logger ?? Logger(label: "handoffd")
        logger[metadataKey: "state"] = "\(configuration.stateDirectory.path)"
        self.logger = logger
    }

    // MARK: Starting and stopping

    /// Loads (or makes) the device's identity and account, then opens the link listener,
    /// discovery and the local socket. Every failure names the file, flag or port.
    public func start() async throws(AgentError) {
        guard !started else { return }
        started = true
        store.sweep()
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
            if let account { _ = try account.keys(in: store) }
            changes = try store.load([RecordedChange].self, from: AccountState.changesFileName) ?? []
        } catch let error as StateError {
            throw AgentError("\(error)")
        } catch {
            throw AgentError("cannot make this device's identity: \(error)")
        }
        updatePins()
        reloadApps()

        do {
            listener = try await LinkListener(
                identity: identity, accepting: { [pins] in pins.value.contains($0) }, host: configuration.listen.host,
                port: configuration.listen.port, eventLoopGroup: eventLoopGroup
            ) { [weak self] frame, peer in
                await self?.answer(frame, from: peer)
            }
        } catch {
            throw AgentError("cannot listen for links on \(configuration.listen): \(error); choose another --listen")
        }
        do throws(AgentError) {
            try await startDiscovery()
            do {
                localServer = try await LocalAPIServer(path: configuration.socketPath, eventLoopGroup: eventLoopGroup, logger: logger) { [weak self] peer, messages in
                    await self?.serve(peer, messages)
                }
            } catch {
                throw AgentError(error.message)
            }
        } catch {
            await stop()
            throw error
        }
        logger.notice(
            "handoffd is running",
            metadata: [
                "device": "\(deviceName)", "account": "\(account?.name ?? "none")", "socket": "\(configuration.socketPath)",
                "links": "\(configuration.listen.host):\(linkPort)",
            ])
    }

    /// Stops everything: apps are disconnected, links closed, the socket file removed.
    public func stop() async {
        discoveryTask?.cancel()
        await discovery?.stop()
        discovery = nil
        await localServer?.close()
        localServer = nil
        await listener?.close()
        listener = nil
        await pairingListener?.close()
        pairingListener = nil
        for id in Array(invitations.keys) { expire(id) }
        joining?.cancel()
        for link in links.values { link.close() }
        links = [:]
        for (_, pending) in pendingSaves {
            pending.continuation.resume(returning: .failure(LocalError(.continuation, code: FetchFailure.handoffFailed, "the agent stopped")))
        }
        pendingSaves = [:]
    }

    /// The port links listen on (and static peers send beacons to).
    public var linkPort: Int { listener?.port ?? configuration.listen.port }

    /// This device's name.
    public var deviceName: String { configuration.name ?? identity?.name ?? ProcessInfo.processInfo.hostName }

    public var deviceID: UUID { identity.id }

    /// This device as the account's members list it (its id, name and certificate).
    public var member: AccountState.Member {
        AccountState.Member(id: identity.id, name: deviceName, certificate: Data(identity.certificateDER))
    }

    private func updatePins() {
        let fingerprints = (account?.members ?? []).compactMap { $0.certificate.map { DeviceIdentity.fingerprint(ofCertificate: Array($0)) } }
        pins.value = Set(fingerprints)
    }

    private func reloadApps() {
        let (loaded, problems) = registry.load()
        apps = loaded
        for problem in problems { logger.warning("an installed app cannot be used: \(problem)") }
    }

    private func startDiscovery() async throws(AgentError) {
        guard let account else { return }
        let keys: [BeaconKey]
        do {
            keys = try account.keys(in: store)
        } catch {
            throw AgentError("\(error)")
        }
        let interfaces = configuration.interfaces ?? Self.multicastInterfaces()
        let discoveryConfiguration = DiscoveryConfiguration(
            port: configuration.discoveryPort, interfaces: interfaces, refreshInterval: configuration.refreshInterval,
            expiry: configuration.expiry, unicastListen: (configuration.listen.host, linkPort),
            staticPeers: configuration.staticPeers.map { ($0.host, $0.port) })
        let made = Discovery(
            device: identity.id, keys: keys, retiredKeys: account.retiredKeys, accountRevision: account.revision,
            linkPort: UInt16(clamping: linkPort), configuration: discoveryConfiguration,
            eventLoopGroup: eventLoopGroup, logger: logger)
        do {
            try await made.start()
        } catch {
            await made.stop()
            throw AgentError("discovery could not start: \(error)")
        }
        discovery = made
        let changes = await made.changes()
        discoveryTask = Task { [weak self] in
            for await change in changes {
                await self?.discovered(change)
            }
        }
        try? await made.announce(offered.map(Self.beaconActivity))
    }

    /// Every interface that is up, multicast-capable and has an IPv4 address, loopback excepted.
    static func multicastInterfaces() -> [String] {
        let devices = (try? System.enumerateDevices()) ?? []
        var names: [String] = []
        for device in devices where device.multicastSupported {
            guard case .v4(let address)? = device.address, !names.contains(device.name) else { continue }
            if address.host.starts(with: "127.") { continue }
            names.append(device.name)
        }
        return names
    }

    // MARK: The local socket

    private func serve(_ peer: LocalPeer, _ messages: AsyncStream<Result<LocalMessage, LocalError>>) async {
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
        activities[session.id] = [:]
        var logger = self.logger
        logger[metadataKey: "pid"] = "\(peer.pid)"
        logger[metadataKey: "client"] = "\(app?.manifest.bundleIdentifier ?? role.rawValue)"
        logger.debug("local client connected")
        peer.send(.reply(request: request, LocalReply(version: LocalMessage.version, device: thisDevice, app: app.map(localApp), account: account?.name)))

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

    /// Which installed app the process behind `peer` is: the one whose installed executable
    /// it runs. A process claiming an app it does not run is refused.
    private func verify(_ peer: LocalPeer, claimed: String?) -> Result<InstalledApp?, LocalError> {
        let running = peer.executable.map { $0.resolvingSymlinksInPath().standardizedFileURL.path }
        let match = apps.first { app in app.executable.resolvingSymlinksInPath().standardizedFileURL.path == running }
        if let claimed, !claimed.isEmpty, match?.manifest.bundleIdentifier != claimed {
            if let installed = apps.first(where: { $0.manifest.bundleIdentifier == claimed }) {
                return .failure(LocalError(.notAllowed, "process \(peer.pid) (\(running ?? "unknown executable")) claims to be '\(claimed)', but that app's executable is \(installed.executable.path); start the installed app, or install this build with 'handoff apps install'"))
            }
            if let match {
                return .failure(LocalError(.notAllowed, "process \(peer.pid) runs the executable of '\(match.manifest.bundleIdentifier)' but claims to be '\(claimed)'"))
            }
        }
        return .success(match)
    }

    private func handle(_ message: LocalMessage, from session: Session, logger: Logger) async {
        switch message {
        case .call(let request, let call):
            await handle(call, request: request, from: session, logger: logger)
        case .becameCurrent(var activity):
            if let app = session.app {
                activity.bundleIdentifier = app.manifest.bundleIdentifier
                activity.teamIdentifier = app.manifest.teamIdentifier
            }
            // What a beacon cannot carry is refused here, not found out when sealing fails.
            guard activity.activityType.utf8.count <= Beacon.maximumActivityTypeBytes,
                (activity.teamIdentifier?.utf8.count ?? 0) <= Beacon.maximumTeamBytes, !activity.activityType.isEmpty
            else {
                logger.warning("an activity was not offered: its type must have 1 to \(Beacon.maximumActivityTypeBytes) bytes and its team at most \(Beacon.maximumTeamBytes)")
                return
            }
            // A client keeps at most 64 live activities; the oldest it still has go first.
            if (activities[session.id]?.count ?? 0) >= 64, activities[session.id]?[activity.id] == nil {
                let current = Set(currentOrder.filter { $0.session == session.id }.map(\.activity))
                if let drop = activities[session.id]?.keys.first(where: { !current.contains($0) }) {
                    activities[session.id]?[drop] = nil
                }
            }
            activities[session.id, default: [:]][activity.id] = activity
            currentOrder.removeAll { $0.session == session.id }
            if !activity.activityType.isEmpty {
                currentOrder.append((session.id, activity.id))
            }
            await offerChanged()
        case .resigned(let id):
            currentOrder.removeAll { $0.session == session.id && $0.activity == id }
            await offerChanged()
        case .invalidated(let id):
            activities[session.id]?[id] = nil
            currentOrder.removeAll { $0.session == session.id && $0.activity == id }
            await offerChanged()
        case .saved(let request, let record):
            finishSave(request, session: session, .success(record))
        case .saveFailed(let request, let error):
            finishSave(request, session: session, .failure(error))
        case .reply, .save, .willContinue, .deliver, .fail, .wasContinued, .event:
            logger.warning("a local client sent a message only the agent sends")
        }
    }

    private func ended(_ session: Session) {
        sessions[session.id] = nil
        activities[session.id] = nil
        watchers[session.id] = nil
        currentOrder.removeAll { $0.session == session.id }
        for (request, pending) in pendingSaves where pending.session == session.id {
            pendingSaves[request] = nil
            pending.continuation.resume(returning: .failure(LocalError(.continuation, code: FetchFailure.handoffFailed, "the app quit before it saved the activity")))
        }
        Task { await offerChanged() }
    }

    private func handle(_ call: LocalCall, request: UInt64, from session: Session, logger: Logger) async {
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
            reply = LocalReply(apps: apps.map(localApp))
        case .installApp(let directory):
            do {
                let installed = try registry.install(from: URL(fileURLWithPath: directory))
                reloadApps()
                logger.notice("installed app '\(installed.manifest.bundleIdentifier)'", metadata: ["from": "\(directory)"])
                reply = LocalReply(app: localApp(installed))
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
            Task {
                let reply = await self.awaitJoin(id)
                session.peer.send(.reply(request: request, reply))
            }
            return
        case .confirmJoin(let id, let accept):
            reply = confirmJoin(id, accept: accept)
        case .join(let code):
            reply = join(code)
        case .awaitJoinResult:
            guard let joining else {
                if let finished = joinResult {
                    joinResult = nil
                    reply = finished
                } else {
                    reply = .failure(LocalError(.notFound, "no join is under way; start one with 'handoff join CODE'"))
                }
                break
            }
            Task {
                let reply = await joining.value
                session.peer.send(.reply(request: request, reply))
            }
            return
        case .removeDevice(let name):
            reply = await removeDevice(named: name)
        case .probe(let host, let port):
            reply = LocalReply(probe: await probe(host: host, port: port))
        case .watch:
            watchers[session.id] = session.peer
            reply = LocalReply(activities: await nearbyActivities())
        case .continue(let activity):
            // A continuation takes as long as the other device does: the session goes on meanwhile.
            Task {
                let reply = await self.continueActivity(activity, logger: logger)
                session.peer.send(.reply(request: request, reply))
            }
            return
        }
        session.peer.send(.reply(request: request, reply))
    }

    // MARK: Account

    private func createAccount(name: String) async -> LocalReply {
        await changingAccount { await makeAccount(name: name) }
    }

    private func makeAccount(name: String) async -> LocalReply {
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
    public func adopt(_ state: AccountState) async throws(AgentError) {
        do {
            try store.save(state, to: AccountState.fileName)
        } catch {
            throw AgentError("\(error)")
        }
        let keysChanged = account?.beaconKeys != state.beaconKeys
        account = state
        updatePins()
        await discovery?.setAccountRevision(state.revision)
        guard keysChanged || discovery == nil else { return }
        discoveryTask?.cancel()
        await discovery?.stop()
        discovery = nil
        try await startDiscovery()
    }


    /// Runs `body` as the only change to the account under way: changes are made one after
    /// the other, each from the state the one before left, however their awaits interleave.
    private func changingAccount<T>(_ body: () async -> T) async -> T {
        while accountChanging {
            await withCheckedContinuation { accountWaiters.append($0) }
        }
        accountChanging = true
        defer {
            accountChanging = false
            if !accountWaiters.isEmpty { accountWaiters.removeFirst().resume() }
        }
        return await body()
    }

    // MARK: Pairing

    /// Makes an invitation and opens the pairing listener for it.
    private func invite(kind: Invitation.Kind, host: String?, lifetime: Double?) async -> LocalReply {
        guard let account else {
            return .failure(LocalError(.account, "this device is in no account yet; make one with 'handoff account create --name NAME'"))
        }
        let lifetime = lifetime ?? 600
        guard lifetime > 0, lifetime <= 86_400 else {
            return .failure(LocalError(.badRequest, "an invitation lasts from 1 second to 24 hours"))
        }
        guard let address = host ?? invitationAddress() else {
            return .failure(LocalError(.badRequest, "this device has no address to put in the invitation; give one with --address"))
        }
        while openingPairingListener { try? await Task.sleep(for: .milliseconds(10)) }
        if pairingListener == nil {
            openingPairingListener = true
            defer { openingPairingListener = false }
            // On the link port plus one, so a firewall needs one more port; with a random link
            // port (tests), a random one.
            let port = configuration.listen.port == 0 ? 0 : configuration.listen.port + 1
            do {
                pairingListener = try await LinkListener(
                    identity: identity, accepting: { _ in true }, host: configuration.listen.host, port: port, eventLoopGroup: eventLoopGroup
                ) { [weak self] frame, peer in
                    await self?.answerJoin(frame, from: peer)
                }
            } catch {
                return .failure(LocalError(.failed, "cannot listen for joining devices on \(configuration.listen.host):\(port): \(error)"))
            }
        }
        let invitation = Invitation.make(kind, host: address, port: pairingListener!.port, fingerprint: identity.fingerprint)
        let id = UUID()
        let expires = Date().addingTimeInterval(lifetime)
        invitations[id] = PendingInvitation(invitation: invitation, expires: expires)
        Task { [weak self] in
            try? await Task.sleep(for: .milliseconds(Int64(lifetime * 1000)))
            await self?.expire(id)
        }
        logger.notice("made an invitation to '\(account.name)'", metadata: ["kind": "\(kind)", "expires": "\(expires)"])
        return LocalReply(
            invitation: LocalInvitation(
                id: id, code: invitation.code, kind: kind == .token ? "token" : "interactive", expires: expires, host: address, port: invitation.port))
    }

    private func invitationAddress() -> String? {
        let listen = configuration.listen.host
        if listen != "0.0.0.0" && listen != "::" { return listen }
        let interfaces = configuration.interfaces ?? Self.multicastInterfaces()
        let devices = (try? System.enumerateDevices()) ?? []
        for name in interfaces {
            if let device = devices.first(where: { $0.name == name }), case .v4? = device.address, let ip = device.address?.ipAddress {
                return ip
            }
        }
        return nil
    }

    private func expire(_ id: UUID) {
        guard let pending = invitations.removeValue(forKey: id) else { return }
        for waiter in pending.waiters { waiter.resume(returning: nil) }
        pending.decision?.resume(returning: false)
        // The listener closes a little later, so the answer to a join in progress is written.
        Task { [weak self] in
            try? await Task.sleep(for: .seconds(5))
            await self?.closePairingListenerIfIdle()
        }
    }

    private func closePairingListenerIfIdle() async {
        guard invitations.isEmpty, let listener = pairingListener else { return }
        pairingListener = nil
        await listener.close()
    }

    private func awaitJoin(_ id: UUID) async -> LocalReply {
        guard invitations[id] != nil else {
            return .failure(LocalError(.notFound, "the invitation has expired or was used"))
        }
        let request: LocalJoinRequest? = await withCheckedContinuation { continuation in
            if let candidate = invitations[id]?.candidate {
                continuation.resume(returning: candidate)
            } else if invitations[id] != nil {
                invitations[id]?.waiters.append(continuation)
            } else {
                continuation.resume(returning: nil)
            }
        }
        guard let request else { return .failure(LocalError(.notFound, "the invitation expired before a device asked to join")) }
        return LocalReply(joinRequest: request)
    }

    private func confirmJoin(_ id: UUID, accept: Bool) -> LocalReply {
        guard let decision = invitations[id]?.decision else {
            return .failure(LocalError(.notFound, "no device is waiting to join with that invitation"))
        }
        invitations[id]?.decision = nil
        decision.resume(returning: accept)
        return LocalReply()
    }

    /// Answers a frame on the pairing listener: only `joinRequest` is heard there.
    private func answerJoin(_ frame: Frame, from peer: LinkPeer) async -> Frame? {
        guard case .joinRequest(let version, let name, let certificate, let proof)? = try? LinkMessage(frame: frame) else {
            return LinkMessage.joinRefused(reason: "only a join request is answered here").frame
        }
        let refuse = { (reason: String) -> Frame? in
            self.logger.warning("refused a device asking to join: \(reason)", metadata: ["name": "\(name)"])
            return LinkMessage.joinRefused(reason: reason).frame
        }
        guard version == LinkMessage.version else { return refuse("it speaks link protocol version \(version), this device \(LinkMessage.version)") }
        guard certificate == peer.certificate else { return refuse("the certificate in the request is not the one it connected with") }
        let now = Date()
        guard let (id, pending) = invitations.first(where: { !$0.value.used && $0.value.expires > now && $0.value.invitation.isValid(proof: proof, certificate: certificate, name: name) }) else {
            return refuse("the code is wrong, was used already, or has expired; ask for a new one with 'handoff device invite'")
        }
        // One use, whatever comes of it.
        invitations[id]?.used = true
        guard let account else { return refuse("this device has left its account") }
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 64 else { return refuse("a device name has 1 to 64 bytes") }
        guard !account.members.contains(where: { $0.name == name }) else {
            return refuse("a device named '\(name)' is already in the account; start the new device's agent with another --name")
        }
        let fingerprint = DeviceIdentity.fingerprint(ofCertificate: certificate)
        guard !account.members.contains(where: { $0.certificate.map { DeviceIdentity.fingerprint(ofCertificate: Array($0)) } == fingerprint }) else {
            return refuse("that device is already a member")
        }
        if pending.invitation.kind == .interactive {
            let request = LocalJoinRequest(name: name, verification: pending.invitation.verificationNumber(certificate: certificate), fingerprint: fingerprint)
            let accepted: Bool = await withCheckedContinuation { continuation in
                guard invitations[id] != nil else { return continuation.resume(returning: false) }
                invitations[id]?.candidate = request
                invitations[id]?.decision = continuation
                for waiter in invitations[id]?.waiters ?? [] { waiter.resume(returning: request) }
                invitations[id]?.waiters = []
            }
            guard accepted else {
                expire(id)
                return refuse("the person on '\(deviceName)' did not confirm the join")
            }
        }
        expire(id)
        guard let memberID = UUID(uuidString: peerID(certificate)) else {
            return refuse("its certificate does not name a device id")
        }
        let committed: Result<(SignedChange, [AccountState.Member]), PairingError> = await changingAccount {
            // From the account as it is now: another change may have come while the person decided.
            guard var account = self.account else { return .failure(PairingError("this device has left its account")) }
            guard !account.members.contains(where: { $0.id == memberID || $0.name == name }) else {
                return .failure(PairingError("a device with that id or name is already in the account"))
            }
            let previous = account.members
            account.members.append(AccountState.Member(id: memberID, name: name, certificate: Data(certificate)))
            account.revision += 1
            let signed: SignedChange
            do {
                signed = try SignedAccount(account, by: identity)
                try store.save(account, to: AccountState.fileName)
            } catch {
                return .failure(PairingError("this device could not save the account: \(error)"))
            }
            self.account = account
            updatePins()
            record(signed, revision: account.revision)
            await discovery?.setAccountRevision(account.revision)
            return .success((signed, previous))
        }
        let signed: SignedChange
        let previous: [AccountState.Member]
        switch committed {
        case .success(let made): (signed, previous) = made
        case .failure(let error): return refuse(error.message)
        }
        logger.notice("'\(name)' joined the account")
        // The answer goes first; the other members hear of the new device meanwhile, and the
        // new device hears this one at once, not at the next refresh.
        let pinned = pins.value
        Task {
            await self.push([signed], to: previous, pins: pinned)
            try? await self.discovery?.announce(self.offered.map(Self.beaconActivity))
        }
        return LinkMessage.joinAccepted(signed).frame
    }

    /// The device id a certificate names (its organizational unit), as `DeviceIdentity.generate` writes it.
    private func peerID(_ certificate: [UInt8]) -> String {
        guard let parsed = try? Certificate(derEncoded: certificate) else { return "" }
        for rdn in parsed.subject {
            for attribute in rdn where attribute.type == .RDNAttributeType.organizationalUnitName {
                return String(describing: attribute.value)
            }
        }
        return ""
    }

    /// Starts joining with an invitation code.
    private func join(_ code: String) -> LocalReply {
        if let account {
            return .failure(LocalError(.account, "this device is already in the account '\(account.name)'"))
        }
        if joining != nil {
            return .failure(LocalError(.account, "a join is already under way"))
        }
        joinResult = nil
        let invitation: Invitation
        do {
            invitation = try Invitation(parsing: code)
        } catch {
            return .failure(LocalError(.badRequest, error.message))
        }
        let certificate = identity.certificateDER
        let name = deviceName
        let request = LinkMessage.joinRequest(version: LinkMessage.version, name: name, certificate: certificate, proof: invitation.proof(certificate: certificate, name: name))
        let deadline: Duration = invitation.kind == .interactive ? .seconds(600) : .seconds(30)
        joining = Task { [identity, eventLoopGroup] in
            let answer: Frame
            do {
                answer = try await withDeadline(deadline) {
                    try await LinkClient.exchange(
                        request.frame, host: invitation.host, port: invitation.port, identity: identity!,
                        accepting: { invitation.matches(fingerprint: $0) }, eventLoopGroup: eventLoopGroup)
                }
            } catch {
                return self.joinEnded(.failure(LocalError(.failed, "cannot reach the inviting device at \(invitation.host):\(invitation.port), or it is not the device that made the code: \(error)")))
            }
            return self.joinEnded(await self.joined(answer))
        }
        return LocalReply(verification: invitation.kind == .interactive ? invitation.verificationNumber(certificate: certificate) : nil)
    }

    private func joinEnded(_ reply: LocalReply) -> LocalReply {
        joining = nil
        joinResult = reply
        return reply
    }

    private func joined(_ answer: Frame) async -> LocalReply {
        switch try? LinkMessage(frame: answer) {
        case .joinAccepted(let change)?:
            let account: AccountState
            do {
                account = try change.account()
            } catch {
                return .failure(LocalError(.failed, error.message))
            }
            guard account.members.contains(where: { $0.certificate.map(Array.init) == identity.certificateDER }) else {
                return .failure(LocalError(.failed, "the inviting device answered with an account that does not list this device"))
            }
            let adopted: AgentError? = await changingAccount {
                guard self.account == nil else { return AgentError("this device joined another account meanwhile") }
                do throws(AgentError) {
                    try await adopt(account)
                } catch {
                    return error
                }
                record(change, revision: account.revision)
                return nil
            }
            if let adopted { return .failure(LocalError(.failed, adopted.message)) }
            logger.notice("joined the account '\(account.name)'", metadata: ["devices": "\(account.members.count)"])
            return LocalReply(account: account.name)
        case .joinRefused(let reason)?:
            return .failure(LocalError(.account, "the inviting device refused: \(reason)"))
        default:
            return .failure(LocalError(.failed, "the inviting device answered with something other than a join result"))
        }
    }

    /// Removes a member: a signed change with a new beacon key, taken up here first, then sent
    /// to every member nearby (the removed one too, so it knows).
    private func removeDevice(named name: String) async -> LocalReply {
        let pinned = pins.value
        // Who is nearby now: a new key starts discovery afresh, with nobody heard yet.
        let nearby = await discovery?.nearby ?? []
        let made: Result<(SignedChange, AccountState, [AccountState.Member]), LocalError> = await changingAccount {
            guard var account = self.account else { return .failure(LocalError(.account, "this device is in no account")) }
            guard let member = account.members.first(where: { $0.name == name }) else {
                return .failure(LocalError(.notFound, "no device named '\(name)' is in the account; 'handoff devices' lists them"))
            }
            guard member.id != identity.id else {
                return .failure(LocalError(.notAllowed, "this device cannot remove itself; remove it from another device of the account"))
            }
            let previous = account.members
            account.members.removeAll { $0.id == member.id }
            // The old keys are kept only to find members that were away (see Discovery.stale).
            account.retiredBeaconKeys = Array((account.beaconKeys + (account.retiredBeaconKeys ?? [])).prefix(4))
            account.beaconKeys = [Data(BeaconKey.generate().rawRepresentation)]
            account.revision += 1
            let signed: SignedChange
            do {
                signed = try SignedAccount(account, by: identity)
                try await adopt(account)
            } catch let error as PairingError {
                return .failure(LocalError(.failed, error.message))
            } catch {
                return .failure(LocalError(.failed, "\(error)"))
            }
            record(signed, revision: account.revision)
            links.removeValue(forKey: member.id)?.close()
            return .success((signed, account, previous))
        }
        switch made {
        case .failure(let error):
            return .failure(error)
        case .success(let (signed, account, previous)):
            // With the pins from before, so that the removed device too can be told.
            await push([signed], to: previous, pins: pinned, nearby: nearby)
            logger.notice("removed '\(name)' from the account and rotated the beacon key")
            return LocalReply(account: account.name)
        }
    }

    /// Sends signed changes to every member in `members` heard nearby, but this device, each on
    /// a connection of its own pinned to `pins`. Those away learn of them when they are heard
    /// again (`catchUp`).
    private func push(_ signed: [SignedChange], to members: [AccountState.Member], pins: Set<String>, nearby known: [NearbyDevice]? = nil) async {
        var nearby = known ?? []
        if known == nil { nearby = await discovery?.nearby ?? [] }
        for member in members where member.id != identity.id {
            guard let device = nearby.first(where: { $0.sender == member.id }) else {
                logger.info("'\(member.name)' is not nearby: it learns of the change when it is heard again")
                continue
            }
            await send(.accountUpdate(signed), to: device, pins: pins)
        }
    }

    /// Sends one message on a connection of its own (never one of the reused links, which a
    /// stranger's replayed beacon must not be able to replace), then closes it.
    private func send(_ message: LinkMessage, to device: NearbyDevice, pins: Set<String>) async {
        do {
            let link = try await PeerConnection.open(
                host: device.address, port: Int(device.linkPort), identity: identity, pins: { pins }, deadline: .seconds(5),
                eventLoopGroup: eventLoopGroup)
            guard link.device == device.sender else {
                link.close()
                logger.warning("the device at \(device.address):\(device.linkPort) is not '\(memberName(device.sender))'")
                return
            }
            link.send(message)
            link.close()
        } catch {
            logger.info("could not reach '\(memberName(device.sender))': \(error.message)")
        }
    }

    /// Keeps a change for members that were away: the last `keptChanges`, on disk.
    private func record(_ change: SignedChange, revision: UInt64) {
        changes.removeAll { $0.revision >= revision }
        changes.append(RecordedChange(revision: revision, signer: change.signer, state: Data(change.state), signature: Data(change.signature)))
        if changes.count > Self.keptChanges { changes.removeFirst(changes.count - Self.keptChanges) }
        do {
            try store.save(changes, to: AccountState.changesFileName)
        } catch {
            logger.warning("could not keep the account's changes for members that are away: \(error)")
        }
    }

    /// Sends a member that is behind (heard with an older revision, or under a retired key)
    /// the changes it missed, at most every 5 seconds.
    private func catchUp(_ member: UUID, address: String, linkPort: UInt16, revision: UInt64) async {
        guard let account, revision < account.revision, account.members.contains(where: { $0.id == member }), member != identity.id else { return }
        let now = ContinuousClock.now
        if let last = lastCatchUp[member], now - last < .seconds(5) { return }
        lastCatchUp[member] = now
        let missed = changes.filter { $0.revision > revision }
        guard let first = missed.first, first.revision == revision + 1 else {
            logger.warning("'\(memberName(member))' is too many changes behind to catch up; remove it and pair it again", metadata: ["its revision": "\(revision)"])
            return
        }
        let device = NearbyDevice(sender: member, address: address, linkPort: linkPort, activity: nil, lastHeard: Date(), accountRevision: revision)
        logger.info("sending '\(memberName(member))' the \(missed.count) account change(s) it missed")
        await send(.accountUpdate(missed.map(\.change)), to: device, pins: pins.value)
    }

    /// Takes up changes another member sent, oldest first; each must be signed by a member of
    /// the account as the change before it left it. Ones already known are skipped.
    private func apply(_ signed: [SignedChange], from peer: LinkPeer) async {
        await changingAccount { await applyInOrder(signed) }
    }

    private func applyInOrder(_ signed: [SignedChange]) async {
        for change in signed.prefix(Self.keptChanges) {
            guard let current = account else { return }
            let updated: AccountState
            do {
                updated = try change.verified(against: current)
            } catch {
                if let revision = try? change.account().revision, revision <= current.revision { continue }
                logger.warning("ignored an account change: \(error.message)")
                return
            }
            let signer = memberName(change.signer)
            if !updated.members.contains(where: { $0.id == identity.id }) {
                logger.notice("this device was removed from the account '\(current.name)' by '\(signer)'")
                await leave()
                return
            }
            record(change, revision: updated.revision)
            do {
                try await adopt(updated)
            } catch {
                logger.error("could not take up an account change: \(error)")
                return
            }
            for (id, link) in links where !updated.members.contains(where: { $0.id == id }) {
                link.close()
                links[id] = nil
            }
            logger.notice("the account changed", metadata: ["by": "\(signer)", "devices": "\(updated.members.count)", "revision": "\(updated.revision)"])
        }
    }

    /// Forgets the account: this device was removed.
    private func leave() async {
        discoveryTask?.cancel()
        await discovery?.stop()
        discovery = nil
        account = nil
        updatePins()
        for link in links.values { link.close() }
        links = [:]
        try? FileManager.default.removeItem(at: store.url(AccountState.fileName))
        try? FileManager.default.removeItem(at: store.url(AccountState.changesFileName))
        changes = []
    }

    // MARK: Offering this device's activity

    private func offerChanged() async {
        var now: LocalActivity?
        for entry in currentOrder.reversed() {
            if let activity = activities[entry.session]?[entry.activity], !(activity.expirationDate.map { $0 <= Date() } ?? false) {
                now = activity
                break
            }
        }
        guard now != offered else { return }
        offered = now
        // An activity stops being offered when it expires, not only at the next change.
        if let expiration = now?.expirationDate {
            let delay = max(0, expiration.timeIntervalSinceNow)
            Task { [weak self] in
                try? await Task.sleep(for: .milliseconds(Int64(delay * 1000) + 10))
                await self?.offerChanged()
            }
        }
        do {
            try await discovery?.announce(now.map(Self.beaconActivity))
        } catch {
            logger.warning("could not announce the current activity: \(error)")
        }
    }

    static func beaconActivity(_ activity: LocalActivity) -> BeaconActivity {
        BeaconActivity(
            id: activity.id, activityType: activity.activityType, title: activity.title, teamIdentifier: activity.teamIdentifier,
            hasWebpageURL: activity.hasWebpageURL, supportsContinuationStreams: activity.supportsContinuationStreams)
    }

    // MARK: Serving other devices

    /// Answers a frame from another device's link.
    private func answer(_ frame: Frame, from peer: LinkPeer) async -> Frame? {
        guard let message = try? LinkMessage(frame: frame) else { return nil }
        switch message {
        case .accountUpdate(let changes):
            await apply(changes, from: peer)
            return nil
        case .joinRequest, .joinAccepted, .joinRefused:
            return nil
        case .hello, .fetch:
            return await FetchService.answer(message, device: identity.id) { await self.save($0) }
        case .continued(let activityID):
            for (sessionID, known) in activities where known[activityID] != nil {
                sessions[sessionID]?.peer.send(.wasContinued(activity: activityID))
            }
            return nil
        case .fetched, .fetchFailed:
            return nil
        }
    }

    /// Asks the app that owns `activityID` to save it, within the deadline, and checks the size.
    private func save(_ activityID: UUID) async -> Result<WireActivityRecord, FetchFailure> {
        guard let owner = activities.first(where: { $0.value[activityID] != nil }), let session = sessions[owner.key] else {
            return .failure(FetchFailure(code: FetchFailure.handoffFailed, message: "the activity is no longer available on '\(deviceName)': its app closed it or quit"))
        }
        let appName = session.app?.manifest.bundleIdentifier ?? "the local client (process \(session.peer.pid))"
        let request = nextSave
        nextSave += 1
        let deadline = configuration.saveDeadline
        let result: Result<LocalRecord, LocalError> = await withCheckedContinuation { continuation in
            pendingSaves[request] = (session.id, continuation)
            session.peer.send(.save(request: request, activity: activityID))
            Task { [weak self] in
                try? await Task.sleep(for: deadline)
                await self?.finishSave(request, session: session, .failure(LocalError(.continuation, code: FetchFailure.remoteAppTimedOut, "'\(appName)' on '\(self?.deviceName ?? "?")' did not save the activity within \(deadline)")))
            }
        }
        switch result {
        case .failure(let error):
            return .failure(FetchFailure(code: error.code ?? FetchFailure.handoffFailed, message: error.message))
        case .success(var record):
            let size = record.userInfo?.count ?? 0
            if size > configuration.maximumPayload {
                logger.warning("an activity's userInfo is over the limit", metadata: ["app": "\(appName)", "bytes": "\(size)"])
                return .failure(FetchFailure(code: FetchFailure.userInfoTooLarge, message: "the activity's userInfo is \(size) bytes, over the limit of \(configuration.maximumPayload); move bulk data to continuation streams"))
            }
            // Bytes from a client in another language are checked here, so that the origin
            // logs the mistake and the continuing side is told, rather than the app there.
            if let bytes = record.userInfo {
                do {
                    _ = try UserInfoCoding.decodeUserInfo(bytes)
                } catch {
                    logger.error("an app's saved userInfo cannot be read: \(error)", metadata: ["app": "\(appName)"])
                    return .failure(FetchFailure(code: FetchFailure.handoffFailed, message: "the activity's userInfo from \(appName) on '\(deviceName)' cannot be read: \(error)"))
                }
            }
            // What other devices see of the app is what its verified manifest says.
            if let known = activities[session.id]?[activityID] {
                record.activity.bundleIdentifier = known.bundleIdentifier
                record.activity.teamIdentifier = known.teamIdentifier
            }
            record.activity.id = activityID
            return .success(WireActivityRecord(record))
        }
    }

    private func finishSave(_ request: UInt64, session: Session, _ result: Result<LocalRecord, LocalError>) {
        guard let pending = pendingSaves[request], pending.session == session.id else { return }
        pendingSaves[request] = nil
        pending.continuation.resume(returning: result)
    }

    // MARK: Continuing another device's activity

    private func continueActivity(_ wanted: UUID?, logger: Logger) async -> LocalReply {
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
            let session: Session
            switch await runningSession(of: manifest.bundleIdentifier) {
            case .success(let found): session = found
            case .failure(let error): return .failure(error)
            }
            let continuation = UUID()
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

    private func route(_ offer: BeaconActivity, webpageURL: URL?) -> ActivityRoute {
        ActivityRouter.route(
            IncomingActivity(teamIdentifier: offer.teamIdentifier, activityType: offer.activityType, webpageURL: webpageURL),
            installed: apps.map(\.manifest))
    }

    private func fetch(_ activityID: UUID, from device: NearbyDevice) async -> Result<WireActivityRecord, FetchFailure> {
        switch await openLink(to: device) {
        case .success(let link): return await link.fetch(activityID, deadline: configuration.fetchDeadline)
        case .failure(let failure): return .failure(failure)
        }
    }

    /// The link to a nearby device: the open one, or a new one.
    private func openLink(to device: NearbyDevice) async -> Result<PeerConnection, FetchFailure> {
        let link: PeerConnection
        if let existing = links[device.sender], existing.isOpen, existing.host == device.address, existing.port == Int(device.linkPort) {
            link = existing
        } else {
            links[device.sender]?.close()
            do {
                link = try await PeerConnection.open(
                    host: device.address, port: Int(device.linkPort), identity: identity, pins: { [pins] in pins.value },
                    deadline: configuration.fetchDeadline, eventLoopGroup: eventLoopGroup)
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

    private func link(to device: NearbyDevice) -> PeerConnection? {
        links[device.sender].flatMap { $0.isOpen ? $0 : nil }
    }

    /// A connected process of the app, the most recent; else the app is started and waited for.
    private func runningSession(of bundleIdentifier: String) async -> Result<Session, LocalError> {
        if let running = newestSession(of: bundleIdentifier) { return .success(running) }
        guard let app = apps.first(where: { $0.manifest.bundleIdentifier == bundleIdentifier }) else {
            return .failure(LocalError(.notFound, "the app '\(bundleIdentifier)' is not installed"))
        }
        let process = Process()
        process.executableURL = app.executable
        process.currentDirectoryURL = app.directory
        var environment = ProcessInfo.processInfo.environment
        environment["HANDOFF_SOCKET"] = configuration.socketPath
        environment["HANDOFF_BUNDLE_IDENTIFIER"] = bundleIdentifier
        // The app's own folder for its data, as an app container is on Apple platforms.
        let data = configuration.stateDirectory.appendingPathComponent("data/\(bundleIdentifier)", isDirectory: true)
        try? FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        environment["HANDOFF_APP_DATA"] = data.path
        process.environment = environment
        // What the app prints goes to its log beside the agent's state, not to the agent's terminal.
        let logs = configuration.stateDirectory.appendingPathComponent("logs", isDirectory: true)
        try? FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let logFile = logs.appendingPathComponent("\(bundleIdentifier).log")
        if !FileManager.default.fileExists(atPath: logFile.path) {
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        if let handle = try? FileHandle(forWritingTo: logFile) {
            handle.seekToEndOfFile()
            process.standardOutput = handle
            process.standardError = handle
        }
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return .failure(LocalError(.failed, "could not start '\(bundleIdentifier)' (\(app.executable.path)): \(error.localizedDescription)"))
        }
        logger.info("started '\(bundleIdentifier)' for a continuation", metadata: ["pid": "\(process.processIdentifier)"])
        let deadline = ContinuousClock.now + configuration.launchDeadline
        while ContinuousClock.now < deadline {
            if let running = newestSession(of: bundleIdentifier) { return .success(running) }
            if !process.isRunning {
                return .failure(LocalError(.failed, "'\(bundleIdentifier)' exited with status \(process.terminationStatus) before it connected to the agent"))
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return .failure(LocalError(.failed, "'\(bundleIdentifier)' started but did not connect to the agent within \(configuration.launchDeadline); does it make an Application?"))
    }

    private func newestSession(of bundleIdentifier: String) -> Session? {
        sessions.values.filter { $0.app?.manifest.bundleIdentifier == bundleIdentifier }.max { $0.connected < $1.connected }
    }

    private func openWebPage(_ page: String) throws(AgentError) {
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

    private func discovered(_ change: DiscoveryEvent) async {
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

    private func nearbyActivity(_ device: NearbyDevice, _ activity: BeaconActivity) -> LocalNearbyActivity {
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

    private func nearbyActivities() async -> [LocalNearbyActivity] {
        let nearby = await discovery?.nearby ?? []
        return nearby.compactMap { device in device.activity.map { nearbyActivity(device, $0) } }.sorted { $0.age < $1.age }
    }

    private func memberName(_ id: UUID) -> String {
        account?.members.first { $0.id == id }?.name ?? "an unnamed device"
    }

    private var thisDevice: LocalDevice {
        LocalDevice(id: identity.id, name: deviceName, isThisDevice: true, isNearby: true, fingerprint: identity.fingerprint)
    }

    private func devices() async -> [LocalDevice] {
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
    private func probe(host: String, port: Int) async -> LocalProbe {
        do {
            let link = try await PeerConnection.open(
                host: host, port: port, identity: identity, pins: { [pins] in pins.value }, deadline: .seconds(3), eventLoopGroup: eventLoopGroup)
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

    private func status() async -> LocalStatus {
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

    private func localApp(_ app: InstalledApp) -> LocalApp {
        LocalApp(
            bundleIdentifier: app.manifest.bundleIdentifier, teamIdentifier: app.manifest.teamIdentifier, executable: app.executable.path,
            activityTypes: app.manifest.continuableActivityTypes.sorted(),
            running: sessions.values.filter { $0.app?.manifest.bundleIdentifier == app.manifest.bundleIdentifier }.count)
    }
}

extension Result {
    var failureValue: Failure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}

extension WireActivityRecord {
    init(_ local: LocalRecord) {
        self.init(
            id: local.activity.id, activityType: local.activity.activityType, title: local.activity.title,
            bundleIdentifier: local.activity.bundleIdentifier, teamIdentifier: local.activity.teamIdentifier,
            supportsContinuationStreams: local.activity.supportsContinuationStreams, expirationDate: local.activity.expirationDate,
            webpageURL: local.webpageURL, referrerURL: local.referrerURL, keywords: local.keywords,
            requiredUserInfoKeys: local.requiredUserInfoKeys, persistentIdentifier: local.persistentIdentifier,
            targetContentIdentifier: local.targetContentIdentifier, isEligibleForSearch: local.isEligibleForSearch,
            isEligibleForPublicIndexing: local.isEligibleForPublicIndexing, isEligibleForPrediction: local.isEligibleForPrediction,
            userInfo: local.userInfo.map(Array.init))
    }
}

extension LocalRecord {
    init(_ wire: WireActivityRecord) {
        self.init(
            activity: LocalActivity(
                id: wire.id, activityType: wire.activityType, title: wire.title, bundleIdentifier: wire.bundleIdentifier,
                teamIdentifier: wire.teamIdentifier, hasWebpageURL: wire.webpageURL != nil,
                supportsContinuationStreams: wire.supportsContinuationStreams, expirationDate: wire.expirationDate),
            webpageURL: wire.webpageURL, referrerURL: wire.referrerURL, keywords: wire.keywords, requiredUserInfoKeys: wire.requiredUserInfoKeys,
            persistentIdentifier: wire.persistentIdentifier, targetContentIdentifier: wire.targetContentIdentifier,
            isEligibleForSearch: wire.isEligibleForSearch, isEligibleForPublicIndexing: wire.isEligibleForPublicIndexing,
            isEligibleForPrediction: wire.isEligibleForPrediction, userInfo: wire.userInfo.map { Data($0) })
    }
}
