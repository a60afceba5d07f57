import Foundation
import HandoffLocalAPI
import HandoffWire

/// A deadline of a continuation, named so that a late firing is told from a current one.
enum ContinuationDeadline: Hashable, Sendable {
    /// The app started for a continuation must connect by then (one per start of an app).
    case launch(app: String, attempt: UInt64)
    /// The app must answer a save request by then.
    case save(request: UInt64)
}

/// Every decision about continuations on this device, both ways: which one of those asked for
/// here is the newest and reaches its app, when an app is started, which app hears
/// `willContinue`, `continue` or a failure, and which saves that other devices' fetches asked
/// this device's apps for are still awaited. A value with no I/O and no clock of its own: the
/// agent runs the actions it returns (launches, messages to apps, answers, timers) and reports
/// back what happened (an app connected, a fetch arrived, a deadline passed).
///
/// Receiving, one continuation asked for on this device:
///
/// ```
///   begin ─(its app runs)──────────────────────────────┐
///     │                                                ▼
///     └─► waiting for the app ──app connected──► told (willContinue) ──fetched──► delivered, or failed in the app
///           │                  (a newer one was     │
///           │                   asked: superseded)  ├─ a newer one is told ──► failed in the app (3072)
///           │                                       └─ the app quit ──► failed
///           └─ the launch failed, the app ended, or the launch deadline ──► failed (the app never heard of it)
/// ```
///
/// The fetch runs from `begin` on, whatever the app does meanwhile; a result that comes while
/// the app is still starting waits for it. At most one continuation is told at a time.
///
/// Origin, one save another device's fetch asked for:
///
/// ```
///   asked to save(request) ──saved, or the app failed──► answered
///                          └─ deadline, the app quit, the agent stopped ──► failed
/// ```
///
/// `Context` is what the driver keeps with a continuation (who asked, for what); `SaveWaiter`
/// what it keeps with a save (who waits for it). The machine only hands them back.
struct ContinuationStateMachine<Context: Sendable, SaveWaiter: Sendable>: Sendable {
    /// Why a continuation ended without its activity.
    enum Failure: Sendable, Hashable {
        /// A newer continuation asked for on this device replaced it.
        case superseded
        /// The app quit after `willContinue`, before the activity arrived.
        case appQuit
        /// The app could not be started (the launcher's reason).
        case launchFailed(String)
        /// The app's process ended before it connected to the agent (how it ended).
        case endedBeforeConnecting(String)
        /// The app started but did not connect within the launch deadline.
        case didNotConnect(Duration)
        /// The fetch from the other device failed.
        case fetch(ContinuationFailure)
        /// The agent stopped.
        case agentStopped
    }

    /// How a save ended.
    enum SaveOutcome: Sendable, Hashable {
        case saved(ActivityRecord)
        /// The app answered with an error.
        case failed(LocalError)
        case timedOut(Duration)
        case appQuit
        case agentStopped
    }

    enum Action: Sendable {
        /// Start `app` for `continuation`; report `launched`, `launchFailed` or `appEnded`
        /// with `attempt`.
        case launch(app: String, continuation: UUID, attempt: UInt64)
        case schedule(ContinuationDeadline, after: Duration)
        case cancel(ContinuationDeadline)
        /// Tell the app of `session` that this continuation is coming.
        case willContinue(Context, session: UUID)
        /// Give the activity to the app, which was told `willContinue`.
        case deliver(Context, session: UUID, FetchedActivity)
        /// Tell the app, which was told `willContinue`, that the continuation failed; then
        /// answer whoever asked.
        case failInApp(Context, session: UUID, Failure)
        /// Answer whoever asked that the continuation failed; no app heard of it, or the one
        /// that did has gone.
        case fail(Context, Failure)
        /// Ask the app of `session` to save `activity`.
        case askToSave(request: UInt64, session: UUID, activity: UUID)
        case answerSave(SaveWaiter, SaveOutcome)
    }

    private struct Receiving: Sendable {
        let id: UUID
        let ticket: UInt64
        let app: String
        let context: Context
        /// The app's session, once it was told `willContinue`.
        var session: UUID?
        /// The fetch's result, when it came before the app was told.
        var fetched: Result<FetchedActivity, ContinuationFailure>?
    }

    private struct Save: Sendable {
        let session: UUID
        let waiter: SaveWaiter
    }

    let launchDeadline: Duration
    let saveDeadline: Duration

    /// Continuations asked for so far; the newest is the one with this ticket.
    private(set) var asked: UInt64 = 0
    /// In the order they were asked for: a few at most.
    private var receiving: [Receiving] = []
    /// Apps being started, with the attempt that starts them.
    private var launches: [String: UInt64] = [:]
    private var attempts: UInt64 = 0
    private var saves = PendingRequests<Save>()
    /// The agent stopped: a continuation that begins afterwards (its caller was still routing
    /// it) fails at once, as saves asked for then do.
    private(set) var isStopped = false

    init(launchDeadline: Duration, saveDeadline: Duration) {
        self.launchDeadline = launchDeadline
        self.saveDeadline = saveDeadline
    }

    // MARK: Receiving

    /// A continuation is asked for: it is the newest from now on. Its ticket goes to `begin`.
    mutating func ask() -> UInt64 {
        asked += 1
        return asked
    }

    /// The continuation `id` (asked for with `ticket`) goes to `app`, whose newest connected
    /// session is `running` if it runs. `fetched` is the activity when it is known already;
    /// otherwise the driver fetches it now and reports `fetched`.
    mutating func begin(
        _ id: UUID, ticket: UInt64, app: String, context: Context, running: UUID?, fetched: Result<FetchedActivity, ContinuationFailure>? = nil
    ) -> [Action] {
        guard !isStopped else { return [.fail(context, .agentStopped)] }
        let continuation = Receiving(id: id, ticket: ticket, app: app, context: context, fetched: fetched)
        if let running { return tell(continuation, session: running) }
        receiving.append(continuation)
        // One start of an app at a time: later continuations wait for the same one.
        guard launches[app] == nil else { return [] }
        attempts += 1
        launches[app] = attempts
        return [.launch(app: app, continuation: id, attempt: attempts)]
    }

    /// The app is started: it has until the launch deadline to connect.
    mutating func launched(_ app: String, attempt: UInt64) -> [Action] {
        guard launches[app] == attempt else { return [] }
        return [.schedule(.launch(app: app, attempt: attempt), after: launchDeadline)]
    }

    /// The app could not be started.
    mutating func launchFailed(_ app: String, attempt: UInt64, reason: String) -> [Action] {
        endLaunch(app, attempt: attempt, .launchFailed(reason))
    }

    /// The process started for `app` ended, `how`; before it connected, that ends its launch.
    mutating func appEnded(_ app: String, attempt: UInt64, how: String) -> [Action] {
        endLaunch(app, attempt: attempt, .endedBeforeConnecting(how))
    }

    /// A session of `app` connected: it takes what waits for the app.
    mutating func appConnected(_ app: String, session: UUID) -> [Action] {
        var actions: [Action] = []
        if let attempt = launches.removeValue(forKey: app) {
            actions.append(.cancel(.launch(app: app, attempt: attempt)))
        }
        let waiting = receiving.filter { $0.app == app && $0.session == nil }
        receiving.removeAll { $0.app == app && $0.session == nil }
        for continuation in waiting {
            actions += tell(continuation, session: session)
        }
        return actions
    }

    /// The fetch of continuation `id` ended.
    mutating func fetched(_ id: UUID, _ result: Result<FetchedActivity, ContinuationFailure>) -> [Action] {
        guard let index = receiving.firstIndex(where: { $0.id == id }) else { return [] }
        guard let session = receiving[index].session else {
            receiving[index].fetched = result
            return []
        }
        let continuation = receiving.remove(at: index)
        return [Self.outcome(continuation.context, session: session, result)]
    }

    // MARK: Origin

    /// Another device's fetch asks for `activity`, which the app of `session` offers.
    mutating func save(_ activity: UUID, session: UUID, waiter: SaveWaiter) -> [Action] {
        guard !isStopped, let request = saves.issue(Save(session: session, waiter: waiter)) else { return [.answerSave(waiter, .agentStopped)] }
        return [.askToSave(request: request, session: session, activity: activity), .schedule(.save(request: request), after: saveDeadline)]
    }

    /// The app of `session` answered save request `request`. An answer from another session,
    /// or to a request that ended, is ignored.
    mutating func saved(_ request: UInt64, session: UUID, _ result: Result<ActivityRecord, LocalError>) -> [Action] {
        guard saves.waiter(of: request)?.session == session, let save = saves.settle(request) else { return [] }
        let outcome: SaveOutcome
        switch result {
        case .success(let record): outcome = .saved(record)
        case .failure(let error): outcome = .failed(error)
        }
        return [.cancel(.save(request: request)), .answerSave(save.waiter, outcome)]
    }

    /// How many saves are awaited.
    var savesAwaited: Int { saves.count }

    // MARK: Both

    /// A deadline passed; one that ended meanwhile changes nothing.
    mutating func deadlinePassed(_ deadline: ContinuationDeadline) -> [Action] {
        switch deadline {
        case .launch(let app, let attempt):
            return endLaunch(app, attempt: attempt, .didNotConnect(launchDeadline), cancelDeadline: false)
        case .save(let request):
            guard let save = saves.settle(request) else { return [] }
            return [.answerSave(save.waiter, .timedOut(saveDeadline))]
        }
    }

    /// A session ended: the continuation its app was told of fails, and its saves.
    mutating func sessionEnded(_ session: UUID) -> [Action] {
        var actions: [Action] = []
        if let index = receiving.firstIndex(where: { $0.session == session }) {
            actions.append(.fail(receiving.remove(at: index).context, .appQuit))
        }
        for (request, save) in saves.settleAll(where: { $0.session == session }) {
            actions += [.cancel(.save(request: request)), .answerSave(save.waiter, .appQuit)]
        }
        return actions
    }

    /// The agent stops: everything under way fails.
    mutating func stopped() -> [Action] {
        isStopped = true
        var actions: [Action] = []
        for (app, attempt) in launches.sorted(by: { $0.key < $1.key }) {
            actions.append(.cancel(.launch(app: app, attempt: attempt)))
        }
        launches = [:]
        for continuation in receiving {
            actions.append(.fail(continuation.context, .agentStopped))
        }
        receiving = []
        for (request, save) in saves.settleAll() {
            actions += [.cancel(.save(request: request)), .answerSave(save.waiter, .agentStopped)]
        }
        return actions
    }

    /// Continuations under way: waiting for their app, or told and waiting for the activity.
    var underWay: (waiting: Int, told: Int) {
        (receiving.count { $0.session == nil }, receiving.count { $0.session != nil })
    }

    // MARK: Transitions

    private mutating func tell(_ continuation: Receiving, session: UUID) -> [Action] {
        // A newer one asked for since (it may still be on its way) wins; the app never hears
        // of this one.
        guard continuation.ticket == asked else { return [.fail(continuation.context, .superseded)] }
        var actions: [Action] = []
        if let index = receiving.firstIndex(where: { $0.session != nil }), let told = receiving[index].session {
            actions.append(.failInApp(receiving.remove(at: index).context, session: told, .superseded))
        }
        actions.append(.willContinue(continuation.context, session: session))
        if let fetched = continuation.fetched {
            actions.append(Self.outcome(continuation.context, session: session, fetched))
        } else {
            var told = continuation
            told.session = session
            receiving.append(told)
        }
        return actions
    }

    private mutating func endLaunch(_ app: String, attempt: UInt64, _ failure: Failure, cancelDeadline: Bool = true) -> [Action] {
        guard launches[app] == attempt else { return [] }
        launches[app] = nil
        var actions: [Action] = cancelDeadline ? [.cancel(.launch(app: app, attempt: attempt))] : []
        for continuation in receiving where continuation.app == app && continuation.session == nil {
            actions.append(.fail(continuation.context, failure))
        }
        receiving.removeAll { $0.app == app && $0.session == nil }
        return actions
    }

    private static func outcome(_ context: Context, session: UUID, _ result: Result<FetchedActivity, ContinuationFailure>) -> Action {
        switch result {
        case .success(let record): .deliver(context, session: session, record)
        case .failure(let failure): .failInApp(context, session: session, .fetch(failure))
        }
    }
}
