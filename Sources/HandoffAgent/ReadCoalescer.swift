import NIOCore
import Synchronization

/// Lets a datagram socket wake its event loop about once per `window` while datagrams keep
/// coming, and at once when they are rare or come in a short burst: interrupt coalescing, for
/// beacons.
///
/// Each datagram that wakes a sleeping loop costs a context switch, and on a virtual machine
/// the exit from a halted processor: more than opening the datagram does. Where many devices
/// of other accounts are near, a stranger's beacon arrives every few milliseconds. So reads
/// are let through at once while a budget of wakes lasts (`burst` of them, refilled at one a
/// `window`), and after that a read is held; what arrives meanwhile waits in the socket's
/// buffer and is read in one go.
///
/// How long: until the budget has a wake again, and no longer than it takes, at the rate the
/// last datagrams came, for a batch (`batch`, what one read takes) to arrive. So a burst of a
/// few (the beacons of a room's devices answering at once) waits for nothing; 200 datagrams a
/// second go on being read about 4 at a time, 50 times a second, none held more than
/// `window`; 10,000 a second are read 16 at a time with holds of under 2 ms, so the socket's
/// buffer never holds much more than a batch for the hold's sake. A read that filled its batch
/// (more are waiting) is never held.
///
/// Sits in front of the reader; it holds the channel's `read` (the pipeline's outbound read
/// that `autoRead` issues after each read), never a datagram.
final class ReadCoalescer: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    typealias InboundOut = AddressedEnvelope<ByteBuffer>
    typealias OutboundIn = AddressedEnvelope<ByteBuffer>
    typealias OutboundOut = AddressedEnvelope<ByteBuffer>

    /// How long a beacon may wait while others keep coming: about 50 wakes a second.
    static let beaconWindow = TimeAmount.milliseconds(20)
    /// The wakes let through at once after a quiet spell.
    static let burst = 16
    /// How many datagrams a socket it sits on reads per wake at most: the channel's
    /// `maxMessagesPerRead`, which its opener sets.
    static let batch = 16

    /// The longest a datagram waits, while others keep coming.
    let window: TimeAmount
    /// The wakes let through at once after a quiet spell; one more comes each `window`.
    let burst: Int
    /// A read that got this many datagrams filled its batch.
    let batch: Int
    let counts: ReadCounts?

    /// The wakes left to let through at once, as of `refilled`.
    private var wakes: Double
    private var refilled: NIODeadline?
    /// When a read was last asked for.
    private var lastAsked: NIODeadline?
    /// Datagrams read since a read was last asked for.
    private var readsSince = 0
    /// The read being held, when one is.
    private var held: Scheduled<Void>?

    init(window: TimeAmount, burst: Int = ReadCoalescer.burst, batch: Int = ReadCoalescer.batch, counts: ReadCounts? = nil) {
        precondition(batch > 0 && burst > 0 && window > .zero)
        self.window = window
        self.burst = burst
        self.wakes = Double(burst)
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
        refill(now)
        let since = lastAsked.map { now - $0 }
        let arrived = readsSince
        lastAsked = now
        readsSince = 0
        guard wakes < 1, arrived < batch, let since else { return letThrough(context: context) }
        // Until the budget has a wake again, or a batch would have come at the rate just seen
        // (the datagrams this read got came since the last read was asked for).
        let untilWake = Int64((1 - wakes) * Double(window.nanoseconds))
        let perDatagram = since.nanoseconds / Int64(max(arrived, 1))
        let untilBatch = perDatagram.multipliedReportingOverflow(by: Int64(batch)).overflow ? Int64.max : perDatagram * Int64(batch)
        counts?.held()
        held = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(max(0, min(untilWake, untilBatch)))) { [self] in
            held = nil
            refill(context.eventLoop.now)
            letThrough(context: context)
        }
    }

    /// Adds the wakes earned since the last refill: one a `window`, up to `burst`.
    private func refill(_ now: NIODeadline) {
        if let refilled { wakes = min(Double(burst), wakes + Double((now - refilled).nanoseconds) / Double(window.nanoseconds)) }
        refilled = now
    }

    private func letThrough(context: ChannelHandlerContext) {
        wakes = max(0, wakes - 1)
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
