import Foundation
import HandoffLocalAPI
import Logging
import NIOCore
import NIOPosix
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent
import HandoffProcess

/// An executable built beside the test bundle (the package's products).
func builtExecutable(_ name: String) -> URL? {
    var folder = Bundle.main.bundleURL
    for _ in 0..<3 {
        let candidate = folder.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        folder.deleteLastPathComponent()
    }
    return nil
}

/// An unprivileged user of this machine named `name` (no home, no shell), made if it is
/// missing: a compositor that refuses root runs as one, and so does a test's second local user.
func localUser(_ name: String) -> Result<(uid: uid_t, gid: gid_t), LocalError> {
    if getpwnam(name) == nil {
        guard getuid() == 0 else { return .failure(LocalError(.failed, "the user '\(name)' is missing, and only root can make it")) }
        do {
            try shell(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name])
        } catch {
            return .failure(LocalError(.failed, "cannot make the user '\(name)': \(error)"))
        }
    }
    guard let entry = getpwnam(name) else { return .failure(LocalError(.failed, "the user '\(name)' is missing")) }
    return .success((entry.pointee.pw_uid, entry.pointee.pw_gid))
}

/// Runs blocking work (a child process, a pipe read to its end) on a thread of its own: the
/// few threads async code shares stay free for the agents under test meanwhile.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// One device of a test: an agent in this process with its own state, socket and ports.
struct TestDevice: Sendable {
    let name: String
    /// The agent, when it runs in this process (nil for a handoffd process).
    let agent: Agent?
    let socket: String
    let state: URL

    /// A client acting for the person (as the CLI does).
    func control() async throws -> LocalClient {
        try await LocalClient.connect(path: socket, role: .control)
    }

    /// Calls the agent and fails the test on a refusal.
    @discardableResult
    func call(_ call: LocalCall) async throws -> LocalReply {
        let client = try await control()
        defer { client.close() }
        let reply = try await client.call(call)
        if let error = reply.error { throw error }
        return reply
    }

    /// Calls the agent and returns its reply, refusals included.
    func attempt(_ call: LocalCall) async throws -> LocalReply {
        let client = try await control()
        defer { client.close() }
        return try await client.call(call)
    }

    func nearby() async throws -> [LocalNearbyActivity] {
        try await call(.nearby).activities ?? []
    }

    /// The MapViewer app's event log on this device (the app writes it in its data folder).
    var mapViewerEvents: [String] {
        let file = state.appendingPathComponent("data/com.example.handoff.MapViewer/events.log")
        return ((try? String(contentsOf: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}

extension TestDevice {
    /// A raw app on this device offers `activity`, answering saves as `behaviour` says;
    /// returns once `viewer` lists it.
    func offer(_ activity: ActivityAnnouncement, answering behaviour: RawApp.SaveBehaviour, seenBy viewer: TestDevice) async throws -> RawApp {
        let app = try await RawApp(socket: socket, behaviour: behaviour)
        try app.client.send(.becameCurrent(activity))
        let listed = await eventually { (try? await viewer.nearby().first?.activity.id) == activity.id }
        try #require(listed, "\(viewer.name) never listed \(name)'s activity")
        return app
    }
}

/// Several agents on loopback, each in its own folder, with multicast on `lo` only and a
/// discovery port of their own so that tests running at once never mix.
final class AgentHarness: Sendable {
    let root: URL
    let discoveryPort: Int
    private let devices = Mutex<[TestDevice]>([])
    private let processes = Mutex<[ChildProcess]>([])
    /// The network the agents share in memory, or nil for real sockets.
    let network: InMemoryNetwork?

    init(inMemory: Bool = false) throws {
        // The suite starts hundreds of agents at once on a few cores: a hello may wait behind
        // all their start-up work for longer than the 15 s a client gives an agent by default
        // (seen as "no answer within 15 seconds" at the suite's start). Its apps and command
        // lines inherit it.
        setenv("HANDOFF_HELLO_TIMEOUT", "90", 0)
        network = inMemory ? InMemoryNetwork() : nil
        // Socket paths are limited to about 100 bytes: keep the folder short.
        root = URL(fileURLWithPath: "/tmp/ho-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        // Below the ephemeral ports (32768 and up), which other sockets take at random.
        discoveryPort = Int.random(in: 20_000..<32_000)
    }

    /// Agents run in development mode: the examples and the tests' apps are not signed (their
    /// teams are names such as EXAMPLETEAM, not keys). SigningTests run agents without it.
    func configuration(_ name: String) -> AgentConfiguration {
        var configuration = AgentConfiguration(
            stateDirectory: root.appendingPathComponent(name, isDirectory: true), socketPath: root.appendingPathComponent("\(name).sock").path,
            name: name, listen: HostPort(host: "127.0.0.1", port: 0), interfaces: ["lo"], discoveryPort: discoveryPort,
            refreshInterval: .seconds(2), expiry: .seconds(8), saveDeadline: .seconds(2), fetchDeadline: .seconds(4), launchDeadline: .seconds(20),
            // DNS-SD on a port of this harness's own, so that tests running at once stay apart.
            serviceDiscoveryPort: discoveryPort + 1)
        configuration.allowsUnsignedApps = true
        return configuration
    }

    /// Starts an agent named `name`, with `adjust` applied to its configuration.
    /// `eventLoopGroup`: the agent's own event loops, as a handoffd process has, rather than the
    /// process-wide ones every test's agents share.
    /// `network`: in place of the harness's own (a test's wrapper around it).
    func start(
        _ name: String, launcher: (any AppLauncher)? = nil, eventLoopGroup: (any EventLoopGroup)? = nil, network: (any AgentNetwork)? = nil,
        _ adjust: (inout AgentConfiguration) -> Void = { _ in }
    ) async throws -> TestDevice {
        var configuration = configuration(name)
        adjust(&configuration)
        var logger = Logger(label: "handoffd")
        logger.logLevel = .error
        let agent = try Agent(
            configuration: configuration, logger: logger, eventLoopGroup: eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton, network: network ?? self.network,
            launcher: launcher ?? ProcessLauncher())
        try await agent.start()
        let device = TestDevice(name: name, agent: agent, socket: configuration.socketPath, state: configuration.stateDirectory)
        devices.withLock { $0.append(device) }
        return device
    }

    /// Puts `devices` in one account: the first makes it, the others join with tokens.
    func pair(_ devices: [TestDevice], account: String = "home") async throws {
        try await devices[0].call(.createAccount(name: account))
        for device in devices.dropFirst() {
            let invitation = try #require(try await devices[0].call(.invite(token: true, host: nil, lifetime: 60)).invitation)
            try await device.call(.join(code: invitation.code))
            try await device.call(.awaitJoinResult)
        }
        // Everyone hears everyone: the joins announce at once.
        for device in devices {
            let others = devices.count - 1
            let heard = try await eventually { (try await device.call(.devices).devices ?? []).filter { $0.isNearby && !$0.isThisDevice }.count == others }
            try #require(heard, "\(device.name) did not hear the account's other devices")
        }
    }

    /// Installs the MapViewer example (its manifest and the built executable) on `device`.
    func installMapViewer(on device: TestDevice) async throws {
        try await installExample("MapViewer", on: device)
    }

    /// Installs the example `name` (Examples/NAME/App's manifest and the built executable, or
    /// `executable` in its place) on `device`.
    func installExample(_ name: String, on device: TestDevice, executable: URL? = nil) async throws {
        let binary = try #require(executable ?? builtExecutable(name), "\(name) was not built next to the tests")
        let folder = root.appendingPathComponent("\(name)-app-\(device.name)", isDirectory: true)
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Examples/\(name)/App").standardizedFileURL
        for file in ["Info.plist", "\(name).entitlements"] {
            try FileManager.default.copyItem(at: sources.appendingPathComponent(file), to: folder.appendingPathComponent(file))
        }
        try FileManager.default.copyItem(at: binary, to: folder.appendingPathComponent(name))
        try await device.call(.installApp(directory: folder.path))
    }

    /// Starts the installed MapViewer on `device` as a person would, with commands on its input.
    func runMapViewer(on device: TestDevice) throws -> MapViewerProcess {
        try runExample("MapViewer", bundle: "com.example.handoff.MapViewer", on: device)
    }

    /// Starts the installed example `name` on `device` as a person would, with commands on its input.
    func runExample(_ name: String, bundle: String, on device: TestDevice) throws -> MapViewerProcess {
        let process = ChildProcess()
        process.executableURL = device.state.appendingPathComponent("apps/\(bundle)/\(name)")
        let data = root.appendingPathComponent("\(name)-data-\(device.name)", isDirectory: true)
        var environment = ProcessInfo.processInfo.environment
        environment["HANDOFF_SOCKET"] = device.socket
        environment["HANDOFF_APP_DATA"] = data.path
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        processes.withLock { $0.append(process) }
        return MapViewerProcess(process: process, input: input, events: data.appendingPathComponent("events.log"))
    }

    /// Stops every agent, ends the apps they started, and removes the folders.
    func stop() async {
        for device in devices.withLock({ $0 }) { await device.agent?.stop() }
        for process in processes.withLock({ $0 }) where process.isRunning { process.terminate() }
        // Apps the agents started find themselves alone; end them too.
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap(Int32.init) {
            guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root.path) else { continue }
            kill(pid, SIGTERM)
        }
        try? FileManager.default.removeItem(at: root)
    }
}

/// A MapViewer started by a test, driven through its standard input.
struct MapViewerProcess: Sendable {
    let process: ChildProcess
    let input: Pipe
    let events: URL

    func send(_ command: String) {
        input.fileHandleForWriting.write(Data((command + "\n").utf8))
    }

    var log: [String] {
        ((try? String(contentsOf: events, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}

/// A raw app on the local socket, for failures no well-behaved app causes: it announces an
/// activity and answers saves as the test says.
final class RawApp: Sendable {
    enum SaveBehaviour: Sendable {
        case answer(ActivityRecord)
        case neverAnswer
        case quit
    }

    let client: LocalClient
    private let inbox: Inbox

    private final class Inbox: Sendable {
        let messages = Mutex<[LocalMessage]>([])
        let client = Mutex<LocalClient?>(nil)
    }

    init(socket: String, behaviour: SaveBehaviour) async throws {
        let inbox = Inbox()
        let client = try await LocalClient.connect(path: socket, role: .app) { message in
            inbox.messages.withLock { $0.append(message) }
            guard case .save(let request, _) = message, let client = inbox.client.withLock({ $0 }) else { return }
            switch behaviour {
            case .answer(let record): try? client.send(.saved(request: request, record))
            case .neverAnswer: break
            case .quit: client.close()
            }
        }
        inbox.client.withLock { $0 = client }
        self.client = client
        self.inbox = inbox
    }

    var messages: [LocalMessage] { inbox.messages.withLock { $0 } }
}

/// A command started by a test, whose output is gathered on a thread of its own (so that no
/// async thread waits on a pipe) and whose input the test types into.
final class RunningCommand: Sendable {
    private let process: ChildProcess
    private let input: Pipe
    private let gathered = Buffer()

    private final class Buffer: Sendable {
        let text = Mutex("")
        /// The output reached its end: the process and any it left closed it.
        let ended = Mutex(false)
    }

    init(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil) throws {
        process = ChildProcess()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let reader = output.fileHandleForReading
        Thread.detachNewThread { [gathered] in
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                gathered.text.withLock { $0 += String(decoding: data, as: UTF8.self) }
            }
            gathered.ended.withLock { $0 = true }
        }
    }

    var output: String { gathered.text.withLock { $0 } }
    var isRunning: Bool { process.isRunning }
    /// It ended and all it printed has been read (`isRunning` turns false before that).
    var isFinished: Bool { !process.isRunning && gathered.ended.withLock { $0 } }
    var status: Int32 { process.terminationStatus }

    func type(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Ends its standard input, as the end of a file or a pipe does.
    func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}
