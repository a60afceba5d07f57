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
}
