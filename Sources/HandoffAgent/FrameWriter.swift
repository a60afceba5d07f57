import HandoffLocalAPI
import NIOCore
import Synchronization

/// Writes frames straight to a channel from whichever thread sends them: NIO hands each to the
/// channel's event loop, with no task and no queue of our own between (each would be one more
/// thread to wake for every frame). Local clients' connections and links to other devices
/// both write through one. At most `limit` frames may be unwritten at once: a local client
/// that leaves more unread is refused the next one (links have no limit: their streams' windows
/// bound what waits).
final class FrameWriter: Sendable {
    private struct State {
        var unwritten = 0
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
        /// Nothing more is taken: the connection is closing.
        case finished
        /// `limit` frames are still unwritten: the client does not read.
        case full
    }

    /// Writes `frame` after every frame written before, unless finished or full.
    @discardableResult
    func write(_ frame: Frame) -> Outcome {
        let outcome = state.withLock { state -> Outcome in
            guard !state.finished else { return .finished }
            guard state.unwritten < limit else { return .full }
            state.unwritten += 1
            return .accepted
        }
        guard outcome == .accepted else { return outcome }
        // Always through the event loop's queue, even from the loop itself: a frame sent
        // there must not overtake one another thread sent just before.
        let channel = self.channel
        channel.eventLoop.execute {
            channel.writeAndFlush(frame).whenComplete { _ in
                let done = self.state.withLock { state -> Bool in
                    state.unwritten -= 1
                    return state.finished && state.unwritten == 0
                }
                if done { self.drained.succeed() }
            }
        }
        return .accepted
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

    var whenDrained: EventLoopFuture<Void> { drained.futureResult }
}
