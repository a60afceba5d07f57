import Crypto
import Foundation

/// The account's key for sealing and opening beacons: 32 random bytes every member holds.
public struct BeaconKey: Sendable, Hashable {
    let key: SymmetricKey

    /// A new random key, made when an account is created or a member is removed.
    public static func generate() -> BeaconKey {
        BeaconKey(key: SymmetricKey(size: .bits256))
    }

    /// A key read back from the account's state.
    public init(rawRepresentation bytes: [UInt8]) throws(BeaconError) {
        guard bytes.count == 32 else { throw .badKey(length: bytes.count) }
        key = SymmetricKey(data: bytes)
    }

    init(key: SymmetricKey) { self.key = key }

    /// The key's bytes, for the account's state file.
    public var rawRepresentation: [UInt8] {
        key.withUnsafeBytes { Array($0) }
    }

    public static func == (lhs: BeaconKey, rhs: BeaconKey) -> Bool {
        lhs.rawRepresentation == rhs.rawRepresentation
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(rawRepresentation)
    }
}

/// What a device announces: that it is there, its link port, and its current activity's
/// identity (never its state). All of it travels sealed.
public struct BeaconContent: Sendable, Hashable {
    /// The sending device's identifier within the account.
    public var sender: UUID
    /// Grows with every beacon a device sends; a receiver refuses one not newer than the last.
    public var sequence: UInt64
    /// When it was sealed, to the millisecond; a receiver refuses one outside its window.
    public var timestamp: Date
    /// The TCP port of the sender's link listener.
    public var linkPort: UInt16
    /// The sender's current activity, or nil when it has none. A beacon carries its id, type,
    /// team, title (shortened at a character boundary, with "…", if it does not fit) and two
    /// flags (a web page, streams); the bundle identifier and expiration date stay at home
    /// (nil in a beacon read).
    public var activity: ActivityAnnouncement?
    /// The revision of the account as the sender knows it: a member that is behind is sent
    /// the changes it missed.
    public var accountRevision: UInt64
    /// How often, in seconds, the sender repeats its beacon while nothing changes; a receiver
    /// keeps it listed for three of these. Nil from a version 1 beacon.
    public var refreshSeconds: UInt16?
    /// Set by a device that just started or whose interface just came (back): devices that
    /// hear it answer with a beacon at once instead of at their next refresh.
    public var asksForAnswers: Bool
    /// Set by a device that hears some device of its link over IPv6 only: the others keep
    /// refreshing over IPv6 there, even where they hear everyone over IPv4 (IPv4 multicast
    /// may be dropped one way only).
    public var wantsIPv6: Bool

    public init(
        sender: UUID, sequence: UInt64, timestamp: Date, linkPort: UInt16, activity: ActivityAnnouncement?, accountRevision: UInt64 = 0,
        refreshSeconds: UInt16? = nil, asksForAnswers: Bool = false, wantsIPv6: Bool = false
    ) {
        self.sender = sender
        self.sequence = sequence
        // The wire keeps milliseconds; keep the value in step so that a round trip is equal.
        self.timestamp = Date(timeIntervalSince1970: (timestamp.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        self.linkPort = linkPort
        self.activity = activity
        self.accountRevision = accountRevision
        self.refreshSeconds = refreshSeconds
        self.asksForAnswers = asksForAnswers
        self.wantsIPv6 = wantsIPv6
    }
}

/// Why a beacon could not be sealed.
public enum BeaconError: Error, Sendable, Hashable, CustomStringConvertible {
    case badKey(length: Int)
    case fieldTooLong(field: String, bytes: Int, limit: Int)

    public var description: String {
        switch self {
        case .badKey(let length): return "a beacon key is 32 bytes; this one has \(length)"
        case .fieldTooLong(let field, let bytes, let limit):
            return "the activity's \(field) is \(bytes) bytes in UTF-8; a beacon carries at most \(limit)"
        }
    }
}

/// Sealed beacons (see `docs/wire-protocol.md`): every beacon is `Beacon.size` bytes, a random
/// nonce followed by ChaCha20-Poly1305 ciphertext and its full 16-byte tag. Nothing is in
/// clear: no version, no key id, no length, so that no byte follows a device or tells what
/// it does. A receiver that cannot open one ignores it, and nothing it holds changes.
public enum Beacon {
    /// The size of every beacon on the wire.
    public static let size = 512
    static let nonceSize = 12
    static let tagSize = 16
    static let plaintextSize = size - nonceSize - tagSize
    /// Version 2 adds the refresh interval and the request for answers; version 1 is still read.
    static let version: UInt8 = 2
    /// Binds the ciphertext to its purpose, so no other sealed message of ours opens as a beacon.
    static let context = Array("handoff beacon v1".utf8)

    public static let maximumActivityTypeBytes = 200
    public static let maximumTeamBytes = 64

    enum Kind: UInt8 {
        case presence = 0
        case activity = 1
    }

    /// Seals a beacon. Throws only for an activity type or team too long to carry.
    public static func seal(_ content: BeaconContent, with key: BeaconKey) throws(BeaconError) -> [UInt8] {
        let plaintext = try encode(content)
        let sealed: ChaChaPoly.SealedBox
        do {
            sealed = try ChaChaPoly.seal(plaintext, using: key.key, nonce: ChaChaPoly.Nonce(), authenticating: context)
        } catch {
            preconditionFailure("sealing with a 256-bit key and a fresh nonce cannot fail: \(error)")
        }
        return Array(sealed.combined)
    }

    /// Opens a beacon with any of `keys` (the current one, and the previous one while a new
    /// key spreads). Returns nil for anything that is not a well-formed beacon of this account.
    public static func open(_ bytes: [UInt8], with keys: [BeaconKey]) -> BeaconContent? {
        guard bytes.count == size, let box = try? ChaChaPoly.SealedBox(combined: bytes) else { return nil }
        for key in keys {
            if let plaintext = try? ChaChaPoly.open(box, using: key.key, authenticating: context) {
                return decode(Array(plaintext))
            }
        }
        return nil
    }

    // MARK: The sealed part

    package static func encode(_ content: BeaconContent) throws(BeaconError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(plaintextSize)
        out.append(version)
        out.append(content.activity == nil ? Kind.presence.rawValue : Kind.activity.rawValue)
        append(content.sequence, to: &out)
        append(UInt64(bitPattern: Int64((content.timestamp.timeIntervalSince1970 * 1000).rounded(.down))), to: &out)
        append(content.sender, to: &out)
        out.append(UInt8(content.linkPort >> 8))
        out.append(UInt8(content.linkPort & 0xFF))
        append(content.accountRevision, to: &out)
        let refresh = content.refreshSeconds ?? 0
        out.append(UInt8(refresh >> 8))
        out.append(UInt8(refresh & 0xFF))
        out.append((content.asksForAnswers ? 1 : 0) | (content.wantsIPv6 ? 2 : 0))
        if let activity = content.activity {
            let type = Array(activity.activityType.utf8)
            guard type.count <= maximumActivityTypeBytes else {
                throw .fieldTooLong(field: "type", bytes: type.count, limit: maximumActivityTypeBytes)
            }
            let team = Array((activity.teamIdentifier ?? "").utf8)
            guard team.count <= maximumTeamBytes else {
                throw .fieldTooLong(field: "team identifier", bytes: team.count, limit: maximumTeamBytes)
            }
            var flags: UInt8 = 0
            if activity.hasWebpageURL { flags |= 1 }
            if activity.supportsContinuationStreams { flags |= 2 }
            if activity.teamIdentifier != nil { flags |= 4 }
            if activity.title != nil { flags |= 8 }
            out.append(flags)
            append(activity.id, to: &out)
            out.append(UInt8(type.count))
            out.append(contentsOf: type)
            out.append(UInt8(team.count))
            out.append(contentsOf: team)
            let room = min(255, plaintextSize - out.count - 1)
            let title = shortened(activity.title ?? "", toBytes: room)
            out.append(UInt8(title.count))
            out.append(contentsOf: title)
        }
        // One size for every beacon: pad with zeros, which the receiver checks.
        out.append(contentsOf: repeatElement(0, count: plaintextSize - out.count))
        return out
    }

    package static func decode(_ bytes: [UInt8]) -> BeaconContent? {
        var reader = ByteReader(bytes)
        guard let format = reader.byte(), format == 1 || format == version, let kind = reader.byte().flatMap(Kind.init(rawValue:)),
            let sequence = reader.uint64(), let milliseconds = reader.uint64(), let sender = reader.uuid(),
            let portHigh = reader.byte(), let portLow = reader.byte(), let revision = reader.uint64()
        else { return nil }
        var refreshSeconds: UInt16?
        var asksForAnswers = false
        var wantsIPv6 = false
        if format >= 2 {
            guard let high = reader.byte(), let low = reader.byte(), let options = reader.byte(), options & ~3 == 0 else { return nil }
            let refresh = UInt16(high) << 8 | UInt16(low)
            refreshSeconds = refresh == 0 ? nil : refresh
            asksForAnswers = options & 1 != 0
            wantsIPv6 = options & 2 != 0
        }
        var activity: ActivityAnnouncement?
        if kind == .activity {
            guard let flags = reader.byte(), flags & ~0x0F == 0, let id = reader.uuid(),
                let type = reader.string(), !type.isEmpty, let team = reader.string(), let title = reader.string(),
                // What no sender writes is refused: fields over the limits the sealing side keeps.
                type.utf8.count <= maximumActivityTypeBytes, team.utf8.count <= maximumTeamBytes
            else { return nil }
            activity = ActivityAnnouncement(
                id: id, activityType: type, title: flags & 8 != 0 ? title : nil,
                teamIdentifier: flags & 4 != 0 ? team : nil, hasWebpageURL: flags & 1 != 0,
                supportsContinuationStreams: flags & 2 != 0)
        }
        guard reader.restIsZero() else { return nil }
        return BeaconContent(
            sender: sender, sequence: sequence,
            timestamp: Date(timeIntervalSince1970: Double(Int64(bitPattern: milliseconds)) / 1000),
            linkPort: UInt16(portHigh) << 8 | UInt16(portLow), activity: activity, accountRevision: revision,
            refreshSeconds: refreshSeconds, asksForAnswers: asksForAnswers, wantsIPv6: wantsIPv6)
    }

    /// The UTF-8 of `text`, shortened at a character boundary with "…" to fit `limit` bytes.
    static func shortened(_ text: String, toBytes limit: Int) -> [UInt8] {
        let whole = Array(text.utf8)
        if whole.count <= limit { return whole }
        let ellipsis = Array("…".utf8)
        var kept = ""
        var used = 0
        for character in text {
            let size = character.utf8.count
            if used + size + ellipsis.count > limit { break }
            kept.append(character)
            used += size
        }
        return Array(kept.utf8) + ellipsis
    }

    private static func append(_ value: UInt64, to out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func append(_ id: UUID, to out: inout [UInt8]) {
        withUnsafeBytes(of: id.uuid) { out.append(contentsOf: $0) }
    }
}

/// Reads the fields of a sealed part; every read returns nil past the end.
struct ByteReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
        guard count <= bytes.count - offset else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func uint64() -> UInt64? {
        take(8).map { $0.reduce(0) { $0 << 8 | UInt64($1) } }
    }

    mutating func uuid() -> UUID? {
        guard let raw = take(16) else { return nil }
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: raw) }
        return UUID(uuid: value)
    }

    /// A string of a one-byte length and UTF-8, refused if not valid UTF-8.
    mutating func string() -> String? {
        guard let count = byte(), let raw = take(Int(count)) else { return nil }
        return String(validating: raw, as: UTF8.self)
    }

    func restIsZero() -> Bool {
        bytes[offset...].allSatisfy { $0 == 0 }
    }
}
