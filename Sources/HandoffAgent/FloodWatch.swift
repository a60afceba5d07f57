import Foundation
import Logging
import Synchronization

/// Notices a flood of refused input (beacons that do not open or come again, connections
/// over a limit) and logs it once: a warning when refusals pass `threshold` in one second,
/// nothing more while it lasts, and one line with the total once `quiet` passes without one.
/// A flood must not cost a log line per packet.
package final class FloodWatch: Sendable {
    package let what: String
    package let threshold: Int
    package let quiet: Duration
    private let logger: Logger

    private struct State {
        var second = ContinuousClock.now
        var inSecond = 0
        var flooding = false
        var total = 0
        var reasons: [String: Int] = [:]
        var sources: Set<String> = []
        var last = ContinuousClock.now
        var floods = 0
        var noted: Set<String> = []
    }

    private let state = Mutex(State())

    /// Logs `message` the first time `key` is noted, never again.
    package func noteOnce(_ key: String, _ message: String) {
        guard state.withLock({ $0.noted.insert(key).inserted }) else { return }
        logger.notice("\(message)")
    }

    /// `what` names what is refused, in a sentence: "beacons", "link connections".
    package init(what: String, threshold: Int = 100, quiet: Duration = .seconds(10), logger: Logger) {
        self.what = what
        self.threshold = threshold
        self.quiet = quiet
        self.logger = logger
    }

    /// How many floods began since the agent started.
    package var floods: Int { state.withLock { $0.floods } }

    /// Whether a flood is under way now.
    package var isFlooding: Bool { state.withLock { $0.flooding } }

    /// One refusal, from `source` (an address), for `reason` ("did not open").
    package func refused(from source: String, reason: String) {
        let now = ContinuousClock.now
        let began: (count: Int, sources: [String])? = state.withLock { state in
            state.last = now
            if now - state.second >= .seconds(1) {
                state.second = now
                state.inSecond = 0
            }
            state.inSecond += 1
            if state.flooding {
                state.total += 1
                state.reasons[reason, default: 0] += 1
                if state.sources.count < 8 { state.sources.insert(source) }
                return nil
            }
            guard state.inSecond > threshold else { return nil }
            state.flooding = true
            state.floods += 1
            state.total = state.inSecond
            state.reasons = [reason: state.inSecond]
            state.sources = [source]
            return (state.inSecond, [source])
        }
        guard let began else { return }
        logger.warning(
            "a flood of \(what): more than \(began.count - 1) refused in a second (\(reason), from \(began.sources.joined(separator: ", ")) among others); refusing them without logging each until it stops")
        // Not owned: it ends the second after the flood does, or with the watch.
        Task { [weak self] in
            while let wait = self?.untilQuiet() {
                // Period: until a second with nothing refused has passed.
                try? await Task.sleep(for: wait)
                guard let self, !self.endIfQuiet() else { return }
            }
        }
    }

    /// How long until `quiet` has passed since the last refusal.
    private func untilQuiet() -> Duration {
        let last = state.withLock { $0.last }
        return max(.milliseconds(10), quiet - (ContinuousClock.now - last))
    }

    /// Logs the end of the flood if none was refused for `quiet`; true when it ended (or
    /// there is no flood).
    private func endIfQuiet() -> Bool {
        let ended: (total: Int, reasons: [String: Int], sources: Set<String>)? = state.withLock { state in
            guard state.flooding else { return (0, [:], []) }
            guard ContinuousClock.now - state.last >= quiet else { return nil }
            state.flooding = false
            state.inSecond = 0
            return (state.total, state.reasons, state.sources)
        }
        guard let ended else { return false }
        if ended.total > 0 {
            let reasons = ended.reasons.sorted { $0.value > $1.value }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            logger.notice("the flood of \(what) stopped: \(ended.total) refused (\(reasons)) from \(ended.sources.sorted().joined(separator: ", "))")
        }
        return true
    }
}

/// A per-source budget of events per second, for input that costs work before it can be
/// judged (a beacon's seal, a connection's handshake). It remembers at most `capacity`
/// sources; past that, a source it cannot remember shares one budget with all such sources.
///
/// A source that proved itself (`trust`: a member's beacon opened and was fresh) keeps a budget
/// of its own for `trustPeriod`, however many strangers arrive: it is never forgotten for being
/// quiet, nor put in the shared budget. So spoofed addresses, however many, cannot starve a
/// member that beacons only every 18 seconds. At most `trustedCapacity` sources are trusted at
/// once (the longest quiet is let go for a new one).
package final class SourceBudget: Sendable {
    package let perSecond: Int
    package let capacity: Int
    package let trustedCapacity: Int
    package let trustPeriod: Duration
    private struct Spent {
        var sources: [String: (second: ContinuousClock.Instant, count: Int)] = [:]
        var pruned: ContinuousClock.Instant
        /// Sources that proved themselves: their budget, and until when they are trusted.
        var trusted: [String: (second: ContinuousClock.Instant, count: Int, until: ContinuousClock.Instant)] = [:]
        /// For tests: sources whose refusals are counted (`countRefusals(of:)`).
        var watched: [String: Int] = [:]
    }
    private let spent = Mutex(Spent(pruned: .now))
    private static let overflow = "*"

    package init(perSecond: Int, capacity: Int = 1024, trustedCapacity: Int = 64, trustPeriod: Duration = .seconds(300)) {
        precondition(perSecond > 0 && capacity > 0 && trustedCapacity > 0)
        self.perSecond = perSecond
        self.capacity = capacity
        self.trustedCapacity = trustedCapacity
        self.trustPeriod = trustPeriod
    }

    /// True when `source` may spend one more now.
    package func spend(_ source: String, now: ContinuousClock.Instant = .now) -> Bool {
        spent.withLock { spent in
            let allowed = Self.spend(source, now: now, &spent, perSecond: perSecond, capacity: capacity)
            if !allowed, !spent.watched.isEmpty, let count = spent.watched[source] { spent.watched[source] = count + 1 }
            return allowed
        }
    }

    /// For tests: counts from now on how often `source` is refused (`refusals(of:)`).
    func countRefusals(of source: String) {
        spent.withLock { $0.watched[source] = $0.watched[source] ?? 0 }
    }

    /// For tests: how often `source` was refused since `countRefusals(of:)`.
    func refusals(of source: String) -> Int {
        spent.withLock { $0.watched[source] ?? 0 }
    }

    private static func spend(_ source: String, now: ContinuousClock.Instant, _ spent: inout Spent, perSecond: Int, capacity: Int) -> Bool {
        if var entry = spent.trusted[source], entry.until > now {
            if now - entry.second >= .seconds(1) { (entry.second, entry.count) = (now, 0) }
            entry.count += 1
            spent.trusted[source] = entry
            return entry.count <= perSecond
        }
        var key = source
        if spent.sources[key] == nil && spent.sources.count >= capacity {
            // Forgetting the sources quiet for a second costs a pass over the table: at
            // most once a second, so that a flood of new addresses cannot make every
            // packet pay for it. Meanwhile new addresses share one budget.
            if now - spent.pruned >= .seconds(1) {
                spent.sources = spent.sources.filter { now - $0.value.second < .seconds(1) }
                spent.pruned = now
            }
            if spent.sources.count >= capacity { key = Self.overflow }
        }
        var entry = spent.sources[key] ?? (now, 0)
        if now - entry.second >= .seconds(1) { entry = (now, 0) }
        entry.count += 1
        spent.sources[key] = entry
        return entry.count <= perSecond
    }

    /// Whether `source` proved itself within `trustPeriod` (`trust`).
    package func isTrusted(_ source: String, now: ContinuousClock.Instant = .now) -> Bool {
        spent.withLock { $0.trusted[source].map { $0.until > now } ?? false }
    }

    /// `source` proved itself now (what it sent was authentic and fresh): it keeps a budget of
    /// its own for `trustPeriod` from now.
    package func trust(_ source: String, now: ContinuousClock.Instant = .now) {
        spent.withLock { spent in
            if spent.trusted[source] == nil && spent.trusted.count >= trustedCapacity {
                spent.trusted = spent.trusted.filter { $0.value.until > now }
                if spent.trusted.count >= trustedCapacity, let oldest = spent.trusted.min(by: { $0.value.until < $1.value.until }) {
                    spent.trusted[oldest.key] = nil
                }
            }
            let entry = spent.trusted[source] ?? (now, 0, now)
            spent.trusted[source] = (entry.second, entry.count, now + trustPeriod)
        }
    }
}
