import HandoffLocalAPI
import NIOCore
import NIOEmbedded
import Testing

@testable import HandoffAgent

/// The link's and the local socket's framing: frames whole in one read, split across reads,
/// several in one, and a frame over the limit.
@Suite("Frames on a channel")
struct FrameHandlerTests {
    static func frames(from reads: [[UInt8]], maximum: Int = 1 << 20) throws -> (frames: [Frame], closed: Bool) {
        let channel = EmbeddedChannel(handler: FrameHandler(maximumPayload: maximum))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        var frames: [Frame] = []
        for read in reads {
            do {
                try channel.writeInbound(channel.allocator.buffer(bytes: read))
            } catch {
                return (frames + drain(channel), true)
            }
            frames += drain(channel)
            if !channel.isActive { return (frames, true) }
        }
        return (frames, !channel.isActive)
    }

    static func drain(_ channel: EmbeddedChannel) -> [Frame] {
        var frames: [Frame] = []
        while let frame = try? channel.readInbound(as: Frame.self) { frames.append(frame) }
        return frames
    }

    let sample = [
        Frame(kind: 1, payload: Array(repeating: 7, count: 300_000)), Frame(kind: 2, payload: []), Frame(kind: 3, payload: Array(0..<200).map(UInt8.init)),
    ]

    @Test("Frames come out whole and in order however the bytes are split: all in one read, one read each, or cut at every size")
    func splits() throws {
        // Compared as a whole, so that a failure prints sizes, not 300,000 bytes.
        func check(_ reads: [[UInt8]], _ expected: [Frame], _ what: String) throws {
            let read = try Self.frames(from: reads)
            let same = read.frames == expected
            #expect(same && !read.closed, "\(what): \(read.frames.map { ($0.kind, $0.payload.count) }), closed \(read.closed)")
        }
        let bytes = sample.flatMap(\.encoded)
        try check([bytes], sample, "all in one read")
        try check(sample.map(\.encoded), sample, "one read each")
        for cut in [4096, 16_384, 299_999, 300_004, 300_005, 300_010] {
            try check(stride(from: 0, to: bytes.count, by: cut).map { Array(bytes[$0..<min($0 + cut, bytes.count)]) }, sample, "cut every \(cut) bytes")
        }
        // Headers cut anywhere, on small frames.
        let small = [Frame(kind: 4, payload: [9]), Frame(kind: 5, payload: []), Frame(kind: 6, payload: Array(repeating: 1, count: 40))]
        let smallBytes = small.flatMap(\.encoded)
        for cut in [1, 2, 3, 4, 5, 6, 7] {
            try check(stride(from: 0, to: smallBytes.count, by: cut).map { Array(smallBytes[$0..<min($0 + cut, smallBytes.count)]) }, small, "cut every \(cut) bytes")
        }
        // A whole frame, then part of the next in the same read, then the rest.
        let first = sample[2].encoded, second = sample[0].encoded
        try check([first + second.prefix(1000), Array(second.dropFirst(1000))], [sample[2], sample[0]], "whole, then split")
    }

    @Test("A frame over the limit closes the channel, whether it comes alone, after whole frames in the same read, or split")
    func oversized() throws {
        let small = Frame(kind: 1, payload: [1, 2, 3])
        let large = Frame(kind: 2, payload: Array(repeating: 0, count: 2_000))
        let alone = try Self.frames(from: [large.encoded], maximum: 1_000)
        #expect(alone.frames.isEmpty && alone.closed)
        let after = try Self.frames(from: [small.encoded + large.encoded + small.encoded], maximum: 1_000)
        #expect(after.frames == [small] && after.closed)
        let split = try Self.frames(from: [small.encoded + Array(large.encoded.prefix(3)), Array(large.encoded.dropFirst(3))], maximum: 1_000)
        #expect(split.frames == [small] && split.closed)
    }
}
