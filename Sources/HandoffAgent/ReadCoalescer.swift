import NIOCore
import Synchronization

/// Lets a datagram socket wake its event loop about once per `window` while datagrams keep
/// coming, and at once when they are rare: interrupt coalescing, for beacons.
///
/// Each datagram that wakes a sleeping loop costs a context switch, and on a virtual machine
/// the exit from a halted processor: more than opening the datagram does. Where many devices
/// of other accounts are near, a stranger's beacon arrives every few milliseconds. So when a
/// read is asked for soon after the last one let through, it is held a while; what arrives
/// meanwhile waits in the socket's buffer and is read in one go.
///
/// How long: until, at the rate the last datagrams came, a batch (`batch`, what one read
/// takes) would have arrived, and never past `window` after the last read let through. So
/// 200 datagrams a second are read about 4 at a time, 50 times a second; 10,000 a second
/// are read 16 at a time with holds of under 2 ms, and the socket's buffer never holds more
/// than about a batch for the hold's sake. A read that filled its batch (more are waiting)
/// is never held. A datagram after a quiet `window` is read at once, so a member's beacon
/// waits at most `window`, and only while others keep coming.
///
/// Sits in front of the reader; it holds the channel's `read` (the pipeline's outbound read
/// that `autoRead` issues after each read), never a datagram.
final class ReadCoalescer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias InboundOut = AddressedEnvelope<ByteBuffer>
    typealias OutboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    /// How long a beacon may wait while others keep coming: at most about 50 wakes a second.
    static let beaconWindow = TimeAmount.milliseconds(20)
    /// How many datagrams a socket it sits on reads per wake at most: the channel's
    /// `maxMessagesPerRead`, which its opener sets.
    static let batch = 16

    /// The longest a datagram waits, while others keep coming.
    let window: TimeAmount
    /// A read that got this many datagrams filled its batch.
    let batch: Int
    let counts: ReadCounts?

    /// When the last read was let through, and when the last one was asked for.
    private var lastRead: NIODeadline?
    private var lastAsked: NIODeadline?
    /// Datagrams read since a read was last asked for.
    private var readsSince = 0
    /// The read being held, when one is.
    private var held: Scheduled<Void>?

    init(window: TimeAmount, batch: Int = ReadCoalescer.batch, counts: ReadCounts? = nil) {
        precondition(batch > 0 && window > .zero)
        self.window = window
        self.batch = batch
        self.counts = counts
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        readsSince += 1
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        counts?.add(datagrams: readsSince)
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        guard held == nil else { return }
        let now = context.eventLoop.now
        defer {
            lastAsked = now
            readsSince = 0
        }
        if let lastRead, let lastAsked, readsSince < batch {
            // The time a batch takes at the rate since the last ask: at least one interval.
            let interval = (now - lastAsked).nanoseconds / Int64(max(readsSince, 1))
            let hold = min(window, .nanoseconds(interval.multipliedReportingOverflow(by: Int64(batch)).overflow ? .max : interval * Int64(batch)))
            if now < lastRead + hold {
                counts?.held()
                held = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastRead + hold) { [self] in
                    held = nil
                    letThrough(context: context, now: context.eventLoop.now)
                }
                return
            }
        }
        letThrough(context: context, now: now)
    }

    private func letThrough(context: ChannelHandlerContext, now: NIODeadline) {
        lastRead = now
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        // A held read goes on, so that the channel keeps reading without this handler.
        guard let held else { return }
        held.cancel()
        self.held = nil
        context.read()
    }
}

/// What a socket's `ReadCoalescer`s saw: datagrams, the reads (wakes) that got them, and how
/// many reads were held.
final class ReadCounts: Sendable {
    private let state = Mutex((datagrams: 0, reads: 0, holds: 0))

    init() {}

    func add(datagrams: Int) {
        state.withLock {
            $0.datagrams += datagrams
            $0.reads += 1
        }
    }

    func held() { state.withLock { $0.holds += 1 } }

    var now: (datagrams: Int, reads: Int, holds: Int) { state.withLock { $0 } }
}
