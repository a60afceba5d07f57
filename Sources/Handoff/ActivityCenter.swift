import Foundation
import HandoffModel
import Logging

/// The app side of continuing an activity: what `HandoffApp.Application` implements to hear
/// of continuations arriving from other devices.
package protocol ContinuationReceiver: AnyObject, Sendable {
    func willContinue(_ continuationID: UUID, activityType: String) async
    func continueActivity(_ continuationID: UUID, _ activity: UserActivity) async
    func didFailToContinue(_ continuationID: UUID, activityType: String, error: CocoaError) async
}

/// One app's link to its device: it keeps the app's current activity, tells the agent about
/// it in order, answers the agent's requests to save, and hands arriving continuations to
/// the app.
///
/// A process has one by default. `HandoffTesting` makes one per simulated app and runs that
/// app's code with it as `ActivityCenter.current`, so several apps share one test process.
package final class ActivityCenter: @unchecked Sendable {
    // @unchecked: the mutable state (`current`, `live`, `receiver` and its waiters) is read and written only
    // under `lock`; everything else is immutable after init.

    /// The center that activities made by the running code belong to.
    @TaskLocal package static var current: ActivityCenter?

    /// The center of this process when no other is set: it speaks to the local agent over its
    /// socket (`HANDOFF_SOCKET`, or the default path), and works locally while none runs.
    package static let processDefault: ActivityCenter = {
        let bundleIdentifier = ProcessInfo.processInfo.environment["HANDOFF_BUNDLE_IDENTIFIER"] ?? Bundle.main.bundleIdentifier
        let logger = Logger(label: "handoff")
        return ActivityCenter(
            connection: SocketAgentConnection(bundleIdentifier: bundleIdentifier, logger: logger),
            bundleIdentifier: bundleIdentifier, teamIdentifier: nil, deviceName: ProcessInfo.processInfo.hostName, logger: logger)
    }()

    /// The center a new `UserActivity` binds to.
    package static var forNewActivities: ActivityCenter { current ?? processDefault }

    package let logger: Logger
    package let bundleIdentifier: String?
    package let teamIdentifier: String?
    package let deviceName: String
    private let connection: any AgentConnection
    private let outbox: AsyncStream<AppEvent>.Continuation

    // NSLock rather than Mutex: what it guards holds values that are not Sendable (`Any` in a
    // userInfo, delegates, activities), read out under the lock; Mutex hands out only what it
    // can send.
    private let lock = NSLock()
    private var currentStorage: UserActivity?
    private var agentContainersStorage: [(identifier: String, folder: URL)] = []
    private var live: [UUID: WeakActivity] = [:]
    private weak var receiverStorage: (any ContinuationReceiver)?
    /// Those waiting for the app to set its receiver up (`waitForReceiver`), by ticket.
    private var receiverWaiters: [UInt64: (waiter: CheckedContinuation<Void, Never>, deadline: Task<Void, Never>?)] = [:]
    private var nextReceiverWaiter: UInt64 = 0

    private struct WeakActivity {
        weak var activity: UserActivity?
    }

    package init(connection: any AgentConnection, bundleIdentifier: String?, teamIdentifier: String?, deviceName: String, logger: Logger? = nil) {
        self.connection = connection
        self.bundleIdentifier = bundleIdentifier
        self.teamIdentifier = teamIdentifier
        self.deviceName = deviceName
        var logger = logger ?? Logger(label: "handoff")
        logger[metadataKey: "app"] = "\(bundleIdentifier ?? "?")"
        logger[metadataKey: "device"] = "\(deviceName)"
        self.logger = logger
        let (stream, continuation) = AsyncStream<AppEvent>.makeStream()
        self.outbox = continuation
        Task { [connection] in
            for await event in stream {
                await connection.send(event)
            }
            // The outbox ends with the center.
            connection.detach()
        }
        connection.attach(self)
    }

    deinit {
        outbox.finish()
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    /// The app that continuations are delivered to.
    package var receiver: (any ContinuationReceiver)? {
        get { locked { receiverStorage } }
        set {
            let waiters = locked { () -> [(waiter: CheckedContinuation<Void, Never>, deadline: Task<Void, Never>?)] in
                receiverStorage = newValue
                guard newValue != nil else { return [] }
                defer { receiverWaiters = [:] }
                return Array(receiverWaiters.values)
            }
            for (waiter, deadline) in waiters {
                deadline?.cancel()
                waiter.resume()
            }
        }
    }

    /// The app's current activity, if any.
    package var currentActivity: UserActivity? { locked { currentStorage } }

    // MARK: From the app's activities

    func makeCurrent(_ activity: UserActivity) {
        locked { announceCurrent(activity) }
    }

    /// Makes `activity` current and tells the agent, under `lock`: deciding and announcing in
    /// one critical section keeps the agent's view in the order of the changes, and keeps an
    /// activity invalidated on another thread from becoming current. (The activity's own lock
    /// is taken inside this one, never the other way round.)
    private func announceCurrent(_ activity: UserActivity) {
        guard !activity.isInvalidated else { return }
        let previous = currentStorage
        currentStorage = activity
        if live.count >= 64 { live = live.filter { $0.value.activity != nil } }
        live[activity.id] = WeakActivity(activity: activity)
        if activity.isOfferable {
            // The agent takes a new current activity as replacing the app's previous one.
            outbox.yield(.becameCurrent(activity.announcement(bundleIdentifier: bundleIdentifier, teamIdentifier: teamIdentifier)))
        } else {
            // Not offered (ineligible or expired): the one it replaced must stop being offered too.
            if let previous, previous !== activity { outbox.yield(.resigned(previous.id)) }
            outbox.yield(.resigned(activity.id))
        }
    }

    /// Tells the agent the current activity again, in order with every other event: for a
    /// connection to an agent that has just (re)started.
    /// The synced containers of this device's agent, as its `hello` said.
    package var agentContainers: [(identifier: String, folder: URL)] {
        get { locked { agentContainersStorage } }
        set { locked { agentContainersStorage = newValue } }
    }

    package func reannounce() {
        locked {
            guard let current = currentStorage, current.isOfferable else { return }
            outbox.yield(.becameCurrent(current.announcement(bundleIdentifier: bundleIdentifier, teamIdentifier: teamIdentifier)))
        }
    }

    /// Waits (up to 10 seconds) for the app to set up its `Application`, so that a
    /// continuation arriving while a launched app starts is not lost. Setting `receiver` ends
    /// the wait.
    package func waitForReceiver() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let ticket = locked { () -> UInt64? in
                guard receiverStorage == nil else { return nil }
                nextReceiverWaiter += 1
                receiverWaiters[nextReceiverWaiter] = (waiter, nil)
                return nextReceiverWaiter
            }
            guard let ticket else { return waiter.resume() }
            // The longest wait: an app that never sets one up loses the continuation.
            let deadline = Task {
                guard (try? await Task.sleep(for: .seconds(10))) != nil else { return }
                self.locked { self.receiverWaiters.removeValue(forKey: ticket) }?.waiter.resume()
            }
            let waiting = locked { () -> Bool in
                guard receiverWaiters[ticket] != nil else { return false }
                receiverWaiters[ticket]?.deadline = deadline
                return true
            }
            if !waiting { deadline.cancel() }
        }
    }

    func resign(_ activity: UserActivity) {
        locked {
            guard currentStorage === activity else { return }
            currentStorage = nil
            outbox.yield(.resigned(activity.id))
        }
    }

    func invalidate(_ activity: UserActivity) {
        locked {
            if currentStorage === activity { currentStorage = nil }
            live[activity.id] = nil
            outbox.yield(.invalidated(activity.id))
        }
    }

    /// A property other devices see changed: tell them if the activity is current.
    func activityChanged(_ activity: UserActivity) {
        locked {
            guard currentStorage === activity else { return }
            announceCurrent(activity)
        }
    }

    func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        try await connection.openStreams(continuation)
    }

    private func liveActivity(_ id: UUID) -> UserActivity? {
        locked { live[id]?.activity }
    }

    /// Whether the activity with this id is one of this app's, alive.
    package func hasActivity(_ id: UUID) -> Bool {
        liveActivity(id) != nil
    }

    // MARK: From the agent

    /// Saves an activity for a continuation: asks the app to bring it up to date, then encodes it.
    package func save(activityID: UUID) async -> Result<ActivityRecord, ContinuationFailure> {
        guard let activity = liveActivity(activityID), !activity.isInvalidated else {
            return .failure(.handoffFailed("the activity is no longer available on '\(deviceName)': its app invalidated or released it"))
        }
        // Saved and encoded in one main-actor turn: the app's own code changes userInfo on the
        // main actor, so nothing it does can slip in between the save and the bytes sent.
        let bundleIdentifier = self.bundleIdentifier
        let teamIdentifier = self.teamIdentifier
        let saved = await MainActor.run { () -> Result<ActivityRecord, UserInfoError> in
            ActivityCenter.$current.withValue(self) { activity.saveIfNeeded() }
            do throws(UserInfoError) {
                return .success(try activity.record(bundleIdentifier: bundleIdentifier, teamIdentifier: teamIdentifier))
            } catch {
                return .failure(error)
            }
        }
        let record: ActivityRecord
        switch saved {
        case .success(let made):
            record = made
        case .failure(let error):
            logger.error("could not save activity for continuation: \(error)", metadata: ["type": "\(activity.activityType)"])
            return .failure(.handoffFailed("the activity '\(activity.activityType)' could not be sent from '\(deviceName)': \(error)"))
        }
        if record.payloadSize > userInfoAdvisedSize {
            logger.warning(
                "userInfo is \(record.payloadSize) bytes; keep it under \(userInfoAdvisedSize) bytes and move bulk data to continuation streams",
                metadata: ["type": "\(activity.activityType)"])
        }
        if let required = activity.requiredUserInfoKeys {
            let present = Set((activity.userInfo ?? [:]).keys.compactMap { $0.base as? String })
            let missing = required.subtracting(present)
            if !missing.isEmpty {
                logger.warning("userInfo lacks required keys \(missing.sorted())", metadata: ["type": "\(activity.activityType)"])
            }
        }
        return .success(record)
    }

    package func willContinue(_ continuationID: UUID, activityType: String) async {
        guard let receiver else {
            logger.warning("a continuation of '\(activityType)' arrived, but this app has no Application to receive it")
            return
        }
        await ActivityCenter.$current.withValue(self) {
            await receiver.willContinue(continuationID, activityType: activityType)
        }
    }

    /// Delivers a fetched activity, or a failure if its `userInfo` cannot be read.
    package func deliver(_ continuationID: UUID, record: ActivityRecord, continuation: ContinuationContext) async {
        var userInfo: [AnyHashable: Any]?
        if let bytes = record.userInfo {
            do {
                userInfo = try UserInfoCoding.decodeUserInfo(bytes)
            } catch {
                let failure = ContinuationFailure.handoffFailed("the activity from '\(continuation.originDevice)' could not be read: \(error)")
                await fail(continuationID, activityType: record.activity.activityType, failure: failure)
                return
            }
        }
        let activity = UserActivity(record: record, userInfo: userInfo, center: self, continuation: continuation)
        guard let receiver else {
            logger.warning("a continued '\(record.activity.activityType)' arrived, but this app has no Application to receive it")
            return
        }
        await ActivityCenter.$current.withValue(self) {
            await receiver.continueActivity(continuationID, activity)
        }
    }

    package func fail(_ continuationID: UUID, activityType: String, failure: ContinuationFailure) async {
        logger.info("continuation failed: \(failure)", metadata: ["type": "\(activityType)"])
        guard let receiver else { return }
        await ActivityCenter.$current.withValue(self) {
            await receiver.didFailToContinue(continuationID, activityType: activityType, error: failure.cocoaError)
        }
    }

    /// The activity was continued elsewhere: its delegate hears of it.
    package func wasContinued(activityID: UUID) async {
        guard let activity = liveActivity(activityID) else { return }
        await MainActor.run {
            ActivityCenter.$current.withValue(self) {
                activity.delegate?.userActivityWasContinued(activity)
            }
        }
    }

    /// Whether the activity with this id is alive, supports streams and has a delegate to take them.
    package func canReceiveStreams(activityID: UUID) async -> Bool {
        guard let activity = liveActivity(activityID), activity.supportsContinuationStreams else { return false }
        return await MainActor.run { activity.delegate != nil }
    }

    /// Hands the origin's ends of a stream pair to the activity's delegate. Returns false (and
    /// closes the streams) when the activity or its delegate is gone.
    package func receiveStreams(activityID: UUID, pair: StreamPair) async -> Bool {
        guard let activity = liveActivity(activityID), activity.supportsContinuationStreams else {
            pair.input.close()
            pair.output.close()
            return false
        }
        return await MainActor.run {
            ActivityCenter.$current.withValue(self) {
                guard let delegate = activity.delegate else {
                    pair.input.close()
                    pair.output.close()
                    return false
                }
                delegate.userActivity(activity, didReceive: pair.input, outputStream: pair.output)
                return true
            }
        }
    }
}
