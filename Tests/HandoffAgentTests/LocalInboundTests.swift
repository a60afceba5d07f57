import Foundation
import HandoffLocalAPI
import HandoffTesting
import NIOCore
import NIOPosix
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import HandoffAgent

/// What a local client's connection reads on its way to the agent's serving of that client.
@Suite("A local connection's messages waiting for the agent")
struct LocalInboundTests {
    /// Frames read into messages, as `LocalMessageDecoder` does (without answering failures).
    final class Decode: ChannelInboundHandler, Sendable {
        typealias InboundIn = Frame
        typealias InboundOut = Result<LocalMessage, LocalError>
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            do throws(LocalError) {
                context.fireChannelRead(wrapInboundOut(.success(try LocalMessage(frame: frame))))
            } catch {
                context.fireChannelRead(wrapInboundOut(.failure(error)))
            }
        }
    }

    /// A connection over one end of a socket pair, read into a `LocalInbound`; the other end is
    /// the client's.
    static func connection() async throws -> (inbound: LocalInbound, channel: any Channel, client: Int32, group: MultiThreadedEventLoopGroup) {
        var ends: [Int32] = [0, 0]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let (channel, inbound) = try await ClientBootstrap(group: group).withConnectedSocket(ends[0]) { channel in
            channel.eventLoop.makeCompletedFuture {
                let inbound = LocalInbound(channel: channel)
                try channel.pipeline.syncOperations.addHandlers(FrameHandler(maximumPayload: LocalMessage.maximumFrame), Decode(), inbound)
                return (channel, inbound)
            }
        }
        return (inbound, channel, ends[1], group)
    }

    @Test("A client that sends 20,000 messages the agent does not take is no longer read once a few wait; taken, every one arrives, in order, and reading goes on")
    func pausesAndLosesNothing() async throws {
        let (inbound, channel, client, group) = try await Self.connection()
        let count = 20_000
        let bytes = (0..<count).flatMap { LocalMessage.call(request: UInt64($0 + 2), .status).frame.encoded }
        // The client writes on a thread of its own: its writes wait once the agent stops reading.
        let writer = Thread {
            var sent = 0
            while sent < bytes.count {
                let wrote = bytes.withUnsafeBytes { send(client, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
                if wrote <= 0 { return }
                sent += wrote
            }
        }
        writer.start()
        // The connection stops being read with a small part of the burst waiting (what one
        // read brings can pass the mark, not more).
        #expect(await eventually { inbound.waiting.reading == false })
        try await Task.sleep(for: .milliseconds(200))  // time for more to be read, were it read
        let paused = inbound.waiting
        #expect(!paused.reading)
        #expect(paused.count < count / 4, "\(paused.count) of \(count) messages read while none was taken")
        var requests: [UInt64] = []
        while requests.count < count, let next = await inbound.next() {
            if case .success(.call(let request, .status)) = next { requests.append(request) }
        }
        #expect(requests == (0..<count).map { UInt64($0 + 2) })
        #expect(inbound.waiting.reading)
        close(client)
        // The client's end closed: the messages end.
        #expect(await inbound.next() == nil)
        try? await channel.close()
        try await group.shutdownGracefully()
    }

    /// `count` calls, from request `first` on, as one read brings them.
    static func burst(_ count: Int, from first: Int) -> ByteBuffer {
        ByteBuffer(bytes: (first..<first + count).flatMap { LocalMessage.call(request: UInt64($0), .status).frame.encoded })
    }

    @Test("Paused again by a burst read before the resumption reaches the event loop, the connection stays paused (the option and the state agree)")
    func pausedAgainBeforeResuming() async throws {
        let (inbound, channel, client, group) = try await Self.connection()
        defer { close(client) }
        // 16 read in one go: paused.
        try await channel.eventLoop.submit { channel.pipeline.syncOperations.fireChannelRead(NIOAny(Self.burst(16, from: 2))) }.get()
        #expect(try await channel.getOption(.autoRead).get() == false)
        // The loop held; meanwhile the agent takes 12 (4 left: reading is to go on), and once the
        // loop is let go, 12 more arrive before the resumption runs.
        let held = DispatchSemaphore(value: 0)
        let more = channel.eventLoop.submit {
            held.wait()
            channel.pipeline.syncOperations.fireChannelRead(NIOAny(Self.burst(12, from: 18)))
        }
        for _ in 0..<12 { _ = await inbound.next() }
        held.signal()
        try await more.get()
        // Everything queued on the loop has run by the time this does.
        let autoRead = try await channel.eventLoop.submit { try channel.syncOptions!.getOption(.autoRead) }.get()
        let state = inbound.waiting
        #expect(state.count == 16)
        #expect(autoRead == state.reading, "reading \(autoRead) while the state says \(state.reading)")
        #expect(!autoRead)
        try? await channel.close()
        try await group.shutdownGracefully()
    }

    @Test("A serving task cancelled while it waits for a message gets none, and stops")
    func cancelledWhileWaiting() async throws {
        let (inbound, channel, client, group) = try await Self.connection()
        defer { close(client) }
        // Cancelled while waiting, or before it waits: either way it ends with nothing.
        let serving = Task { await inbound.next() }
        try await Task.sleep(for: .milliseconds(50))  // the task is waiting for a message by now
        serving.cancel()
        let got = await serving.value
        #expect(got == nil)
        try? await channel.close()
        try await group.shutdownGracefully()
    }
}
