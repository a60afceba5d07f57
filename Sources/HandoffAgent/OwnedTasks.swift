import Logging
import Synchronization

/// The tasks an owner (the agent, discovery) starts that are not part of answering one call: a
/// hop from a socket's callback onto the actor, an app's start, a catch-up with a device, a
/// deadline's work. Each runs until it returns or until its owner ends; none outlives the owner.
///
///     open ──start──▶ open (+1 running) ──a task returns──▶ open (−1)
///       │
///       └──end()──▶ ended: every running task cancelled and awaited; start refuses
///
/// `start` takes the body as `Task {}` does, isolated to the caller's actor, so that a body
/// may read the actor's state as it did in a `Task {}`. A body that ignores cancellation and
/// never returns holds `end()` back for at most `endLimit`; it is then logged by name.
final class OwnedTasks: Sendable {
    private struct State {
        var next: UInt64 = 0
        /// Each task by number, listed before it exists (its `task` set just after), so that
        /// one that returns at once is forgotten rather than listed for good.
        var running: [UInt64: (name: String, task: Task<Void, Never>?)] = [:]
        var ended = false
        /// Told once `running` is empty (`end()` waiting).
        var whenEmpty: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())
    private let logger: Logger?
    /// How long `end()` waits for its tasks once cancelled.
    let endLimit: Duration

    /// - Parameter logger: where a task that `end()` gave up on is named (nowhere if nil).
    init(logger: Logger? = nil, endLimit: Duration = .seconds(5)) {
        self.logger = logger
        self.endLimit = endLimit
    }

    /// Runs `body` as one of the owner's tasks; false (and `body` never runs) once `end()` was
    /// called: work for a stopped owner is not done.
    @discardableResult
    func start(_ name: String, @_inheritActorContext _ body: sending @escaping @isolated(any) () async -> Void) -> Bool {
        guard let id = listed(name) else { return false }
        return started(
            id,
            // Held in `running` by `started`.
            Task { [weak self] in
                await body()
                self?.returned(id)
            })
    }

    /// Runs `body` as `start` does, but begins it on the calling thread (`Task.immediate`), up
    /// to its first suspension: called from an event loop's callback, the hop onto an actor
    /// that is free is made there and then, not once the loop has done its other work.
    @discardableResult
    func startImmediate(_ name: String, _ body: @escaping @Sendable () async -> Void) -> Bool {
        guard let id = listed(name) else { return false }
        return started(
            id,
            // Held in `running` by `started`.
            Task.immediate { [weak self] in
                await body()
                self?.returned(id)
            })
    }

    /// Lists a task about to start; nil once `end()` was called.
    private func listed(_ name: String) -> UInt64? {
        state.withLock { state -> UInt64? in
            guard !state.ended else { return nil }
            state.next += 1
            state.running[state.next] = (name, nil)
            return state.next
        }
    }

    private func started(_ id: UInt64, _ task: Task<Void, Never>) -> Bool {
        let ended = state.withLock { state -> Bool in
            state.running[id]?.task = task
            return state.ended
        }
        // `end()` ran between the two locks above: it did not see this task to cancel it.
        if ended { task.cancel() }
        return true
    }

    /// Runs `body` as `start` does, but on no actor: it starts at once, even while the caller's
    /// actor is busy (the caller goes on with what it was doing).
    @discardableResult
    func startConcurrent(_ name: String, _ body: @escaping @Sendable () async -> Void) -> Bool {
        start(name) { @concurrent in await body() }
    }

    /// How many tasks run now.
    var count: Int { state.withLock { $0.running.count } }

    /// The names of the tasks that run now (for a stuck `end()`, and for tests).
    var names: [String] { state.withLock { $0.running.values.map(\.name).sorted() } }

    /// Whether `end()` was called.
    var hasEnded: Bool { state.withLock { $0.ended } }

    /// Refuses new tasks and cancels the running ones, without waiting for them (`end()` waits):
    /// for an owner that must have its tasks stop before it closes what they use.
    func cancel() {
        let running = state.withLock { state in
            state.ended = true
            return Array(state.running.values)
        }
        for entry in running { entry.task?.cancel() }
    }

    /// Refuses new tasks, cancels the running ones and waits until they have returned (at most
    /// `endLimit`; those still running then are named in the log).
    func end() async {
        cancel()
        let outcome = FirstOutcome<Bool>()
        // Every task listed, even one whose `start` has not recorded it yet (it is cancelled
        // as it is), tells when it returns: the last one to return settles the wait.
        let empty = state.withLock { state -> Bool in
            if state.running.isEmpty { return true }
            state.whenEmpty.append { outcome.settle(true) }
            return false
        }
        guard !empty else { return }
        // The limit of a stop: a task that ignores cancellation must not hang it.
        let timer = Task { [endLimit] in
            guard (try? await Task.sleep(for: endLimit)) != nil else { return }
            outcome.settle(false)
        }
        let allReturned = await outcome.value()
        timer.cancel()
        if !allReturned {
            logger?.warning("tasks still running \(endLimit) after the stop asked them to end: \(names.joined(separator: ", "))")
        }
    }

    private func returned(_ id: UInt64) {
        let told = state.withLock { state -> [@Sendable () -> Void] in
            state.running.removeValue(forKey: id)
            guard state.running.isEmpty else { return [] }
            defer { state.whenEmpty = [] }
            return state.whenEmpty
        }
        for tell in told { tell() }
    }
}
