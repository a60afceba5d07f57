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
public struct FrameDecoder: Sendable {
    /// The limit; a change applies from the next frame's header on.
    public var maximumPayload: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var failed: FrameError?

    public init(maximumPayload: Int = 1 << 20) {
        precondition(maximumPayload >= 0)
        self.maximumPayload = maximumPayload
    }

    /// Bytes buffered and not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Adds bytes from the stream.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        guard failed == nil else { return }
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole frame, nil if more bytes are needed; throws (and keeps throwing) once the
    /// stream declared a frame over the limit.
    public mutating func next() throws(FrameError) -> Frame? {
        if let failed { throw failed }
        guard bufferedByteCount >= Frame.headerSize else { return nil }
        let declared = (0..<4).reduce(0) { $0 << 8 | Int(buffer[start + $1]) }
        guard declared <= maximumPayload else {
            let error = FrameError.tooLarge(declared: declared, limit: maximumPayload)
            failed = error
            buffer = []
            start = 0
            throw error
        }
        guard bufferedByteCount >= Frame.headerSize + declared else { return nil }
        let kind = buffer[start + 4]
        let payload = Array(buffer[(start + Frame.headerSize)..<(start + Frame.headerSize + declared)])
        start += Frame.headerSize + declared
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        return Frame(kind: kind, payload: payload)
    }
}
