import Foundation
import HandoffWire

/// This device's view of the account's clipboard: its own copy, if it has one, and the offers
/// other devices' beacons carry. The clipboard here is the newest of them not yet expired (by
/// the time each was copied, then the device's identifier): a copy here replaces another
/// device's older offer, and a newer one anywhere in the account replaces a copy here. A value
/// with no I/O: the agent tells it what happened, with the time, and asks.
///
/// ```
///   none ──copied here──► local(offer) ──expired / replaced──► …
///        ──heard an offer──► remote(device, offer) ──expired / device gone / replaced──► …
///   current = the newest unexpired of {local} ∪ remote offers
/// ```
/// What holds the bytes of a copy made on this device: files the agent keeps (a `copy` on the
/// local socket), by type; or the session service that offered it (`offerClipboard`), which is
/// asked for a type's bytes when a device pastes it.
enum LocalClipboardContent: Sendable, Hashable {
    case held([String: URL])
    case provided(session: UUID)
}

struct ClipboardBoard: Sendable {
    /// A copy made on this device, and what holds its bytes.
    struct Local<Content: Sendable>: Sendable {
        var offer: ClipboardOffer
        var expires: ContinuousClock.Instant
        var content: Content
    }

    /// An offer another device made, as its beacon said.
    struct Remote: Sendable, Hashable {
        var device: UUID
        var offer: ClipboardOffer
        var expires: ContinuousClock.Instant
    }

    /// What a paste here pastes.
    enum Current: Sendable, Hashable {
        case local(ClipboardOffer)
        case remote(Remote)

        var offer: ClipboardOffer {
            switch self {
            case .local(let offer): return offer
            case .remote(let remote): return remote.offer
            }
        }
    }

    private(set) var local: Local<LocalClipboardContent>?
    private(set) var remote: [UUID: Remote] = [:]
    private var lastGeneration: UInt64 = 0

    // MARK: Changes

    /// A copy here, of `types` whose bytes `content` holds, at `date`, offered for `lifetime`.
    /// Returns its offer and the content of the copy it replaced (for the caller to remove).
    mutating func copied(
        _ types: [ClipboardType], content: LocalClipboardContent, at date: Date, lifetime: Duration, now: ContinuousClock.Instant
    ) -> (offer: ClipboardOffer, replaced: LocalClipboardContent?) {
        // Milliseconds since 1970, and never backwards: a restarted agent's copies stay newer.
        let generation = max(lastGeneration + 1, UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down))))
        lastGeneration = generation
        let seconds = UInt16(clamping: Int(lifetime.seconds.rounded(.up)))
        let offer = ClipboardOffer(generation: generation, copiedAt: date, lifetimeSeconds: seconds, types: types)
        let replaced = local?.content
        local = Local(offer: offer, expires: now + lifetime, content: content)
        return (offer, replaced)
    }

    /// The copy here expired or is given up: its content, for the caller to remove.
    mutating func dropLocal() -> LocalClipboardContent? {
        defer { local = nil }
        return local?.content
    }

    /// A beacon of `device` carried `offer` (or none), sent at `sent` on its clock. Returns
    /// whether what it offers changed.
    @discardableResult
    mutating func heard(_ device: UUID, offer: ClipboardOffer?, sent: Date, now: ContinuousClock.Instant) -> Bool {
        // A copy made later than the beacon that carries it (past the clocks' leeway) is no
        // copy any sender makes: it would win over every real one. None is taken.
        guard let offer, offer.copiedAt.timeIntervalSince(sent) <= Self.leeway else { return remote.removeValue(forKey: device) != nil }
        if remote[device]?.offer == offer { return false }
        // Its age on its own clock: a clock that differs from this one moves nothing. Held to
        // the offer's lifetime, whatever time it claims (no arithmetic on a wild one).
        let age = max(0, sent.timeIntervalSince(offer.copiedAt))
        let left = min(Double(offer.lifetimeSeconds), max(-1, Double(offer.lifetimeSeconds) - age))
        remote[device] = Remote(device: device, offer: offer, expires: now + .milliseconds(Int64((left * 1000).rounded(.down))))
        return true
    }

    /// How far a copy's time may be ahead of its beacon's (the beacon's own window).
    static let leeway: TimeInterval = 30

    /// `device` is no longer heard (or left the account): its offer goes.
    @discardableResult
    mutating func gone(_ device: UUID) -> Bool {
        remote.removeValue(forKey: device) != nil
    }

    /// Forgets every offer, this device's too: the clipboard was turned off, or the device
    /// left its account. Returns the local copy's content, for the caller to remove.
    mutating func clear() -> LocalClipboardContent? {
        remote = [:]
        return dropLocal()
    }

    // MARK: Questions

    /// The copy here while it is offered (what beacons carry).
    func localOffer(now: ContinuousClock.Instant) -> ClipboardOffer? {
        guard let local, now < local.expires else { return nil }
        return local.offer
    }

    /// What a paste on device `me` pastes: the newest offer not expired.
    func current(now: ContinuousClock.Instant, me: UUID) -> Current? {
        var best: (key: (Date, String), current: Current)?
        if let local, now < local.expires {
            best = ((local.offer.copiedAt, me.uuidString), .local(local.offer))
        }
        for offer in remote.values where now < offer.expires {
            let key = (offer.offer.copiedAt, offer.device.uuidString)
            if best.map({ key > $0.key }) ?? true { best = (key, .remote(offer)) }
        }
        return best?.current
    }

    /// When the next offer expires, if any does: the agent looks again then.
    func nextExpiry(now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        let times = ([local?.expires].compactMap { $0 } + remote.values.map(\.expires)).filter { $0 > now }
        return times.min()
    }

    /// The content of type `type` of this device's copy `generation`, for a device that pastes
    /// it; or why not.
    func servable(generation: UInt64, type: String, now: ContinuousClock.Instant) -> Result<(ClipboardType, LocalClipboardContent), ClipboardRefusal> {
        guard let local, local.offer.generation == generation else { return .failure(.replaced) }
        guard now < local.expires else { return .failure(.expired) }
        guard let offered = local.offer.types.first(where: { $0.name == type }) else {
            return .failure(.typeNotOffered(type, offered: local.offer.types.map(\.name)))
        }
        if case .held(let files) = local.content, files[type] == nil {
            return .failure(.typeNotOffered(type, offered: local.offer.types.map(\.name)))
        }
        return .success((offered, local.content))
    }

    /// The type a paste asking for `wanted` (nil: any) gets from `offer`: the one named, else
    /// the first text type, else the first type.
    static func pasteType(_ wanted: String?, in offer: ClipboardOffer) -> ClipboardType? {
        if let wanted { return offer.types.first { $0.name == wanted } }
        let text = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain"]
        return offer.types.first { text.contains($0.name) } ?? offer.types.first
    }
}

/// Why a device does not give a paste what it asked for.
enum ClipboardRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    case off
    case replaced
    case expired
    case typeNotOffered(String, offered: [String])

    var description: String {
        switch self {
        case .off: return "its clipboard is off (--clipboard off)"
        case .replaced: return "that copy was replaced by a newer one"
        case .expired: return "that copy expired"
        case .typeNotOffered(let type, let offered): return "it did not offer type '\(type)' (it offered \(offered.map { "'\($0)'" }.joined(separator: ", ")))"
        }
    }
}
