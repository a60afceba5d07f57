import Foundation
import HandoffLocalAPI
import Logging
import Synchronization

/// Where an app's messages to its agent go: the socket client, or a client in the agent's
/// own process.
package protocol LocalAPILink: Sendable {
    func send(_ message: LocalMessage) throws(LocalError)
    var isClosed: Bool { get }
}

extension LocalClient: LocalAPILink {}

/// The app's side of the local API, whatever carries it: the app's events go out as
/// messages, and the agent's messages become calls on the app's `ActivityCenter`, in order.
/// `SocketAgentConnection` and the in-process connection of `HandoffAgent` share it.
package final class AppSideOfLocalAPI: Sendable {
    private let state = Mutex(State())
    private let inbox: AsyncStream<LocalMessage>.Continuation

    private struct State {
        weak var center: ActivityCenter?
        var link: (any LocalAPILink)?
        /// The agent's socket, where stream connections go; nil when there is none.
        var streamPath: String?
        /// Messages queued for the app, and how many of them it has handled.
        var queued: UInt64 = 0
        var handled: UInt64 = 0
        var drainWaiters: [(upTo: UInt64, waiter: CheckedContinuation<Void, Never>)] = []
    }

    package init() {
        let (stream, continuation) = AsyncStream<LocalMessage>.makeStream()
        inbox = continuation
        // Continuation messages are handed to the app one at a time, in the agent's order.
        Task { [weak self] in
            for await message in stream {
                if let center = self?.center {
                    await Self.handle(message, center: center)
                }
                self?.handledOne()
            }
        }
    }

    private func handledOne() {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.handled += 1
            let handled = state.handled
            let ready = state.drainWaiters.filter { $0.upTo <= handled }.map(\.waiter)
            state.drainWaiters.removeAll { $0.upTo <= handled }
            return ready
        }
        for waiter in ready { waiter.resume() }
    }

    /// Returns once the app has handled every message received so far (a delivery has
    /// reached its delegate, a failure its `didFail`).
    package func drained() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state -> Bool in
                if state.handled >= state.queued { return true }
                state.drainWaiters.append((state.queued, waiter))
                return false
            }
            if done { waiter.resume() }
        }
    }

    deinit {
        inbox.finish()
    }

    package var center: ActivityCenter? {
        get { state.withLock { $0.center } }
        set { state.withLock { $0.center = newValue } }
    }

    /// Where stream connections to the agent go.
    package var streamPath: String? {
        get { state.withLock { $0.streamPath } }
        set { state.withLock { $0.streamPath = newValue } }
    }

    /// The link messages go out on now (nil while there is none).
    package var link: (any LocalAPILink)? {
        get { state.withLock { $0.link } }
        set { state.withLock { $0.link = newValue } }
    }

    /// Sends one of the app's events, if a link is up; when one comes, the current activity
    /// is announced again (`ActivityCenter.reannounce`), so nothing is lost meanwhile.
    package func send(_ event: AppEvent) {
        guard let link, !link.isClosed else { return }
        let message: LocalMessage
        switch event {
        case .becameCurrent(let announcement): message = .becameCurrent(announcement)
        case .resigned(let id): message = .resigned(activity: id)
        case .invalidated(let id): message = .invalidated(activity: id)
        }
        try? link.send(message)
    }

    /// A message from the agent.
    package func received(_ message: LocalMessage) {
        switch message {
        case .reply(1, let hello):
            // The answer to `hello` on a link that hands every message over (in process).
            center?.agentContainers = (hello.containers ?? []).map { ($0.identifier, URL(fileURLWithPath: $0.folder, isDirectory: true)) }
        case .save(let request, let activityID):
            guard let center, let link else { return }
            // Saves run beside continuations: a slow delivery never delays an answer to another device.
            Task {
                switch await center.save(activityID: activityID) {
                case .success(let record):
                    try? link.send(.saved(request: request, record))
                case .failure(let failure):
                    try? link.send(.saveFailed(request: request, LocalError(.continuation, code: failure.code, failure.message)))
                }
            }
        case .streamRequest(let token, let activityID):
            guard let center, let link else { return }
            let path = streamPath
            // Streams are taken beside continuations, as saves are.
            Task {
                guard let path else {
                    try? link.send(.streamRefused(stream: token, error: LocalError(.failed, "this app has no socket to its agent for streams")))
                    return
                }
                guard await center.canReceiveStreams(activityID: activityID) else {
                    try? link.send(.streamRefused(stream: token, error: LocalError(
                        .continuation, code: ContinuationFailure.Code.handoffFailed,
                        "the activity is gone from the originating app, does not support continuation streams, or has no delegate to take them")))
                    return
                }
                let socket: LocalStreamSocket
                do {
                    socket = try await SocketStreams.connect(path: path, .acceptStream(version: LocalMessage.version, stream: token))
                } catch {
                    return
                }
                _ = await center.receiveStreams(activityID: activityID, pair: SocketStreams.pair(socket))
            }
        default:
            state.withLock { $0.queued += 1 }
            inbox.yield(message)
        }
    }

    private static func handle(_ message: LocalMessage, center: ActivityCenter) async {
        switch message {
        case .willContinue(let continuation, let activityType):
            await center.waitForReceiver()
            await center.willContinue(continuation, activityType: activityType)
        case .deliver(let continuation, let record, let origin):
            await center.waitForReceiver()
            let context = ContinuationContext(continuationID: continuation, originActivityID: origin.activity, originDevice: origin.deviceName)
            await center.deliver(continuation, record: record, continuation: context)
        case .fail(let continuation, let activityType, let error):
            await center.waitForReceiver()
            let failure = ContinuationFailure(code: CocoaError.Code(rawValue: error.code ?? ContinuationFailure.Code.handoffFailed), message: error.message)
            await center.fail(continuation, activityType: activityType, failure: failure)
        case .wasContinued(let activity):
            await center.wasContinued(activityID: activity)
        default:
            break
        }
    }
}

/// The link from an app to `handoffd` over the local socket (`docs/local-api.md`).
///
/// It connects in the background and keeps trying every second while no agent runs, so the
/// app works locally meanwhile and joins in as soon as an agent starts. Each time it
/// connects, the app's current activity is announced again: an agent that restarted learns
/// it without the app doing anything.
package final class SocketAgentConnection: AgentConnection {
    package let path: String
    private let bundleIdentifier: String?
    private let logger: Logger
    private let side = AppSideOfLocalAPI()
    private let state = Mutex(State())
    /// Wakes the connection's thread: the connection ended, or the center went away.
    private let wake = DispatchSemaphore(value: 0)

    private struct State {
        var client: LocalClient?
        var started = false
        var stopped = false
        var toldNoAgent = false
    }

    package init(path: String = LocalSocket.defaultPath(), bundleIdentifier: String?, logger: Logger) {
        self.path = path
        self.bundleIdentifier = bundleIdentifier
        self.logger = logger
        side.streamPath = path
    }

    deinit {
        state.withLock { $0.stopped = true }
    }

    package func detach() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    /// Whether a connection to the agent is up now.
    package var isConnected: Bool {
        state.withLock { $0.client.map { !$0.isClosed } ?? false }
    }

    package func attach(_ center: ActivityCenter) {
        side.center = center
        let start = state.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        guard start else { return }
        let thread = Thread { [self] in maintain() }
        thread.name = "handoff-agent-connection"
        thread.start()
    }

    /// Connects, and reconnects after the agent goes away, until the center is released.
    private func maintain() {
        // Foundation's `Thread.name` does not reach the kernel here: named, it shows in `top -H`.
        #if os(Linux)
        try? "handoff-agent".write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
        #endif
        while true {
            let stopped = state.withLock { $0.stopped }
            guard side.center != nil, !stopped else {
                state.withLock { $0.client?.close() }
                return
            }
            if let client = state.withLock({ $0.client }), !client.isClosed {
                // Until the connection ends or the center goes away (each signals). Nothing
                // here holds the center meanwhile: its going away is what ends the wait.
                wake.wait()
                continue
            }
            guard let center = side.center else { continue }
            do throws(LocalError) {
                let client = try LocalClient(
                    path: path, role: .app, bundleIdentifier: bundleIdentifier,
                    onMessage: { [side] message in side.received(message) },
                    onClose: { [logger, wake] reason in
                        logger.info("the Handoff agent connection ended: \(reason)")
                        wake.signal()
                    })
                let wasTold = state.withLock { state in
                    state.client = client
                    defer { state.toldNoAgent = false }
                    return state.toldNoAgent
                }
                side.link = client
                center.agentContainers = (client.hello.containers ?? []).map { ($0.identifier, URL(fileURLWithPath: $0.folder, isDirectory: true)) }
                let app = client.hello.app.map { "as '\($0.bundleIdentifier)'" } ?? "as an app that is not installed (it can offer activities but not receive them)"
                if wasTold {
                    logger.notice("connected to the Handoff agent at \(path) \(app)")
                } else {
                    logger.info("connected to the Handoff agent at \(path) \(app)")
                }
                center.reannounce()
            } catch {
                let tell = state.withLock { state in
                    defer { state.toldNoAgent = true }
                    return !state.toldNoAgent
                }
                if tell {
                    logger.notice("\(error.message); activities stay on this device until an agent is running")
                }
                // Tries again in a second (sooner if the center goes away).
                _ = wake.wait(timeout: .now() + 1)
            }
        }
    }

    package func send(_ event: AppEvent) async {
        side.send(event)
    }

    package func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        try await SocketStreams.open(path: path, continuation: continuation.continuationID)
    }
}
