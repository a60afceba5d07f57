import Foundation
import Handoff
import HandoffLocalAPI

extension InProcessClient: LocalAPILink {}

/// The link from an app to an agent in the same process, with no socket: the app's
/// `ActivityCenter` speaks the local API to `Agent.connectInProcess`, exactly as a real app
/// does over the socket (`SocketAgentConnection`, whose message handling it shares). For
/// several devices, each an agent, in one test process.
package final class InProcessAgentConnection: AgentConnection {
    private let agent: Agent
    private let bundleIdentifier: String?
    private let side = AppSideOfLocalAPI()

    /// - Parameter bundleIdentifier: the installed app this one is; nil for an app that can
    ///   only offer activities.
    package init(agent: Agent, bundleIdentifier: String?) {
        self.agent = agent
        self.bundleIdentifier = bundleIdentifier
    }

    package func attach(_ center: ActivityCenter) {
        side.center = center
        Task { [side, agent, bundleIdentifier] in
            let client = await agent.connectInProcess { side.received($0) }
            client.send(.call(request: 1, .hello(version: LocalMessage.version, role: .app, bundleIdentifier: bundleIdentifier)))
            side.link = client
            // What the app did before the link was up is announced now.
            side.center?.reannounce()
        }
    }

    package func send(_ event: AppEvent) async {
        side.send(event)
    }

    package func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        throw .connectionUnavailable("continuation streams between devices are not available yet in this release of handoffd")
    }
}
