import HandoffLocalAPI
import NIOCore
import Synchronization

/// Writes frames straight to a channel from whichever thread sends them: NIO hands each to the
/// channel's event loop, with no task and no queue of our own between (each would be one more
/// thread to wake for every frame). Local clients' connections and links to other devices
/// both write through one.
///
/// While `limit` bytes wait for the socket to take them (the peer does not read), the next
/// frame closes the connection instead. What waits is counted in bytes, as the memory it
/// holds, and only once NIO has it: an agent that answers a burst of requests faster than its
/// event loop writes the answers does not cut off a client that reads them. Links have no
/// limit: their streams' windows bound what waits.
final class FrameWriter: Sendable {
    private struct State {
        /// Frames taken and not yet written (or failed): what `whenDrained` waits for.
        var unwritten = 0
        /// Bytes handed to NIO that the socket has not taken yet (counted on the event loop).
        var waiting = 0
        /// Frames handed to the event loop's queue that it has not got to yet.
        var queued = 0
        var finished = false
    }
    private let channel: any Channel
    private let limit: Int
    private let state = Mutex(State())
    private let drained: EventLoopPromise<Void>

    init(channel: any Channel, limit: Int) {
        self.channel = channel
        self.limit = limit
        drained = channel.eventLoop.makePromise()
    }

    enum Outcome: Equatable {
        case accepted
        /// Nothing more is taken: the connection is closing (finished, or cut off).
        case finished
    }

    /// Writes `frame` after every frame written before, unless finished.
    @discardableResult
    func write(_ frame: Frame) -> Outcome {
        let channel = self.channel
        // On the event loop's own thread (where handoffd's tasks run), with nothing in its
        // queue from another thread, the frame is written now; otherwise through the queue, so
        // that it does not overtake a frame another thread sent just before.
        let onLoop = channel.eventLoop.inEventLoop
        let taken = state.withLock { state -> Bool? in
            guard !state.finished else { return nil }
            state.unwritten += 1
            if onLoop, state.queued == 0 { return true }
            state.queued += 1
            return false
        }
        guard let now = taken else { return .finished }
        if now {
            send(frame)
        } else {
            channel.eventLoop.execute {
                self.state.withLock { $0.queued -= 1 }
                self.send(frame)
            }
        }
        return .accepted
    }

    /// Hands `frame` to the channel, on its event loop.
    private func send(_ frame: Frame) {
        let channel = self.channel
        do {
            let size = Frame.headerSize + frame.payload.count
            let cutOff = self.state.withLock { state -> Bool in
                guard state.waiting < self.limit else {
                    state.finished = true
                    return true
                }
                state.waiting += size
                return false
            }
            if cutOff {
                // The peer left `limit` bytes unread: it is cut off. Closing fails what
                // waits, which drains the writer.
                channel.close(promise: nil)
                self.written()
                return
            }
            channel.writeAndFlush(frame).whenComplete { _ in
                self.state.withLock { $0.waiting -= size }
                self.written()
            }
        }
    }

    private func written() {
        let done = state.withLock { state -> Bool in
            state.unwritten -= 1
            return state.finished && state.unwritten == 0
        }
        if done { drained.succeed() }
    }

    /// Takes no more frames; `whenDrained` completes once those taken are written (or failed).
    func finish() {
        let done = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.finished = true
            return state.unwritten == 0
        }
        if done { drained.succeed() }
    }

    /// Whether the writer takes no more frames (finished, or the peer was cut off).
    var isFinished: Bool { state.withLock { $0.finished } }

    var whenDrained: EventLoopFuture<Void> { drained.futureResult }
}
