import Foundation
import HandoffDesktop
import HandoffLocalAPI
import HandoffProcess
import HandoffSession

/// Starts a desktop application on files or addresses, as the desktop does: over D-Bus for an
/// entry that is `DBusActivatable` (`org.freedesktop.Application.Open`, the bus starting it if
/// it is not running), else by its `Exec`, expanded without a shell, so no file name can become
/// a command.
enum Launcher {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// How the application was reached.
    enum Started: Equatable {
        /// Its `Exec` runs as this process.
        case process(Int32)
        /// Its bus name was asked to open them.
        case dbus(String)
    }

    /// Opens `urls` with `entry`; `folder` is the started program's working folder.
    static func open(_ urls: [URL], with entry: DesktopEntry, environment: [String: String], bus: DBusConnection?, folder: URL?) async throws(Failure) -> Started {
        if entry.dbusActivatable, let bus, let name = busName(of: entry) {
            let open = DBusMessage(
                kind: .methodCall, path: objectPath(of: name), interface: "org.freedesktop.Application", member: "Open", destination: name,
                body: [.strings(urls.map(\.absoluteString)), .emptyDictionary])
            do {
                _ = try await bus.call(open, timeout: .seconds(20))
                return .dbus(name)
            } catch {
                // An entry with an Exec too is started by it, as the specification allows.
                guard entry.exec != nil else { throw Failure("\(entry.id) did not open it over D-Bus: \(error)") }
            }
        }
        let argv: [String]
        do throws(KeyFile.ParseError) {
            argv = try entry.command(opening: urls)
        } catch {
            throw Failure("\(entry.id) cannot open it: \(error)")
        }
        guard let program = find(argv[0], path: environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin") else {
            throw Failure("\(entry.id) runs '\(argv[0])', which is not installed here")
        }
        // Started without this service's descriptors (its sockets to the agent, the bus and the
        // display stay its own: an app must not keep them open after the service ends).
        let process = ChildProcess()
        process.executableURL = program
        process.arguments = Array(argv.dropFirst())
        process.environment = environment
        if let folder { process.currentDirectoryURL = folder }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw Failure("could not start \(entry.id): \(error)")
        }
        return .process(process.processIdentifier)
    }

    /// The bus name of a D-Bus activatable entry: its ID without `.desktop`, when that is a
    /// valid well-known name (two or more elements).
    static func busName(of entry: DesktopEntry) -> String? {
        let name = String(entry.id.dropLast(".desktop".count))
        let elements = name.split(separator: ".", omittingEmptySubsequences: false)
        guard entry.id.hasSuffix(".desktop"), name.utf8.count <= 255, elements.count >= 2 else { return nil }
        let valid = elements.allSatisfy { element in
            guard let first = element.first, !first.isNumber else { return false }
            return element.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
        }
        return valid ? name : nil
    }

    /// The object path an activatable application serves: its name with `.` as `/`, `-` as `_`.
    static func objectPath(of name: String) -> String {
        "/" + name.replacingOccurrences(of: ".", with: "/").replacingOccurrences(of: "-", with: "_")
    }

    /// The program `name` names: itself when it is a path, else the first in `path` that can run.
    static func find(_ name: String, path: String) -> URL? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? URL(fileURLWithPath: name) : nil }
        for folder in path.split(separator: ":") where folder.hasPrefix("/") {
            let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}

extension ClipboardService {
    /// Tells the person something went wrong with what they asked for on this device: in the log,
    /// and in a desktop notification when there is a session bus.
    func tell(_ summary: String, _ body: String, environment: [String: String]) {
        log("\(summary): \(body)")
        guard let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty else { return }
        // Shown when the bus answers; nothing waits for it.
        Task { [self] in
            do {
                let notifier = try await DesktopNotifier.connect(environment: ["DBUS_SESSION_BUS_ADDRESS": address])
                defer { notifier.close() }
                _ = try await notifier.inform(summary: summary, body: body)
            } catch {
                log("no desktop notification: \(error)")
            }
        }
    }
}

extension ClipboardService {
    /// Tells the agent what `client`'s system activities offer now, or why not, for `doctor`:
    /// one line of at most 300 characters (a title's line breaks become spaces).
    func report(_ status: String, on client: LocalClient) {
        var line = String(String.UnicodeScalarView(status.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : $0 }))
        if line.count > 300 { line = String(line.prefix(299)) + "…" }
        guard !line.isEmpty else { return }
        // Said when the agent takes it; nothing waits for it.
        Task { [self] in
            if let error = await Self.call(client, .systemActivityStatus(status: line)).error { log("the agent did not take the status: \(error.message)") }
        }
    }
}
