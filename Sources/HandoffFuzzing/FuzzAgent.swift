import Foundation
import HandoffAgent
import HandoffLocalAPI
import HandoffTesting
import HandoffWire
import Logging
import Synchronization

/// The agent the `agent-local-messages` target serves decoded messages to: the one `handoffd`
/// runs, in this process, on an in-memory network (no sockets, no multicast) that faults on
/// what a socket network would trap on, launching no app and fetching no web site, with its
/// state in a folder of its own that is removed at exit.
final class FuzzAgent: Sendable {
    static let shared = FuzzAgent()

    let agent: Agent
    private let folder: URL

    private init() {
        folder = Self.folder(of: getpid())
        try? FileManager.default.removeItem(at: folder)
        try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var logger = Logger(label: "handoff.fuzz")
        logger.logLevel = .critical
        let configuration = AgentConfiguration(
            stateDirectory: folder, socketPath: folder.appendingPathComponent("agent.sock").path, name: "fuzz",
            listen: HostPort(host: "127.0.0.1", port: 0), interfaces: [], saveDeadline: .milliseconds(200), fetchDeadline: .milliseconds(400),
            launchDeadline: .milliseconds(200), servesLocalSocket: false, serviceDiscoveryPort: nil)
        do {
            agent = try Agent(
                configuration: configuration, logger: logger, network: CheckedNetwork(), launcher: NoLaunches(), siteAssociations: NoSiteAssociations())
        } catch {
            preconditionFailure("the fuzz target's agent cannot be made: \(error)")
        }
        let agent = agent
        Self.wait {
            do {
                try await agent.start()
            } catch {
                // Else every session would close at once, and the target test nothing.
                preconditionFailure("the fuzz target's agent cannot start: \(error)")
            }
        }
        atexit { try? FileManager.default.removeItem(at: FuzzAgent.folder(of: getpid())) }
    }

    private static func folder(of process: pid_t) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("handoff-fuzz-agent-\(process)")
    }

    /// Serves `messages` as one client's session (after its `hello` as `role`), and returns
    /// once the agent answered a last call: everything before it was handled.
    func serve(_ messages: [LocalMessage], role: LocalRole) {
        let agent = agent
        Self.wait {
            let (answered, answer) = AsyncStream<Void>.makeStream()
            let client = await agent.connectInProcess { message in
                if case .reply(request: UInt64.max, _) = message { answer.yield() }
            } onClose: {
                answer.finish()
            }
            client.send(.call(request: 1, .hello(version: LocalMessage.version, role: role, bundleIdentifier: nil)))
            for message in messages { client.send(message) }
            client.send(.call(request: UInt64.max, .status))
            for await _ in answered { break }
            client.close()
        }
    }

    /// Runs `work` to its end from a thread outside Swift's concurrency (the fuzzer's, or the
    /// thread a test gives the fuzz run).
    private static func wait(_ work: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task {
            await work()
            done.signal()
        }
        done.wait()
    }

    /// What reaches outside this process is left out: installing an app copies a folder named
    /// by the message (and a fuzzer must not read the machine's files).
    static func reachesOutside(_ message: LocalMessage) -> Bool {
        if case .call(_, .installApp) = message { return true }
        return false
    }
}

/// A launcher that starts nothing: a continuation or web page the fuzzer asks for fails.
private struct NoLaunches: AppLauncher {
    func launch(_ launch: AppLaunch) async throws(AgentError) -> any LaunchedApp {
        throw AgentError("the fuzz target starts no app")
    }

    func openWebPage(_ url: URL, browserCommand: [String]) async throws(AgentError) {
        throw AgentError("the fuzz target opens no web page")
    }
}

/// The in-memory network, refusing as a fault what the socket network cannot take: a port
/// outside 0 to 65535, on which NIO's address code traps. The agent must never pass one.
private struct CheckedNetwork: AgentNetwork {
    let network = InMemoryNetwork()
    var beaconBus: BeaconBus? { network.beaconBus }

    private func check(_ port: Int, _ what: String) {
        precondition((0...65_535).contains(port), "the agent passed port \(port) to its network to \(what): a socket network traps on it")
    }

    func listen(
        identity: DeviceIdentity, trust: LinkTrust, host: String, port: Int, whenAccepted: @escaping @Sendable (UInt64) -> Void,
        acceptStream: @escaping @Sendable (LinkStreamTarget, LinkStream, LinkPeer) async -> ContinuationFailure?,
        answer: @escaping @Sendable (Frame, LinkPeer) async -> Frame?
    ) async throws -> any LinkListening {
        check(port, "listen")
        return try await network.listen(
            identity: identity, trust: trust, host: host, port: port, whenAccepted: whenAccepted, acceptStream: acceptStream, answer: answer)
    }

    func open(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration, idle: Duration?, first: LinkFirstFetch?
    ) async throws(ContinuationFailure) -> any OutgoingLink {
        check(port, "open a link")
        return try await network.open(host: host, port: port, identity: identity, pins: pins, deadline: deadline, idle: idle, first: first)
    }

    func converse(
        _ first: Frame, host: String, port: Int, identity: DeviceIdentity, accepting accepts: @escaping @Sendable (String) -> Bool,
        next: @escaping @Sendable (Frame) -> Frame?
    ) async throws -> [Frame] {
        check(port, "join")
        return try await network.converse(first, host: host, port: port, identity: identity, accepting: accepts, next: next)
    }
}
