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
    /// Set by a device that hears some device of its link over IPv6 only, or has no IPv4
    /// there: the others keep refreshing over IPv6 there, even where they hear everyone over
    /// IPv4 (IPv4 multicast may be dropped one way only, or a lease may have ended).
    public var wantsIPv6: Bool
    /// What the sender offers to paste, if anything (a version 3 beacon): the types that fit
    /// beside the activity, never the content.
    public var clipboard: ClipboardOffer?

    public init(
        sender: UUID, sequence: UInt64, timestamp: Date, linkPort: UInt16, activity: ActivityAnnouncement?, accountRevision: UInt64 = 0,
        refreshSeconds: UInt16? = nil, asksForAnswers: Bool = false, wantsIPv6: Bool = false, clipboard: ClipboardOffer? = nil
    ) {
        self.clipboard = clipboard
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
    /// Version 3 adds a clipboard offer; a beacon without one is written as version 2, which
    /// agents from before the clipboard still read.
    static let version: UInt8 = 2
    static let clipboardVersion: UInt8 = 3
    /// The bytes before the activity and the clipboard: version, kind, sequence, time, sender,
    /// link port, account revision, refresh interval, options.
    static let headerSize = 1 + 1 + 8 + 8 + 16 + 2 + 8 + 2 + 1
    /// What the clipboard leaves of the activity's title, at least, when both are carried.
    static let titleRoomKept = 24
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
        if case .opened(let content) = read(bytes, with: keys) { return content }
        return nil
    }

    /// What a datagram is to a holder of `keys`.
    public enum Reading: Sendable {
        /// A well-formed beacon of this account.
        case opened(BeaconContent)
        /// Sealed with one of the keys (a member's), but not a beacon this version writes or
        /// reads: a newer version's, or one that breaks its limits.
        case malformed
        /// Not sealed with any of the keys.
        case notOurs
    }

    public static func read(_ bytes: [UInt8], with keys: [BeaconKey]) -> Reading {
        guard bytes.count == size, let box = try? ChaChaPoly.SealedBox(combined: bytes) else { return .notOurs }
        for key in keys {
            if let plaintext = try? ChaChaPoly.open(box, using: key.key, authenticating: context) {
                return decode(Array(plaintext)).map(Reading.opened) ?? .malformed
            }
        }
        return .notOurs
    }

    /// Seals `plaintext` as a beacon's sealed part as it is (tests write what no sender writes).
    package static func seal(plaintext: [UInt8], with key: BeaconKey) -> [UInt8] {
        let sealed = try! ChaChaPoly.seal(plaintext, using: key.key, nonce: ChaChaPoly.Nonce(), authenticating: context)
        return Array(sealed.combined)
    }

    // MARK: The sealed part

    package static func encode(_ content: BeaconContent) throws(BeaconError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(plaintextSize)
        let type = Array((content.activity?.activityType ?? "").utf8)
        guard type.count <= maximumActivityTypeBytes else {
            throw .fieldTooLong(field: "type", bytes: type.count, limit: maximumActivityTypeBytes)
        }
        let team = Array((content.activity?.teamIdentifier ?? "").utf8)
        guard team.count <= maximumTeamBytes else {
            throw .fieldTooLong(field: "team identifier", bytes: team.count, limit: maximumTeamBytes)
        }
        // The clipboard's section takes what the activity leaves, keeping some of its title.
        var clipboard: [UInt8]?
        if let offer = content.clipboard {
            let activityRoom = content.activity.map { 1 + 16 + 1 + type.count + 1 + team.count + 1 + min(Array(($0.title ?? "").utf8).count, titleRoomKept) } ?? 0
            clipboard = ClipboardOffer.section(offer, room: plaintextSize - headerSize - activityRoom)?.bytes
        }
        out.append(clipboard == nil ? version : clipboardVersion)
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
        out.append((content.asksForAnswers ? 1 : 0) | (content.wantsIPv6 ? 2 : 0) | (clipboard == nil ? 0 : 4))
        if let clipboard { out.append(contentsOf: clipboard) }
        if let activity = content.activity {
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
        guard let format = reader.byte(), format >= 1, format <= clipboardVersion, let kind = reader.byte().flatMap(Kind.init(rawValue:)),
            let sequence = reader.uint64(), let milliseconds = reader.uint64(), let sender = reader.uuid(),
            let portHigh = reader.byte(), let portLow = reader.byte(), let revision = reader.uint64()
        else { return nil }
        var refreshSeconds: UInt16?
        var asksForAnswers = false
        var wantsIPv6 = false
        var clipboard: ClipboardOffer?
        if format >= 2 {
            // Version 3 sets the clipboard's bit, and only it does.
            guard let high = reader.byte(), let low = reader.byte(), let options = reader.byte(), options & ~7 == 0,
                (options & 4 != 0) == (format == clipboardVersion)
            else { return nil }
            let refresh = UInt16(high) << 8 | UInt16(low)
            refreshSeconds = refresh == 0 ? nil : refresh
            asksForAnswers = options & 1 != 0
            wantsIPv6 = options & 2 != 0
            if options & 4 != 0 {
                guard let offer = ClipboardOffer.read(&reader) else { return nil }
                clipboard = offer
            }
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
            refreshSeconds: refreshSeconds, asksForAnswers: asksForAnswers, wantsIPv6: wantsIPv6, clipboard: clipboard)
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

    /// An unsigned LEB128 number of at most 10 bytes.
    mutating func leb128() -> UInt64? {
        var value: UInt64 = 0
        for index in 0..<10 {
            guard let byte = byte() else { return nil }
            let bits = UInt64(byte & 0x7F)
            guard index < 9 || bits <= 1 else { return nil }
            value |= bits << UInt64(7 * index)
            if byte & 0x80 == 0 { return value }
        }
        return nil
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
