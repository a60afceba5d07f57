import ArgumentParser
import HandoffCommandLine
import Foundation
import HandoffAgent
import Logging
import ServiceLifecycle

/// handoffd's entry, for the `handoffd` program and the programs' shared binary (handoff-programs).
public enum HandoffDaemonMain {
    public static func main() async { await Handoffd.main() }
}

struct Handoffd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoffd",
        abstract: "The Handoff agent: one per user session. Apps and the 'handoff' command talk to it over a local socket.",
        discussion: withExamples(
            """
            Every option can also be set in the configuration file, one 'key = value' per line with the \
            option's long name as the key (for example 'listen = [::]:47170'); options given here win. \
            The file is $XDG_CONFIG_HOME/handoff/handoffd.conf unless --config names another. The Debian \
            package starts it for every user's session (systemctl --user status handoffd).
            """,
            [
                ("handoffd", "Run the agent for this session, with the state in ~/.local/state/handoff."),
                ("handoffd --name desk --peer 100.64.0.7:47170", "Name this device, and reach a device over a VPN, where multicast does not go."),
            ]),
        version: handoffVersion)

    @Option(help: ArgumentHelp("The configuration file.", valueName: "FILE"))
    var config: String?

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Where the identity, account and apps are kept (default $XDG_STATE_HOME/handoff).", valueName: "DIR"))
    var stateDirectory: String?

    @Option(help: ArgumentHelp("The local socket (default $XDG_RUNTIME_DIR/handoff/agent.sock).", valueName: "PATH"))
    var socket: String?

    @Option(help: "This device's name, as the account's other devices show it.")
    var name: String?

    @Option(help: ArgumentHelp("Where links and static peers' beacons arrive (default [::]:47170, IPv6 and IPv4).", valueName: "HOST:PORT"))
    var listen: String?

    @Option(name: .customLong("interface"), help: ArgumentHelp("An interface to announce on; repeat for several; 'none' for no multicast (default: every multicast interface but loopback).", valueName: "IFACE"))
    var interfaces: [String] = []

    @Option(name: .customLong("peer"), help: ArgumentHelp("A static peer that gets beacons by unicast (VPNs, networks without multicast); repeatable.", valueName: "HOST:PORT"))
    var peers: [String] = []

    @Option(name: .customLong("container"), help: ArgumentHelp("A synced folder, the same ID on every device: file URLs inside it arrive as the other device's own path; repeatable.", valueName: "ID=PATH"))
    var containers: [String] = []

    @Option(name: .customLong("discovery-port"), help: "The UDP port of the multicast group (default 47168).")
    var discoveryPort: String?

    @Option(name: .customLong("dns-sd"), help: ArgumentHelp("The mDNS port DNS-SD publishes and browses _handoff._tcp on, shared with avahi (default 5353); 'off' for none.", valueName: "PORT|off"))
    var dnsSD: String?

    @Option(name: .customLong("name-rotation"), help: ArgumentHelp("The longest time one set of random DNS-SD names is used, such as 15m (default; from 5s to 1h).", valueName: "DURATION"))
    var nameRotation: String?

    @Option(name: .customLong("link-idle"), help: ArgumentHelp("How long a link this device opened stays open unused before it is closed, such as 1h (default; from 1s to 24h).", valueName: "DURATION"))
    var linkIdle: String?

    @Option(name: .customLong("save-deadline"), help: "How long an app has to save an activity, such as 5s.")
    var saveDeadline: String?

    @Option(name: .customLong("fetch-deadline"), help: "How long a continuation waits for the other device, such as 10s.")
    var fetchDeadline: String?

    @Option(name: .customLong("maximum-payload"), help: "The largest encoded userInfo that may travel, in bytes (default 65536).")
    var maximumPayload: String?

    @Option(help: "The command that opens web pages (default xdg-open).")
    var browser: String?

    @Option(name: .customLong("default-browser"), help: "The bundle identifier of an installed browser app that receives web activities itself.")
    var defaultBrowser: String?

    @Option(name: .customLong("association-ca"), help: ArgumentHelp("A certificate authority (PEM) trusted for web sites' association files besides the system's.", valueName: "FILE"))
    var associationCA: String?

    @Option(name: .customLong("association-refresh"), help: ArgumentHelp("How long a web site's association file is trusted before it is fetched again (default 1h).", valueName: "D"))
    var associationRefresh: String?

    @Option(help: ArgumentHelp("Desktop notifications of activities nearby, with a Continue button: on (the default, where there is a desktop session) or off.", valueName: "on|off"))
    var notifications: String?

    @Option(
        name: .customLong("development-mode"),
        help: ArgumentHelp("Development mode: install apps that are not signed too, with a warning: on or off (the default).", valueName: "on|off"))
    var developmentMode: String?

    @Option(help: ArgumentHelp("Whether what is copied here is offered to the account's nearby devices, and what they copy can be pasted here (default on).", valueName: "on|off"))
    var clipboard: String?

    @Option(name: .customLong("clipboard-expiry"), help: ArgumentHelp("How long a copy is offered to the account's other devices, such as 2m (default; from 1s to 1h).", valueName: "DURATION"))
    var clipboardExpiry: String?

    @Option(name: .customLong("clipboard-size-limit"), help: ArgumentHelp("The most one copy may hold and one paste may bring, such as 256MiB (default).", valueName: "SIZE"))
    var clipboardSizeLimit: String?

    @Option(
        name: .customLong("system-activities"),
        help: ArgumentHelp("Which activities of the apps that never link Handoff this device offers and opens: media,documents (the default), either, or off.", valueName: "LIST"))
    var systemActivities: String?

    @Option(name: .customLong("idle-release"), help: "After this long idle, give back free memory and unused code pages, such as 15s (the default), or off.")
    var idleRelease: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning or error.")
    var logLevel: String = "info"

    func run() async throws {
        AllocatorPolicy.keepWorkingMemory()
        // The agent's tasks run on its event loop (docs/agent.md, Performance): one loop, so
        // that a continuation's connections (the caller's, the app's, the link) and its tasks
        // share a thread and hand work to each other without waking another one.
        // HANDOFF_EXECUTOR=swift keeps Swift's own pool of threads instead, for comparison;
        // a number sets how many event loops there are.
        let executor = ProcessInfo.processInfo.environment["HANDOFF_EXECUTOR"]
        if executor != "swift" {
            EventLoopExecutor.takeOver(loops: executor.flatMap { Int($0) }.map { min(max($0, 1), 64) } ?? 1)
        }
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level: '\(logLevel)' is not one of trace, debug, info, notice, warning, error")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "handoffd")

        let configuration: AgentConfiguration
        do {
            configuration = try resolveConfiguration()
        } catch {
            FileHandle.standardError.write(Data("handoffd: \(error)\n".utf8))
            throw ExitCode(2)
        }
        let agent: Agent
        do {
            agent = try Agent(configuration: configuration, logger: logger)
            try await agent.start()
        } catch {
            FileHandle.standardError.write(Data("handoffd: \(error)\n".utf8))
            throw ExitCode(1)
        }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [AgentService(agent: agent)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    private func resolveConfiguration() throws -> AgentConfiguration {
        var flags = AgentSettings()
        flags.stateDirectory = stateDirectory
        flags.socket = socket
        flags.name = name
        flags.listen = listen
        flags.interfaces = interfaces
        flags.peers = peers
        flags.containers = containers
        flags.discoveryPort = discoveryPort
        flags.dnsSD = dnsSD
        flags.nameRotation = nameRotation
        flags.linkIdle = linkIdle
        flags.saveDeadline = saveDeadline
        flags.fetchDeadline = fetchDeadline
        flags.maximumPayload = maximumPayload
        flags.browser = browser
        flags.defaultBrowser = defaultBrowser
        flags.idleRelease = idleRelease
        flags.notifications = notifications
        flags.developmentMode = developmentMode
        flags.clipboard = clipboard
        flags.clipboardExpiry = clipboardExpiry
        flags.clipboardSizeLimit = clipboardSizeLimit
        flags.systemActivities = systemActivities
        flags.associationCA = associationCA
        flags.associationRefresh = associationRefresh
        let fileURL = config.map { URL(fileURLWithPath: $0) } ?? AgentConfiguration.defaultConfigFile()
        var file: ConfigurationFile?
        // A named file must exist; the default one is optional.
        if config != nil || FileManager.default.fileExists(atPath: fileURL.path) {
            file = try ConfigurationFile(contentsOf: fileURL)
        }
        return try AgentConfiguration.resolve(flags: flags, file: file, fileName: fileURL.path)
    }
}

/// The agent as a service of the group: it runs until a graceful shutdown (SIGTERM, SIGINT),
/// then stops, closing links and removing its socket.
struct AgentService: Service {
    let agent: Agent

    func run() async throws {
        try? await gracefulShutdown()
        await agent.stop()
    }
}
