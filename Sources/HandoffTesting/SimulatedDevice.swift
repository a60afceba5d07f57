import Foundation
import Handoff
import HandoffApp
import Synchronization

/// One device of a `HandoffFabric`: it runs apps, tells the other devices of its account
/// about its current activity, lists theirs, and continues them as the real agent does.
public actor SimulatedDevice {
    public nonisolated let name: String
    public nonisolated let account: String
    private weak var fabric: HandoffFabric?
    private let configuration: HandoffFabric.Configuration

    private struct AppSlot {
        var manifest: AppManifest
        var makeDelegate: @MainActor @Sendable () -> (any ApplicationDelegate)?
        var application: Application?
        var center: ActivityCenter?
        var mailbox: AppMailbox?
        /// Identifies the running instance, so that a dead instance's events are ignored.
        var launch: UUID?
    }

    private struct ActiveContinuation {
        var id: UUID
        var activityType: String
        var mailbox: AppMailbox
        var result: OneShot<Result<ActivityRecord, ContinuationFailure>>
    }

    private var apps: [String: AppSlot] = [:]
    private var launches: [String: Task<Application, Never>] = [:]
    /// Each app's current activity, as its app announced it.
    private var currentByApp: [String: ActivityAnnouncement] = [:]
    /// Which app an activity belongs to, until it is invalidated.
    private var owners: [UUID: String] = [:]
    /// Apps in the order they last made an activity current, most recent last.
    private var recency: [String] = []
    /// The activity this device offers: the most recent app's current one.
    public private(set) var advertisedActivity: ActivityAnnouncement?
    /// What the other devices of the account offer, by device name.
    private var heard: [String: ActivityAnnouncement] = [:]
    private var faults: Set<InjectedFault> = []
    private var fetchesInFlight: [UUID: OneShot<Result<ActivityRecord, ContinuationFailure>>] = [:]
    private var active: ActiveContinuation?
    private var changeWaiters: [CheckedContinuation<Void, Never>] = []

    /// Pages this device opened in its browser, in order.
    public private(set) var openedWebpages: [URL] = []
    /// The bundle identifier of the browser app that receives web activities, if any.
    public private(set) var defaultBrowser: String?
    /// Synced folders on this device, given to the apps it launches.
    public private(set) var syncedContainers: [SyncedContainer] = []

    private nonisolated let inbox: AsyncStream<PeerMessage>.Continuation

    private enum PeerMessage: Sendable {
        case offers(device: String, ActivityAnnouncement)
        case withdraws(device: String, UUID)
    }

    init(name: String, account: String, fabric: HandoffFabric) {
        self.name = name
        self.account = account
        self.fabric = fabric
        self.configuration = fabric.configuration
        let (stream, inbox) = AsyncStream<PeerMessage>.makeStream()
        self.inbox = inbox
        Task { [weak self] in
            for await message in stream {
                guard let self else { return }
                await self.hear(message)
            }
        }
    }

    deinit { inbox.finish() }

    // MARK: Apps

    /// Installs an app; the device launches it when a continuation needs it, making its
    /// delegate with `makeDelegate`.
    public func install(_ manifest: AppManifest, delegate makeDelegate: @escaping @MainActor @Sendable () -> (any ApplicationDelegate)? = { nil }) {
        if var slot = apps[manifest.bundleIdentifier] {
            // Reinstalling changes what the next launch gets; a running instance keeps running.
            slot.manifest = manifest
            slot.makeDelegate = makeDelegate
            apps[manifest.bundleIdentifier] = slot
        } else {
            apps[manifest.bundleIdentifier] = AppSlot(manifest: manifest, makeDelegate: makeDelegate)
        }
    }

    /// Installs and launches an app whose delegate `makeDelegate` makes, and returns it. Run the
    /// app's code with `application.perform { … }` so that its activities belong to it.
    @discardableResult
    public func launch(
        _ manifest: AppManifest, delegate makeDelegate: @escaping @MainActor @Sendable () -> (any ApplicationDelegate)? = { nil }
    ) async -> Application {
        if let running = apps[manifest.bundleIdentifier], running.manifest == manifest, let application = running.application {
            return application
        }
        if let launching = launches[manifest.bundleIdentifier] {
            return await launching.value
        }
        install(manifest, delegate: makeDelegate)
        return await start(manifest.bundleIdentifier)
    }

    /// The running app with this bundle identifier, if any.
    public func application(_ bundleIdentifier: String) -> Application? {
        apps[bundleIdentifier]?.application
    }

    /// Ends an app as a crash would: its activities vanish from the other devices, and the
    /// next continuation that needs it launches it again.
    public func terminate(_ bundleIdentifier: String) {
        guard var slot = apps[bundleIdentifier] else { return }
        slot.application = nil
        slot.center = nil
        slot.mailbox = nil
        slot.launch = nil
        apps[bundleIdentifier] = slot
        for (id, owner) in owners where owner == bundleIdentifier { owners[id] = nil }
        currentByApp[bundleIdentifier] = nil
        refreshAdvertisement()
        if let active, active.mailbox.center.bundleIdentifier == bundleIdentifier {
            active.result.resolve(.failure(.handoffFailed("the app '\(bundleIdentifier)' on '\(name)' ended")))
        }
    }

    /// Web sites' approvals of apps (host → `TEAMID.bundle.id`), as their association files
    /// would say; the agent fetches these from the sites, the fabric takes them from the test.
    public private(set) var siteApprovals: [String: Set<String>] = [:]

    /// Records that the site at `host` approves the app for web-to-app continuation.
    public func approve(_ applicationIdentifier: String, forSite host: String) {
        siteApprovals[host.lowercased(), default: []].insert(applicationIdentifier)
    }

    /// Chooses the browser app that receives web activities itself.
    public func setDefaultBrowser(_ bundleIdentifier: String?) { defaultBrowser = bundleIdentifier }

    /// Sets the synced folders that apps launched from now on see.
    public func setSyncedContainers(_ containers: [SyncedContainer]) { syncedContainers = containers }

    private func start(_ bundleIdentifier: String) async -> Application {
        if let running = apps[bundleIdentifier]?.application { return running }
        if let launching = launches[bundleIdentifier] { return await launching.value }
        guard let slot = apps[bundleIdentifier] else { preconditionFailure("'\(bundleIdentifier)' is not installed on '\(name)'") }
        let launchID = UUID()
        let center = ActivityCenter(
            connection: DeviceConnection(device: self, bundleIdentifier: bundleIdentifier, launch: launchID),
            bundleIdentifier: bundleIdentifier, teamIdentifier: slot.manifest.teamIdentifier, deviceName: name)
        let manifest = slot.manifest
        let containers = syncedContainers
        let makeDelegate = slot.makeDelegate
        // Continuations arriving while the app starts wait for this one launch.
        let launch = Task { @MainActor in
            Application(center: center, manifest: manifest, syncedContainers: containers, delegate: makeDelegate())
        }
        launches[bundleIdentifier] = launch
        apps[bundleIdentifier]?.center = center
        apps[bundleIdentifier]?.mailbox = AppMailbox(center: center)
        apps[bundleIdentifier]?.launch = launchID
        let application = await launch.value
        launches[bundleIdentifier] = nil
        apps[bundleIdentifier]?.application = application
        return application
    }

    // MARK: Faults

    /// Injects a failure; `clear(_:)` removes it.
    public func inject(_ fault: InjectedFault) {
        faults.insert(fault)
        if fault == .unreachable {
            for (_, fetch) in fetchesInFlight {
                fetch.resolve(.failure(.connectionUnavailable("the connection to '\(name)' was lost during the fetch")))
            }
        }
    }

    public func clear(_ fault: InjectedFault) { faults.remove(fault) }

    // MARK: What apps tell the device

    fileprivate func appEvent(_ event: AppEvent, from bundleIdentifier: String, launch: UUID) {
        // Events of an app instance that has since ended (or been replaced) are stale.
        guard apps[bundleIdentifier]?.launch == launch else { return }
        switch event {
        case .becameCurrent(let announcement):
            owners[announcement.id] = bundleIdentifier
            currentByApp[bundleIdentifier] = announcement
            recency.removeAll { $0 == bundleIdentifier }
            recency.append(bundleIdentifier)
        case .resigned(let id):
            if currentByApp[bundleIdentifier]?.id == id { currentByApp[bundleIdentifier] = nil }
        case .invalidated(let id):
            owners[id] = nil
            if currentByApp[bundleIdentifier]?.id == id { currentByApp[bundleIdentifier] = nil }
        }
        refreshAdvertisement()
        changed()
    }

    /// The device offers the current activity of the app that most recently made one current,
    /// as the frontmost app's; when that one resigns, the next most recent app's is offered.
    private func refreshAdvertisement() {
        let latest = recency.last { currentByApp[$0] != nil }.flatMap { currentByApp[$0] }
        guard latest != advertisedActivity else { return }
        let previous = advertisedActivity
        advertisedActivity = latest
        for peer in fabric?.peers(of: self) ?? [] {
            if let latest {
                peer.inbox.yield(.offers(device: name, latest))
            } else if let previous {
                peer.inbox.yield(.withdraws(device: name, previous.id))
            }
        }
        changed()
    }

    /// Tells a device that just joined what this one offers.
    func introduce(to newcomer: SimulatedDevice) {
        if let advertisedActivity {
            newcomer.inbox.yield(.offers(device: name, advertisedActivity))
        }
    }

    private func hear(_ message: PeerMessage) {
        switch message {
        case .offers(let device, let announcement):
            heard[device] = announcement
        case .withdraws(let device, let id):
            if heard[device]?.id == id { heard[device] = nil }
        }
        changed()
    }

    // MARK: Nearby activities

    /// The activities the account's other devices offer now; expired ones are left out.
    public var nearbyActivities: [NearbyActivity] {
        let now = Date()
        return heard.filter { !$0.value.isExpired(at: now) }
            .map { NearbyActivity(device: $0.key, announcement: $0.value) }
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
        let deadline = ContinuousClock.now + configuration.waitLimit
        let timer = Task { [weak self] in
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

    /// Continues an activity another device offers, as a person choosing it here would: picks
    /// the app (or the browser), launches it, fetches the activity from its device and
    /// delivers it. The app hears exactly one `continue` or `didFail`.
    public func continueActivity(_ nearby: NearbyActivity) async -> ContinuationOutcome {
        let announcement = nearby.announcement
        guard let origin = fabric?.device(named: nearby.device) else {
            return .failed(.connectionUnavailable("device '\(nearby.device)' is not in this fabric"))
        }
        guard !announcement.isExpired() else {
            return .notContinued(reason: "the activity '\(announcement.activityType)' from '\(nearby.device)' has expired")
        }
        let installed = apps.values.map(\.manifest).sorted { $0.bundleIdentifier < $1.bundleIdentifier }
        var incoming = IncomingActivity(
            teamIdentifier: announcement.teamIdentifier, activityType: announcement.activityType,
            originBundleIdentifier: announcement.bundleIdentifier)
        let approvals = siteApprovals
        let approves = { (host: String, app: String) in approvals[host.lowercased()]?.contains(app) ?? false }
        var route = ActivityRouter.route(incoming, installed: installed, defaultBrowser: defaultBrowser, siteApproves: approves)
        var prefetched: ActivityRecord?
        if case .app = route {
        } else if announcement.hasWebpageURL || announcement.activityType == NSUserActivityTypeBrowsingWeb {
            // Routing to a browser or a web-approved app needs the page: fetch it first.
            switch await origin.fetch(announcement.id, deadline: configuration.saveDeadline) {
            case .success(let record):
                prefetched = record
                incoming.webpageURL = record.webpageURL
                route = ActivityRouter.route(incoming, installed: installed, defaultBrowser: defaultBrowser, siteApproves: approves)
            case .failure(let failure):
                return .failed(failure)
            }
        }
        switch route {
        case .nowhere(let reason):
            return .notContinued(reason: reason)
        case .webBrowser(let url, _):
            openedWebpages.append(url)
            changed()
            await origin.activityWasContinued(announcement.id)
            return .openedInBrowser(url)
        case .app(let manifest, _):
            return await continueInApp(manifest.bundleIdentifier, announcement, from: origin, prefetched: prefetched)
        }
    }

    private func continueInApp(
        _ bundleIdentifier: String, _ announcement: ActivityAnnouncement, from origin: SimulatedDevice, prefetched: ActivityRecord?
    ) async -> ContinuationOutcome {
        _ = await start(bundleIdentifier)
        guard let mailbox = apps[bundleIdentifier]?.mailbox else {
            return .failed(.handoffFailed("the app '\(bundleIdentifier)' could not be started on '\(name)'"))
        }
        let id = UUID()
        let type = announcement.activityType
        let result = OneShot<Result<ActivityRecord, ContinuationFailure>>()
        let previous = active
        active = ActiveContinuation(id: id, activityType: type, mailbox: mailbox, result: result)
        if let previous {
            let superseded = ContinuationFailure.cancelled("a newer continuation of '\(type)' replaced this one")
            previous.result.resolve(.failure(superseded))
            previous.mailbox.post(.fail(previous.id, activityType: previous.activityType, superseded, delivered: nil))
        }
        mailbox.post(.willContinue(id, activityType: type))
        if let prefetched {
            result.resolve(.success(prefetched))
        } else {
            let deadline = configuration.saveDeadline
            Task { result.resolve(await origin.fetch(announcement.id, deadline: deadline)) }
        }
        let fetched = await result.value()
        guard active?.id == id else {
            // Superseded or ended elsewhere: the app was already told.
            if case .failure(let failure) = fetched { return .failed(failure) }
            return .failed(.cancelled("a newer continuation replaced this one"))
        }
        active = nil
        var outcome: Result<ActivityRecord, ContinuationFailure> = fetched
        if case .success(let record) = fetched, record.payloadSize > configuration.payloadLimit {
            outcome = .failure(.userInfoTooLarge(
                "the activity's userInfo is \(record.payloadSize) bytes, over the limit of \(configuration.payloadLimit) bytes; move bulk data to continuation streams"))
        }
        switch outcome {
        case .failure(let failure):
            let delivered = OneShot<Void>()
            mailbox.post(.fail(id, activityType: type, failure, delivered: delivered))
            await delivered.value()
            changed()
            return .failed(failure)
        case .success(let record):
            let context = ContinuationContext(continuationID: id, originActivityID: announcement.id, originDevice: origin.name)
            let delivered = OneShot<Void>()
            mailbox.post(.deliver(id, record, context, delivered: delivered))
            await delivered.value()
            await origin.activityWasContinued(announcement.id)
            changed()
            return .continued(bundleIdentifier: bundleIdentifier)
        }
    }

    // MARK: As the originating device

    /// Asks the owning app to save the activity and returns it, within `deadline`.
    func fetch(_ activityID: UUID, deadline: Duration) async -> Result<ActivityRecord, ContinuationFailure> {
        if faults.contains(.unreachable) {
            return .failure(.connectionUnavailable("device '\(name)' cannot be reached"))
        }
        guard let bundleIdentifier = owners[activityID], let center = apps[bundleIdentifier]?.center,
            currentByApp[bundleIdentifier]?.id == activityID
        else {
            return .failure(.handoffFailed("device '\(name)' no longer offers this activity"))
        }
        let result = OneShot<Result<ActivityRecord, ContinuationFailure>>()
        let fetchID = UUID()
        fetchesInFlight[fetchID] = result
        if !faults.contains(.appStallsOnSave(bundleIdentifier: bundleIdentifier)) {
            Task { result.resolve(await center.save(activityID: activityID)) }
        }
        let name = self.name
        let timer = Task {
            try await Task.sleep(for: deadline)
            result.resolve(.failure(.remoteAppTimedOut("the app '\(bundleIdentifier)' on '\(name)' did not save the activity within \(deadline)")))
        }
        let value = await result.value()
        timer.cancel()
        fetchesInFlight[fetchID] = nil
        return value
    }

    func activityWasContinued(_ activityID: UUID) async {
        guard !faults.contains(.unreachable), let owner = owners[activityID], let center = apps[owner]?.center else { return }
        await center.wasContinued(activityID: activityID)
    }

    func acceptStreams(_ activityID: UUID, pair: StreamPair) async throws(ContinuationFailure) {
        guard !faults.contains(.unreachable) else {
            throw .connectionUnavailable("device '\(name)' cannot be reached")
        }
        guard let owner = owners[activityID], let center = apps[owner]?.center else {
            throw .handoffFailed("the originating activity is gone from '\(name)'")
        }
        guard await center.receiveStreams(activityID: activityID, pair: pair) else {
            throw .handoffFailed("the originating app on '\(name)' has no delegate to take the streams")
        }
    }

    fileprivate func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
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
}

/// A wait in a fabric test that did not see what it waited for.
public struct FabricTimeout: Error, CustomStringConvertible {
    public var what: String
    public var limit: Duration
    public var description: String { "waited \(limit) for \(what), in vain" }
}

/// What the device tells one app about continuations, delivered in the order the device
/// decided it, whatever the interleaving of concurrent continuations.
final class AppMailbox: Sendable {
    enum Letter: Sendable {
        case willContinue(UUID, activityType: String)
        case deliver(UUID, ActivityRecord, ContinuationContext, delivered: OneShot<Void>)
        case fail(UUID, activityType: String, ContinuationFailure, delivered: OneShot<Void>?)
    }

    let center: ActivityCenter
    private let letters: AsyncStream<Letter>.Continuation

    init(center: ActivityCenter) {
        self.center = center
        let (stream, letters) = AsyncStream<Letter>.makeStream()
        self.letters = letters
        Task {
            for await letter in stream {
                switch letter {
                case .willContinue(let id, let type):
                    await center.willContinue(id, activityType: type)
                case .deliver(let id, let record, let context, let delivered):
                    await center.deliver(id, record: record, continuation: context)
                    delivered.resolve(())
                case .fail(let id, let type, let failure, let delivered):
                    await center.fail(id, activityType: type, failure: failure)
                    delivered?.resolve(())
                }
            }
        }
    }

    deinit { letters.finish() }

    func post(_ letter: Letter) { letters.yield(letter) }
}

/// An app's link to its simulated device.
private struct DeviceConnection: AgentConnection {
    let device: SimulatedDevice
    let bundleIdentifier: String
    let launch: UUID

    func send(_ event: AppEvent) async {
        await device.appEvent(event, from: bundleIdentifier, launch: launch)
    }

    func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        try await device.openStreams(continuation)
    }
}

/// A value set once, by whoever comes first, and awaited by one task.
final class OneShot<Value: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<Value, Never>)
        case done(Value)
    }

    private let state = Mutex<State>(.empty)

    /// Sets the value if none was set; returns whether this call set it.
    @discardableResult
    func resolve(_ value: Value) -> Bool {
        let (set, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Value, Never>?) in
            switch state {
            case .done:
                return (false, nil)
            case .empty:
                state = .done(value)
                return (true, nil)
            case .waiting(let continuation):
                state = .done(value)
                return (true, continuation)
            }
        }
        waiter?.resume(returning: value)
        return set
    }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let ready: Value? = state.withLock { state in
                if case .done(let value) = state { return value }
                state = .waiting(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
