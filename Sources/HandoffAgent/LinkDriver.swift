import Foundation
import HandoffWire
import Synchronization

/// Runs one link's `LinkStateMachine`: holds it under a lock with the timers it set, carries
/// out what it decides (outside the lock: writes, answers, keepalive, closing) through the
/// link's own `IO`, and reports the timers' firing back to it. The TLS link and the in-memory
/// link each give it their IO; the decisions are the machine's, the same for both.
package final class LinkDriver: Sendable {
    package typealias Waiter = @Sendable (LinkAnswer) -> Void
    package typealias Machine = LinkStateMachine<Waiter>

    /// How a link does what its machine decides.
    package struct IO: Sendable {
        package var write: @Sendable (LinkMessage) -> Void
        /// Sets the socket's keepalive to `watching` as it is when this runs.
        package var applyKeepalive: @Sendable () -> Void
        package var close: @Sendable () -> Void
        /// Continuation streams open on the link now.
        package var streamsOpen: @Sendable () -> Int

        package init(
            write: @escaping @Sendable (LinkMessage) -> Void, applyKeepalive: @escaping @Sendable () -> Void = {},
            close: @escaping @Sendable () -> Void = {}, streamsOpen: @escaping @Sendable () -> Int = { 0 }
        ) {
            self.write = write
            self.applyKeepalive = applyKeepalive
            self.close = close
            self.streamsOpen = streamsOpen
        }
    }

    private struct Held {
        var machine: Machine
        var timers: [LinkDeadline: LoopTimer] = [:]
        var io: IO?
    }

    private let held: Mutex<Held>

    package init(host: String, port: Int, idle: Duration?) {
        held = Mutex(Held(machine: Machine(host: host, port: port, idle: idle, now: .now)))
    }

    /// Gives the driver the link's IO, once its connection exists (before any request).
    package func attach(_ io: IO) {
        held.withLock { $0.io = io }
    }

    // MARK: What the link asks

    package func greeted(_ frame: Frame) -> Result<UUID, ContinuationFailure> {
        held.withLock { $0.machine.greeted(frame, now: .now) }
    }

    package var isOpen: Bool { held.withLock { $0.machine.isOpen } }
    var watching: Bool { held.withLock { $0.machine.watching } }
    var keepaliveChanges: Int { held.withLock { $0.machine.keepaliveChanges } }

    func isIdle(for idle: Duration, streamsOpen: Int) -> Bool {
        held.withLock { $0.machine.isIdle(for: idle, now: .now, streamsOpen: streamsOpen) }
    }

    /// Sends the request `make` makes with its number; `done` gets what became of it, once.
    package func request(deadline: Duration, streamsOpen: Int, _ make: (UInt64) -> LinkMessage, done: @escaping Waiter) {
        run(streamsOpen: streamsOpen) { $0.request(done, deadline: deadline, now: $1, streamsOpen: $2, make) }
    }

    package func received(_ message: LinkMessage, streamsOpen: Int) {
        run(streamsOpen: streamsOpen) { $0.received(message, now: $1, streamsOpen: $2) }
    }

    package func used() {
        held.withLock { $0.machine.used(now: .now) }
    }

    package func ended(_ reason: String) {
        run(streamsOpen: 0) { machine, _, _ in machine.ended(reason) }
    }

    func idleCheck(streamsOpen: Int) {
        run(streamsOpen: streamsOpen) { $0.idleCheck(now: $1, streamsOpen: $2) }
    }

    func busyChanged(streamsOpen: Int, starting: Bool = false, immediately: Bool = false) {
        run(streamsOpen: streamsOpen) { $0.busyChanged(now: $1, streamsOpen: $2, starting: starting, immediately: immediately) }
    }

    // MARK: Running the machine

    private func deadlinePassed(_ deadline: LinkDeadline) {
        let streamsOpen = held.withLock { $0.io }?.streamsOpen() ?? 0
        run(streamsOpen: streamsOpen, firing: deadline) { $0.deadlinePassed(deadline, now: $1, streamsOpen: $2) }
    }

    /// One step of the machine under the lock (with its timers set and cancelled there, so
    /// that they keep the machine's order), then the rest of what it decided, unlocked.
    private func run(
        streamsOpen: Int, firing: LinkDeadline? = nil, _ step: (inout Machine, ContinuousClock.Instant, Int) -> [Machine.Action]
    ) {
        let (actions, io) = held.withLock { held -> ([Machine.Action], IO?) in
            if let firing { held.timers[firing] = nil }
            let actions = step(&held.machine, .now, streamsOpen)
            for action in actions {
                switch action {
                case .schedule(let deadline, let after):
                    held.timers[deadline]?.cancel()
                    held.timers[deadline] = LoopTimer(after: after) { [weak self] in self?.deadlinePassed(deadline) }
                case .cancel(let deadline):
                    held.timers.removeValue(forKey: deadline)?.cancel()
                default:
                    break
                }
            }
            return (actions, held.io)
        }
        for action in actions {
            switch action {
            case .write(let message): io?.write(message)
            case .answer(let waiter, let answer): waiter(answer)
            case .applyKeepalive: io?.applyKeepalive()
            case .close: io?.close()
            case .schedule, .cancel: break
            }
        }
    }
}
