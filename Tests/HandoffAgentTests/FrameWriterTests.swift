import Foundation
import HandoffLocalAPI
import NIOCore
import NIOEmbedded
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import HandoffAgent

/// The frame writer of local sockets and links: frames go straight to the channel, in the order they were
/// sent, at most `limit` unwritten, and closing waits for what was sent.
@Suite("Frame writer")
struct FrameWriterTests {
    static func frame(_ number: UInt8) -> Frame { Frame(kind: 0x4A, payload: [number]) }

    @Test("Frames are written in the order sent: one sent on the event loop does not overtake those sent just before from another thread")
    func order() async throws {
        // A real channel on a real event loop, over one end of a socket pair.
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { close(ends[1]) }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ClientBootstrap(group: group).channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: 1 << 20)) }
        }.withConnectedSocket(ends[0]).get()
        let writer = FrameWriter(channel: channel, limit: 10)
        // The loop is held busy while this thread sends two frames; then, still on the loop,
        // it sends a third.
        let sent = DispatchSemaphore(value: 0)
        let stalled = channel.eventLoop.submit {
            sent.wait()
            #expect(writer.write(Self.frame(3)) == .accepted)
        }
        #expect(writer.write(Self.frame(1)) == .accepted)
        #expect(writer.write(Self.frame(2)) == .accepted)
        sent.signal()
        try await stalled.get()
        writer.finish()
        try await writer.whenDrained.get()
        var bytes: [UInt8] = []
        var decoder = FrameDecoder(maximumPayload: 1 << 20)
        var written: [UInt8] = []
        while written.count < 3 {
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = read(ends[1], &buffer, buffer.count)
            try #require(count > 0)
            bytes += buffer.prefix(count)
            decoder.append(bytes)
            bytes = []
            while let frame = try decoder.next() { written += frame.payload }
        }
        #expect(written == [1, 2, 3])
        try await channel.close()
        try await group.shutdownGracefully()
    }

    @Test("A client that leaves the limit unwritten is refused the next frame (full: it is cut off); after finishing nothing is taken (finished: no cut-off); finishing waits for what was taken")
    func limitAndDrain() throws {
        let channel = EmbeddedChannel()
        let writer = FrameWriter(channel: channel, limit: 2)
        #expect(writer.write(Self.frame(1)) == .accepted)
        #expect(writer.write(Self.frame(2)) == .accepted)
        #expect(writer.write(Self.frame(3)) == .full)
        writer.finish()
        #expect(writer.write(Self.frame(4)) == .finished)
        let drained = Shared(false)
        writer.whenDrained.whenSuccess { drained.update { $0 = true } }
        #expect(!drained.value)
        channel.embeddedEventLoop.run()
        #expect(drained.value)
        var written: [UInt8] = []
        while let frame = try channel.readOutbound(as: Frame.self) { written += frame.payload }
        #expect(written == [1, 2])
    }
}
