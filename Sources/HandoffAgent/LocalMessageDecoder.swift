import HandoffLocalAPI
import NIOCore
import Synchronization

/// Reads each frame of a local client's connection into a `LocalMessage` on the event loop, as
/// it arrives, and passes it on (to the connection's `LocalInbound`, whose reader is the agent's
/// serving of that client: no task between). A frame that is not a message is answered at once
/// with the error, under its request number if that can be read, and passed on as a failure.
final class LocalMessageDecoder: ChannelInboundHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Result<LocalMessage, LocalError>

    private let peer: LocalPeer

    init(peer: LocalPeer) {
        self.peer = peer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        HopTrace.stamp("read call")
        context.fireChannelRead(wrapInboundOut(Self.read(unwrapInboundIn(data), answeringFailuresTo: peer)))
    }

    /// The message in `frame`; if there is none, the error, which `peer` is told at once.
    static func read(_ frame: Frame, answeringFailuresTo peer: LocalPeer) -> Result<LocalMessage, LocalError> {
        do throws(LocalError) {
            return .success(try LocalMessage(frame: frame))
        } catch {
            peer.send(.reply(request: LocalAPIServer.requestNumber(in: frame.payload), .failure(error)))
            return .failure(error)
        }
    }
}

/// One local client's messages as the agent serves them, in order: from its connection (the
/// first, read during the handshake, then what the connection's async channel reads), or from
/// a client in the agent's own process. A connection that fails ends them.
package struct LocalMessages: AsyncSequence, Sendable {
    package typealias Element = Result<LocalMessage, LocalError>

    private enum Source: Sendable {
        case stream(AsyncStream<Element>)
        case connection(LocalInbound)
    }

    private let first: Element?
    private let source: Source

    /// The messages of a client in this process, as it sends them.
    init(_ stream: AsyncStream<Element>) {
        first = nil
        source = .stream(stream)
    }

    /// `first`, then what `inbound` reads.
    init(first: Element, inbound: LocalInbound) {
        self.first = first
        source = .connection(inbound)
    }

    package func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .stream(let stream): AsyncIterator(first: first, stream: stream.makeAsyncIterator(), inbound: nil)
        case .connection(let inbound): AsyncIterator(first: first, stream: nil, inbound: inbound)
        }
    }

    package struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate var first: Element?
        fileprivate var stream: AsyncStream<Element>.AsyncIterator?
        fileprivate var inbound: LocalInbound?

        package mutating func next() async -> Element? {
            if let message = first {
                first = nil
                return message
            }
            if var iterator = stream {
                defer { stream = iterator }
                return await iterator.next()
            }
            if let inbound {
                // A connection that failed (or a serving task cancelled) ends the messages.
                return await inbound.next()
            }
            return nil
        }
    }
}

/// What a local client's connection has read and the agent has not taken yet, for the agent's
/// serving of that client (`LocalMessages`), which takes it as it arrives: the last handler of
/// the connection's pipeline. While `high` messages wait it stops reading the connection, until
/// no more than `low` do: a client that sends faster than the agent answers is slowed down (its
/// writes wait), not cut off, and nothing it sent is lost. The connection's end, or the serving
/// task's cancellation, ends the messages once those read are taken.
///
/// (It takes the place of NIO's async channel, which cost each message about 30,000 instructions
/// more on its way in and out: `Benchmarks/instructions.sh`.)
final class LocalInbound: ChannelInboundHandler, Sendable {
    typealias InboundIn = Result<LocalMessage, LocalError>
    typealias Element = Result<LocalMessage, LocalError>

    private struct State: ~Copyable {
        var waiting: [Element] = []
        var head = 0
        var taker: CheckedContinuation<Element?, Never>?
        var ended = false
        var reading = true

        var count: Int { waiting.count - head }

        mutating func take() -> Element {
            let element = waiting[head]
            head += 1
            if head == waiting.count {
                waiting.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64, head * 2 >= waiting.count {
                waiting.removeFirst(head)
                head = 0
            }
            return element
        }
    }

    private let state = Mutex(State())
    private let channel: any Channel
    let high: Int
    let low: Int

    init(channel: any Channel, high: Int = 16, low: Int = 4) {
        precondition(low < high)
        self.channel = channel
        self.high = high
        self.low = low
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let element = unwrapInboundIn(data)
        let (taker, pause) = state.withLock { state -> (CheckedContinuation<Element?, Never>?, Bool) in
            guard !state.ended else { return (nil, false) }
            if let taker = state.taker {
                state.taker = nil
                return (taker, false)
            }
            state.waiting.append(element)
            guard state.reading, state.count >= high else { return (nil, false) }
            state.reading = false
            return (nil, true)
        }
        taker?.resume(returning: element)
        if pause { try? context.channel.syncOptions?.setOption(.autoRead, value: false) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        end()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        end()
        context.close(promise: nil)
    }

    /// How many messages wait to be taken, and whether the connection is being read (tests).
    var waiting: (count: Int, reading: Bool) { state.withLock { ($0.count, $0.reading) } }

    /// No more messages are read; those read are still taken.
    func end() {
        let taker = state.withLock { state -> CheckedContinuation<Element?, Never>? in
            state.ended = true
            defer { state.taker = nil }
            return state.taker
        }
        taker?.resume(returning: nil)
    }

    /// The next message read, waiting for it if none is; nil once the connection has ended
    /// (or the task was cancelled) and every message read was taken.
    func next() async -> Element? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
                let (now, resume) = state.withLock { state -> (Element??, Bool) in
                    if state.count > 0 {
                        let element = state.take()
                        guard !state.reading, !state.ended, state.count <= low else { return (.some(element), false) }
                        state.reading = true
                        return (.some(element), true)
                    }
                    if state.ended || Task.isCancelled { return (.some(nil), false) }
                    state.taker = continuation
                    return (nil, false)
                }
                if resume {
                    let channel = self.channel
                    channel.eventLoop.execute {
                        // Unless the connection was paused again meanwhile (a burst read before
                        // this ran): the option then stays off, as the state says.
                        guard self.state.withLock({ $0.reading }) else { return }
                        try? channel.syncOptions?.setOption(.autoRead, value: true)
                        channel.read()
                    }
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            end()
        }
    }
}
