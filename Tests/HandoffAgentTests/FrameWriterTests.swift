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

    /// A real channel on a real event loop of its own, over one end of a socket pair; the other
    /// end is `peer`'s.
    static func socketPair() async throws -> (channel: any Channel, peer: Int32, group: MultiThreadedEventLoopGroup) {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ClientBootstrap(group: group).channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: 1 << 20)) }
        }.withConnectedSocket(ends[0]).get()
        return (channel, ends[1], group)
    }

    @Test("Frames are written in the order sent: one sent on the event loop does not overtake those sent just before from another thread")
    func order() async throws {
        let (channel, peer, group) = try await Self.socketPair()
        defer { close(peer) }
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
            let count = read(peer, &buffer, buffer.count)
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

    @Test("A peer that leaves the limit (in bytes) unwritten is cut off at the next frame; after finishing nothing is taken; finishing waits for what was taken")
    func limitAndDrain() throws {
        // A socket that takes nothing: every write waits (as for a peer that does not read).
        let socket = StalledWrites()
        let channel = EmbeddedChannel(handler: socket)
        _ = try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        // Two frames of 6 bytes may wait.
        let writer = FrameWriter(channel: channel, limit: 12)
        let first = writer.write(Self.frame(1)), second = writer.write(Self.frame(2))
        #expect(first == .accepted && second == .accepted)
        channel.embeddedEventLoop.run()
        let openBefore = channel.isActive
        #expect(openBefore)
        let third = writer.write(Self.frame(3))
        #expect(third == .accepted)
        channel.embeddedEventLoop.run()
        let openAfter = channel.isActive
        #expect(!openAfter, "a peer with 2 frames unwritten was not cut off at the third")
        let fourth = writer.write(Self.frame(4))
        #expect(fourth == .finished)
        let payloads = socket.payloads
        #expect(payloads == [1, 2])
        let drained = Shared(false)
        writer.whenDrained.whenSuccess { drained.update { $0 = true } }
        channel.embeddedEventLoop.run()
        #expect(drained.value)
    }

    @Test("Frames that NIO has not been handed yet do not count: 40 frames of 1 KB sent while the event loop is busy reach a peer whose socket takes them, with a limit of 10 bytes")
    func burstIsNotCutOff() async throws {
        let (channel, peer, group) = try await Self.socketPair()
        defer { close(peer) }
        // 10 bytes: less than a frame. Only what waits for the socket counts, and nothing does.
        let writer = FrameWriter(channel: channel, limit: 10)
        // The loop is held busy while this thread sends 40 frames of 1,000 bytes: all wait for
        // the loop, none for the socket (whose buffer takes them all when the loop writes them).
        let sent = DispatchSemaphore(value: 0)
        let stalled = channel.eventLoop.submit { sent.wait() }
        let refused = (0..<40).filter { writer.write(Frame(kind: 0x4A, payload: [UInt8](repeating: UInt8($0), count: 1_000))) != .accepted }.count
        sent.signal()
        try await stalled.get()
        writer.finish()
        try await writer.whenDrained.get()
        #expect(refused == 0)
        let open = channel.isActive
        #expect(open, "the writer cut off a peer whose socket took every frame")
        var received = 0
        var decoder = FrameDecoder(maximumPayload: 1 << 20)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK)
        while true {
            let count = read(peer, &buffer, buffer.count)
            if count <= 0 { break }
            decoder.append(buffer.prefix(count))
            while try decoder.next() != nil { received += 1 }
        }
        #expect(received == 40)
        try await channel.close()
        try await group.shutdownGracefully()
    }

    @Test("After finishing, what was taken is still written, and then whenDrained completes")
    func finishWritesWhatWasTaken() throws {
        let held = HeldWrites()
        let channel = EmbeddedChannel(handler: held)
        let writer = FrameWriter(channel: channel, limit: 1_000)
        #expect(writer.write(Self.frame(1)) == .accepted)
        #expect(writer.write(Self.frame(2)) == .accepted)
        writer.finish()
        #expect(writer.write(Self.frame(3)) == .finished)
        let drained = Shared(false)
        writer.whenDrained.whenSuccess { drained.update { $0 = true } }
        channel.embeddedEventLoop.run()
        #expect(!drained.value, "drained while two frames were still being written")
        held.release()
        channel.embeddedEventLoop.run()
        #expect(drained.value)
        var written: [UInt8] = []
        while let frame = try channel.readOutbound(as: Frame.self) { written += frame.payload }
        #expect(written == [1, 2])
    }

    @Test("On the event loop's thread, with nothing queued from another thread, a frame is in the socket before write returns (no turn of the loop's queue first)")
    func writtenAtOnceOnTheLoop() async throws {
        let (channel, peer, group) = try await Self.socketPair()
        defer { close(peer) }
        _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK)
        let writer = FrameWriter(channel: channel, limit: .max)
        let atOnce = try await channel.eventLoop.submit { () -> Int in
            #expect(writer.write(Self.frame(1)) == .accepted)
            var buffer = [UInt8](repeating: 0, count: 256)
            return read(peer, &buffer, buffer.count)
        }.get()
        #expect(atOnce == Frame.headerSize + 1, "a frame written on the loop waited for the loop's queue")
        writer.finish()
        try await writer.whenDrained.get()
        try await channel.close()
        try await group.shutdownGracefully()
    }
}

/// An outbound end that holds every write until `release`, then passes them on in order.
private final class HeldWrites: ChannelOutboundHandler, @unchecked Sendable {
    typealias OutboundIn = Frame
    typealias OutboundOut = Frame
    private var held: [(NIOAny, EventLoopPromise<Void>?)] = []
    private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        held.append((data, promise))
    }

    func flush(context: ChannelHandlerContext) {}

    func release() {
        guard let context else { return }
        for (data, promise) in held { context.write(data, promise: promise) }
        held = []
        context.flush()
    }
}

/// An outbound end that holds every write unfinished until the channel closes, which fails them.
private final class StalledWrites: ChannelOutboundHandler {
    typealias OutboundIn = Frame
    private var held: [EventLoopPromise<Void>?] = []
    private(set) var payloads: [UInt8] = []

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        payloads += unwrapOutboundIn(data).payload
        held.append(promise)
    }

    func flush(context: ChannelHandlerContext) {}

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        for promise in held { promise?.fail(ChannelError.ioOnClosedChannel) }
        held = []
        context.close(mode: mode, promise: promise)
    }
}
