import Foundation
import HandoffWire

/// Every decision of the side that answers a link (`LinkServeHandler` drives it from the
/// connection's event loop): who the peer is before anything is answered, the first frame
/// answered before any later one, stream frames handled at once and in order, at most
/// `maximumInFlight` answers under way (requests past that wait their turn and the link is
/// not read meanwhile, so TCP slows the sender), and a peer no longer accepted cut off at its
/// next frame. A value with no I/O: the driver asks whether a peer is accepted at that moment
/// and runs what it returns.
///
/// ```
///   waiting ──first frame──► starting(queued; identify the peer)
///      starting ──not accepted──► ended
///               ──accepted, its hello already answered──┐
///               ──accepted──► (answer the first frame) ──┴──► serving(peer) ──closed──► ended
///
///   in serving, a request: dispatched (under the limit) ──answered──► the oldest waiting one goes
///                          └─ backlog (at the limit; reads held until it empties)
/// ```
struct LinkServeStateMachine<Peer: Sendable>: Sendable {
    enum State: Sendable {
        /// Before the first frame.
        case waiting
        /// The first frame came; the peer is being identified, then the first frame answered.
        /// Frames read meanwhile wait here, in order.
        case starting(queued: [Frame])
        case serving(Peer)
        case ended
    }

    enum Action: Sendable {
        /// Find out who the peer is, then call `identified`.
        case identify
        /// Answer the first frame, then call `firstAnswered`.
        case answerFirst(Frame, Peer)
        /// Answer a request, then call `answered`.
        case dispatch(Frame, Peer)
        /// Hand a stream frame to the link's streams, now.
        case stream(Frame)
        /// Read from the connection (a read the pipeline asked for and was held).
        case read
        /// Close the connection.
        case close
        /// The link is over: end its streams (if it was serving) and stop writing.
        case finish(streams: Bool)
    }

    static var maximumInFlight: Int { 64 }

    private(set) var state = State.waiting
    /// Answers under way.
    private(set) var inFlight = 0
    /// Requests read while `maximumInFlight` answers were under way, oldest first.
    private(set) var backlog: [Frame] = []
    /// Whether a read was held back.
    private(set) var readHeld = false

    /// A frame was read. `accepts` says whether a peer is accepted at this moment.
    mutating func read(_ frame: Frame, accepts: (Peer) -> Bool) -> [Action] {
        switch state {
        case .waiting:
            state = .starting(queued: [frame])
            return [.identify]
        case .starting(var queued):
            queued.append(frame)
            state = .starting(queued: queued)
            return []
        case .serving(let peer):
            return serve(frame, peer: peer, accepts: accepts)
        case .ended:
            return []
        }
    }

    /// The peer is known (nil: it showed nothing usable). `helloAnswered`: this side's own
    /// greeting already answered a first frame that is a hello.
    mutating func identified(_ found: Peer?, accepts: (Peer) -> Bool, helloAnswered: Bool) -> [Action] {
        guard case .starting(let queued) = state else { return [] }
        guard let peer = found, accepts(peer) else { return end(close: true) }
        let first = queued[0]
        if helloAnswered, case .hello? = try? LinkMessage(frame: first) {
            return startServing(peer, then: queued.dropFirst(), accepts: accepts)
        }
        state = .starting(queued: Array(queued.dropFirst()))
        return [.answerFirst(first, peer)]
    }

    /// The first frame's answer is written.
    mutating func firstAnswered(_ peer: Peer, accepts: (Peer) -> Bool) -> [Action] {
        guard case .starting(let later) = state else { return [] }
        return startServing(peer, then: later[...], accepts: accepts)
    }

    /// An answer is written: the oldest request waiting goes, or a read held back does.
    mutating func answered(accepts: (Peer) -> Bool) -> [Action] {
        inFlight -= 1
        guard case .serving(let peer) = state else { return [] }
        guard !backlog.isEmpty else { return resumeReading() }
        let next = backlog.removeFirst()
        guard accepts(peer) else { return end(close: true) }
        inFlight += 1
        return [.dispatch(next, peer)]
    }

    /// The pipeline asks for a read: not while the first frame is being answered (what comes
    /// meanwhile waits, held to what one read brings), nor while the limit is reached.
    mutating func readWanted() -> [Action] {
        var starting = false
        if case .starting = state { starting = true }
        guard !starting, inFlight < Self.maximumInFlight, backlog.isEmpty else {
            readHeld = true
            return []
        }
        return [.read]
    }

    /// The connection ended (or the handler was removed).
    mutating func ended() -> [Action] {
        end(close: false)
    }

    // MARK: Steps

    private mutating func serve(_ frame: Frame, peer: Peer, accepts: (Peer) -> Bool) -> [Action] {
        guard accepts(peer) else { return end(close: true) }
        if LinkMessage.isStreamFrame(frame) { return [.stream(frame)] }
        guard inFlight < Self.maximumInFlight else {
            backlog.append(frame)
            return []
        }
        inFlight += 1
        return [.dispatch(frame, peer)]
    }

    private mutating func startServing(_ peer: Peer, then queued: ArraySlice<Frame>, accepts: (Peer) -> Bool) -> [Action] {
        state = .serving(peer)
        var actions: [Action] = []
        for frame in queued {
            guard case .serving = state else { return actions }
            actions += serve(frame, peer: peer, accepts: accepts)
        }
        return actions + resumeReading()
    }

    private mutating func resumeReading() -> [Action] {
        guard readHeld, case .serving = state, inFlight < Self.maximumInFlight, backlog.isEmpty else { return [] }
        readHeld = false
        return [.read]
    }

    private mutating func end(close: Bool) -> [Action] {
        if case .ended = state { return close ? [.close] : [] }
        var serving = false
        if case .serving = state { serving = true }
        state = .ended
        backlog = []
        return [.finish(streams: serving)] + (close ? [.close] : [])
    }
}
