/// One message on a stream: a 4-byte big-endian payload length, a kind byte, the payload.
/// Links between agents and the local socket both carry frames (see `docs/wire-protocol.md`).
public struct Frame: Sendable, Hashable {
    public var kind: UInt8
    public var payload: [UInt8]

    public init(kind: UInt8, payload: [UInt8]) {
        self.kind = kind
        self.payload = payload
    }

    /// The bytes of this frame on the wire.
    public var encoded: [UInt8] {
        let length = UInt32(payload.count)
        var out: [UInt8] = [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), kind]
        out.append(contentsOf: payload)
        return out
    }

    public static let headerSize = 5
}

/// Why a stream's bytes are not frames; the connection carrying them should be closed.
public enum FrameError: Error, Sendable, Hashable, CustomStringConvertible {
    case tooLarge(declared: Int, limit: Int)

    public var description: String {
        switch self {
        case .tooLarge(let declared, let limit):
            return "a frame declares \(declared) bytes, over the limit of \(limit); the sender is refused"
        }
    }
}

/// Cuts a byte stream into frames. A frame that declares more than `maximumPayload` bytes is
/// refused as soon as its header arrives, before anything is buffered for it.
///
/// A large frame (a stream's chunk) that has begun but not ended is gathered in place: once its
/// header is in, its payload gets its own array, and the bytes that follow go straight into it,
/// one copy from the reads to the frame. Small frames are cut from a shared buffer.
public struct FrameDecoder: Sendable {
    /// The limit; a change applies from the next frame's header on.
    public var maximumPayload: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var failed: FrameError?
    /// The frame gathered in place, when there is one: its kind, its declared length, and the
    /// payload so far (its capacity reserved for the whole, up to `largestReserve`).
    private var gathering = false
    private var gatheredKind: UInt8 = 0
    private var gatheredLength = 0
    private var gathered: [UInt8] = []

    /// Frames from this size up are gathered in place.
    static let gatherThreshold = 16 * 1024
    /// The most reserved at a header's word; a larger frame's array grows as its bytes come.
    static let largestReserve = 1 << 20 + 64

    public init(maximumPayload: Int = 1 << 20) {
        precondition(maximumPayload >= 0)
        self.maximumPayload = maximumPayload
    }

    /// Bytes buffered and not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - start + (gathering ? Frame.headerSize + gathered.count : 0) }

    /// Adds bytes from the stream.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        guard failed == nil else { return }
        var rest = bytes[...]
        if gathering {
            let wanted = min(gatheredLength - gathered.count, rest.count)
            if wanted > 0 {
                let end = rest.index(rest.startIndex, offsetBy: wanted)
                gathered.append(contentsOf: rest[..<end])
                rest = rest[end...]
            }
            if rest.isEmpty { return }
        }
        // A large frame that begins these bytes and does not end in them is gathered from them
        // at once, not through the shared buffer.
        if !gathering, start == buffer.count, rest.count >= Frame.headerSize {
            let declared = rest.prefix(4).reduce(0) { $0 << 8 | Int($1) }
            if declared >= Self.gatherThreshold, declared <= maximumPayload, rest.count < Frame.headerSize + declared {
                buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
                start = 0
                gathering = true
                gatheredKind = rest[rest.index(rest.startIndex, offsetBy: 4)]
                gatheredLength = declared
                gathered = []
                gathered.reserveCapacity(min(declared, Self.largestReserve))
                gathered.append(contentsOf: rest.dropFirst(Frame.headerSize))
                return
            }
        }
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: rest)
    }

    /// The next whole frame, nil if more bytes are needed; throws (and keeps throwing) once the
    /// stream declared a frame over the limit.
    public mutating func next() throws(FrameError) -> Frame? {
        if let failed { throw failed }
        if gathering {
            guard gathered.count == gatheredLength else { return nil }
            gathering = false
            defer { gathered = [] }
            return Frame(kind: gatheredKind, payload: gathered)
        }
        guard buffer.count - start >= Frame.headerSize else { return nil }
        let declared = (0..<4).reduce(0) { $0 << 8 | Int(buffer[start + $1]) }
        guard declared <= maximumPayload else {
            let error = FrameError.tooLarge(declared: declared, limit: maximumPayload)
            failed = error
            buffer = []
            start = 0
            throw error
        }
        let kind = buffer[start + 4]
        guard buffer.count - start >= Frame.headerSize + declared else {
            if declared >= Self.gatherThreshold {
                // Gathered in place from here on: what is buffered of it moves once, the rest
                // arrives into it.
                gathering = true
                gatheredKind = kind
                gatheredLength = declared
                gathered = []
                gathered.reserveCapacity(min(declared, Self.largestReserve))
                gathered.append(contentsOf: buffer[(start + Frame.headerSize)...])
                buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
                start = 0
            }
            return nil
        }
        let payload = Array(buffer[(start + Frame.headerSize)..<(start + Frame.headerSize + declared)])
        start += Frame.headerSize + declared
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        return Frame(kind: kind, payload: payload)
    }
}
