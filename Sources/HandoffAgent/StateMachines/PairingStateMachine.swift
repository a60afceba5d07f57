import Foundation
import HandoffLocalAPI
import HandoffWire

/// A deadline of pairing, named so that a late firing is told from a current one.
enum PairingDeadline: Hashable, Sendable {
    /// The invitation's lifetime ends.
    case invitation(UUID)
    /// The answer `token` to the device whose certificate has this fingerprint waits no longer
    /// for its confirmation.
    case confirmation(String, token: UUID)
    /// Close the pairing listener if no invitation is open by then (a little after the last
    /// one ended, so that the answer to a join under way is written).
    case listenerIdle
}

/// Every decision of pairing on this device: as the inviting device, which invitations are
/// open, which request a code lets in, how fast an address may guess, when the invitations are
/// withdrawn, who waits for a device to ask and for the person's decision, and which answered
/// joins wait for their confirmation; as the joining device, whether a join is under way and
/// how it ended; and, for both, that one change to the account is made at a time. A value
/// with no I/O and no clock of its own (`now` comes with each event); the agent runs what it
/// returns: timers, and the waiters it resumes.
///
/// ```
///   an invitation:  open ──a request with its code──► used ──(interactive) asked(request)──► decided
///                     │                                 └──(token)─────────────────────────► decided
///                     └──expiry──► gone (its waiters told)
///   a join answered: awaiting confirmation(token) ──joinConfirmed──► committed
///                                                 └──deadline of its own token──► dropped
///   this device joining: idle ──join──► under way(those awaiting the result) ──ended(reply)──► ended(reply) ──result taken──► idle
///   the account:   unchanged ──a change begins──► changing(those queued) ──it ends──► the next queued, or unchanged
/// ```
///
/// Guessing is slow, and costs only the guesser, as sshd's per-source penalties do: five
/// requests a minute from one source (an address) are looked at, and a
/// source whose code was wrong twice is refused unread for 10 s, twice that after each further
/// wrong code (up to 10 minutes), until it sent none for 10 minutes after its wait ended. Wrong codes never withdraw
/// an invitation: a flood from strangers cannot take the person's join away, and a 40-bit
/// secret at these rates holds for an invitation's lifetime (docs/wire-protocol.md, Pairing).
/// The person is told of the wrong codes with the device that asks (`wrongCodeReport`).
struct PairingStateMachine<Waiter: Sendable>: Sendable {
    /// Join requests looked at per minute from one source.
    static var attemptsPerMinute: Int { 5 }
    /// How long a source waits after its second wrong code; doubled with each further one.
    static var firstPenalty: Duration { .seconds(10) }
    /// The longest wait after a wrong code.
    static var longestPenalty: Duration { .seconds(600) }
    /// A source's wrong codes are forgotten this long after its wait ended.
    static var penaltyMemory: Duration { .seconds(600) }
    /// How long a join answered waits for the joining device's confirmation.
    static var confirmationDeadline: Duration { .seconds(10) }
    /// How long the pairing listener stays open after the last invitation ended.
    static var listenerLinger: Duration { .seconds(5) }

    struct Offer: Sendable {
        var invitation: Invitation
        var expires: Date
        var used = false
        /// The device that asked with it, once one did (interactive invitations).
        var candidate: LocalJoinRequest?
        /// Those waiting for a device to ask with it (`handoff device invite` showing it).
        var awaiting: [Waiter] = []
        /// The device that asked waits for the person's decision.
        var decision: Waiter?
    }

    /// What a waiter is resumed with.
    enum Resumption: Sendable {
        /// The device that asked with the invitation; nil when it ended first.
        case candidate(LocalJoinRequest?)
        /// The person's decision (false when the invitation ended first).
        case decision(Bool)
        /// How this device's join ended.
        case joinResult(LocalReply)
        /// This change to the account may go ahead.
        case accountTurn
    }

    enum Action: Sendable {
        case schedule(PairingDeadline, after: Duration)
        case cancel(PairingDeadline)
        case resume(Waiter, Resumption)
        /// Close the pairing listener: no invitation is left.
        case closeListener
    }

    /// A join answered, until its device confirms that it has the answer.
    struct AnsweredJoin: Sendable {
        var signed: SignedChange
        /// The account with the device in it.
        var account: AccountState
        /// The members before it.
        var previous: [AccountState.Member]
        var name: String
        /// It was a member already (it asked again, never having heard it joined).
        var isMember: Bool
        /// This answer's own, so that only its deadline drops it (not an earlier answer's to
        /// the same device).
        var token: UUID
    }

    /// This device's own join.
    enum Joining: Sendable {
        case idle
        case underWay(awaiting: [Waiter])
        case ended(LocalReply)
    }

    /// Changes to the account: at most one at a time.
    enum AccountChange: Sendable {
        case unchanged
        case changing(queued: [Waiter])
    }

    private(set) var invitations: [UUID: Offer] = [:]
    /// Answered joins by the fingerprint of the certificate their device connected with.
    private(set) var answered: [String: AnsweredJoin] = [:]
    private var attempts: [String: [ContinuousClock.Instant]] = [:]
    private var pruneAttemptsAt = 256
    private var prunePenaltiesAt = 256
    /// What a source's wrong codes cost it.
    struct Penalty: Sendable {
        var wrongCodes: Int
        var until: ContinuousClock.Instant
    }
    private(set) var penalties: [String: Penalty] = [:]
    /// Wrong codes by source while the listener has been open, for the person.
    private(set) var wrongCodes: [String: Int] = [:]
    private(set) var joining: Joining = .idle
    private(set) var accountChange: AccountChange = .unchanged

    // MARK: Invitations

    /// An invitation is made; it lasts `lifetime` (until `expires`).
    mutating func issue(_ id: UUID, _ invitation: Invitation, expires: Date, lifetime: Duration) -> [Action] {
        invitations[id] = Offer(invitation: invitation, expires: expires)
        return [.cancel(.listenerIdle), .schedule(.invitation(id), after: lifetime)]
    }

    /// The invitation is over (expired, used, refused, withdrawn): those waiting on it are
    /// told, and the listener closes a little later if it was the last. Nothing if it was over.
    mutating func expire(_ id: UUID) -> [Action] {
        guard let offer = invitations.removeValue(forKey: id) else { return [] }
        var actions: [Action] = [.cancel(.invitation(id))]
        actions += offer.awaiting.map { .resume($0, .candidate(nil)) }
        if let decision = offer.decision { actions.append(.resume(decision, .decision(false))) }
        if invitations.isEmpty { actions.append(.schedule(.listenerIdle, after: Self.listenerLinger)) }
        return actions
    }

    /// Every invitation is over (the agent stops).
    mutating func expireAll() -> [Action] {
        invitations.keys.sorted { $0.uuidString < $1.uuidString }.flatMap { expire($0) } + [.cancel(.listenerIdle)]
    }

    /// What a join request with a code comes to.
    enum Request: Sendable, Equatable {
        /// Refused unread: the source asked too often, or its last code was wrong too lately.
        case held(String)
        /// Refused: the code is wrong.
        case refused(String)
        /// The code is that of this invitation, which is now used.
        case matched(UUID, Invitation)
    }

    /// The source a request is counted under: its address, an IPv4 peer of a dual-stack
    /// listener (::ffff:a.b.c.d) as its IPv4 address. Not an IPv6 /64: every device of a
    /// LAN shares one, link-local addresses all do, and a stranger's guesses would hold the
    /// real joiner back. Many addresses buy a guesser more tries, bounded as
    /// docs/wire-protocol.md (Pairing) says.
    static func source(of address: String) -> String {
        let bare = String(address.split(separator: "%", maxSplits: 1).first ?? "")
        if bare.lowercased().hasPrefix("::ffff:"), bare.contains(".") { return String(bare.dropFirst(7)) }
        return address
    }

    /// The most sources whose penalties are kept: past it the one whose wait ends first goes.
    static var sourcesKept: Int { 4096 }

    static var wrongCode: String { "the code is wrong, was used already, or has expired; ask for a new one with 'handoff device invite'" }

    /// A device at `address` (nil: in this process, one source) asks to join with `proof`.
    mutating func requested(proof: [UInt8], certificate: [UInt8], name: String, from address: String?, now: ContinuousClock.Instant, date: Date) -> Request {
        let source = address.map(Self.source(of:)) ?? "this process"
        // Pruned when a table doubled since the last pruning, so a flood costs no pass per request.
        if attempts.count >= pruneAttemptsAt {
            attempts = attempts.filter { $0.value.contains { now - $0 < .seconds(60) } }
            pruneAttemptsAt = max(256, attempts.count * 2)
        }
        if penalties.count >= prunePenaltiesAt {
            penalties = penalties.filter { now - $0.value.until < Self.penaltyMemory }
            prunePenaltiesAt = max(256, penalties.count * 2)
        }
        if let penalty = penalties[source], now < penalty.until {
            let wait = penalty.until - now
            return .held("a wrong code came from this address \(penalty.wrongCodes == 1 ? "moments" : "several times") ago; wait \(Int((wait / .seconds(1)).rounded(.up))) s and try again")
        }
        let recent = (attempts[source] ?? []).filter { now - $0 < .seconds(60) }
        guard recent.count < Self.attemptsPerMinute else {
            return .held("too many join attempts from this address; wait a minute and try again")
        }
        if attempts[source] == nil, attempts.count >= Self.sourcesKept, let oldest = attempts.min(by: { ($0.value.last ?? now) < ($1.value.last ?? now) })?.key {
            attempts[oldest] = nil
        }
        attempts[source] = recent + [now]
        guard let (id, offer) = invitations.first(where: { !$0.value.used && $0.value.expires > date && $0.value.invitation.isValid(proof: proof, certificate: certificate, name: name) })
        else {
            var penalty = penalties[source].flatMap { now - $0.until < Self.penaltyMemory ? $0 : nil } ?? Penalty(wrongCodes: 0, until: now)
            penalty.wrongCodes += 1
            // The first is free (a person who typed an older code, then the right one).
            penalty.until = penalty.wrongCodes == 1 ? now : now + min(Self.firstPenalty * (1 << min(penalty.wrongCodes - 2, 16)), Self.longestPenalty)
            if penalties[source] == nil, penalties.count >= Self.sourcesKept, let first = penalties.min(by: { $0.value.until < $1.value.until })?.key {
                penalties[first] = nil
            }
            penalties[source] = penalty
            // The report names at most 64 sources; the rest are counted together.
            if !invitations.isEmpty { wrongCodes[wrongCodes[source] != nil || wrongCodes.count < 64 ? source : "other addresses", default: 0] += 1 }
            return .refused(Self.wrongCode)
        }
        // One use, whatever comes of it.
        invitations[id]?.used = true
        return .matched(id, offer.invitation)
    }

    /// What the person is told of wrong codes while invitations were open, or nil for none:
    /// "5 join requests with a wrong code were refused (10.0.0.3 sent 3, 10.0.0.4 sent 2)".
    var wrongCodeReport: String? {
        guard !wrongCodes.isEmpty else { return nil }
        let total = wrongCodes.values.reduce(0, +)
        let sources = wrongCodes.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
        let named = sources.prefix(5).map { "\($0.key) sent \($0.value)" }.joined(separator: ", ") + (sources.count > 5 ? ", and \(sources.count - 5) more" : "")
        return "\(total) join request\(total == 1 ? "" : "s") with a wrong code \(total == 1 ? "was" : "were") refused (\(named)): someone on the network may be guessing; the invitation stayed open, and each wrong code slows its sender down"
    }

    /// `waiter` waits for a device to ask with invitation `id`: told at once if one did; nil
    /// if the invitation is not open.
    mutating func awaitCandidate(_ id: UUID, _ waiter: Waiter) -> [Action]? {
        guard let offer = invitations[id] else { return nil }
        if let candidate = offer.candidate { return [.resume(waiter, .candidate(candidate))] }
        invitations[id]?.awaiting.append(waiter)
        return []
    }

    /// The device that asked with invitation `id` waits (`decision`) for the person's
    /// decision; those waiting for it are told who it is. Refused at once when the invitation
    /// is gone meanwhile.
    mutating func ask(_ id: UUID, _ request: LocalJoinRequest, decision: Waiter) -> [Action] {
        guard let offer = invitations[id] else { return [.resume(decision, .decision(false))] }
        invitations[id]?.candidate = request
        invitations[id]?.decision = decision
        invitations[id]?.awaiting = []
        return offer.awaiting.map { .resume($0, .candidate(request)) }
    }

    /// The person decided on the device waiting with invitation `id`; nil when none waits.
    mutating func decide(_ id: UUID, accept: Bool) -> [Action]? {
        guard let decision = invitations[id]?.decision else { return nil }
        invitations[id]?.decision = nil
        return [.resume(decision, .decision(accept))]
    }

    // MARK: Answered joins

    /// An answer went to the device that connected with certificate fingerprint `key`: it is
    /// kept until `confirmationDeadline`, under its own token.
    mutating func answered(_ key: String, _ join: AnsweredJoin) -> [Action] {
        answered[key] = join
        return [.schedule(.confirmation(key, token: join.token), after: Self.confirmationDeadline)]
    }

    /// The confirmation deadline of the answer `token` passed: that answer, if it is still
    /// the one waiting (a later answer to the same device keeps its own deadline).
    mutating func confirmationDeadlinePassed(_ key: String, token: UUID) -> AnsweredJoin? {
        guard answered[key]?.token == token else { return nil }
        return answered.removeValue(forKey: key)
    }

    /// The device confirmed that it has its answer: the join to commit, if one waits.
    mutating func confirmed(_ key: String) -> AnsweredJoin? {
        answered.removeValue(forKey: key)
    }

    /// A deadline passed. The listener's: closed if no invitation was made since. An
    /// invitation's: it expires. A confirmation's is `confirmationDeadlinePassed`.
    mutating func deadlinePassed(_ deadline: PairingDeadline) -> [Action] {
        switch deadline {
        case .invitation(let id):
            return expire(id)
        case .listenerIdle:
            guard invitations.isEmpty else { return [] }
            // The next listener's report starts empty (the sources' penalties stay).
            wrongCodes = [:]
            return [.closeListener]
        case .confirmation(let key, let token):
            _ = confirmationDeadlinePassed(key, token: token)
            return []
        }
    }

    // MARK: This device joining

    /// A join starts; false if one is under way.
    mutating func startJoin() -> Bool {
        if case .underWay = joining { return false }
        joining = .underWay(awaiting: [])
        return true
    }

    /// The join ended with `reply`: those waiting are told, and it is kept for one who asks later.
    mutating func joinEnded(_ reply: LocalReply) -> [Action] {
        guard case .underWay(let awaiting) = joining else { return [] }
        joining = .ended(reply)
        return awaiting.map { .resume($0, .joinResult(reply)) }
    }

    /// `waiter` asks how the join ended: told when it does, or at once (taking the result) if
    /// it has; nil when no join was made.
    mutating func awaitJoinResult(_ waiter: Waiter) -> [Action]? {
        switch joining {
        case .idle:
            return nil
        case .underWay(var awaiting):
            awaiting.append(waiter)
            joining = .underWay(awaiting: awaiting)
            return []
        case .ended(let reply):
            joining = .idle
            return [.resume(waiter, .joinResult(reply))]
        }
    }

    // MARK: Changes to the account

    /// A change to the account asks to begin: at once if none is under way, else after those
    /// queued before it.
    mutating func beginAccountChange(_ waiter: Waiter) -> [Action] {
        switch accountChange {
        case .unchanged:
            accountChange = .changing(queued: [])
            return [.resume(waiter, .accountTurn)]
        case .changing(var queued):
            queued.append(waiter)
            accountChange = .changing(queued: queued)
            return []
        }
    }

    /// The change under way ended: the next one queued begins.
    mutating func accountChangeEnded() -> [Action] {
        guard case .changing(var queued) = accountChange, !queued.isEmpty else {
            accountChange = .unchanged
            return []
        }
        let next = queued.removeFirst()
        accountChange = .changing(queued: queued)
        return [.resume(next, .accountTurn)]
    }
}
