import NIOCore
import NIOEmbedded
import Testing

@testable import HandoffAgent

/// Counts the reads that pass it on their way to the socket (the head of an embedded channel).
private final class ReadTap: ChannelOutboundHandler {
    typealias OutboundIn = AddressedEnvelope<ByteBuffer>
    var reads = 0
    func read(context: ChannelHandlerContext) {
        reads += 1
        context.read()
    }
}

/// A datagram socket on an embedded loop, as NIO drives one with `autoRead`: while a read is
/// pending, what arrives is read at once, at most `batch` a time, then read-complete fires and
/// the next read is asked for; while none is pending, datagrams wait in the buffer.
private final class SimulatedSocket {
    let channel: EmbeddedChannel
    let loop: EmbeddedEventLoop
    let tap = ReadTap()
    let batch: Int
    /// When each waiting datagram arrived.
    var buffer: [NIODeadline] = []
    var consumedReads = 0
    var wakes = 0
    var delays: [TimeAmount] = []
    var largestBuffer = 0

    init(coalescer: ReadCoalescer?, batch: Int = ReadCoalescer.batch) throws {
        loop = EmbeddedEventLoop()
        channel = EmbeddedChannel(loop: loop)
        self.batch = batch
        try channel.pipeline.syncOperations.addHandler(tap)
        if let coalescer { try channel.pipeline.syncOperations.addHandler(coalescer) }
        channel.read()
    }

    var readPending: Bool { tap.reads > consumedReads }

    /// A datagram arrives now: read at once if a read is pending, else it waits.
    func arrive() throws {
        buffer.append(loop.now)
        largestBuffer = max(largestBuffer, buffer.count)
        try drain()
    }

    /// Moves time on, running what the coalescer scheduled, and reads what waits if a read
    /// came pending.
    func advance(by amount: TimeAmount) throws {
        loop.advanceTime(by: amount)
        try drain()
    }

    private func drain() throws {
        while readPending, !buffer.isEmpty {
            consumedReads = tap.reads
            wakes += 1
            for arrived in buffer.prefix(batch) {
                delays.append(loop.now - arrived)
                let envelope = AddressedEnvelope(remoteAddress: try SocketAddress(ipAddress: "10.9.0.1", port: 47_168), data: channel.allocator.buffer(bytes: [1]))
                // Not writeInbound: that completes a read for each datagram.
                channel.pipeline.syncOperations.fireChannelRead(NIOAny(envelope))
                _ = try channel.readInbound(as: AddressedEnvelope<ByteBuffer>.self)
            }
            buffer.removeFirst(min(batch, buffer.count))
            channel.pipeline.syncOperations.fireChannelReadComplete()
            channel.read()
        }
    }

    /// Datagrams every `interval` for `duration`, time moving on in steps of `step`.
    func stream(every interval: TimeAmount, for duration: TimeAmount, step: TimeAmount) throws {
        var elapsed = TimeAmount.zero
        var next = TimeAmount.zero
        while elapsed < duration {
            while next <= elapsed {
                try arrive()
                next = next + interval
            }
            try advance(by: step)
            elapsed = elapsed + step
        }
        for _ in 0..<(TimeAmount.milliseconds(100).nanoseconds / step.nanoseconds) { try advance(by: step) }
    }
}

@Suite("Coalescing a socket's reads")
struct ReadCoalescerTests {
    @Test("Item 5: 200 datagrams a second wake the loop about 50 times a second, not 200, and none waits more than the 20 ms window")
    func strangersAreReadInBatches() throws {
        let counts = ReadCounts()
        let socket = try SimulatedSocket(coalescer: ReadCoalescer(window: .milliseconds(20), counts: counts))
        try socket.stream(every: .milliseconds(5), for: .seconds(10), step: .microseconds(500))
        let bare = try SimulatedSocket(coalescer: nil)
        try bare.stream(every: .milliseconds(5), for: .seconds(10), step: .microseconds(500))
        #expect(bare.wakes == 2_000, "without coalescing each datagram is a wake: \(bare.wakes)")
        #expect(socket.delays.count == 2_000 && socket.buffer.isEmpty, "every datagram was read: \(socket.delays.count)")
        // 16 at once, then one a window.
        #expect(socket.wakes <= 16 + 500 + 10, "wakes in 10 s: \(socket.wakes)")
        #expect(socket.delays.max()! <= .milliseconds(20), "longest wait \(socket.delays.max()!)")
        #expect(counts.now.datagrams == 2_000 && counts.now.reads == socket.wakes, "counted \(counts.now)")
    }

    @Test("Item 5: a datagram after a quiet spell is read at once, as is each of a few that come farther apart than the window")
    func rareDatagramsAreReadAtOnce() throws {
        let socket = try SimulatedSocket(coalescer: ReadCoalescer(window: .milliseconds(20)))
        try socket.advance(by: .seconds(5))
        for _ in 0..<10 {
            try socket.arrive()
            try socket.advance(by: .milliseconds(25))
        }
        #expect(socket.wakes == 10)
        #expect(socket.delays.allSatisfy { $0 == .zero }, "waits: \(socket.delays)")
    }

    @Test("Item 5: bursts of 8 datagrams half a millisecond apart, every 200 ms (a room's devices answering at once), are each read at once")
    func burstsAreReadAtOnce() throws {
        let socket = try SimulatedSocket(coalescer: ReadCoalescer(window: .milliseconds(20)))
        try socket.advance(by: .seconds(1))
        for _ in 0..<20 {
            for _ in 0..<8 {
                try socket.arrive()
                try socket.advance(by: .microseconds(500))
            }
            for _ in 0..<400 { try socket.advance(by: .microseconds(500)) }
        }
        #expect(socket.delays.count == 160)
        #expect(socket.delays.allSatisfy { $0 == .zero }, "longest wait \(socket.delays.max()!)")
    }

    @Test("Item 5: 10,000 datagrams a second are held under 2 ms at a time, so the buffer never holds much more than a batch, and every one is read")
    func aFloodIsNotHeldLong() throws {
        let socket = try SimulatedSocket(coalescer: ReadCoalescer(window: .milliseconds(20)))
        try socket.stream(every: .microseconds(100), for: .seconds(2), step: .microseconds(100))
        #expect(socket.delays.count == 20_000 && socket.buffer.isEmpty)
        #expect(socket.largestBuffer <= 2 * ReadCoalescer.batch, "the buffer held \(socket.largestBuffer) at most")
        #expect(socket.delays.max()! <= .milliseconds(3), "longest wait \(socket.delays.max()!)")
    }

    @Test("Item 5: a read that filled its batch is never held: 64 datagrams at once are read in four reads without a wait")
    func aFullBatchIsReadOn() throws {
        // A budget of one wake, spent by the first of the four reads: the other three are let
        // through for their full batches alone.
        let socket = try SimulatedSocket(coalescer: ReadCoalescer(window: .milliseconds(20), burst: 1))
        try socket.advance(by: .seconds(1))
        // Queued while no read is pending, then the pending read arrives with all of them.
        socket.consumedReads = socket.tap.reads
        for _ in 0..<64 { try socket.arrive() }
        socket.consumedReads = socket.tap.reads - 1
        try socket.advance(by: .zero)
        #expect(socket.wakes == 4 && socket.buffer.isEmpty, "wakes \(socket.wakes), left \(socket.buffer.count)")
        #expect(socket.delays.allSatisfy { $0 == .zero }, "longest wait \(socket.delays.max()!)")
    }

    @Test("Item 5: removing the coalescer while it holds a read lets the read through, so the socket keeps reading")
    func removalLetsTheHeldReadGo() throws {
        // A budget of one wake, spent by the first datagram: the second's read is held.
        let coalescer = ReadCoalescer(window: .milliseconds(20), burst: 1)
        let socket = try SimulatedSocket(coalescer: coalescer)
        try socket.advance(by: .seconds(1))
        try socket.arrive()
        try socket.advance(by: .milliseconds(2))
        try socket.arrive()
        #expect(!socket.readPending, "the second read is held")
        try socket.channel.pipeline.syncOperations.removeHandler(coalescer).wait()
        #expect(socket.readPending, "the held read went on when the coalescer was removed")
    }
}
