import Foundation
import HandoffWire

/// What became of a request on a link.
package enum LinkAnswer: Sendable {
    case answered(LinkMessage)
    case ended(String)
    case timedOut
}

/// A deadline of a link, named so that a late firing is told from a current one.
enum LinkDeadline: Hashable, Sendable {
    /// The request with this number must be answered by then.
    case request(UInt64)
    /// Look again whether the link has been quiet long enough to switch keepalive off.
    case quiet
}

/// Every decision of the side that opened a link to another device: the peer's hello, the
/// requests waiting for their answers (matched by number), their deadlines, the end of the
/// link, when an idle link closes, and when TCP keepalive watches the connection. A value with
/// no I/O and no clock of its own (`now` comes with each event); a driver runs what it returns.
/// The TLS link (`TLSLink`) and the in-memory link (`InMemoryLink`) drive this same
/// machine, so the two cannot decide differently.
///
/// ```
///   greeting ──hello, same version──► open(device; requests by number) ──ended, closed, idle──► closed(reason)
///      └── anything else first, another version, ended ──► closed(reason)
///
///   a request:  sent(number) ──its answer──► answered
///                            ├─ its deadline ──► timed out
///                            └─ the link ends ──► ended
/// ```
///
/// Keepalive, on a link that closes when idle: on while a request waits or a stream is open;
/// off once nothing went over the link for `keepaliveLinger` (so requests in quick succession
/// switch it neither way), long before TCP's first probe after 5 s of silence.
package struct LinkStateMachine<Waiter: Sendable>: Sendable {
    enum State: Sendable, Equatable {
        case greeting
        case open(device: UUID)
        case closed(reason: String)
    }

    enum Action: Sendable {
        case write(LinkMessage)
        case schedule(LinkDeadline, after: Duration)
        case cancel(LinkDeadline)
        case answer(Waiter, LinkAnswer)
        /// Set the socket's keepalive to what `watching` says when the driver gets to it.
        case applyKeepalive
        /// Close the connection (it has been idle).
        case close
    }

    /// How long keepalive stays on after the last use.
    static var keepaliveLinger: Duration { .seconds(2) }

    let host: String
    let port: Int
    /// Nothing over the link for this long, and nothing waiting on it: it closes. Nil: it stays.
    let idle: Duration?

    private(set) var state: State = .greeting
    private var pending = PendingRequests<Waiter>()
    /// When anything last went over the link (a request, an answer, a message, a stream frame).
    private(set) var lastUse: ContinuousClock.Instant
    /// Whether keepalive is on (it is when the connection is made).
    private(set) var watching = true
    private var quietCheckArmed = false
    /// How many times keepalive was switched (for tests).
    private(set) var keepaliveChanges = 0

    init(host: String, port: Int, idle: Duration?, now: ContinuousClock.Instant) {
        self.host = host
        self.port = port
        self.idle = idle
        self.lastUse = now
    }

    var isOpen: Bool {
        if case .open = state { return true }
        return false
    }

    var requestsWaiting: Int { pending.count }

    private func unavailable(_ why: String) -> ContinuationFailure {
        ContinuationFailure(code: ContinuationFailure.Code.connectionUnavailable, message: "the device at \(host):\(port) \(why)")
    }

    // MARK: Greeting

    /// The peer's first frame: its hello, or the reason the link is refused (then closed).
    mutating func greeted(_ frame: Frame, now: ContinuousClock.Instant) -> Result<UUID, ContinuationFailure> {
        guard case .greeting = state else { return .failure(unavailable("said hello twice")) }
        guard case .hello(let version, let device)? = try? LinkMessage(frame: frame) else {
            state = .closed(reason: "no hello")
            return .failure(unavailable("did not say hello"))
        }
        guard version == LinkMessage.version else {
            state = .closed(reason: "link protocol version \(version)")
            return .failure(ContinuationFailure(
                code: ContinuationFailure.Code.handoffFailed,
                message: "the device at \(host):\(port) speaks link protocol version \(version), this one \(LinkMessage.version); update Handoff on both devices"))
        }
        state = .open(device: device)
        lastUse = now
        return .success(device)
    }

    // MARK: Requests

    /// Sends the request `make` makes with the next number; `waiter` gets what becomes of it.
    /// A first request may go before the peer's hello, with this side's own (it waits for its
    /// answer as any other; a link that never opens ends it).
    mutating func request(
        _ waiter: Waiter, deadline: Duration, now: ContinuousClock.Instant, streamsOpen: Int, _ make: (UInt64) -> LinkMessage
    ) -> [Action] {
        if case .closed = state { return [.answer(waiter, .ended("the link had ended"))] }
        guard let number = pending.issue(waiter) else { return [.answer(waiter, .ended("the link had ended"))] }
        lastUse = now
        // The request first: what follows only matters once its answer is due.
        return [.write(make(number)), .schedule(.request(number), after: deadline)] + busyChanged(now: now, streamsOpen: streamsOpen)
    }

    /// A message from the peer. Answers resolve their request; the rest is not the machine's.
    mutating func received(_ message: LinkMessage, now: ContinuousClock.Instant, streamsOpen: Int) -> [Action] {
        lastUse = now
        switch message {
        case .fetched(let request, _), .fetchFailed(let request, _, _):
            guard let waiter = pending.settle(request) else { return [] }
            return [.cancel(.request(request)), .answer(waiter, .answered(message))] + busyChanged(now: now, streamsOpen: streamsOpen)
        default:
            return []
        }
    }

    /// Something went over the link outside a request (a message with no answer, a stream frame).
    mutating func used(now: ContinuousClock.Instant) {
        lastUse = now
    }

    mutating func deadlinePassed(_ deadline: LinkDeadline, now: ContinuousClock.Instant, streamsOpen: Int) -> [Action] {
        switch deadline {
        case .request(let request):
            guard let waiter = pending.settle(request) else { return [] }
            return [.answer(waiter, .timedOut)] + busyChanged(now: now, streamsOpen: streamsOpen)
        case .quiet:
            guard isOpen else { return [] }
            let quiet = now - lastUse
            guard quiet >= Self.keepaliveLinger else { return [.schedule(.quiet, after: Self.keepaliveLinger - quiet)] }
            quietCheckArmed = false
            return busyChanged(now: now, streamsOpen: streamsOpen, immediately: true)
        }
    }

    /// The link ended (the first reason stays); every request waiting ends with it.
    mutating func ended(_ reason: String) -> [Action] {
        if case .closed = state {} else { state = .closed(reason: reason) }
        let waiting = pending.settleAll()
        let quiet: [Action] = quietCheckArmed ? [.cancel(.quiet)] : []
        quietCheckArmed = false
        return waiting.flatMap { [Action.cancel(.request($0.request)), .answer($0.waiter, .ended(reason))] } + quiet
    }

    // MARK: Idle

    /// Whether nothing went over the link for `idle`, and nothing waits on it.
    func isIdle(for idle: Duration, now: ContinuousClock.Instant, streamsOpen: Int) -> Bool {
        isOpen && now - lastUse >= idle && streamsOpen == 0 && pending.isEmpty
    }

    /// Looked at a few times per `idle`: an idle link closes.
    mutating func idleCheck(now: ContinuousClock.Instant, streamsOpen: Int) -> [Action] {
        guard let idle, isIdle(for: idle, now: now, streamsOpen: streamsOpen) else { return [] }
        return ended("idle for \(idle)") + [.close]
    }

    /// Keepalive on while a request waits or a stream is open (or one is `starting`), off
    /// otherwise; only for a link that closes when idle (others keep it on). On is at once;
    /// off waits until the link has been quiet for `keepaliveLinger`, unless `immediately`.
    mutating func busyChanged(now: ContinuousClock.Instant, streamsOpen: Int, starting: Bool = false, immediately: Bool = false) -> [Action] {
        let wanted = starting || streamsOpen > 0 || !pending.isEmpty
        guard idle != nil, isOpen, watching != wanted else { return [] }
        if !wanted && !immediately {
            guard !quietCheckArmed else { return [] }
            quietCheckArmed = true
            return [.schedule(.quiet, after: Self.keepaliveLinger)]
        }
        watching = wanted
        keepaliveChanges += 1
        return [.applyKeepalive]
    }

    // MARK: Answers

    /// What a fetch's answer means for the app, whatever link carried it.
    package static func result(of answer: LinkAnswer, for activityID: UUID, host: String, port: Int, deadline: Duration) -> Result<FetchedActivity, ContinuationFailure> {
        switch answer {
        case .answered(.fetched(_, let record)):
            guard record.record.activity.id == activityID else {
                return .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the device at \(host):\(port) answered with another activity"))
            }
            return .success(record)
        case .answered(.fetchFailed(_, let code, let message)):
            return .failure(ContinuationFailure(code: Int(code), message: message))
        case .answered:
            return .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the device at \(host):\(port) sent an answer that is not a fetch result"))
        case .ended:
            return .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the device at \(host):\(port) went away during the fetch"))
        case .timedOut:
            return .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the device at \(host):\(port) did not answer within \(deadline)"))
        }
    }
}
