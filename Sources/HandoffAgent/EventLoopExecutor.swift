import CHandoffSystem
import Foundation
import NIOCore
import NIOPosix

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
        return handoff_take_global_executor { job in
            guard let job else { return }
            let unowned = unsafeBitCast(job, to: UnownedJob.self)
            MultiThreadedEventLoopGroup.singleton.any().enqueue(ExecutorJob(unowned))
        } == 1
    }
}

extension TimeAmount {
    /// The same length of time, to the nanosecond.
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        self = .nanoseconds(overflow ? (seconds < 0 ? .min : .max) : nanoseconds &+ attoseconds / 1_000_000_000)
    }
}

/// A deadline kept by an event loop (the one the caller runs on, if it runs on one): `expire`
/// runs once `duration` has passed, unless `cancel` came first. Setting and cancelling one
/// from its loop's thread wakes no other thread; a sleeping task's timer (`Task.sleep`) wakes
/// the system's timer thread twice, and runs to its end even when nothing waits for it any more.
struct LoopTimer: Sendable {
    private let scheduled: Scheduled<Void>

    init(after duration: Duration, on loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any(), _ expire: @escaping @Sendable () -> Void) {
        scheduled = loop.scheduleTask(in: TimeAmount(duration), expire)
    }

    /// Stops the timer if it has not run yet.
    func cancel() { scheduled.cancel() }

    /// Waits `duration` on an event loop; throws `CancellationError` when the task is cancelled first.
    static func sleep(for duration: Duration, on loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.any()) async throws {
        let scheduled = loop.scheduleTask(in: TimeAmount(duration)) {}
        try await withTaskCancellationHandler {
            do { try await scheduled.futureResult.get() } catch { throw CancellationError() }
        } onCancel: {
            scheduled.cancel()
        }
    }
}
