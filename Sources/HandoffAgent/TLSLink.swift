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
package final class TLSLink: Sendable {
    package let host: String
    package let port: Int
    /// The device that answered `hello`.
    package let device: UUID
    /// The link's decisions (`LinkStateMachine`), and the timers they set.
    private let driver: LinkDriver
    /// Frames go straight to the channel from whichever thread sends them, in order.
    private let writer: FrameWriter
    /// The continuation streams this device opens on the link.
    let streams: LinkStreamMux

    /// How long keepalive stays on after the last answer (`LinkStateMachine.keepaliveLinger`).
    static var keepaliveLinger: Duration { LinkDriver.Machine.keepaliveLinger }

    /// The connection's channel (for tests to look at its socket).
    let socket: any Channel

    private init(host: String, port: Int, device: UUID, driver: LinkDriver, writer: FrameWriter, channel: any Channel) {
        self.host = host
        self.port = port
        self.device = device
        self.driver = driver
        self.writer = writer
        self.socket = channel
        self.streams = LinkStreamMux(
            send: { message in
                driver.used()
                writer.write(message.frame)
            },
            // A stream that ended lets the link go quiet: keepalive goes off once nothing else
            // waits (on a link kept open an hour it would probe every 5 s all that time).
            closed: { [weak driver] remaining in driver?.busyChanged(streamsOpen: remaining) })
        // The driver keeps these for the link's life: what they reach back to is held weakly.
        let streams = self.streams
        driver.attach(
            LinkDriver.IO(
                write: { writer.write($0.frame) },
                applyKeepalive: { [weak driver] in
                    guard let driver else { return }
                    // What the machine says when the event loop gets to it, not when asked:
                    // changes decided on two threads cannot land out of order.
                    channel.eventLoop.execute {
                        channel.setOption(.socketOption(.so_keepalive), value: driver.watching ? 1 : 0).whenFailure { _ in }
                    }
                },
                close: {
                    // What was sent before is written, then the connection closes.
                    writer.finish()
                },
                streamsOpen: { [weak streams] in streams?.openStreams ?? 0 }))
    }

    /// Whether nothing went over the link for `idle`, and nothing waits on it (no request
    /// unanswered, no stream open).
    func isIdle(for idle: Duration) -> Bool {
        driver.isIdle(for: idle, streamsOpen: streams.openStreams)
    }

    /// Whether the link is still up.
    package var isOpen: Bool { driver.isOpen }

    /// Opens a link and exchanges `hello`. Every failure is 4609: the peer cannot be reached,
    /// refused the handshake or the membership proof (it does not pin this device, or this
    /// device does not pin it),
    /// or closed before saying hello.
    ///
    /// With `idle`, the link closes once nothing went over it for that long and nothing waits
    /// on it: an idle link then sends nothing at all (not even TCP keepalives), and the next
    /// request opens another.
    ///
    /// `first` is a fetch sent with `hello`, before the peer has answered: sealed inside this
    /// side's membership proof, it is answered as soon as the peer (the member `first.target`
    /// names, else the link is refused) accepts the proof (`LinkProofHandler`), and its outcome
    /// goes to `first.done` exactly once, as `fetch` gives it, whatever becomes of the link.
    package static func open(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration = .seconds(5), idle: Duration? = nil,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        first: LinkFirstFetch? = nil
    ) async throws(ContinuationFailure) -> TLSLink {
        try await start(
            host: host, port: port, identity: identity, pins: pins, deadline: deadline, idle: idle, maximumFrame: maximumFrame,
            eventLoopGroup: eventLoopGroup, first: first
        ).finish()
    }

    /// `open` in two halves: this one returns at once, and `finish` on what it returns waits for
    /// the link. A link to an address (not a name) has its connection begun before this
    /// returns: called on the event loop's own thread (where the agent's tasks run in
    /// handoffd), the SYN leaves before the caller goes on to anything else (a continuation's
    /// `willContinue` to the app), not once a task gets to it.
    package static func start(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration = .seconds(5), idle: Duration? = nil,
        maximumFrame: Int = LinkMessage.maximumFrame, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        first: LinkFirstFetch? = nil
    ) -> LinkStart<TLSLink> {
        HopTrace.stamp("link begins")
        let unavailable: @Sendable (String) -> ContinuationFailure = { why in ContinuationFailure(code: ContinuationFailure.Code.connectionUnavailable, message: "the device at \(host):\(port) \(why)") }
        // The peer's hello (or why there is none; nil once the deadline passed), and the
        // connection once made: frames are handed to it from the event loop as they are read.
        let hello = FirstOutcome<Result<UUID, ContinuationFailure>?>()
        let driver = LinkDriver(host: host, port: port, idle: idle)
        let connection = LockedValue<TLSLink?>(nil)
        // Each channel's writer, set as the channel is made, on its event loop, before any frame
        // can be read (a name's lookup may try several addresses, each with a channel).
        let made = LockedValue<[ObjectIdentifier: FrameWriter]>([:])
        // Whether the first fetch was asked (it then has its outcome from the link's driver).
        let asked = LockedValue(false)
        let receiver = LinkReceiver(
            frame: { frame, channel, isFirst in
                guard isFirst else {
                    if let message = try? LinkMessage(frame: frame) { connection.value?.received(message) }
                    return true
                }
                let greeting = driver.greeted(frame)
                // The link is made here, on the event loop, before the frames after the hello
                // (the first fetch's answer among them) are read.
                if case .success(let device) = greeting, let writer = made.value[ObjectIdentifier(channel)] {
                    let link = TLSLink(host: host, port: port, device: device, driver: driver, writer: writer, channel: channel)
                    connection.value = link
                    if let idle { link.closeWhenIdle(idle, on: channel.eventLoop) }
                }
                hello.settle(greeting)
                return (try? greeting.get()) != nil
            },
            end: { error in
                // The handshake's failure shows here, as the link ending before the hello.
                let why = error.map { " (\($0))" } ?? ""
                hello.settle(.failure(unavailable("refused the link or is not a member of this account\(why)")))
                let reason = error.map { "\($0)" } ?? "closed by the peer"
                driver.ended(reason)
                connection.value?.streams.linkEnded(reason)
            })
        /// Hello, then the first fetch: held by the proof's handler until the peer is proven.
        @Sendable func greet(_ writer: FrameWriter) {
            writer.write(LinkMessage.hello(version: LinkMessage.version, device: identity.id).frame)
            guard let first, !asked.exchange(true) else { return }
            driver.request(deadline: first.deadline, streamsOpen: 0, { .fetch(request: $0, activityID: first.activityID) }) { answer in
                first.done(LinkDriver.Machine.result(of: answer, for: first.activityID, host: host, port: port, deadline: first.deadline))
            }
        }
        // An address is connected to as it is, with one channel: its hello and first fetch go in
        // as it is made, so that they are held when the handshake ends and ride in the proof.
        // A name may be tried at several addresses: they go once the connection is made.
        let address = try? SocketAddress(ipAddress: host, port: port)
        let literal = address != nil
        let shown = identity.links.current()
        let context: NIOSSLContext
        do {
            context = try identity.links.context(for: shown)
        } catch {
            let failure = unavailable("cannot be reached: \(error)")
            if let first, !asked.exchange(true) { first.done(.failure(failure)) }
            return LinkStart(finish: { () async throws(ContinuationFailure) -> TLSLink in throw failure }, abandon: {})
        }
        let trust = LinkTrust.members({ pins().contains($0) })
        @Sendable func initialize(_ channel: any Channel) throws {
            // Written straight to the channel, in the order sent; closing it
            // (`close()`) writes what was sent, then closes the connection.
            let writer = FrameWriter(channel: channel, limit: .max)
            writer.whenDrained.whenComplete { _ in channel.close(promise: nil) }
            channel.closeFuture.whenComplete { _ in writer.finish() }
            made.update { $0[ObjectIdentifier(channel)] = writer }
            try LinkTLS.watchForDeadPeers(channel)
            try HopTraceRecords.add(to: channel)
            let tls = try NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: LinkTLS.verifier(trust))
            try channel.pipeline.syncOperations.addHandler(tls)
            try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: maximumFrame))
            // Hello waits in it until the device answering proves it is a member.
            _ = try LinkTLS.addProof(
                to: channel, .connecting, trust: trust, identity: identity, shown: shown, maximumFrame: maximumFrame, target: first?.target)
            try channel.pipeline.syncOperations.addHandler(receiver)
            if literal {
                // Until the link is made, the first fetch is all the driver writes.
                driver.attach(LinkDriver.IO(write: { writer.write($0.frame) }))
                greet(writer)
            }
        }
        @Sendable func bootstrap() -> ClientBootstrap {
            // The calling thread's own loop when it is one (`any()`; `next()` takes turns).
            ClientBootstrap(group: eventLoopGroup.any())
                .connectTimeout(.nanoseconds(Int64(deadline.components.seconds) * 1_000_000_000 + deadline.components.attoseconds / 1_000_000_000))
        }
        // Begun now (on the event loop at once, when this is its thread); the connect timeout
        // bounds it, and the hello's timer the rest.
        let connecting = address.map { address in
            bootstrap().channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try initialize(channel) } }.connect(to: address)
        }
        if connecting != nil { HopTrace.stamp("connect called") }
        let finish = { @Sendable () async throws(ContinuationFailure) -> TLSLink in
            let channel: any Channel
            do {
                if let connecting {
                    channel = try await connecting.get()
                } else {
                    channel = try await withDeadline(deadline) {
                        try await bootstrap().connect(host: host, port: port) { channel in
                            channel.eventLoop.makeCompletedFuture {
                                try initialize(channel)
                                return channel
                            }
                        }
                    }
                }
            } catch {
                let timedOut: Bool
                switch error {
                case is DeadlineExceeded, ChannelError.connectTimeout: timedOut = true
                default: timedOut = false
                }
                let failure = timedOut ? unavailable("did not answer within \(deadline)") : unavailable("cannot be reached: \(error)")
                // A fetch asked ends with the link's driver; one never asked ends here.
                if let first, !asked.exchange(true) { first.done(.failure(failure)) }
                throw failure
            }

            guard let writer = made.value[ObjectIdentifier(channel)] else { preconditionFailure("a connected channel was made by its initializer") }
            // Only the channel connected stays (a name's other tries closed).
            made.update { $0 = [ObjectIdentifier(channel): writer] }
            if !literal {
                // On the event loop, where the link is made as the hello is read: the link's own IO,
                // once there, is not replaced by this one.
                channel.eventLoop.execute {
                    if connection.value == nil { driver.attach(LinkDriver.IO(write: { writer.write($0.frame) })) }
                    greet(writer)
                }
            }
            let timer = channel.eventLoop.scheduleTask(in: TimeAmount(deadline)) { hello.settle(nil) }
            let first = await hello.value()
            timer.cancel()
            switch first {
            case .success?:
                guard let link = connection.value else { preconditionFailure("the link is made as its hello is read") }
                // The link may have ended between the hello and now.
                if !channel.isActive { link.end("closed by the peer") }
                return link
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
        return LinkStart(
            finish: finish,
            abandon: {
                connecting?.whenSuccess { $0.close(promise: nil) }
                // A first fetch never sent (a name, or a connection that failed before its
                // hello) ends here; one sent ends with the link's driver as it closes.
                if let first, !asked.exchange(true) { first.done(.failure(unavailable("was given up before the link opened"))) }
            })
    }

    /// Fetches activity `activityID`. Exactly one outcome: the record, the origin's own
    /// failure (its code passed through), or 4608 when the link ends or the deadline passes.
    package func fetch(_ activityID: UUID, deadline: Duration) async -> Result<FetchedActivity, ContinuationFailure> {
        await withCheckedContinuation { continuation in
            fetch(activityID, deadline: deadline) { continuation.resume(returning: $0) }
        }
    }

    /// Fetches activity `activityID`, the request already on its way to the event loop when
    /// this returns; `done` gets the one outcome, as `fetch(_:deadline:)` returns it.
    package func fetch(_ activityID: UUID, deadline: Duration, then done: @escaping @Sendable (Result<FetchedActivity, ContinuationFailure>) -> Void) {
        let (host, port) = (self.host, self.port)
        driver.request(deadline: deadline, streamsOpen: streams.openStreams, { .fetch(request: $0, activityID: activityID) }) { answer in
            done(LinkDriver.Machine.result(of: answer, for: activityID, host: host, port: port, deadline: deadline))
        }
    }

    /// Sends a message that has no answer (`continued`).
    package func send(_ message: LinkMessage) {
        driver.used()
        writer.write(message.frame)
    }

    /// Checks a few times per `idle` whether the link is idle, and closes it then. Meanwhile
    /// the link watches for a vanished peer (TCP keepalive) only while something waits on it: a
    /// link with nothing to do sends nothing until it closes.
    private func closeWhenIdle(_ idle: Duration, on eventLoop: any EventLoop) {
        let every = TimeAmount.nanoseconds(max(Int64(idle.components.seconds) * 1_000_000_000 / 4 + idle.components.attoseconds / 4_000_000_000, 50_000_000))
        driver.busyChanged(streamsOpen: streams.openStreams, immediately: true)
        eventLoop.scheduleRepeatedTask(initialDelay: every, delay: every) { [weak self] task in
            guard let self, self.isOpen else { return task.cancel() }
            self.driver.idleCheck(streamsOpen: self.streams.openStreams)
            if !self.isOpen { task.cancel() }
        }
    }

    /// How many times keepalive was switched on or off (for tests).
    var keepaliveChanges: Int { driver.keepaliveChanges }

    /// Closes the link: what was queued is written, then the connection closes; pending
    /// requests end.
    package func close() {
        end("closed by this device")
        // What was sent before (a last `continued`) is written, then the connection closes.
        writer.finish()
    }

    private func received(_ message: LinkMessage) {
        switch message {
        case .streamAccepted, .streamRefused, .streamData, .streamCredit, .streamEnd, .streamStop, .streamReset:
            driver.used()
            streams.received(message)
        default:
            driver.received(message, streamsOpen: streams.openStreams)
        }
    }

    fileprivate func end(_ reason: String) {
        driver.ended(reason)
        streams.linkEnded(reason)
    }

    /// Opens a continuation stream to the app whose activity is `activityID` on the peer.
    package func openStream(_ target: LinkStreamTarget, deadline: Duration) async -> Result<LinkStream, ContinuationFailure> {
        driver.busyChanged(streamsOpen: streams.openStreams, starting: true)
        let opened = await streams.open(target, deadline: deadline)
        driver.busyChanged(streamsOpen: streams.openStreams)
        return opened
    }
}

/// The end of a link's pipeline on the side that opened it: hands each frame to `frame` on the
/// event loop (`isFirst` for the peer's hello; returning false closes the link), and tells
/// `end` once, when the link closes (with the error that closed it, if one did).
private final class LinkReceiver: ChannelInboundHandler, Sendable {
    typealias InboundIn = Frame

    private let frame: @Sendable (Frame, any Channel, _ isFirst: Bool) -> Bool
    private let end: @Sendable ((any Error)?) -> Void
    /// Used on the channel's event loop only (locked so that the handler can be `Sendable`).
    private let state = Mutex<(first: Bool, error: (any Error)?, ended: Bool)>((true, nil, false))

    init(frame: @escaping @Sendable (Frame, any Channel, Bool) -> Bool, end: @escaping @Sendable ((any Error)?) -> Void) {
        self.frame = frame
        self.end = end
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let (isFirst, ended) = state.withLock { state in
            defer { state.first = false }
            return (state.first, state.ended)
        }
        guard !ended else { return }
        if !frame(unwrapInboundIn(data), context.channel, isFirst) { context.close(promise: nil) }
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
