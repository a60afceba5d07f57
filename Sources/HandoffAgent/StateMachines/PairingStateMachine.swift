import Foundation
import HandoffLocalAPI
import HandoffWire

/// Every decision of the inviting device about devices asking to join its account: which
/// invitations are open, which request a code lets in, how fast an address may guess, when
/// the invitations are withdrawn, and which answered joins wait for their confirmation. A
/// value with no I/O and no clock of its own (`now` comes with each event); the agent runs
/// what it returns: answers, timers, the person's decision.
///
/// ```
///   an invitation:  open ──a request with its code──► used ──(interactive) asked(request)──► decided
///                     │                                 └──(token)─────────────────────────► decided
///                     └──expiry, or withdrawn after 10 wrong codes──► gone
///   a join answered: awaiting confirmation(token) ──joinConfirmed──► committed
///                                                 └──deadline of its own token──► dropped
/// ```
///
/// Guessing is slow: five requests a minute from one address are looked at, the rest refused
/// unread; ten wrong codes withdraw every open invitation (the person makes a new one).
struct PairingStateMachine: Sendable {
    /// Join requests looked at per minute from one address.
    static let attemptsPerMinute = 5
    /// Wrong codes after which the invitations are withdrawn.
    static let wrongCodesAllowed = 10
    /// How long a join answered waits for the joining device's confirmation.
    static let confirmationDeadline: Duration = .seconds(10)

    struct Offer: Sendable {
        var invitation: Invitation
        var expires: Date
        var used = false
        /// The device that asked with it, once one did (interactive invitations).
        var candidate: LocalJoinRequest?
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

    private(set) var invitations: [UUID: Offer] = [:]
    /// Answered joins by the fingerprint of the certificate their device connected with.
    private(set) var answered: [String: AnsweredJoin] = [:]
    private var attempts: [String: [ContinuousClock.Instant]] = [:]
    private(set) var wrongCodes = 0

    // MARK: Invitations

    mutating func issue(_ id: UUID, _ invitation: Invitation, expires: Date) {
        invitations[id] = Offer(invitation: invitation, expires: expires)
    }

    /// The invitation is over (expired, used, refused, withdrawn); what it was, if it was open.
    mutating func expire(_ id: UUID) -> Offer? {
        invitations.removeValue(forKey: id)
    }

    /// The pairing listener closed (no invitation was left): guesses start from zero again.
    mutating func listenerClosed() {
        wrongCodes = 0
    }

    /// What a join request with a code comes to.
    enum Request: Sendable, Equatable {
        /// Refused with this reason, unread or with a wrong code.
        case refused(String)
        /// Refused, and these invitations are withdrawn: too many wrong codes.
        case withdraw([UUID], refusal: String)
        /// The code is that of this invitation, which is now used.
        case matched(UUID, Invitation)
    }

    static let wrongCode = "the code is wrong, was used already, or has expired; ask for a new one with 'handoff device invite'"

    /// A device at `address` (nil in memory) asks to join with `proof`.
    mutating func requested(proof: [UInt8], certificate: [UInt8], name: String, from address: String?, now: ContinuousClock.Instant, date: Date) -> Request {
        if let address {
            if attempts.count >= 256 { attempts = attempts.filter { $0.value.contains { now - $0 < .seconds(60) } } }
            let recent = (attempts[address] ?? []).filter { now - $0 < .seconds(60) }
            guard recent.count < Self.attemptsPerMinute else {
                return .refused("too many join attempts from this address; wait a minute and try again")
            }
            attempts[address] = recent + [now]
        }
        guard let (id, offer) = invitations.first(where: { !$0.value.used && $0.value.expires > date && $0.value.invitation.isValid(proof: proof, certificate: certificate, name: name) })
        else {
            wrongCodes += 1
            guard wrongCodes >= Self.wrongCodesAllowed, !invitations.isEmpty else { return .refused(Self.wrongCode) }
            wrongCodes = 0
            return .withdraw(Array(invitations.keys), refusal: Self.wrongCode)
        }
        // One use, whatever comes of it.
        invitations[id]?.used = true
        return .matched(id, offer.invitation)
    }

    /// The device that asked with invitation `id` waits for the person's decision; false when
    /// the invitation is gone meanwhile.
    mutating func ask(_ id: UUID, _ request: LocalJoinRequest) -> Bool {
        guard invitations[id] != nil else { return false }
        invitations[id]?.candidate = request
        return true
    }

    // MARK: Answered joins

    /// An answer went to the device that connected with certificate fingerprint `key`: it is
    /// kept until `confirmationDeadline` (which the driver schedules with `join.token`).
    mutating func answered(_ key: String, _ join: AnsweredJoin) {
        answered[key] = join
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
}
