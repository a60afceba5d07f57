import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

/// The program: `handoff continue` in its plain forms goes straight to the agent
/// (`QuickContinue`); everything else through the argument parser.
@main
enum HandoffMain {
    static func main() async {
        if let quick = QuickContinue(arguments: Array(CommandLine.arguments.dropFirst())) { quick.run() }
        await HandoffCommand.main()
    }
}

struct HandoffCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "handoff",
        abstract: "See and continue the activities of your other devices, and manage this device's Handoff agent.",
        version: handoffCLIVersion,
        subcommands: [
            Status.self, Devices.self, List.self, Continue.self, Watch.self, Publish.self, Apps.self, TeamCommand.self, AccountCommand.self,
            DeviceCommand.self, Join.self, Probe.self, Doctor.self, BrowserCommand.self,
        ])
}

let handoffCLIVersion = "0.3.0"

struct Connection: ParsableArguments {
    @Option(help: ArgumentHelp("The agent's socket (default $HANDOFF_SOCKET, else $XDG_RUNTIME_DIR/handoff/agent.sock).", valueName: "PATH"))
    var socket: String?

    var path: String { socket ?? LocalSocket.defaultPath() }

    /// Connects as the person's tool, or exits with a message and code 3 when no agent runs.
    func connect(onMessage: @escaping @Sendable (LocalMessage) -> Void = { _ in }) throws -> LocalClient {
        do {
            return try LocalClient(path: path, role: .control, onMessage: onMessage)
        } catch {
            fail(error)
        }
    }
}

struct Output: ParsableArguments {
    @Flag(help: "Print JSON instead of text.")
    var json = false
}

/// Calls the agent; a refusal ends the program with its exit code.
func call(_ client: LocalClient, _ call: LocalCall) async -> LocalReply {
    let reply: LocalReply
    do {
        reply = try await client.call(call)
    } catch {
        fail(error)
    }
    if let error = reply.error { fail(error) }
    return reply
}

func age(_ seconds: Double) -> String {
    switch seconds {
    case ..<1: return "now"
    case ..<60: return "\(Int(seconds))s ago"
    case ..<3600: return "\(Int(seconds / 60))m ago"
    default: return "\(Int(seconds / 3600))h ago"
    }
}

/// Lays out rows in columns.
func table(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
    for row in all {
        print(row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "This device, its account, and what the agent is doing.")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        let client = try connection.connect()
        guard let status = await call(client, .status).status else { fail(LocalError(.failed, "the agent sent no status")) }
        if output.json { return printJSON(status) }
        print("device:     \(status.device.name) (\(status.device.id.uuidString))")
        print("account:    \(status.account.map { "\($0), \(status.members) device\(status.members == 1 ? "" : "s")" } ?? status.removed.map { "none: " + removedText($0) } ?? "none yet: 'handoff account create --name NAME', or join one")")
        print("nearby:     \(status.nearby) device\(status.nearby == 1 ? "" : "s")")
        print("links:      port \(status.linkPort)")
        print("interfaces: \(status.interfaces.isEmpty ? "none (no multicast)" : status.interfaces.joined(separator: ", "))")
        if !status.staticPeers.isEmpty { print("peers:      \(status.staticPeers.joined(separator: ", "))") }
        print("apps:       \(status.apps) installed")
        if let counters = status.discovery {
            print("beacons:    \(counters.accepted) accepted, \(counters.unopened) not for this account, \(counters.replayed) replayed, \(counters.outsideWindow) outside the time window")
        }
        if let current = status.currentActivity {
            print("offering:   \(current.title ?? current.activityType) (\(current.activityType))")
        }
        print("agent:      handoffd \(status.version), socket \(client.path)")
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "devices", abstract: "The devices of this device's account.")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        let client = try connection.connect()
        let devices = await call(client, .devices).devices ?? []
        if output.json { return printJSON(devices) }
        if devices.isEmpty {
            if let removed = await call(client, .status).status?.removed { return print("This device has no account: " + removedText(removed) + ".") }
            return print("No account yet: 'handoff account create --name NAME' on your first device.")
        }
        table(
            ["NAME", "STATE", "ADDRESS", "FINGERPRINT"],
            devices.map { device in
                [
                    device.name + (device.isThisDevice ? " (this device)" : ""),
                    device.isThisDevice ? "-" : device.isNearby ? "nearby, \(age(device.lastHeard ?? 0))" : "not seen",
                    device.address ?? "-", String((device.fingerprint ?? "-").prefix(16)),
                ]
            })
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The activities your other devices offer now.")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        let client = try connection.connect()
        let activities = await call(client, .nearby).activities ?? []
        if output.json { return printJSON(activities) }
        if activities.isEmpty { return print("No activity is offered nearby.") }
        table(
            ["DEVICE", "APP", "TITLE", "AGE", "ID"],
            activities.map { offer in
                [
                    offer.deviceName, offer.handler ?? "(none here)", offer.activity.title ?? offer.activity.activityType, age(offer.age),
                    offer.activity.id.uuidString,
                ]
            })
    }
}

struct Continue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "continue", abstract: "Continue an activity from another device here.")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Argument(help: "The activity's id, as 'handoff list' shows it.") var id: String?
    @Flag(help: "Continue the most recent activity offered nearby.") var latest = false

    func validate() throws {
        if id == nil && !latest { throw ValidationError("name an activity's id, or give --latest") }
        if id != nil && latest { throw ValidationError("give an id or --latest, not both") }
        if let id, UUID(uuidString: id) == nil { throw ValidationError("'\(id)' is not an activity id (a UUID, as 'handoff list' shows it)") }
    }

    func run() async throws {
        let client = try connection.connect()
        ContinueReport.print(await call(client, .continue(activity: id.flatMap(UUID.init(uuidString:)))), json: output.json)
    }
}

/// What `status` and `devices` say of a device removed from its account.
func removedText(_ removed: LocalRemoval) -> String {
    let when = removed.at.formatted(date: .abbreviated, time: .shortened)
    return "it was removed from '\(removed.account)' by '\(removed.by)' (\(when)); to join again, make a code on a member with 'handoff device invite', then 'handoff join CODE' here"
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "watch", abstract: "Show activities as they appear nearby, until interrupted.")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Flag(help: "Also show a desktop notification for each activity, whose Continue button continues it here (needs a desktop session).")
    var notify = false

    func run() async throws {
        let json = output.json
        let notifications = notify ? await Notifications.start(socket: connection.path) : nil
        let (events, sink) = AsyncStream<LocalEvent>.makeStream()
        let client = try connection.connect { message in
            if case .event(let event) = message { sink.yield(event) }
        }
        let current = await call(client, .watch).activities ?? []
        // What each device offered last, to say what went away when it goes.
        var shown: [UUID: LocalNearbyActivity] = [:]
        for offer in current { shown[offer.device] = offer }
        for offer in current {
            if json {
                printJSON(LocalEvent(change: .appeared, device: offer.device, deviceName: offer.deviceName, activity: offer))
            } else {
                print("offered  \(offer.deviceName): \(offer.activity.title ?? offer.activity.activityType)  [\(offer.handler ?? "no app here")]  \(offer.activity.id.uuidString)")
            }
        }
        // What is offered already reaches a pipe at once, not at the first change.
        fflush(nil)
        for offer in current { await notifications?.show(offer) }
        for await event in events {
            if let offer = event.activity {
                await notifications?.show(offer)
            } else {
                await notifications?.gone(event.device)
            }
            let before = shown[event.device]
            shown[event.device] = event.activity
            if json {
                printJSON(event)
            } else if let offer = event.activity {
                print("\(event.change == .changed ? "changed" : "offered")  \(event.deviceName): \(offer.activity.title ?? offer.activity.activityType)  [\(offer.handler ?? "no app here")]  \(offer.activity.id.uuidString)")
            } else if let before {
                // Which activity went away, as it was shown.
                print("gone     \(event.deviceName): \(before.activity.title ?? before.activity.activityType)  [\(before.handler ?? "no app here")]  \(before.activity.id.uuidString)")
            } else {
                print("gone     \(event.deviceName)")
            }
            fflush(nil)
        }
    }
}

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apps",
        abstract: "The apps installed for Handoff on this device, and signing them.",
        subcommands: [ListApps.self, Install.self, Remove.self, Sign.self, Verify.self], defaultSubcommand: ListApps.self)

    struct ListApps: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the installed apps.")
        @OptionGroup var connection: Connection
        @OptionGroup var output: Output

        func run() async throws {
            let client = try connection.connect()
            let apps = await call(client, .apps).apps ?? []
            if output.json { return printJSON(apps) }
            if apps.isEmpty { return print("No app is installed; 'handoff apps install DIR' installs one.") }
            table(
                ["APP", "TEAM", "SIGNED", "RUNNING", "ACTIVITY TYPES"],
                apps.map {
                    [$0.bundleIdentifier, $0.teamIdentifier ?? "-", $0.signedBy == nil ? "no" : "yes", "\($0.running)", $0.activityTypes.joined(separator: ", ")]
                })
        }
    }

    struct Install: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "install", abstract: "Install an app: a directory with Info.plist, its entitlements and the executable.")
        @OptionGroup var connection: Connection
        @OptionGroup var output: Output
        @Argument(help: "The app's directory.") var directory: String

        func run() async throws {
            let client = try connection.connect()
            let absolute = URL(fileURLWithPath: directory, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).standardizedFileURL.path
            let reply = await call(client, .installApp(directory: absolute))
            for warning in reply.warnings ?? [] { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
            guard let app = reply.app else { return }
            if output.json { return printJSON(app) }
            let signed = app.signedBy.map { "signed by team \($0)" } ?? "not signed"
            print("Installed \(app.bundleIdentifier) (team \(app.teamIdentifier ?? "none"), \(signed)): \(app.activityTypes.joined(separator: ", "))")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an installed app.")
        @OptionGroup var connection: Connection
        @Argument(help: "The app's bundle identifier.") var bundleIdentifier: String

        func run() async throws {
            let client = try connection.connect()
            _ = await call(client, .removeApp(bundleIdentifier: bundleIdentifier))
            print("Removed \(bundleIdentifier).")
        }
    }
}

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "account", abstract: "This device's account.", subcommands: [Create.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "create", abstract: "Make a new account with this device as its first member.")
        @OptionGroup var connection: Connection
        @Option(help: "The account's name.") var name: String

        func run() async throws {
            let client = try connection.connect()
            _ = await call(client, .createAccount(name: name))
            print("Made the account '\(name)'. Add your other devices with 'handoff device invite'.")
        }
    }
}

struct Probe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Try a link to another device: is its port open, and does it accept this device?")
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Argument(help: ArgumentHelp("The other device's link address.", valueName: "HOST:PORT")) var address: String

    func run() async throws {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (1...65_535).contains(port) else {
            throw ValidationError("'\(address)' is not HOST:PORT")
        }
        let host = String(address[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let client = try connection.connect()
        guard let probe = await call(client, .probe(host: host, port: port)).probe else { return }
        if output.json { return printJSON(probe) }
        print(probe.message)
        if !probe.member { throw ExitCode(probe.reachable ? Exit.notAllowed : Exit.notFound) }
    }
}

/// The desktop notifications of `handoff watch --notify` (`NearbyNotifications`, as the
/// agent shows them); "Continue" continues the activity here through the agent.
struct Notifications {
    let nearby: NearbyNotifications
    let socket: String

    static func start(socket: String) async -> Notifications? {
        do {
            return Notifications(nearby: NearbyNotifications(notifier: try await DesktopNotifier.connect()), socket: socket)
        } catch {
            FileHandle.standardError.write(Data("handoff: no desktop notifications: \(error); watching goes on\n".utf8))
            return nil
        }
    }

    func show(_ offer: LocalNearbyActivity) async {
        let activity = offer.activity.id
        let socket = self.socket
        do {
            try await nearby.show(
                device: offer.device, deviceName: offer.deviceName, title: offer.activity.title ?? offer.activity.activityType, handler: offer.handler
            ) {
                Task {
                    guard let client = try? await LocalClient.connect(path: socket, role: .control) else { return }
                    defer { client.close() }
                    _ = try? await client.call(.continue(activity: activity))
                }
            }
        } catch {
            FileHandle.standardError.write(Data("handoff: a notification could not be shown: \(error)\n".utf8))
        }
    }

    func gone(_ device: UUID) async {
        await nearby.gone(device: device)
    }
}
