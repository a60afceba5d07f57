import Foundation
import HandoffAgent
import Handoff
import HandoffLocalAPI
import Synchronization

extension InProcessClient: LocalAPILink {}

/// The link from an app to an agent in the same process, with no socket: the app's
/// `ActivityCenter` speaks the local API to `Agent.connectInProcess`, exactly as a real app
/// does over the socket (`SocketAgentConnection`, whose message handling it shares). For
/// several devices, each an agent, in one test process.
package final class InProcessAgentConnection: AgentConnection {
    /// Opens continuation streams to the originating app; until the agents carry streams
    /// between devices, whoever runs the devices in process supplies this.
    package typealias StreamOpener = @Sendable (ContinuationContext) async throws(ContinuationFailure) -> StreamPair

    private let agent: Agent
    private let bundleIdentifier: String?
    private let side = AppSideOfLocalAPI()
    private let streamOpener: StreamOpener?
    private let state = Mutex(State())

    private struct State {
        var client: InProcessClient?
        var closed = false
        var holdsSaves = false
        var connectWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// - Parameter bundleIdentifier: the installed app this one is; nil for an app that can
    ///   only offer activities.
    package init(agent: Agent, bundleIdentifier: String?, streamOpener: StreamOpener? = nil) {
        self.agent = agent
        self.bundleIdentifier = bundleIdentifier
        self.streamOpener = streamOpener
        if agent.configuration.servesLocalSocket { side.streamPath = agent.configuration.socketPath }
    }

    package func attach(_ center: ActivityCenter) {
        side.center = center
        Task { [self] in
            let client = await agent.connectInProcess { [weak self] message in
                // An app that hangs in its save never answers.
                if case .save = message, self?.holdsSaves == true { return }
                self?.side.received(message)
            }
            client.send(.call(request: 1, .hello(version: LocalMessage.version, role: .app, bundleIdentifier: bundleIdentifier)))
            let (closed, waiters) = state.withLock { state in
                state.client = client
                defer { state.connectWaiters = [] }
                return (state.closed, state.connectWaiters)
            }
            if closed {
                client.close()
            } else {
                side.link = client
                // What the app did before the link was up is announced now.
                side.center?.reannounce()
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Returns once the link to the agent is up (or was closed first).
    package func connected() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.client != nil || state.closed { return true }
                state.connectWaiters.append(waiter)
                return false
            }
            if ready { waiter.resume() }
        }
    }

    /// Ends the link, as an app that quits or crashes ends its socket: the agent withdraws
    /// its activities, and nothing more reaches it.
    package func close() {
        let client = state.withLock { state in
            state.closed = true
            return state.client
        }
        client?.close()
    }

    /// Whether the app leaves save requests unanswered, as an app stuck in its save would.
    package var holdsSaves: Bool {
        get { state.withLock { $0.holdsSaves } }
        set { state.withLock { $0.holdsSaves = newValue } }
    }

    /// Returns once the app has handled every message the agent sent it so far.
    package func drained() async {
        await side.drained()
    }

    package func send(_ event: AppEvent) async {
        side.send(event)
    }

    package func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        if let streamOpener { return try await streamOpener(continuation) }
        // Streams go through the agent's socket, as a separate app's would.
        guard agent.configuration.servesLocalSocket else {
            throw .connectionUnavailable("the agent serves no local socket, and continuation streams go through it")
        }
        return try await SocketStreams.open(path: agent.configuration.socketPath, continuation: continuation.continuationID)
    }
}
