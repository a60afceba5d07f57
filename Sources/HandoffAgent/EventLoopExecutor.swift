import CHandoffSystem
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// Runs the agent's tasks on NIO's event loops instead of Swift's own pool of threads.
///
/// A message crosses from an event loop (which reads it) to tasks and actors (which handle it)
/// and back (to write the answer). With two pools of threads every such crossing wakes a
/// sleeping thread, 20–50 µs each on a small machine, and a continuation made about 25 of
/// them. With the tasks on the event loops, a job that a loop's thread makes runs on that same
/// thread after what it is doing now: no wake-up, no second thread.
public enum EventLoopExecutor {
    /// Makes `MultiThreadedEventLoopGroup.singleton` (of `loops` threads) the home of every task
    /// the process starts from now on. Call it once, first thing, before the singleton is used.
    /// Returns false when it could not (the loop count was already fixed, or another hook is set).
    @discardableResult
    public static func takeOver(loops: Int? = nil) -> Bool {
        if let loops { NIOSingletons.groupLoopCountSuggestion = loops }
        // Made here, so that the hook never meets a group being made.
        _ = MultiThreadedEventLoopGroup.singleton
        let taken = handoff_take_global_executor { job in
            guard let job else { return }
            let unowned = unsafeBitCast(job, to: UnownedJob.self)
            MultiThreadedEventLoopGroup.singleton.any().enqueue(ExecutorJob(unowned))
        } == 1
        if taken { active.store(true, ordering: .releasing) }
        return taken
    }

    /// Whether the process's tasks run on the event loops (`takeOver` succeeded).
    static var isActive: Bool { active.load(ordering: .acquiring) }

    private static let active = Atomic<Bool>(false)
}

extension TimeAmount {
    /// The same length of time, to the nanosecond.
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        self = .nanoseconds(overflow ? (seconds < 0 ? .min : .max) : nanoseconds &+ attoseconds / 1_000_000_000)
    }
}

/// A deadline: `expire` runs once `duration` has passed, unless `cancel` came first.
///
/// Where the tasks run on the event loops (handoffd), an event loop keeps it: setting and
/// cancelling one from its loop's thread wakes no other thread, where a sleeping task's timer
/// (`Task.sleep`) wakes the system's timer thread twice. Elsewhere (an agent inside another
/// program, as in the tests) it is a sleeping task, as before: it counts its time only while
/// that program's pool of threads runs its tasks, as the work it bounds does.
struct LoopTimer: Sendable {
    private enum Kind: Sendable {
        case loop(Scheduled<Void>)
        case task(Task<Void, Never>)
    }

    private let kind: Kind

    init(after duration: Duration, _ expire: @escaping @Sendable () -> Void) {
        if EventLoopExecutor.isActive {
            kind = .loop(MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(duration), expire))
        } else {
            // Held in `kind`: `cancel()` ends it.
            kind = .task(
                Task {
                    // The timer asked for, off the event loop: `duration` is the caller's.
                    guard (try? await Task.sleep(for: duration)) != nil else { return }
                    expire()
                })
        }
    }

    /// Lets the timer run without keeping it to cancel.
    func forget() {}

    /// Stops the timer if it has not run yet.
    func cancel() {
        switch kind {
        case .loop(let scheduled): scheduled.cancel()
        case .task(let task): task.cancel()
        }
    }

    /// Waits `duration`; throws `CancellationError` when the task is cancelled first.
    static func sleep(for duration: Duration) async throws {
        guard EventLoopExecutor.isActive else { return try await Task.sleep(for: duration) }
        let scheduled = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: TimeAmount(duration)) {}
        try await withTaskCancellationHandler {
            do { try await scheduled.futureResult.get() } catch { throw CancellationError() }
        } onCancel: {
            scheduled.cancel()
        }
    }
}
