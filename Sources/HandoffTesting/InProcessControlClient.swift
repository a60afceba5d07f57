import Foundation
import HandoffAgent
import HandoffLocalAPI
import Synchronization

/// A control client (what the `handoff` CLI is) of an agent in the same process: calls and
/// their replies over `Agent.connectInProcess`, and the events of `watch`.
package final class InProcessControlClient: Sendable {
    private let client: InProcessClient
    private let state = Mutex(State())
    private let eventSink: AsyncStream<LocalEvent>.Continuation
    /// What `watch` reports, after the call: activities appearing, changing and going.
    package let events: AsyncStream<LocalEvent>

    private struct State {
        /// Calls waiting for their reply.
        var pending = PendingRequests<CheckedContinuation<LocalReply, Never>>()
    }

    private init(client: InProcessClient, events: AsyncStream<LocalEvent>, sink: AsyncStream<LocalEvent>.Continuation) {
        self.client = client
        self.events = events
        self.eventSink = sink
    }

    /// Connects to `agent` and says hello.
    package static func connect(to agent: Agent) async -> InProcessControlClient {
        let (events, sink) = AsyncStream<LocalEvent>.makeStream()
        let box = Mutex<InProcessControlClient?>(nil)
        let client = await agent.connectInProcess(
            onMessage: { message in box.withLock { $0 }?.received(message) },
            onClose: { box.withLock { $0 }?.close() })
        let control = InProcessControlClient(client: client, events: events, sink: sink)
        box.withLock { $0 = control }
        // The first call, so request 1, as on the socket.
        _ = await control.call(.hello(version: LocalMessage.version, role: .control, bundleIdentifier: nil))
        return control
    }

    /// Calls the agent and returns its reply; a closed client gets a failure.
    package func call(_ call: LocalCall) async -> LocalReply {
        await withCheckedContinuation { (waiter: CheckedContinuation<LocalReply, Never>) in
            guard let request = state.withLock({ $0.pending.issue(waiter) }) else {
                waiter.resume(returning: .failure(LocalError(.failed, "the connection to the agent is closed")))
                return
            }
            client.send(.call(request: request, call))
        }
    }

    private func received(_ message: LocalMessage) {
        switch message {
        case .reply(let request, let reply):
            state.withLock { $0.pending.settle(request) }?.resume(returning: reply)
        case .event(let event):
            eventSink.yield(event)
        default:
            break
        }
    }

    /// Ends the session; calls waiting for a reply get a failure.
    package func close() {
        let pending = state.withLock { $0.pending.close() }
        client.close()
        eventSink.finish()
        for waiter in pending { waiter.resume(returning: .failure(LocalError(.failed, "the connection to the agent closed"))) }
    }
}
