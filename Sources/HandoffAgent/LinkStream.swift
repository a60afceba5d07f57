import Foundation
import HandoffWire
import Synchronization

/// One continuation stream on a link, as one side sees it: bytes both ways with flow control
/// by credit (the receiver grants what it has consumed, so a slow reader slows the writer and
/// at most one window of bytes waits at the receiver), an end each way, and a reset.
/// `LinkStreamStateMachine` makes every decision; this class runs what it returns: frames to
/// the link, events to the reader, a waiting writer woken. See `docs/wire-protocol.md`,
/// Continuation streams.
package final class LinkStream: Sendable {
    package let id: UInt64
    /// What the other side sends. Buffers at most one window of data: the other side may not
    /// send more than it was granted.
    package let events: AsyncStream<LinkStreamEvent>
    private let sink: AsyncStream<LinkStreamEvent>.Continuation
    private let send: @Sendable (LinkMessage) -> Void
    private let state: Mutex<Driven>
    private let removed: @Sendable (UInt64) -> Void

    private struct Driven: ~Copyable {
        var machine: LinkStreamStateMachine
        /// A writer waiting for credit.
        var writer: CheckedContinuation<Void, Never>?
    }

    init(id: UInt64, window: UInt32, peerWindow: UInt32?, send: @escaping @Sendable (LinkMessage) -> Void, removed: @escaping @Sendable (UInt64) -> Void) {
        self.id = id
        self.send = send
        self.removed = removed
        (events, sink) = AsyncStream<LinkStreamEvent>.makeStream()
        state = Mutex(Driven(machine: LinkStreamStateMachine(id: id, window: window, peerWindow: peerWindow)))
    }

    /// Why the stream failed, if it did.
    package var failure: String? { state.withLock { $0.machine.failure } }

    /// Whether the stream is over both ways (or failed).
    package var isFinished: Bool { state.withLock { $0.machine.isFinished } }

    /// Whether a writer waits for credit now.
    var hasWaitingWriter: Bool { state.withLock { $0.writer != nil } }

    /// Runs `transition` on the machine, then what it returned, outside the lock and in order.
    @discardableResult
    private func run(_ transition: (inout LinkStreamStateMachine) -> LinkStreamStateMachine.Effects) -> LinkStreamStateMachine.Effects {
        let (effects, writer) = state.withLock { driven -> (LinkStreamStateMachine.Effects, CheckedContinuation<Void, Never>?) in
            let effects = transition(&driven.machine)
            guard effects.wakeWriter else { return (effects, nil) }
            defer { driven.writer = nil }
            return (effects, driven.writer)
        }
        for message in effects.send { send(message) }
        writer?.resume()
        for event in effects.events { sink.yield(event) }
        if effects.finish {
            sink.finish()
            removed(id)
        }
        return effects
    }

    // MARK: Writing

    /// Sends `bytes`, waiting for credit as the other side consumes. Throws once the stream
    /// failed, the other side stopped reading, or this side ended it.
    package func write(_ bytes: [UInt8]) async throws(LinkStreamFailure) {
        var offset = 0
        while offset < bytes.count {
            let allowed = await takeCredit(upTo: min(bytes.count - offset, LinkMessage.maximumStreamChunk))
            switch allowed {
            case .failure(let failure): throw failure
            case .success(let count):
                let chunk = offset == 0 && count == bytes.count ? bytes : Array(bytes[offset..<offset + count])
                send(.streamData(stream: id, bytes: chunk))
                offset += count
            }
        }
    }

    private func takeCredit(upTo wanted: Int) async -> Result<Int, LinkStreamFailure> {
        while true {
            switch state.withLock({ $0.machine.takeCredit(upTo: wanted) }) {
            case .send(let count): return .success(count)
            case .refused(let reason): return .failure(LinkStreamFailure(message: reason))
            case .wait: break
            }
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { driven -> Bool in
                    guard driven.machine.writerWaits else { return true }
                    driven.writer = waiter
                    return false
                }
                if ready { waiter.resume() }
            }
        }
    }

    /// This side writes no more: the other side's input ends once it has read what came before.
    package func finish() {
        run { $0.finish() }
    }

    /// This side reads no more: the other side's writes fail from now on.
    package func stopReading() {
        run { $0.stopReading() }
    }

    // MARK: Reading

    /// `count` bytes of data events were consumed: the other side may send that many more.
    /// Credit goes back in steps of a quarter window, not after every chunk.
    package func consumed(_ count: Int) {
        run { $0.consumed(count) }
    }

    // MARK: Ending

    /// Ends the stream both ways with `reason`, telling the other side.
    package func reset(_ reason: String) {
        run { $0.reset(reason) }
    }

    /// This side is done with the stream. A stream not finished both ways is reset, so the
    /// other side never waits for bytes or credit that will not come.
    package func close() {
        run { $0.close() }
    }

    /// Marks the stream failed without telling the other side.
    func fail(_ reason: String) {
        run { $0.fail(reason) }
    }

    // MARK: From the link

    /// The other side accepted the stream; false when it was not waiting for that.
    func accepted(window peerWindow: UInt32) -> Bool {
        var accepted = false
        run { machine in
            let (first, effects) = machine.accepted(window: peerWindow)
            accepted = first
            return effects
        }
        return accepted
    }

    /// Sends the acceptance of a stream the other side opened (the accepting side's app took it).
    func sendAccepted() {
        run { $0.accept() }
    }

    func received(_ message: LinkMessage) {
        run { $0.received(message) }
    }
}
