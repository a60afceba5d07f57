import Testing

@testable import HandoffWire

@Suite("Frames")
struct FrameTests {
    @Test("Frames come back whole, however the stream splits them")
    func everySplit() throws {
        let frames = [Frame(kind: 1, payload: Array("hello".utf8)), Frame(kind: 2, payload: []), Frame(kind: 255, payload: [UInt8](repeating: 7, count: 300))]
        let stream = frames.flatMap(\.encoded)
        for split in 0...stream.count {
            var decoder = FrameDecoder()
            var received: [Frame] = []
            decoder.append(stream[..<split])
            while let frame = try decoder.next() { received.append(frame) }
            decoder.append(stream[split...])
            while let frame = try decoder.next() { received.append(frame) }
            #expect(received == frames, "split at \(split)")
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test("S9: A frame that declares 16 MiB is refused from its header alone")
    func hugeDeclared() {
        var decoder = FrameDecoder(maximumPayload: 1 << 20)
        decoder.append([0x01, 0x00, 0x00, 0x00, 0x09])
        #expect(throws: FrameError.tooLarge(declared: 16 << 20, limit: 1 << 20)) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 0)
        decoder.append([0, 0, 0, 0, 1])
        #expect(throws: FrameError.self) { try decoder.next() }
    }

    @Test("A partial frame waits for the rest")
    func partial() throws {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 3, 9, 1])
        #expect(try decoder.next() == nil)
        decoder.append([2, 3])
        #expect(try decoder.next() == Frame(kind: 9, payload: [1, 2, 3]))
    }

    @Test("Large frames, gathered in place as their bytes come, come back whole among small ones, however reads split them and whenever frames are asked for")
    func largeFramesGathered() throws {
        var random = SeededRandom(seed: 7)
        // Small, around the threshold, a stream's chunk, and over the reserve.
        let payloads = [0, 5, 300, 16 * 1024 - 1, 16 * 1024, 256 * 1024, 1 << 20 + 200].map { size in
            (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        }
        for round in 0..<30 {
            let frames = (0..<Int.random(in: 1...5, using: &random)).map { index in
                var payload = payloads.randomElement(using: &random)!
                if !payload.isEmpty { payload[payload.count - 1] = UInt8(truncatingIfNeeded: round) }
                return Frame(kind: UInt8(index), payload: payload)
            }
            let stream = frames.flatMap(\.encoded)
            var decoder = FrameDecoder(maximumPayload: 2 << 20)
            var received: [Frame] = []
            var offset = 0
            var returned = 0
            while offset < stream.count {
                let count = min(stream.count - offset, [1, 7, 4096, 65536, 300_000].randomElement(using: &random)!)
                decoder.append(stream[offset..<offset + count])
                offset += count
                // Sometimes several reads go in before frames are asked for.
                if Bool.random(using: &random) {
                    while let frame = try decoder.next() {
                        received.append(frame)
                        returned += Frame.headerSize + frame.payload.count
                    }
                }
                #expect(decoder.bufferedByteCount == offset - returned, "round \(round)")
            }
            while let frame = try decoder.next() { received.append(frame) }
            #expect(received == frames, "round \(round): sizes \(frames.map(\.payload.count))")
            #expect(decoder.bufferedByteCount == 0)
        }
    }

    @Test("S9: The limit holds for a frame that would be gathered in place: refused from its header, nothing kept")
    func largeOverLimit() {
        var decoder = FrameDecoder(maximumPayload: 64 * 1024)
        decoder.append(Frame(kind: 1, payload: [UInt8](repeating: 1, count: 64 * 1024 + 1)).encoded.prefix(1000))
        #expect(throws: FrameError.tooLarge(declared: 64 * 1024 + 1, limit: 64 * 1024)) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 0)
    }
}

/// A small deterministic generator (SplitMix64), so a failing round can be replayed.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
