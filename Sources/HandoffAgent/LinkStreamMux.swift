import Foundation
import HandoffWire
import Synchronization

/// What a stream is opened to: the app offering an activity (a continuation stream), or the
/// clipboard a device offers, one generation and type of it (a paste).
package enum LinkStreamTarget: Sendable, Hashable {
    case activity(UUID)
    case clipboard(generation: UInt64, type: String)
}

/// The continuation streams of one link: it numbers the streams this side opens, routes the
/// other side's stream frames to their streams, and fails every stream when the link drops.
package final class LinkStreamMux: Sendable {
    /// What a side does with a stream the other side opens: accept it (calling
    /// `LinkStream.accept` on the stream it is given, then using it) and return nil, or return
    /// why not.
    package typealias Acceptor = @Sendable (_ target: LinkStreamTarget, _ stream: LinkStream) async -> ContinuationFailure?

    /// How many bytes each side lets the other send ahead of its reading.
    package static let defaultWindow: UInt32 = 1 << 20
    /// How many streams may be open on one link at once.
    package static let maximumStreams = 64

    private let send: @Sendable (LinkMessage) -> Void
    /// Told how many streams stay open each time one closes.
    private let closed: @Sendable (_ remaining: Int) -> Void
    private let window: UInt32
    private let acceptor: Acceptor?
    private let state = Mutex(State())

    private struct State: ~Copyable {
        var nextStream: UInt64 = 1
        var streams: [UInt64: LinkStream] = [:]
        var opening: [UInt64: Opening] = [:]
        var ended: String?
    }

    /// An open waiting for the other side's answer, and its deadline (cancelled by the answer).
    private struct Opening {
        var waiter: CheckedContinuation<Result<LinkStream, ContinuationFailure>, Never>
        var deadline: LoopTimer?

        func resume(returning outcome: Result<LinkStream, ContinuationFailure>) {
            deadline?.cancel()
            waiter.resume(returning: outcome)
        }
    }

    /// The streams being handed to an app here, one task each; cancelled when the link ends.
    private let tasks = OwnedTasks()

    /// - Parameter acceptor: how streams the other side opens are taken; nil refuses them all
    ///   (the side that opened the link opens streams, the other accepts).
    package init(
        window: UInt32 = LinkStreamMux.defaultWindow, acceptor: Acceptor? = nil, send: @escaping @Sendable (LinkMessage) -> Void,
        closed: @escaping @Sendable (_ remaining: Int) -> Void = { _ in }
    ) {
        self.window = window
        self.acceptor = acceptor
        self.send = send
        self.closed = closed
    }

    /// How many streams are open now.
    package var openStreams: Int { state.withLock { $0.streams.count } }

    /// Opens a stream to `target` on the other device. Exactly one outcome: the stream, the
    /// other side's refusal, 4609 when the link has ended or ends first, 4610 when no answer
    /// comes within `deadline`.
    package func open(_ target: LinkStreamTarget, deadline: Duration) async -> Result<LinkStream, ContinuationFailure> {
        let opened: Result<LinkStream, ContinuationFailure> = await withCheckedContinuation { continuation in
            let made = state.withLock { state -> Result<LinkStream, ContinuationFailure> in
                if let ended = state.ended {
                    return .failure(ContinuationFailure(code: ContinuationFailure.Code.connectionUnavailable, message: "the link had ended: \(ended)"))
                }
                guard state.streams.count < Self.maximumStreams else {
                    return .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "\(Self.maximumStreams) streams are open on this link already; close one first"))
                }
                let id = state.nextStream
                state.nextStream += 1
                let stream = makeStream(id: id, peerWindow: nil)
                state.streams[id] = stream
                state.opening[id] = Opening(waiter: continuation)
                return .success(stream)
            }
            switch made {
            case .failure:
                continuation.resume(returning: made)
            case .success(let stream):
                switch target {
                case .activity(let activityID): send(.streamOpen(stream: stream.id, activityID: activityID, window: window))
                case .clipboard(let generation, let type): send(.clipboardOpen(stream: stream.id, generation: generation, type: type, window: window))
                }
                let timer = LoopTimer(after: deadline) { [weak self] in
                    guard let self, let waiting = self.state.withLock({ $0.opening.removeValue(forKey: stream.id) }) else { return }
                    stream.reset("no answer within \(deadline)")
                    let message: String
                    switch target {
                    case .activity: message = "the app on the other device did not take the streams within \(deadline)"
                    case .clipboard: message = "the other device did not begin sending its clipboard within \(deadline)"
                    }
                    waiting.waiter.resume(returning: .failure(ContinuationFailure(code: ContinuationFailure.Code.remoteAppTimedOut, message: message)))
                }
                // Answered already (the frame went out above): the timer has nothing to do.
                let waiting = state.withLock { state -> Bool in
                    guard state.opening[stream.id] != nil else { return false }
                    state.opening[stream.id]?.deadline = timer
                    return true
                }
                if !waiting { timer.cancel() }
            }
        }
        return opened
    }

    private func makeStream(id: UInt64, peerWindow: UInt32?) -> LinkStream {
        LinkStream(id: id, window: window, peerWindow: peerWindow, send: send) { [weak self] id in
            guard let self else { return }
            let remaining = state.withLock { state -> Int in
                state.streams.removeValue(forKey: id)
                return state.streams.count
            }
            closed(remaining)
        }
    }

    /// A stream frame from the other side, handled in the order frames arrive.
    package func received(_ message: LinkMessage) {
        switch message {
        case .streamOpen(let id, _, let peerWindow), .clipboardOpen(let id, _, _, let peerWindow):
            let target: LinkStreamTarget
            switch message {
            case .clipboardOpen(_, let generation, let type, _): target = .clipboard(generation: generation, type: type)
            case .streamOpen(_, let activityID, _): target = .activity(activityID)
            default: return
            }
            let stream = state.withLock { state -> LinkStream? in
                guard state.ended == nil, state.streams[id] == nil, state.streams.count < Self.maximumStreams else { return nil }
                let stream = makeStream(id: id, peerWindow: peerWindow)
                state.streams[id] = stream
                return stream
            }
            guard let stream else {
                send(.streamRefused(stream: id, code: UInt16(ContinuationFailure.Code.handoffFailed), message: "the stream number is in use, or too many streams are open on this link"))
                return
            }
            guard let acceptor else {
                stream.fail("refused")
                send(.streamRefused(stream: id, code: UInt16(ContinuationFailure.Code.handoffFailed), message: "this device does not take streams on links it opened"))
                return
            }
            tasks.start("accept a stream") {
                if let refusal = await acceptor(target, stream) {
                    stream.fail("refused: \(refusal.message)")
                    self.send(.streamRefused(stream: id, code: UInt16(clamping: refusal.code), message: refusal.message))
                }
            }
        case .streamAccepted(let id, let peerWindow):
            let (stream, waiting) = state.withLock { state in (state.streams[id], state.opening.removeValue(forKey: id)) }
            guard let waiting else { return }
            // Whatever came first (a reset, a second acceptance), the open ends with one outcome.
            guard let stream, stream.accepted(window: peerWindow) else {
                stream?.reset("accepted twice")
                waiting.resume(returning: .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the other device ended the stream as it accepted it")))
                return
            }
            waiting.resume(returning: .success(stream))
        case .streamRefused(let id, let code, let message):
            let (stream, waiting) = state.withLock { state in (state.streams[id], state.opening.removeValue(forKey: id)) }
            stream?.fail("refused: \(message)")
            waiting?.resume(returning: .failure(ContinuationFailure(code: Int(code), message: message)))
        case .streamData(let id, _), .streamCredit(let id, _), .streamEnd(let id), .streamStop(let id), .streamReset(let id, _):
            // Frames for a stream that is gone (closed here, or never opened) are dropped.
            state.withLock { $0.streams[id] }?.received(message)
        default:
            break
        }
    }

    /// The link ended: every stream fails, and every open waiting for an answer gets 4609.
    package func linkEnded(_ reason: String) {
        tasks.cancel()
        let (streams, opening) = state.withLock { state in
            if state.ended == nil { state.ended = reason }
            defer { state.opening = [:] }
            return (Array(state.streams.values), Array(state.opening.values))
        }
        for waiting in opening {
            waiting.resume(returning: .failure(ContinuationFailure(code: ContinuationFailure.Code.connectionUnavailable, message: "the link dropped before the streams opened: \(reason)")))
        }
        for stream in streams { stream.fail("the link to the other device dropped: \(reason)") }
    }
}

extension LinkStream {
    /// Accepts a stream the other side opened: call before using it.
    package func accept() {
        sendAccepted()
    }
}
