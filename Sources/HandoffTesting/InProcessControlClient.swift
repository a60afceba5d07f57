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
        var nextRequest: UInt64 = 2
        var pending: [UInt64: CheckedContinuation<LocalReply, Never>] = [:]
        var closed = false
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
        _ = await control.call(.hello(version: LocalMessage.version, role: .control, bundleIdentifier: nil), request: 1)
        return control
    }

    /// Calls the agent and returns its reply; a closed client gets a failure.
    package func call(_ call: LocalCall) async -> LocalReply {
        let request = state.withLock { state in
            defer { state.nextRequest += 1 }
            return state.nextRequest
        }
        return await self.call(call, request: request)
    }

    private func call(_ call: LocalCall, request: UInt64) async -> LocalReply {
        await withCheckedContinuation { (waiter: CheckedContinuation<LocalReply, Never>) in
            let open = state.withLock { state -> Bool in
                guard !state.closed else { return false }
                state.pending[request] = waiter
                return true
            }
            guard open else {
                waiter.resume(returning: .failure(LocalError(.failed, "the connection to the agent is closed")))
                return
            }
            client.send(.call(request: request, call))
        }
    }

    private func received(_ message: LocalMessage) {
        switch message {
        case .reply(let request, let reply):
            state.withLock { $0.pending.removeValue(forKey: request) }?.resume(returning: reply)
        case .event(let event):
            eventSink.yield(event)
        default:
            break
        }
    }

    /// Ends the session; calls waiting for a reply get a failure.
    package func close() {
        let pending = state.withLock { state in
            state.closed = true
            defer { state.pending = [:] }
            return Array(state.pending.values)
        }
        client.close()
        eventSink.finish()
        for waiter in pending { waiter.resume(returning: .failure(LocalError(.failed, "the connection to the agent closed"))) }
    }
}
