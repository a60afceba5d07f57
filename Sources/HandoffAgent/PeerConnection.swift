import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// A link to another device of the account, kept open and shared by every request to that
/// device: TLS 1.3, the membership proof each way (`LinkProof`), then `hello` each way, then any number of
/// requests at once, matched to their answers by number.
public final class PeerConnection: Sendable {
    public let host: String
    public let port: Int
    /// The device that answered `hello`.
    public let device: UUID
    private let state: Mutex<LinkState>
    /// Frames go straight to the channel from whichever thread sends them, in order.
    private let writer: FrameWriter
    /// The continuation streams this device opens on the link.
    let streams: LinkStreamMux

    /// A request waiting for its answer, and the timer that ends the wait.
    private struct Waiting {
        var done: @Sendable (Answer) -> Void
        var timer: LoopTimer?
    }

    private struct LinkState: ~Copyable {
        var nextRequest: UInt64 = 1
        var pending: [UInt64: Waiting] = [:]
        var ended: String?
        /// Whether TCP keepalive is on, and whether it follows what waits on the link
        /// (`watchWhileBusy`).
        var watching = true
        var watchesWhenBusy = false
        /// Whether a timer will switch keepalive off once the link has been quiet a moment.
        var quietCheckArmed = false
        /// How many times keepalive was switched (for tests).
        var keepaliveChanges = 0
    }

    /// How long keepalive stays on after the last answer: requests in quick succession then
    /// switch it neither off nor on (two `setsockopt` calls each, before), and it is off long
    /// before the 5 s of silence after which TCP would send its first probe.
    static let keepaliveLinger: Duration = .seconds(2)

    /// When anything last went over the link (a request, an answer, a stream frame).
    private let lastUse: LockedValue<ContinuousClock.Instant>

    /// What became of a request.
    enum Answer: Sendable {
        case answered(LinkMessage)
        case ended(String)
        case timedOut
    }

    /// The connection's channel (for tests to look at its socket).
    private(set) var socket: (any Channel)? {
        get { socketStorage.value }
        set { socketStorage.value = newValue }
    }
    private let socketStorage = LockedValue<(any Channel)?>(nil)

    private init(host: String, port: Int, device: UUID, writer: FrameWriter) {
        self.host = host
        self.port = port
        self.device = device
        self.writer = writer
        self.state = Mutex(LinkState())
        let lastUse = LockedValue(ContinuousClock.now)
        self.lastUse = lastUse
        self.streams = LinkStreamMux { message in
            lastUse.value = .now
            writer.write(message.frame)
        }
    }

    /// Whether nothing went over the link for `idle`, and nothing waits on it (no request
    /// unanswered, no stream open).
    func isIdle(for idle: Duration, now: ContinuousClock.Instant = .now) -> Bool {
        guard now - lastUse.value >= idle, streams.openStreams == 0 else { return false }
        return state.withLock { $0.pending.isEmpty && $0.ended == nil }
    }

    /// Whether the link is still up.
    public var isOpen: Bool { state.withLock { $0.ended == nil } }

    /// Opens a link and exchanges `hello`. Every failure is 4609: the peer cannot be reached,
    /// refused the handshake or the membership proof (it does not pin this device, or this
    /// device does not pin it),
    /// or closed before saying hello.
    ///
    /// With `idle`, the link closes once nothing went over it for that long and nothing waits
    /// on it: an idle link then sends nothing at all (not even TCP keepalives), and the next
    /// request opens another.
    public static func open(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration = .seconds(5), idle: Duration? = nil,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(FetchFailure) -> PeerConnection {
        let unavailable: @Sendable (String) -> FetchFailure = { why in FetchFailure(code: FetchFailure.connectionUnavailable, message: "the device at \(host):\(port) \(why)") }
        // The peer's hello (or why there is none; nil once the deadline passed), and the
        // connection once made: frames are handed to it from the event loop as they are read.
        let hello = FirstOutcome<Result<UUID, FetchFailure>?>()
        let connection = LockedValue<PeerConnection?>(nil)
        let receiver = LinkReceiver(
            frame: { frame, isFirst in
                guard isFirst else {
                    if let message = try? LinkMessage(frame: frame) { connection.value?.received(message) }
                    return true
                }
                guard case .hello(let version, let device)? = try? LinkMessage(frame: frame) else {
                    hello.settle(.failure(unavailable("did not say hello")))
                    return false
                }
                guard version == LinkMessage.version else {
                    hello.settle(.failure(FetchFailure(code: FetchFailure.handoffFailed, message: "the device at \(host):\(port) speaks link protocol version \(version), this one \(LinkMessage.version); update Handoff on both devices")))
                    return false
                }
                hello.settle(.success(device))
                return true
            },
            end: { error in
                // The handshake's failure shows here, as the link ending before the hello.
                let why = error.map { " (\($0))" } ?? ""
                hello.settle(.failure(unavailable("refused the link or is not a member of this account\(why)")))
                connection.value?.end(error.map { "\($0)" } ?? "closed by the peer")
            })
        let channel: any Channel
        do {
            let shown = identity.links.current()
            let context = try LinkTLS.context(showing: shown)
            let trust = LinkTrust.members({ pins().contains($0) })
            channel = try await withDeadline(deadline) {
                try await ClientBootstrap(group: eventLoopGroup)
                    .connectTimeout(.nanoseconds(Int64(deadline.components.seconds) * 1_000_000_000 + deadline.components.attoseconds / 1_000_000_000))
                    .connect(literalOrHost: host, port: port) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try LinkTLS.watchForDeadPeers(channel)
                            let tls = try NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: LinkTLS.verifier(trust))
                            try channel.pipeline.syncOperations.addHandler(tls)
                            try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: maximumFrame))
                            // Hello waits in it until the device answering proves it is a member.
                            _ = try LinkTLS.addProof(to: channel, .connecting, trust: trust, identity: identity, shown: shown, maximumFrame: maximumFrame)
                            try channel.pipeline.syncOperations.addHandler(receiver)
                            return channel
                        }
                    }
            }
        } catch is DeadlineExceeded {
            throw unavailable("did not answer within \(deadline)")
        } catch {
            throw unavailable("cannot be reached: \(error)")
        }

        // Written straight to the channel, in the order sent; closing it (`close()`) writes
        // what was sent, then closes the connection.
        let writer = FrameWriter(channel: channel, limit: .max)
        writer.whenDrained.whenComplete { _ in channel.close(promise: nil) }
        channel.closeFuture.whenComplete { _ in writer.finish() }
        writer.write(LinkMessage.hello(version: LinkMessage.version, device: identity.id).frame)
        let timer = channel.eventLoop.scheduleTask(in: TimeAmount(deadline)) { hello.settle(nil) }
        let first = await hello.value()
        timer.cancel()
        switch first {
        case .success(let device)?:
            let made = PeerConnection(host: host, port: port, device: device, writer: writer)
            made.socket = channel
            connection.value = made
            // The link may have ended between the hello and now.
            if !channel.isActive { made.end("closed by the peer") }
            if let idle { made.closeWhenIdle(idle, on: channel.eventLoop) }
            return made
        case .failure(let failure)?:
            writer.finish()
            channel.close(promise: nil)
            throw failure
        case nil:
            writer.finish()
            channel.close(promise: nil)
            throw unavailable("did not complete the handshake within \(deadline)")
        }
    }

    /// Fetches activity `activityID`. Exactly one outcome: the record, the origin's own
    /// failure (its code passed through), or 4608 when the link ends or the deadline passes.
    public func fetch(_ activityID: UUID, deadline: Duration) async -> Result<WireActivityRecord, FetchFailure> {
        await withCheckedContinuation { continuation in
            fetch(activityID, deadline: deadline) { continuation.resume(returning: $0) }
        }
    }

    /// Fetches activity `activityID`, the request already on its way to the event loop when
    /// this returns; `done` gets the one outcome, as `fetch(_:deadline:)` returns it.
    public func fetch(_ activityID: UUID, deadline: Duration, then done: @escaping @Sendable (Result<WireActivityRecord, FetchFailure>) -> Void) {
        let (host, port) = (self.host, self.port)
        request(deadline: deadline, { .fetch(request: $0, activityID: activityID) }) { answer in
            done(Self.result(of: answer, for: activityID, host: host, port: port, deadline: deadline))
        }
    }

    /// What a fetch's answer means for the app, whatever carried it.
    static func result(of answer: Answer, for activityID: UUID, host: String, port: Int, deadline: Duration) -> Result<WireActivityRecord, FetchFailure> {
        switch answer {
        case .answered(.fetched(_, let record)):
            guard record.id == activityID else {
                return .failure(FetchFailure(code: FetchFailure.handoffFailed, message: "the device at \(host):\(port) answered with another activity"))
            }
            return .success(record)
        case .answered(.fetchFailed(_, let code, let message)):
            return .failure(FetchFailure(code: Int(code), message: message))
        case .answered:
            return .failure(FetchFailure(code: FetchFailure.handoffFailed, message: "the device at \(host):\(port) sent an answer that is not a fetch result"))
        case .ended:
            return .failure(FetchFailure(code: FetchFailure.handoffFailed, message: "the device at \(host):\(port) went away during the fetch"))
        case .timedOut:
            return .failure(FetchFailure(code: FetchFailure.handoffFailed, message: "the device at \(host):\(port) did not answer within \(deadline)"))
        }
    }

    /// Sends a message that has no answer (`continued`).
    public func send(_ message: LinkMessage) {
        lastUse.value = .now
        writer.write(message.frame)
    }

    /// Checks a few times per `idle` whether the link is idle, and closes it then. Meanwhile
    /// the link watches for a vanished peer (TCP keepalive) only while something waits on it: a
    /// link with nothing to do sends nothing until it closes.
    private func closeWhenIdle(_ idle: Duration, on eventLoop: any EventLoop) {
        let every = TimeAmount.nanoseconds(max(Int64(idle.components.seconds) * 1_000_000_000 / 4 + idle.components.attoseconds / 4_000_000_000, 50_000_000))
        state.withLock { $0.watchesWhenBusy = true }
        watchWhileBusy(now: true)
        eventLoop.scheduleRepeatedTask(initialDelay: every, delay: every) { [weak self] task in
            guard let self, self.isOpen else { return task.cancel() }
            self.watchWhileBusy()
            guard self.isIdle(for: idle) else { return }
            task.cancel()
            self.close()
        }
    }

    /// Keepalive on while a request is unanswered or a stream is open, off otherwise. Only for
    /// a link that closes when idle (`open(idle:)`); others keep it on. Switching it on is at
    /// once; switching it off waits until the link has been quiet for `keepaliveLinger`
    /// (`quietCheck`), unless `now`.
    private func watchWhileBusy(starting: Bool = false, now: Bool = false) {
        let busy = starting || streams.openStreams > 0
        let change: Bool? = state.withLock { state -> Bool? in
            let wanted = busy || !state.pending.isEmpty
            guard state.watchesWhenBusy, state.ended == nil, state.watching != wanted else { return nil }
            if !wanted && !now {
                guard !state.quietCheckArmed else { return nil }
                state.quietCheckArmed = true
                return false
            }
            state.watching = wanted
            state.keepaliveChanges += 1
            return true
        }
        switch change {
        case true?: applyKeepalive()
        case false?: LoopTimer(after: Self.keepaliveLinger) { [weak self] in self?.quietCheck() }.forget()
        case nil: break
        }
    }

    /// Switches keepalive off once nothing went over the link for `keepaliveLinger`; if
    /// something did meanwhile, looks again when it will have been that long.
    private func quietCheck() {
        let quiet = ContinuousClock.now - lastUse.value
        guard quiet >= Self.keepaliveLinger else {
            LoopTimer(after: Self.keepaliveLinger - quiet) { [weak self] in self?.quietCheck() }.forget()
            return
        }
        state.withLock { $0.quietCheckArmed = false }
        watchWhileBusy(now: true)
    }

    /// How many times keepalive was switched on or off (for tests).
    var keepaliveChanges: Int { state.withLock { $0.keepaliveChanges } }

    /// Sets the socket's keepalive to what `watching` says when the event loop gets to it, not
    /// to what it said when asked: changes decided on two threads cannot land out of order.
    private func applyKeepalive() {
        guard let socket else { return }
        socket.eventLoop.execute { [weak self] in
            guard let self else { return }
            let on = self.state.withLock { $0.watching }
            socket.setOption(.socketOption(.so_keepalive), value: on ? 1 : 0).whenFailure { _ in }
        }
    }

    /// Closes the link: what was queued is written, then the connection closes; pending
    /// requests end.
    public func close() {
        end("closed by this device")
        // What was sent before (a last `continued`) is written, then the connection closes.
        writer.finish()
    }

    /// Sends the request `make` makes with its number; `done` gets what became of it, once.
    private func request(deadline: Duration, _ make: (UInt64) -> LinkMessage, done: @escaping @Sendable (Answer) -> Void) {
        let number: UInt64? = state.withLock { state in
            guard state.ended == nil else { return nil }
            defer { state.nextRequest += 1 }
            state.pending[state.nextRequest] = Waiting(done: done)
            return state.nextRequest
        }
        guard let number else {
            done(.ended("the link had ended"))
            return
        }
        lastUse.value = .now
        // The request first: what follows only matters once its answer is due.
        writer.write(make(number).frame)
        watchWhileBusy()
        let timer = LoopTimer(after: deadline) { [weak self] in self?.resolve(number, .timedOut) }
        // Kept with the request, to be stopped by its answer (unless the answer came first).
        let answered = state.withLock { state in
            state.pending[number]?.timer = timer
            return state.pending[number] == nil
        }
        if answered { timer.cancel() }
    }

    private func resolve(_ number: UInt64, _ answer: Answer) {
        guard let waiting = state.withLock({ $0.pending.removeValue(forKey: number) }) else { return }
        waiting.timer?.cancel()
        waiting.done(answer)
        watchWhileBusy()
    }

    private func received(_ message: LinkMessage) {
        lastUse.value = .now
        switch message {
        case .fetched(let request, _), .fetchFailed(let request, _, _):
            resolve(request, .answered(message))
        case .streamAccepted, .streamRefused, .streamData, .streamCredit, .streamEnd, .streamStop, .streamReset:
            streams.received(message)
        default:
            break
        }
    }

    fileprivate func end(_ reason: String) {
        let pending = state.withLock { state -> [Waiting] in
            if state.ended == nil { state.ended = reason }
            defer { state.pending = [:] }
            return Array(state.pending.values)
        }
        for waiting in pending {
            waiting.timer?.cancel()
            waiting.done(.ended(reason))
        }
        streams.linkEnded(reason)
    }

    /// Opens a continuation stream to the app whose activity is `activityID` on the peer.
    public func openStream(activityID: UUID, deadline: Duration) async -> Result<LinkStream, FetchFailure> {
        watchWhileBusy(starting: true)
        let opened = await streams.open(activityID: activityID, deadline: deadline)
        watchWhileBusy()
        return opened
    }
}

/// A value shared between tasks, under a lock.
final class LockedValue<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Changes the value in one step (`value += 1` would read and write in two).
    func update(_ change: (inout Value) -> Void) {
        storage.withLock { change(&$0) }
    }
}

/// The end of a link's pipeline on the side that opened it: hands each frame to `frame` on the
/// event loop (`isFirst` for the peer's hello; returning false closes the link), and tells
/// `end` once, when the link closes (with the error that closed it, if one did).
private final class LinkReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = Frame

    private let frame: @Sendable (Frame, _ isFirst: Bool) -> Bool
    private let end: @Sendable ((any Error)?) -> Void
    /// Used on the channel's event loop only (locked so that the handler can be `Sendable`).
    private let state = Mutex<(first: Bool, error: (any Error)?, ended: Bool)>((true, nil, false))

    init(frame: @escaping @Sendable (Frame, Bool) -> Bool, end: @escaping @Sendable ((any Error)?) -> Void) {
        self.frame = frame
        self.end = end
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let (isFirst, ended) = state.withLock { state in
            defer { state.first = false }
            return (state.first, state.ended)
        }
        guard !ended else { return }
        if !frame(unwrapInboundIn(data), isFirst) { context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        state.withLock { if $0.error == nil { $0.error = error } }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish()
    }

    /// Tells `end`, the first time only.
    private func finish() {
        let error: (any Error)?? = state.withLock { state in
            guard !state.ended else { return .none }
            state.ended = true
            return .some(state.error)
        }
        if case .some(let error) = error { end(error) }
    }
}
