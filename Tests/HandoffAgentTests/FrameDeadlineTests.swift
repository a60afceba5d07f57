import Foundation
import HandoffLocalAPI
import NIOCore
import NIOEmbedded
import Testing

@testable import HandoffAgent

/// The local socket's frame deadline (`FrameHandler`'s `partialDeadline`): a sender that stops
/// half-way through a frame is cut off, and nothing else is.
@Suite("A frame begun must go on arriving")
struct FrameDeadlineTests {
    /// A channel reading frames with a 10 s deadline; what it passes on is dropped.
    func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: 1 << 20, partialDeadline: .seconds(10)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    /// The first `count` bytes of a 512 KiB stream frame.
    func start(of count: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(UInt32(512 * 1024))
        buffer.writeInteger(UInt8(LocalStreamFrame.data))
        buffer.writeRepeatingByte(7, count: count - 5)
        return buffer
    }

    @Test("A frame that keeps arriving for longer than the deadline, every read ending inside it, is not cut off")
    func progressIsNotAStall() throws {
        let channel = try channel()
        try channel.writeInbound(start(of: 1024))
        for _ in 0..<30 {
            // A second a read, 30 s in all: each read brings bytes.
            channel.read()
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(900))
            try channel.writeInbound(ByteBuffer(repeating: 7, count: 1024))
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        }
        #expect(channel.isActive, "cut off while its frame was arriving")
        _ = try? channel.finish()
    }

    @Test("While this side reads nothing (back-pressure: the frames read wait for the link), the sender is not cut off")
    func notReadingIsNotAStall() throws {
        let channel = try channel()
        try channel.writeInbound(start(of: 64 * 1024))
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive, "cut off while nothing was asked of it")
        _ = try? channel.finish()
    }

    @Test("A read asked for in the middle of a frame that brings nothing within the deadline cuts the sender off")
    func stallIsCutOff() throws {
        let channel = try channel()
        try channel.writeInbound(start(of: 64 * 1024))
        channel.read()
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive, "a sender stopped half-way through its frame kept its connection")
    }

    @Test("Between frames there is no deadline")
    func betweenFrames() throws {
        let channel = try channel()
        var whole = ByteBuffer()
        whole.writeInteger(UInt32(3))
        whole.writeInteger(UInt8(LocalStreamFrame.data))
        whole.writeBytes([1, 2, 3])
        try channel.writeInbound(whole)
        channel.read()
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        _ = try? channel.finish()
    }
}
