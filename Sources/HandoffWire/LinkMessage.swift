import Foundation

/// A file URL in an activity's `userInfo` that lies in a synced container on the origin: the
/// container (the same identifier on every device) and the file's path inside it, so that the
/// receiver can give its app the same file in its own copy of the container.
public struct WireFileReference: Sendable, Hashable {
    /// The URL as it is in the origin's `userInfo` (`absoluteString`).
    public var url: String
    public var container: String
    /// Relative, `/`-separated, without `.` or `..`.
    public var path: String

    public init(url: String, container: String, path: String) {
        self.url = url
        self.container = container
        self.path = path
    }
}

/// A fetched activity as it travels over a link: the activity's record (encoded by this
/// module; `userInfo` opaque here) and the file URLs in its `userInfo` that lie in the origin's
/// synced containers.
public struct FetchedActivity: Sendable, Hashable {
    public var record: ActivityRecord
    public var fileReferences: [WireFileReference]

    public init(_ record: ActivityRecord, fileReferences: [WireFileReference] = []) {
        self.record = record
        self.fileReferences = fileReferences
    }
}

/// A change to an account, as it travels: the account as JSON, signed by a member.
public struct SignedChange: Sendable, Hashable {
    public var signer: UUID
    public var state: [UInt8]
    public var signature: [UInt8]

    public init(signer: UUID, state: [UInt8], signature: [UInt8]) {
        self.signer = signer
        self.state = state
        self.signature = signature
    }
}

/// The messages of a link, each carried in one frame whose kind says which it is.
/// See `docs/wire-protocol.md`.
public enum LinkMessage: Sendable, Hashable {
    /// Before anything else on a link between members, each side proves it holds a member's
    /// long-term key, the connecting side first: its long-term certificate and a signature
    /// binding it to this link, sealed with the account's keys (one box per key the sender
    /// holds; the answer has one). See `docs/wire-protocol.md`, Membership proof.
    case proof(boxes: [[UInt8]])
    /// The first frame each side sends: the protocol version it speaks and who it is.
    case hello(version: UInt8, device: UUID)
    /// Asks the peer for its activity `activityID`, saved now.
    case fetch(request: UInt64, activityID: UUID)
    /// The saved activity.
    case fetched(request: UInt64, FetchedActivity)
    /// The fetch failed; `code` is Foundation's error code (4608 to 4611, 3072).
    case fetchFailed(request: UInt64, code: UInt16, message: String)
    /// The activity was continued on the sender; the origin tells its app.
    case continued(activityID: UUID)
    /// Changes to the account's membership, oldest first: each the account as JSON (`state`),
    /// signed by the member `signer` with its device key over `state`.
    case accountUpdate([SignedChange])
    /// Tells a device it was removed: the account after its removal, signed by a member, with
    /// its keys left out (a removed device must not learn the new beacon key). Never taken up
    /// as the account; the device only checks it and leaves.
    case removed(SignedChange)
    /// Sent on the pairing listener by a device asking to join: its name, its certificate
    /// (DER), and a proof that it holds the invitation's secret (see `docs/wire-protocol.md`, Pairing).
    case joinRequest(version: UInt8, name: String, certificate: [UInt8], proof: [UInt8])
    /// The joining device is in: the change that added it, signed by the inviting device.
    case joinAccepted(SignedChange)
    /// The join was refused, and why.
    case joinRefused(reason: String)
    /// The joining device has the answer (`joinAccepted`) and asks the inviting device to
    /// commit the join, which it does only now and answers with `joinAccepted` again.
    case joinConfirmed
    /// Opens continuation stream `stream` to the app whose activity is `activityID`; the
    /// opener may receive `window` bytes before it grants more. Only the side that opened the
    /// link opens streams.
    case streamOpen(stream: UInt64, activityID: UUID, window: UInt32)
    /// The origin's app took the stream; the origin may receive `window` bytes.
    case streamAccepted(stream: UInt64, window: UInt32)
    /// The stream was not opened; `code` as in `fetchFailed`.
    case streamRefused(stream: UInt64, code: UInt16, message: String)
    /// Bytes of the stream, in order; never more than the receiver's window allows.
    case streamData(stream: UInt64, bytes: [UInt8])
    /// The receiver read `bytes` more: the sender may send that many more.
    case streamCredit(stream: UInt64, bytes: UInt32)
    /// The sender will send no more bytes on the stream (its output stream closed).
    case streamEnd(stream: UInt64)
    /// The sender reads no more (its input stream closed): the receiver's writes fail.
    case streamStop(stream: UInt64)
    /// The stream ended in failure both ways, and why.
    case streamReset(stream: UInt64, reason: String)
    /// Opens stream `stream` to paste type `type` of the clipboard the other side offers as
    /// `generation` (`ClipboardOffer`): it answers as to `streamOpen`, then sends the bytes and
    /// ends the stream. The opener sends nothing on it.
    case clipboardOpen(stream: UInt64, generation: UInt64, type: String, window: UInt32)

    /// The version this build speaks.
    /// Version 2 proves membership inside the link (`proof`) instead of in the certificates.
    public static let version: UInt8 = 2

    /// The most boxes a `proof` carries.
    public static let maximumProofBoxes = 8

    enum Kind: UInt8 {
        case hello = 0x01
        case proof = 0x02
        case fetch = 0x10
        case fetched = 0x11
        case fetchFailed = 0x12
        case continued = 0x13
        case accountUpdate = 0x20
        case removed = 0x21
        case joinRequest = 0x30
        case joinAccepted = 0x31
        case joinRefused = 0x32
        case joinConfirmed = 0x33
        case streamOpen = 0x40
        case streamAccepted = 0x41
        case streamRefused = 0x42
        case streamData = 0x43
        case streamCredit = 0x44
        case streamEnd = 0x45
        case streamStop = 0x46
        case streamReset = 0x47
        case clipboardOpen = 0x48
    }

    /// Whether a frame is one of a continuation stream's (kinds 0x40 to 0x4F), which are handled
    /// in order, as they arrive.
    public static func isStreamFrame(_ frame: Frame) -> Bool { frame.kind & 0xF0 == 0x40 }

    /// The largest frame payload a link carries; a larger declared frame closes the link.
    public static let maximumFrame = 1 << 20

    /// The most stream bytes one `streamData` carries: half the default window, so that one
    /// chunk travels while the one before is consumed. Each chunk costs every process on its
    /// path (two apps, two agents) a wake-up and a few system calls; 512 KiB chunks took a
    /// quarter less CPU per GiB than 256 KiB ones (docs/agent.md, Streams). Receivers accept
    /// any chunk that fits a frame, as they always did.
    public static let maximumStreamChunk = 512 * 1024

    /// The frame that carries this message.
    public var frame: Frame {
        var writer = FieldWriter()
        switch self {
        case .hello(let version, let device):
            writer.byte(version)
            writer.uuid(device)
            return Frame(kind: Kind.hello.rawValue, payload: writer.bytes)
        case .proof(let boxes):
            writer.varint(UInt64(boxes.count))
            for box in boxes { writer.data(box) }
            return Frame(kind: Kind.proof.rawValue, payload: writer.bytes)
        case .fetch(let request, let activityID):
            writer.varint(request)
            writer.uuid(activityID)
            return Frame(kind: Kind.fetch.rawValue, payload: writer.bytes)
        case .fetched(let request, let record):
            writer.varint(request)
            writer.fetched(record)
            return Frame(kind: Kind.fetched.rawValue, payload: writer.bytes)
        case .fetchFailed(let request, let code, let message):
            writer.varint(request)
            writer.varint(UInt64(code))
            writer.string(message)
            return Frame(kind: Kind.fetchFailed.rawValue, payload: writer.bytes)
        case .continued(let activityID):
            writer.uuid(activityID)
            return Frame(kind: Kind.continued.rawValue, payload: writer.bytes)
        case .accountUpdate(let changes):
            writer.varint(UInt64(changes.count))
            for change in changes { writer.change(change) }
            return Frame(kind: Kind.accountUpdate.rawValue, payload: writer.bytes)
        case .joinRequest(let version, let name, let certificate, let proof):
            writer.byte(version)
            writer.string(name)
            writer.data(certificate)
            writer.data(proof)
            return Frame(kind: Kind.joinRequest.rawValue, payload: writer.bytes)
        case .joinAccepted(let change):
            writer.change(change)
            return Frame(kind: Kind.joinAccepted.rawValue, payload: writer.bytes)
        case .removed(let change):
            writer.change(change)
            return Frame(kind: Kind.removed.rawValue, payload: writer.bytes)
        case .joinRefused(let reason):
            writer.string(reason)
            return Frame(kind: Kind.joinRefused.rawValue, payload: writer.bytes)
        case .joinConfirmed:
            return Frame(kind: Kind.joinConfirmed.rawValue, payload: [])
        case .streamOpen(let stream, let activityID, let window):
            writer.varint(stream)
            writer.uuid(activityID)
            writer.varint(UInt64(window))
            return Frame(kind: Kind.streamOpen.rawValue, payload: writer.bytes)
        case .streamAccepted(let stream, let window):
            writer.varint(stream)
            writer.varint(UInt64(window))
            return Frame(kind: Kind.streamAccepted.rawValue, payload: writer.bytes)
        case .streamRefused(let stream, let code, let message):
            writer.varint(stream)
            writer.varint(UInt64(code))
            writer.string(message)
            return Frame(kind: Kind.streamRefused.rawValue, payload: writer.bytes)
        case .streamData(let stream, let bytes):
            // The bytes run to the end of the frame: no length of their own.
            writer.bytes.reserveCapacity(10 + bytes.count)
            writer.varint(stream)
            writer.bytes.append(contentsOf: bytes)
            return Frame(kind: Kind.streamData.rawValue, payload: writer.bytes)
        case .streamCredit(let stream, let bytes):
            writer.varint(stream)
            writer.varint(UInt64(bytes))
            return Frame(kind: Kind.streamCredit.rawValue, payload: writer.bytes)
        case .streamEnd(let stream):
            writer.varint(stream)
            return Frame(kind: Kind.streamEnd.rawValue, payload: writer.bytes)
        case .streamStop(let stream):
            writer.varint(stream)
            return Frame(kind: Kind.streamStop.rawValue, payload: writer.bytes)
        case .streamReset(let stream, let reason):
            writer.varint(stream)
            writer.string(reason)
            return Frame(kind: Kind.streamReset.rawValue, payload: writer.bytes)
        case .clipboardOpen(let stream, let generation, let type, let window):
            writer.varint(stream)
            writer.varint(generation)
            writer.string(type)
            writer.varint(UInt64(window))
            return Frame(kind: Kind.clipboardOpen.rawValue, payload: writer.bytes)
        }
    }

    /// Reads a message from a frame, or throws saying what is wrong; never traps.
    public init(frame: Frame) throws(LinkMessageError) {
        guard let kind = Kind(rawValue: frame.kind) else { throw .unknownKind(frame.kind) }
        var reader = FieldReader(frame.payload)
        switch kind {
        case .hello:
            self = .hello(version: try reader.byte(), device: try reader.uuid())
        case .proof:
            let count = try reader.varint()
            guard count > 0, count <= UInt64(Self.maximumProofBoxes) else { throw .malformed("a proof of \(count) boxes (1 to \(Self.maximumProofBoxes))") }
            var boxes: [[UInt8]] = []
            for _ in 0..<count { boxes.append(try reader.data()) }
            self = .proof(boxes: boxes)
        case .fetch:
            self = .fetch(request: try reader.varint(), activityID: try reader.uuid())
        case .fetched:
            self = .fetched(request: try reader.varint(), try reader.fetched())
        case .fetchFailed:
            let request = try reader.varint()
            let code = try reader.varint()
            guard code <= UInt64(UInt16.max) else { throw .malformed("error code \(code) out of range") }
            self = .fetchFailed(request: request, code: UInt16(code), message: try reader.string())
        case .continued:
            self = .continued(activityID: try reader.uuid())
        case .accountUpdate:
            let count = try reader.varint()
            // Each change takes at least 18 bytes: a count beyond what remains is a lie.
            guard count <= UInt64(frame.payload.count / 18) else { throw .truncated }
            var changes: [SignedChange] = []
            for _ in 0..<count { changes.append(try reader.change()) }
            self = .accountUpdate(changes)
        case .joinRequest:
            self = .joinRequest(version: try reader.byte(), name: try reader.string(), certificate: try reader.data(), proof: try reader.data())
        case .joinAccepted:
            self = .joinAccepted(try reader.change())
        case .removed:
            self = .removed(try reader.change())
        case .joinRefused:
            self = .joinRefused(reason: try reader.string())
        case .joinConfirmed:
            self = .joinConfirmed
        case .streamOpen:
            self = .streamOpen(stream: try reader.varint(), activityID: try reader.uuid(), window: try reader.window())
        case .streamAccepted:
            self = .streamAccepted(stream: try reader.varint(), window: try reader.window())
        case .streamRefused:
            let stream = try reader.varint()
            let code = try reader.varint()
            guard code <= UInt64(UInt16.max) else { throw .malformed("error code \(code) out of range") }
            self = .streamRefused(stream: stream, code: UInt16(code), message: try reader.string())
        case .streamData:
            let stream = try reader.varint()
            let bytes = reader.rest()
            guard !bytes.isEmpty else { throw .malformed("stream data without bytes") }
            self = .streamData(stream: stream, bytes: bytes)
        case .streamCredit:
            let stream = try reader.varint()
            let bytes = try reader.window()
            guard bytes > 0 else { throw .malformed("a stream credit of 0 bytes") }
            self = .streamCredit(stream: stream, bytes: bytes)
        case .streamEnd:
            self = .streamEnd(stream: try reader.varint())
        case .streamStop:
            self = .streamStop(stream: try reader.varint())
        case .streamReset:
            self = .streamReset(stream: try reader.varint(), reason: try reader.string())
        case .clipboardOpen:
            let stream = try reader.varint()
            let generation = try reader.varint()
            let type = try reader.string()
            guard ClipboardOffer.isValidTypeName(type) else {
                throw .malformed("a clipboard type must be 1 to \(ClipboardOffer.maximumTypeNameBytes) bytes of printable ASCII")
            }
            self = .clipboardOpen(stream: stream, generation: generation, type: type, window: try reader.window())
        }
        guard reader.isAtEnd else { throw .malformed("unexpected bytes after the message") }
    }
}

/// Why a frame is not a link message.
public enum LinkMessageError: Error, Sendable, Hashable, CustomStringConvertible {
    case unknownKind(UInt8)
    case truncated
    case malformed(String)

    public var description: String {
        switch self {
        case .unknownKind(let kind): return "unknown link message kind \(kind)"
        case .truncated: return "link message ends early"
        case .malformed(let why): return "malformed link message: \(why)"
        }
    }
}

struct FieldWriter {
    var bytes: [UInt8] = []

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func uuid(_ value: UUID) {
        withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ value: String) {
        let utf8 = Array(value.utf8)
        varint(UInt64(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    mutating func data(_ value: [UInt8]) {
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func change(_ change: SignedChange) {
        uuid(change.signer)
        data(change.state)
        data(change.signature)
    }

    mutating func optionalString(_ value: String?) {
        if let value {
            byte(1)
            string(value)
        } else {
            byte(0)
        }
    }

    mutating func strings(_ values: [String]) {
        varint(UInt64(values.count))
        for value in values { string(value) }
    }

    mutating func fetched(_ fetched: FetchedActivity) {
        let record = fetched.record
        let activity = record.activity
        uuid(activity.id)
        string(activity.activityType)
        optionalString(activity.title)
        optionalString(activity.bundleIdentifier)
        optionalString(activity.teamIdentifier)
        var flags: UInt8 = 0
        if activity.supportsContinuationStreams { flags |= 1 }
        if record.isEligibleForSearch { flags |= 2 }
        if record.isEligibleForPublicIndexing { flags |= 4 }
        if record.isEligibleForPrediction { flags |= 8 }
        if activity.expirationDate != nil { flags |= 16 }
        if record.requiredUserInfoKeys != nil { flags |= 32 }
        if record.userInfo != nil { flags |= 64 }
        if !fetched.fileReferences.isEmpty { flags |= 128 }
        byte(flags)
        if let expiration = activity.expirationDate {
            withUnsafeBytes(of: expiration.timeIntervalSinceReferenceDate.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }
        optionalString(record.webpageURL)
        optionalString(record.referrerURL)
        strings(record.keywords)
        if let required = record.requiredUserInfoKeys { strings(required) }
        optionalString(record.persistentIdentifier)
        optionalString(record.targetContentIdentifier)
        if let userInfo = record.userInfo {
            varint(UInt64(userInfo.count))
            bytes.append(contentsOf: userInfo)
        }
        if !fetched.fileReferences.isEmpty {
            varint(UInt64(fetched.fileReferences.count))
            for reference in fetched.fileReferences {
                string(reference.url)
                string(reference.container)
                string(reference.path)
            }
        }
    }
}

struct FieldReader {
    private let bytes: [UInt8]
    private var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { offset == bytes.count }

    mutating func byte() throws(LinkMessageError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func varint() throws(LinkMessageError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            if shift == 63 && b > 1 { throw .malformed("varint overflows 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw .malformed("varint longer than 10 bytes") }
        }
    }

    /// A length, checked against what remains before anything is allocated.
    mutating func length() throws(LinkMessageError) -> Int {
        let value = try varint()
        guard value <= UInt64(bytes.count - offset) else { throw .truncated }
        return Int(value)
    }

    mutating func take(_ count: Int) throws(LinkMessageError) -> ArraySlice<UInt8> {
        guard count <= bytes.count - offset else { throw .truncated }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    mutating func uuid() throws(LinkMessageError) -> UUID {
        let raw = try take(16)
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: raw) }
        return UUID(uuid: value)
    }

    mutating func string() throws(LinkMessageError) -> String {
        let raw = try take(try length())
        guard let string = String(validating: raw, as: UTF8.self) else { throw .malformed("a string is not valid UTF-8") }
        return string
    }

    mutating func data() throws(LinkMessageError) -> [UInt8] {
        Array(try take(try length()))
    }

    /// A window or credit: a varint that fits 32 bits.
    mutating func window() throws(LinkMessageError) -> UInt32 {
        let value = try varint()
        guard value <= UInt64(UInt32.max) else { throw .malformed("a stream window of \(value) bytes is over 2^32 - 1") }
        return UInt32(value)
    }

    /// Every byte not read yet.
    mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }

    mutating func change() throws(LinkMessageError) -> SignedChange {
        SignedChange(signer: try uuid(), state: try data(), signature: try data())
    }

    mutating func optionalString() throws(LinkMessageError) -> String? {
        switch try byte() {
        case 0: return nil
        case 1: return try string()
        case let other: throw .malformed("optional marker \(other)")
        }
    }

    mutating func strings() throws(LinkMessageError) -> [String] {
        let count = try length()
        var values: [String] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try string()) }
        return values
    }

    mutating func fetched() throws(LinkMessageError) -> FetchedActivity {
        let id = try uuid()
        let type = try string()
        guard !type.isEmpty else { throw .malformed("empty activity type") }
        let title = try optionalString()
        let bundle = try optionalString()
        let team = try optionalString()
        let flags = try byte()
        var expiration: Date?
        if flags & 16 != 0 {
            let raw = try take(8)
            var bits: UInt64 = 0
            withUnsafeMutableBytes(of: &bits) { $0.copyBytes(from: raw) }
            let seconds = Double(bitPattern: UInt64(littleEndian: bits))
            guard seconds.isFinite else { throw .malformed("the expiration date is not a finite number") }
            expiration = Date(timeIntervalSinceReferenceDate: seconds)
        }
        let webpage = try optionalString()
        let referrer = try optionalString()
        let keywords = try strings()
        let required = flags & 32 != 0 ? try strings() : nil
        let persistent = try optionalString()
        let target = try optionalString()
        var userInfo: Data?
        if flags & 64 != 0 { userInfo = Data(try take(try length())) }
        var references: [WireFileReference] = []
        if flags & 128 != 0 {
            // Each reference takes at least 3 bytes: a count beyond what remains is a lie.
            let count = try varint()
            guard count > 0, count <= UInt64(bytes.count - offset) / 3 else { throw .malformed("a file reference count of \(count)") }
            for _ in 0..<count {
                references.append(WireFileReference(url: try string(), container: try string(), path: try string()))
            }
        }
        let activity = ActivityAnnouncement(
            id: id, activityType: type, title: title, bundleIdentifier: bundle, teamIdentifier: team, hasWebpageURL: webpage != nil,
            supportsContinuationStreams: flags & 1 != 0, expirationDate: expiration)
        let record = ActivityRecord(
            activity: activity, webpageURL: webpage, referrerURL: referrer, keywords: keywords, requiredUserInfoKeys: required,
            persistentIdentifier: persistent, targetContentIdentifier: target, isEligibleForSearch: flags & 2 != 0,
            isEligibleForPublicIndexing: flags & 4 != 0, isEligibleForPrediction: flags & 8 != 0, userInfo: userInfo)
        return FetchedActivity(record, fileReferences: references)
    }
}
