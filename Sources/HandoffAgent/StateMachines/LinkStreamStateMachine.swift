import HandoffWire

/// Every decision about one continuation stream at one end of a link: which frames it sends,
/// what its reader hears, how much its writer may send. A value with no I/O: `LinkStream`
/// runs what each transition returns.
///
/// ```
///   this side opens                         the other side opens
///      opening                                  offered(its window)
///         │ accepted(its window)                   │ accept (this side's app took it)
///         └──────────────────► open(out, in) ◄─────┘
///
///   out: writing(credit) ──finish (end sent)──────────► ended
///        writing(credit) ──stop received─────────────► stopped
///   in:  reading(window) ──end received──────────────► ended
///        reading(window) ──stopReading (stop sent)────► stopped(window): bytes still on their
///                                                      way are dropped and granted back
///   open, out and in both over ─────────────────────► finished
///   any but finished ──reset either way, refused, link dropped, let go unfinished──► failed(why)
/// ```
///
/// The other side may send no more than this side granted: the stream's window at first, then
/// what this side's reader consumed, granted back a quarter window at a time. Data beyond it,
/// before acceptance, or after the end resets the stream. See docs/wire-protocol.md,
/// Continuation streams.
struct LinkStreamStateMachine: Sendable, Equatable {
    /// This side's writing.
    enum Outbound: Sendable, Equatable {
        /// Bytes this side may still send.
        case writing(credit: Int)
        /// This side sent its end.
        case ended
        /// The other side reads no more.
        case stopped
    }

    /// The other side's writing, as this side reads it.
    enum Inbound: Sendable, Equatable {
        case reading(Window)
        /// The other side sent its end.
        case ended
        /// This side reads no more; bytes already sent are still counted and granted back.
        case stopped(Window)
    }

    /// What the other side sent and this side has not granted back yet.
    struct Window: Sendable, Equatable {
        /// Bytes received and not yet granted back.
        var outstanding = 0
        /// Bytes consumed and not yet granted back.
        var consumed = 0
    }

    enum State: Sendable, Equatable {
        case opening
        case offered(peerWindow: UInt32)
        case open(Outbound, Inbound)
        case finished
        case failed(String)
    }

    /// What a transition asks of the stream's owner, to do in this order.
    struct Effects: Sendable, Equatable {
        /// Frames for the other side.
        var send: [LinkMessage] = []
        /// What this side's reader hears.
        var events: [LinkStreamEvent] = []
        /// The stream is over: the reader's events end and the link forgets the stream.
        var finish = false
        /// A writer waiting for credit looks again.
        var wakeWriter = false

        static let none = Effects()
    }

    /// What a writer may do now.
    enum Credit: Sendable, Equatable {
        case send(Int)
        case wait
        case refused(String)
    }

    let id: UInt64
    /// How many bytes this side lets the other send ahead of its reading.
    let window: UInt32
    private(set) var state: State

    /// A stream this side opens (`peerWindow` nil: it waits for the answer), or one the other
    /// side opened with its window.
    init(id: UInt64, window: UInt32, peerWindow: UInt32?) {
        self.id = id
        self.window = window
        state = peerWindow.map { .offered(peerWindow: $0) } ?? .opening
    }

    /// Why the stream failed, if it did.
    var failure: String? {
        if case .failed(let reason) = state { return reason }
        return nil
    }

    /// Whether the stream is over both ways, or failed.
    var isFinished: Bool {
        switch state {
        case .finished, .failed: true
        case .opening, .offered, .open: false
        }
    }

    /// Whether a writer must wait for credit (or for the stream to open) before it can go on.
    var writerWaits: Bool {
        switch state {
        case .opening, .offered, .open(.writing(credit: 0), _): true
        default: false
        }
    }

    // MARK: This side's app

    /// A writer wants to send up to `wanted` bytes.
    mutating func takeCredit(upTo wanted: Int) -> Credit {
        switch state {
        case .failed(let reason):
            return .refused(reason)
        case .open(.stopped, _):
            return .refused("the app on the other device closed its input stream")
        case .open(.ended, _), .finished:
            return .refused("the stream was closed for writing")
        case .opening, .offered, .open(.writing(credit: 0), _):
            return .wait
        case .open(.writing(let credit), let inbound):
            let count = min(wanted, credit)
            state = .open(.writing(credit: credit - count), inbound)
            return .send(count)
        }
    }

    /// This side writes no more.
    mutating func finish() -> Effects {
        guard case .open(.writing, let inbound) = state else { return .none }
        return settle(.ended, inbound, Effects(send: [.streamEnd(stream: id)]))
    }

    /// This side reads no more: the other side's writes fail from now on.
    mutating func stopReading() -> Effects {
        guard case .open(let outbound, .reading(let window)) = state else { return .none }
        return settle(outbound, .stopped(window), Effects(send: [.streamStop(stream: id)]))
    }

    /// This side's reader consumed `count` bytes of data events: once a quarter window has
    /// been, it is granted back.
    mutating func consumed(_ count: Int) -> Effects {
        switch state {
        case .open(let outbound, .reading(var window)):
            let grant = window.consume(count, of: Int(self.window))
            state = .open(outbound, .reading(window))
            return grant.map { Effects(send: [.streamCredit(stream: id, bytes: UInt32($0))]) } ?? .none
        case .open(let outbound, .stopped(var window)):
            let grant = window.consume(count, of: Int(self.window))
            state = .open(outbound, .stopped(window))
            return grant.map { Effects(send: [.streamCredit(stream: id, bytes: UInt32($0))]) } ?? .none
        default:
            return .none
        }
    }

    /// This side accepts a stream the other side opened.
    mutating func accept() -> Effects {
        guard case .offered(let peerWindow) = state else { return .none }
        state = .open(.writing(credit: Int(peerWindow)), .reading(Window()))
        return Effects(send: [.streamAccepted(stream: id, window: window)], wakeWriter: true)
    }

    /// Ends the stream both ways with `reason`, telling the other side.
    mutating func reset(_ reason: String) -> Effects {
        guard !isFinished else { return .none }
        var effects = fail(reason)
        effects.send = [.streamReset(stream: id, reason: reason)]
        return effects
    }

    /// This side is done with the stream: one not over both ways is reset, so the other side
    /// never waits for bytes or credit that will not come.
    mutating func close() -> Effects {
        guard isFinished else {
            return reset("the app on the other device let go of its streams before ending them both ways (it closed its connection, or crashed)")
        }
        return Effects(finish: true, wakeWriter: true)
    }

    /// The stream failed without a word to the other side (it refused it, reset it, or the link
    /// dropped).
    mutating func fail(_ reason: String) -> Effects {
        guard !isFinished else { return .none }
        state = .failed(reason)
        return Effects(events: [.failed(reason)], finish: true, wakeWriter: true)
    }

    // MARK: The other side

    /// The other side accepted the stream this side opened; false when it was not waiting for
    /// that (accepted twice, or already over).
    mutating func accepted(window peerWindow: UInt32) -> (Bool, Effects) {
        guard case .opening = state else { return (false, .none) }
        state = .open(.writing(credit: Int(peerWindow)), .reading(Window()))
        return (true, Effects(wakeWriter: true))
    }

    /// A stream frame from the other side.
    mutating func received(_ message: LinkMessage) -> Effects {
        switch (message, state) {
        case (_, .finished), (_, .failed):
            return .none
        case (.streamData(_, let bytes), .open(let outbound, .reading(var window))):
            window.outstanding += bytes.count
            guard window.outstanding <= Int(self.window) else { return violated() }
            state = .open(outbound, .reading(window))
            return Effects(events: [.data(bytes)])
        case (.streamData(_, let bytes), .open(let outbound, .stopped(var window))):
            // Bytes for an input this side's app closed are dropped, and granted back at once.
            window.outstanding += bytes.count
            guard window.outstanding <= Int(self.window) else { return violated() }
            state = .open(outbound, .stopped(window))
            return consumed(bytes.count)
        case (.streamData, _):
            return violated()
        case (.streamCredit(_, let bytes), .open(.writing(let credit), let inbound)):
            state = .open(.writing(credit: credit + Int(bytes)), inbound)
            return Effects(wakeWriter: true)
        case (.streamCredit, _):
            return .none
        case (.streamEnd, .open(let outbound, .reading)):
            return settle(outbound, .ended, Effects(events: [.end]))
        case (.streamEnd, .open(let outbound, .stopped)):
            return settle(outbound, .ended, .none)
        case (.streamEnd, .open(_, .ended)):
            return .none
        case (.streamEnd, _):
            return violated()
        case (.streamStop, .open(.writing, let inbound)):
            return settle(.stopped, inbound, Effects(events: [.stop], wakeWriter: true))
        case (.streamStop, .open(.ended, let inbound)):
            return settle(.stopped, inbound, .none)
        case (.streamStop, .open(.stopped, _)):
            return .none
        case (.streamStop, _):
            return violated()
        case (.streamReset(_, let reason), _):
            return fail("the other device ended the stream: \(reason)")
        default:
            return .none
        }
    }

    // MARK: Helpers

    /// Moves to `outbound` and `inbound`, or to finished when both are over.
    private mutating func settle(_ outbound: Outbound, _ inbound: Inbound, _ effects: Effects) -> Effects {
        var effects = effects
        switch (outbound, inbound) {
        case (.writing, _), (_, .reading):
            state = .open(outbound, inbound)
        default:
            state = .finished
            effects.finish = true
            effects.wakeWriter = true
        }
        return effects
    }

    private mutating func violated() -> Effects {
        reset("the other device sent data before the stream was accepted, beyond its window, or after its end")
    }
}

extension LinkStreamStateMachine.Window {
    /// Counts `count` bytes consumed; returns what to grant back once a quarter window has been.
    fileprivate mutating func consume(_ count: Int, of window: Int) -> Int? {
        consumed += count
        guard consumed >= window / 4 else { return nil }
        defer { consumed = 0 }
        outstanding -= consumed
        return consumed
    }
}
