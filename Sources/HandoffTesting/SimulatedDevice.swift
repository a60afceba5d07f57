import Foundation
import Handoff
import HandoffAgent
import HandoffApp
import HandoffLocalAPI
import Logging
import Synchronization

/// One device of a `HandoffFabric`: a real agent with its own identity, account membership
/// and state, and the apps it runs. Its apps' activities reach the account's other devices
/// through the agent's beacons; `continueActivity` asks the agent, which routes, starts the
/// app if needed, fetches from the other device and delivers, as `handoff continue` does.
public actor SimulatedDevice {
    public nonisolated let name: String
    public nonisolated let account: String
    /// Where this device's agent is on the fabric's network.
    nonisolated let host: String
    private weak var fabric: HandoffFabric?
    private let configuration: HandoffFabric.Configuration
    private let network: InMemoryNetwork
    private let sites = FixedSiteAssociations()
    private nonisolated let launcher: FabricLauncher
    private var agent: Agent?
    private var control: InProcessControlClient?
    /// Opens once the agent runs and is in its account, or could not.
    private nonisolated let started = Gate()
    /// Why the device could not start or join its account, if so: every use of it throws it.
    private var setupFailure: FabricSetupFailure?

    private struct AppSlot {
        var manifest: AppManifest
        var makeDelegate: @MainActor @Sendable () -> (any ApplicationDelegate)?
        var application: Application?
        var center: ActivityCenter?
        var connection: InProcessAgentConnection?
    }

    private var apps: [String: AppSlot] = [:]
    private var launches: [String: Task<Application, Never>] = [:]
    /// What the account's other devices offer, by device id, as the agent reports it.
    private var heard: [UUID: LocalNearbyActivity] = [:]
    private var faults: Set<InjectedFault> = []
    private var changeWaiters: [CheckedContinuation<Void, Never>] = []

    /// Pages this device opened in its browser, in order.
    public private(set) var openedWebpages: [URL] = []
    /// The bundle identifier of the browser app that receives web activities, if any.
    public private(set) var defaultBrowser: String?
    /// Synced folders on this device, given to the apps it launches.
    public private(set) var syncedContainers: [SyncedContainer] = []
    /// Web sites' approvals of apps (host → `TEAMID.bundle.id`), as their association files
    /// would say; the agent asks these instead of fetching the sites.
    public private(set) var siteApprovals: [String: Set<String>] = [:]

    init(name: String, account: String, number: Int, fabric: HandoffFabric, members: [SimulatedDevice]) {
        self.name = name
        self.account = account
        host = "device-\(number).fabric"
        self.fabric = fabric
        configuration = fabric.configuration
        network = fabric.network
        launcher = FabricLauncher()
        let folder = fabric.root.appendingPathComponent("device-\(number)", isDirectory: true)
        Task { [started] in
            await self.prepare(in: folder, members: members)
            started.open()
        }
    }

    // MARK: The agent

    /// Starts the agent and puts it in the account: the first device makes the account, the
    /// others join it with an invitation from the device added before them. The device is
    /// ready once every member lists it (it is pinned, and known by name, everywhere).
    private func prepare(in folder: URL, members: [SimulatedDevice]) async {
        do {
            try await setUp(in: folder, members: members)
        } catch let failure as FabricSetupFailure {
            setupFailure = failure
        } catch {
            setupFailure = FabricSetupFailure(device: name, reason: "\(error)")
        }
        changed()
    }

    private func setUp(in folder: URL, members: [SimulatedDevice]) async throws {
        launcher.device.withLock { $0 = WeakDevice(device: self) }
        var logger = Logger(label: "handoff.fabric")
        logger.logLevel = .error
        let agentConfiguration = AgentConfiguration(
            stateDirectory: folder, socketPath: folder.appendingPathComponent("agent.sock").path, name: name,
            listen: HostPort(host: host, port: 0), interfaces: [], refreshInterval: .seconds(5), expiry: .seconds(30),
            saveDeadline: configuration.saveDeadline, fetchDeadline: configuration.saveDeadline + .seconds(5),
            launchDeadline: configuration.waitLimit, maximumPayload: configuration.payloadLimit, servesLocalSocket: false)
        let agent: Agent
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            agent = try Agent(configuration: agentConfiguration, logger: logger, network: network, launcher: launcher, siteAssociations: sites)
            try await agent.start()
            self.agent = agent
        } catch {
            throw FabricSetupFailure(device: name, reason: "its agent could not start: \(error)")
        }
        let control = await InProcessControlClient.connect(to: agent)
        self.control = control
        if let previous = members.last {
            let invitation = try await previous.invite()
            try checked(await control.call(.join(code: invitation)), "join the account '\(account)'")
            try checked(await control.call(.awaitJoinResult), "join the account '\(account)'")
            for member in members {
                try await member.waitForMember(named: name, limit: configuration.waitLimit)
            }
        } else {
            try checked(await control.call(.createAccount(name: account)), "make the account '\(account)'")
        }
        let watching = await control.call(.watch)
        for activity in watching.activities ?? [] { heard[activity.device] = activity }
        Task { [weak self] in
            for await event in control.events { await self?.hear(event) }
        }
    }

    /// An invitation code for the next device of the account (a one-time token, as scripts use).
    private func invite() async throws -> String {
        try await ready()
        let reply = await control?.call(.invite(token: true, host: nil, lifetime: 60))
        guard let code = reply?.invitation?.code else {
            throw FabricSetupFailure(device: name, reason: "it could not invite a device: \(reply?.error?.message ?? "no invitation")")
        }
        return code
    }

    /// Waits until this device's agent lists the device `name` among the account's members.
    private func waitForMember(named name: String, limit: Duration) async throws {
        let joined = await eventually(within: limit) { (await control?.call(.devices).devices ?? []).contains { $0.name == name } }
        guard joined else {
            throw FabricSetupFailure(device: name, reason: "'\(self.name)' never learned that it joined the account '\(account)' within \(limit)")
        }
    }

    private func checked(_ reply: LocalReply, _ what: String) throws {
        if let error = reply.error {
            throw FabricSetupFailure(device: name, reason: "it could not \(what): \(error.message)")
        }
    }

    /// Waits until the agent runs and is in its account; throws why it is not.
    private func ready() async throws {
        await started.wait()
        if let setupFailure { throw setupFailure }
    }

    /// Stops the agent; the fabric does it when it goes.
    func shutDown() async {
        await started.wait()
        control?.close()
        for slot in apps.values { slot.connection?.close() }
        await agent?.stop()
    }

    private func hear(_ event: LocalEvent) {
        switch event.change {
        case .appeared, .changed:
            heard[event.device] = event.activity
        case .gone:
            heard[event.device] = nil
        }
        changed()
    }

    // MARK: Apps

    /// Installs an app; the device launches it when a continuation needs it, making its
    /// delegate with `makeDelegate`.
    public func install(_ manifest: AppManifest, delegate makeDelegate: @escaping @MainActor @Sendable () -> (any ApplicationDelegate)? = { nil }) async throws {
        try await ready()
        if var slot = apps[manifest.bundleIdentifier] {
            // Reinstalling changes what the next launch gets; a running instance keeps running.
            slot.manifest = manifest
            slot.makeDelegate = makeDelegate
            apps[manifest.bundleIdentifier] = slot
        } else {
            apps[manifest.bundleIdentifier] = AppSlot(manifest: manifest, makeDelegate: makeDelegate)
        }
        await agent?.installInProcess(manifest)
    }

    /// Installs and launches an app whose delegate `makeDelegate` makes, and returns it. Run the
    /// app's code with `application.perform { … }` so that its activities belong to it.
    @discardableResult
    public func launch(
        _ manifest: AppManifest, delegate makeDelegate: @escaping @MainActor @Sendable () -> (any ApplicationDelegate)? = { nil }
    ) async throws -> Application {
        if let running = apps[manifest.bundleIdentifier], running.manifest == manifest, let application = running.application {
            return application
        }
        if let launching = launches[manifest.bundleIdentifier] {
            return await launching.value
        }
        try await install(manifest, delegate: makeDelegate)
        return try await start(manifest.bundleIdentifier)
    }

    /// The running app with this bundle identifier, if any.
    public func application(_ bundleIdentifier: String) -> Application? {
        apps[bundleIdentifier]?.application
    }

    /// Ends an app as a crash would: its link to the agent closes, its activities vanish from
    /// the other devices, and the next continuation that needs it launches it again. Returns
    /// once the agent has seen it end.
    public func terminate(_ bundleIdentifier: String) async {
        guard var slot = apps[bundleIdentifier] else { return }
        slot.connection?.close()
        slot.application = nil
        slot.center = nil
        slot.connection = nil
        apps[bundleIdentifier] = slot
        _ = await eventually(within: configuration.waitLimit) {
            (await control?.call(.apps).apps?.first { $0.bundleIdentifier == bundleIdentifier }?.running ?? 0) == 0
        }
    }

    /// Records that the site at `host` approves the app for web-to-app continuation.
    public func approve(_ applicationIdentifier: String, forSite host: String) {
        siteApprovals[host.lowercased(), default: []].insert(applicationIdentifier)
        sites.approve(applicationIdentifier, forSite: host)
    }

    /// Chooses the browser app that receives web activities itself.
    public func setDefaultBrowser(_ bundleIdentifier: String?) async throws {
        try await ready()
        defaultBrowser = bundleIdentifier
        await agent?.setDefaultBrowser(bundleIdentifier)
    }

    /// Sets the synced folders that apps launched from now on see.
    public func setSyncedContainers(_ containers: [SyncedContainer]) { syncedContainers = containers }

    /// Starts an installed app, or returns the running (or starting) one. Started for a
    /// continuation, an app with scenes connects its scene when the activity arrives.
    fileprivate func start(_ bundleIdentifier: String, forContinuation: Bool = false) async throws -> Application {
        try await ready()
        if let running = apps[bundleIdentifier]?.application { return running }
        if let launching = launches[bundleIdentifier] { return await launching.value }
        guard let slot = apps[bundleIdentifier], let agent else {
            throw FabricSetupFailure(device: name, reason: "'\(bundleIdentifier)' is not installed on it")
        }
        let connection = InProcessAgentConnection(agent: agent, bundleIdentifier: bundleIdentifier) { [weak self] context throws(ContinuationFailure) in
            guard let self else { throw .connectionUnavailable("the device is gone") }
            return try await self.openStreams(context)
        }
        connection.holdsSaves = faults.contains(.appStallsOnSave(bundleIdentifier: bundleIdentifier))
        let center = ActivityCenter(connection: connection, bundleIdentifier: bundleIdentifier, teamIdentifier: slot.manifest.teamIdentifier, deviceName: name)
        let manifest = slot.manifest
        let containers = syncedContainers
        let makeDelegate = slot.makeDelegate
        // Continuations arriving while the app starts wait for this one launch.
        let launch = Task { @MainActor in
            let application = Application(center: center, manifest: manifest, syncedContainers: containers, delegate: makeDelegate())
            application.perform { application.finishLaunching(awaitingContinuation: forContinuation) }
            return application
        }
        launches[bundleIdentifier] = launch
        apps[bundleIdentifier]?.center = center
        apps[bundleIdentifier]?.connection = connection
        let application = await launch.value
        await connection.connected()
        launches[bundleIdentifier] = nil
        // Unless it was terminated meanwhile.
        if apps[bundleIdentifier]?.connection === connection {
            apps[bundleIdentifier]?.application = application
        }
        return application
    }

    fileprivate func opened(_ url: URL) {
        openedWebpages.append(url)
        changed()
    }

    // MARK: Faults

    /// Injects a failure; `clear(_:)` removes it.
    public func inject(_ fault: InjectedFault) {
        faults.insert(fault)
        switch fault {
        case .unreachable:
            network.setUnreachable(host, true)
        case .appStallsOnSave(let bundleIdentifier):
            apps[bundleIdentifier]?.connection?.holdsSaves = true
        }
    }

    public func clear(_ fault: InjectedFault) {
        faults.remove(fault)
        switch fault {
        case .unreachable:
            network.setUnreachable(host, false)
        case .appStallsOnSave(let bundleIdentifier):
            apps[bundleIdentifier]?.connection?.holdsSaves = false
        }
    }

    // MARK: Nearby activities

    /// The activities the account's other devices offer now, as this device's agent lists them.
    public var nearbyActivities: [NearbyActivity] {
        heard.values
            .map { NearbyActivity(device: $0.deviceName, announcement: $0.activity) }
            .sorted { $0.device < $1.device }
    }

    /// Waits until another device offers a matching activity, and returns it.
    public func nearbyActivity(ofType activityType: String? = nil, from device: String? = nil) async throws -> NearbyActivity {
        let what = "an activity\(activityType.map { " of type '\($0)'" } ?? "")\(device.map { " from '\($0)'" } ?? "") to be offered to '\(name)'"
        return try await waitFor(what) { me in
            me.nearbyActivities.first { (activityType == nil || $0.activityType == activityType) && (device == nil || $0.device == device) }
        }
    }

    /// Waits until `condition` holds for this device, re-checking whenever its state changes.
    /// Fails after the fabric's `waitLimit` rather than hanging a test.
    public func waitUntil(_ what: String, _ condition: @Sendable (isolated SimulatedDevice) -> Bool) async throws {
        try await waitFor(what) { condition($0) ? () : nil }
    }

    /// Waits until `find` returns a value, re-checking whenever this device's state changes,
    /// and returns that value.
    public func waitFor<Found: Sendable>(_ what: String, _ find: @Sendable (isolated SimulatedDevice) -> Found?) async throws -> Found {
        try await ready()
        let deadline = ContinuousClock.now + configuration.waitLimit
        let timer = Task { [weak self] in
            // The wait's limit: the waiter is woken to see that it has passed.
            try? await Task.sleep(until: deadline)
            await self?.changed()
        }
        defer { timer.cancel() }
        while true {
            if let found = find(self) { return found }
            guard ContinuousClock.now < deadline else { throw FabricTimeout(what: what, limit: configuration.waitLimit) }
            await withCheckedContinuation { changeWaiters.append($0) }
        }
    }

    private func changed() {
        let waiters = changeWaiters
        changeWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    // MARK: Continuing

    /// How many continuations this device's agent has been asked for so far (each one the
    /// agent takes is the newest until the next).
    package var continuationsAsked: UInt64 {
        get async { await agent?.continuationsAsked ?? 0 }
    }

    /// Continues an activity another device offers, as a person choosing it here would: the
    /// agent picks the app (or the browser), launches it, fetches the activity from its
    /// device and delivers it. The app hears exactly one `continue` or `didFail`, and has
    /// handled it when this returns.
    public func continueActivity(_ nearby: NearbyActivity) async -> ContinuationOutcome {
        do {
            try await ready()
        } catch {
            return .failed(.handoffFailed("\(error)"))
        }
        guard let control else { return .failed(.handoffFailed("the agent of '\(name)' is not running")) }
        let reply = await control.call(.continue(activity: nearby.announcement.id))
        // What the agent told the apps has reached their delegates.
        for slot in apps.values {
            await slot.connection?.drained()
        }
        changed()
        if let error = reply.error {
            switch error.kind {
            case .continuation:
                let code = CocoaError.Code(rawValue: error.code ?? ContinuationFailure.Code.handoffFailed)
                return .failed(ContinuationFailure(code: code, message: error.message))
            case .notFound:
                return .notContinued(reason: error.message)
            default:
                return .failed(.handoffFailed(error.message))
            }
        }
        if let app = reply.continued?.app {
            return .continued(bundleIdentifier: app)
        }
        if let page = reply.continued?.webpageURL, let url = URL(string: page) {
            return .openedInBrowser(url)
        }
        return .failed(.handoffFailed("the agent's answer names neither an app nor a page"))
    }

    // MARK: Streams

    /// Opens a stream pair to the app that offered the activity on the origin device.
    /// Until the agents carry streams between devices, the fabric connects the two apps
    /// itself, refusing as an unreachable device would.
    private func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        guard let origin = fabric?.device(named: continuation.originDevice) else {
            throw .connectionUnavailable("device '\(continuation.originDevice)' is not in this fabric")
        }
        let (mine, theirs) = StreamPipe.makeConnectedPairs()
        do {
            try await origin.acceptStreams(continuation.originActivityID, pair: theirs)
        } catch {
            mine.input.close()
            mine.output.close()
            throw error
        }
        return mine
    }

    private func acceptStreams(_ activityID: UUID, pair: StreamPair) async throws(ContinuationFailure) {
        guard !faults.contains(.unreachable) else {
            pair.input.close()
            pair.output.close()
            throw .connectionUnavailable("device '\(name)' cannot be reached")
        }
        guard let center = apps.values.compactMap(\.center).first(where: { $0.hasActivity(activityID) }) else {
            pair.input.close()
            pair.output.close()
            throw .handoffFailed("the originating activity is gone from '\(name)'")
        }
        guard await center.receiveStreams(activityID: activityID, pair: pair) else {
            throw .handoffFailed("the originating app on '\(name)' has no delegate to take the streams")
        }
    }
}

/// A wait in a fabric test that did not see what it waited for.
/// A simulated device that could not start its agent, join its account, or start an app:
/// what it was asked and why it could not.
public struct FabricSetupFailure: Error, CustomStringConvertible {
    public var device: String
    public var reason: String
    public var description: String { "HandoffFabric: device '\(device)': \(reason)" }
}

public struct FabricTimeout: Error, CustomStringConvertible {
    public var what: String
    public var limit: Duration
    public var description: String { "waited \(limit) for \(what), in vain" }
}


struct WeakDevice: Sendable {
    weak var device: SimulatedDevice?
}

/// How a simulated device's agent starts apps: in the test's process, with the delegate
/// the test gave; and where its web pages go: to the device's list of opened pages.
final class FabricLauncher: AppLauncher {
    let device = Mutex(WeakDevice())

    struct Started: LaunchedApp {
        var ended: String? { nil }
    }

    func launch(_ launch: AppLaunch) async throws(AgentError) -> any LaunchedApp {
        guard let device = device.withLock({ $0.device }) else { throw AgentError("the simulated device is gone") }
        do {
            _ = try await device.start(launch.app.manifest.bundleIdentifier, forContinuation: true)
        } catch {
            throw AgentError("\(error)")
        }
        return Started()
    }

    func openWebPage(_ url: URL, browserCommand: [String]) async throws(AgentError) {
        await device.withLock { $0.device }?.opened(url)
    }
}
