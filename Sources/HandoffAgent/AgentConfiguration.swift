import Foundation
import HandoffLocalAPI
import NIOSSL

/// How an agent runs: every setting of `handoffd`, from its flags or its configuration file.
public struct AgentConfiguration: Sendable {
    /// Where the device's identity, account and apps are kept.
    package var stateDirectory: URL
    /// The local socket's path.
    package var socketPath: String
    /// This device's name, as the account's other devices show it; nil keeps the saved one
    /// (the host name on first start).
    package var name: String?
    /// Where links (TCP) and beacons from static peers (UDP) are taken, on one port number.
    /// `::` (the default) takes IPv6 and IPv4; on a host without IPv6 it means `0.0.0.0`.
    package var listen: HostPort
    /// Whether a `listen` port another program holds gives way to one the system chooses: so
    /// for the default port, which the agent of every user of a machine tries first (the
    /// package turns the agent on for each); a port the person chose stops the agent instead.
    /// Other devices learn the port from beacons and DNS-SD; a join code then carries it.
    package var listenFallsBack = false
    /// The interfaces beacons are multicast on; nil chooses every interface that is up and
    /// multicast-capable, loopback excepted; empty sends no multicast.
    package var interfaces: [String]?
    /// Devices that get this device's beacons by unicast, at their `listen` addresses.
    package var staticPeers: [HostPort]
    /// The multicast group's port.
    package var discoveryPort: Int
    /// The port DNS-SD's multicast DNS runs on (5353, shared with avahi); nil for no DNS-SD.
    package var serviceDiscoveryPort: Int?
    /// The longest time one set of DNS-SD names is used before new random ones replace it.
    package var nameRotation: Duration
    /// How long a link this device opened stays open with nothing on it (no request, no
    /// stream): then it is closed, and the next continuation opens another (one handshake and
    /// proof). Until then a continuation after quiet needs neither, and the link costs the
    /// accepting side's keepalive probe and its answer every 5 minutes (`LinkTLS`).
    package var linkIdle: Duration = .seconds(3600)
    /// How often the beacon is repeated while an activity is offered, and without one.
    package var refreshInterval: Duration
    package var idleRefreshInterval: Duration
    /// How long a device stays listed without a beacon (longer for one that refreshes less often).
    package var expiry: Duration
    /// How long an app has to save its activity for a continuation (then 4610).
    package var saveDeadline: Duration
    /// How long a continuation waits for the other device (then 4608).
    package var fetchDeadline: Duration
    /// How long a launched app has to connect to the agent.
    package var launchDeadline: Duration
    /// The largest `userInfo`, encoded, that may travel (then 4611).
    package var maximumPayload: Int
    /// The command that opens a web page (the URL is its last argument).
    package var browserCommand: [String]
    /// The installed browser app that receives web activities itself, rather than the page
    /// opening with `browserCommand` (it must list `NSUserActivityTypeBrowsingWeb`).
    package var defaultBrowser: String?
    /// Whether apps and the CLI reach this agent on `socketPath`; an agent whose clients all
    /// run in its own process (`Agent.connectInProcess`) needs no socket.
    package var servesLocalSocket: Bool
    /// After this long with nothing to do, the agent gives back free heap and its mappings of
    /// code it is not running (`handoffd` does after 15 s); nil never. For an agent that is
    /// the whole process: one sharing a process with other code leaves this nil.
    package var idleRelease: Duration?
    /// With `idleRelease` set, how long after starting the agent gives back, once and busy or
    /// not, what starting touched: the code that read the configuration and the state, made or
    /// loaded the identity and opened the sockets is not run again, yet it stayed mapped until
    /// the first idle spell, which an agent kept busy from the start never has.
    package var startupRelease: Duration = .seconds(2)
    /// Synced folders on this device: a file URL inside one travels as the container and a
    /// path, and arrives as the receiver's own path.
    package var containers: [ContainerFolder] = []
    /// Certificate authorities trusted for web sites' association files besides the system's.
    package var associationTrust: [NIOSSLCertificate] = []
    /// How long what a web site's association file says is kept before it is fetched again.
    package var associationRefresh: Duration = .seconds(3600)
    /// The session bus desktop notifications go to (`DBUS_SESSION_BUS_ADDRESS`); nil for none.
    package var desktopBus: String?
    /// Development mode: apps that are not signed are installed too, with a warning. Off by
    /// default; an app whose signature does not hold is refused either way.
    package var allowsUnsignedApps = false
    /// Whether this device offers what is copied on it to the account's devices, and pastes
    /// what they offer (docs/clipboard.md).
    package var clipboard = true
    /// How long a copy is offered to the account's other devices.
    package var clipboardLifetime: Duration = .seconds(120)
    /// The most bytes one copy may hold (a `handoff copy`), and one paste may bring.
    package var clipboardSizeLimit: UInt64 = 256 << 20
    /// The kinds of system activity this device offers and opens (docs/system-activities.md):
    /// `media`, `documents`.
    package var systemActivities: Set<String> = AgentConfiguration.systemActivityKinds
    package static let systemActivityKinds: Set<String> = ["media", "documents"]

    package init(
        stateDirectory: URL, socketPath: String, name: String? = nil, listen: HostPort = HostPort(host: "::", port: 47_170),
        interfaces: [String]? = nil, staticPeers: [HostPort] = [], discoveryPort: Int = 47_168, refreshInterval: Duration = .seconds(18),
        expiry: Duration = .seconds(45), saveDeadline: Duration = .seconds(5), fetchDeadline: Duration = .seconds(10),
        launchDeadline: Duration = .seconds(10), maximumPayload: Int = 64 * 1024, browserCommand: [String] = ["xdg-open"],
        defaultBrowser: String? = nil, servesLocalSocket: Bool = true, idleRelease: Duration? = nil,
        idleRefreshInterval: Duration = .seconds(120), serviceDiscoveryPort: Int? = 5353, nameRotation: Duration = .seconds(15 * 60)
    ) {
        self.serviceDiscoveryPort = serviceDiscoveryPort
        self.nameRotation = nameRotation
        self.stateDirectory = stateDirectory
        self.socketPath = socketPath
        self.name = name
        self.listen = listen
        self.interfaces = interfaces
        self.staticPeers = staticPeers
        self.discoveryPort = discoveryPort
        self.refreshInterval = refreshInterval
        self.expiry = expiry
        self.saveDeadline = saveDeadline
        self.fetchDeadline = fetchDeadline
        self.launchDeadline = launchDeadline
        self.maximumPayload = maximumPayload
        self.browserCommand = browserCommand
        self.defaultBrowser = defaultBrowser
        self.servesLocalSocket = servesLocalSocket
        self.idleRelease = idleRelease
        self.idleRefreshInterval = idleRefreshInterval
    }

    /// `$XDG_STATE_HOME/handoff`, or `~/.local/state/handoff`.
    public static func defaultStateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return URL(fileURLWithPath: state).appendingPathComponent("handoff", isDirectory: true)
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".local/state/handoff", isDirectory: true)
    }

    /// `$XDG_CONFIG_HOME/handoff/handoffd.conf`, or `~/.config/handoff/handoffd.conf`.
    public static func defaultConfigFile(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return URL(fileURLWithPath: config).appendingPathComponent("handoff/handoffd.conf")
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".config/handoff/handoffd.conf")
    }
}

/// A host (name or address; IPv6 in brackets) and a port.
package struct HostPort: Sendable, Hashable, CustomStringConvertible {
    package var host: String
    package var port: Int

    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Reads `HOST:PORT` or `[IPV6]:PORT`; the message says what is wrong.
    package init(parsing text: String) throws(ConfigurationError) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                throw ConfigurationError("'\(text)' is not [IPV6]:PORT")
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else {
                throw ConfigurationError("'\(text)' is not HOST:PORT (write an IPv6 address in brackets: [::1]:47170)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw ConfigurationError("'\(text)' has no host") }
        guard let port = Int(portText), (0...65_535).contains(port) else {
            throw ConfigurationError("'\(text)' has no port from 0 to 65535")
        }
        self.host = String(host)
        self.port = port
    }

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A bad flag or configuration line; the message names it.
public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The configuration file: one `key = value` per line, the keys of `handoffd`'s long flags
/// (`name`, `listen`, `interface`, `peer`, `state-dir`, `socket`, ...), `#` comments, and
/// repeatable keys given once per line.
public struct ConfigurationFile: Sendable, Hashable {
    /// The settings in file order, each with its line number.
    package var entries: [(key: String, value: String, line: Int)]

    package static let keys: Set<String> = [
        "state-dir", "socket", "name", "listen", "interface", "peer", "discovery-port", "save-deadline", "fetch-deadline",
        "maximum-payload", "browser", "default-browser", "idle-release", "dns-sd", "name-rotation", "link-idle", "container",
        "association-ca", "association-refresh", "notifications", "development-mode", "clipboard", "clipboard-expiry",
        "clipboard-size-limit", "system-activities",
    ]
    package static let repeatable: Set<String> = ["interface", "peer", "container"]

    public init(contentsOf url: URL) throws(ConfigurationError) {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ConfigurationError("cannot read the configuration file \(url.path): \(error.localizedDescription)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError("\(url.path): not UTF-8 text")
        }
        try self.init(text: text, name: url.path)
    }

    public init(text: String, name: String) throws(ConfigurationError) {
        var entries: [(key: String, value: String, line: Int)] = []
        var seen: Set<String> = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError("\(name):\(number): expected 'key = value', found '\(line)'")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard Self.keys.contains(key) else {
                throw ConfigurationError("\(name):\(number): unknown key '\(key)'; the keys are \(Self.keys.sorted().joined(separator: ", "))")
            }
            guard !value.isEmpty else {
                throw ConfigurationError("\(name):\(number): '\(key)' has no value")
            }
            if !Self.repeatable.contains(key) {
                guard seen.insert(key).inserted else {
                    throw ConfigurationError("\(name):\(number): '\(key)' is given twice; only 'interface', 'peer' and 'container' repeat")
                }
            }
            entries.append((key, value, number))
        }
        self.entries = entries
    }

    public static func == (lhs: ConfigurationFile, rhs: ConfigurationFile) -> Bool {
        lhs.entries.map { "\($0.key)=\($0.value)@\($0.line)" } == rhs.entries.map { "\($0.key)=\($0.value)@\($0.line)" }
    }

    public func hash(into hasher: inout Hasher) {
        for entry in entries { hasher.combine("\(entry.key)=\(entry.value)@\(entry.line)") }
    }

    package func values(_ key: String) -> [(value: String, line: Int)] {
        entries.filter { $0.key == key }.map { ($0.value, $0.line) }
    }
}

extension Duration {
    /// Reads `250ms`, `5s`, `2m`, `1h` or a plain number of seconds.
    package init(parsing text: String) throws(ConfigurationError) {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            if let number = Double(text.dropLast(suffix.count)), number >= 0, number.isFinite {
                self = .milliseconds(Int64((number * scale * 1000).rounded()))
                return
            }
        }
        if let number = Double(text), number >= 0, number.isFinite {
            self = .milliseconds(Int64((number * 1000).rounded()))
            return
        }
        throw ConfigurationError("'\(text)' is not a duration such as 250ms, 5s or 2m")
    }
}

/// The settings as given, before they are checked: from flags (`source` nil) or a
/// configuration file. `AgentConfiguration.resolve` turns them into a configuration, naming
/// the flag or the file and line of anything wrong.
public struct AgentSettings: Sendable {
    public var stateDirectory: String?
    public var socket: String?
    public var name: String?
    public var listen: String?
    public var interfaces: [String] = []
    public var peers: [String] = []
    public var discoveryPort: String?
    public var dnsSD: String?
    public var nameRotation: String?
    public var linkIdle: String?
    public var saveDeadline: String?
    public var fetchDeadline: String?
    public var maximumPayload: String?
    public var browser: String?
    public var defaultBrowser: String?
    public var idleRelease: String?
    public var containers: [String] = []
    public var associationCA: String?
    public var associationRefresh: String?
    public var notifications: String?
    public var developmentMode: String?
    public var clipboard: String?
    public var clipboardExpiry: String?
    public var clipboardSizeLimit: String?
    public var systemActivities: String?

    public init() {}
}

extension AgentConfiguration {
    /// A size such as `256MiB`, `64KiB`, `1GiB` or a number of bytes: from 1 byte to 16 GiB.
    /// `media,documents`, either alone, or `off`.
    package static func systemActivityKinds(_ text: String) throws(ConfigurationError) -> Set<String> {
        if text == "off" { return [] }
        let kinds = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard !kinds.isEmpty, kinds.allSatisfy(systemActivityKinds.contains) else {
            throw ConfigurationError("'\(text)' is not a list of system activity kinds: give media, documents, both (media,documents) or off")
        }
        return Set(kinds)
    }

    package static func byteSize(_ text: String) throws(ConfigurationError) -> UInt64 {
        let units: [(String, UInt64)] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10), ("B", 1), ("", 1)]
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for (unit, scale) in units where trimmed.hasSuffix(unit) {
            let number = trimmed.dropLast(unit.count).trimmingCharacters(in: .whitespaces)
            guard let value = UInt64(number), value > 0, value <= (16 << 30) / scale else { break }
            return value * scale
        }
        throw ConfigurationError("'\(text)' is not a size from 1 byte to 16GiB, such as 256MiB, 64KiB or 1000000")
    }

    /// Flags win over the configuration file, which wins over the defaults. Repeatable
    /// settings (`interface`, `peer`) given as flags replace the file's.
    public static func resolve(
        flags: AgentSettings, file: ConfigurationFile?, fileName: String = "the configuration file",
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> AgentConfiguration {
        func pick(_ flag: String?, _ key: String) -> (value: String, origin: String)? {
            if let flag { return (flag, "--\(key)") }
            if let entry = file?.values(key).last { return (entry.value, "\(fileName):\(entry.line) (\(key))") }
            return nil
        }
        func list(_ flags: [String], _ key: String) -> [(value: String, origin: String)] {
            if !flags.isEmpty { return flags.map { ($0, "--\(key)") } }
            return (file?.values(key) ?? []).map { ($0.value, "\(fileName):\($0.line) (\(key))") }
        }
        func checked<T>(_ origin: String, _ body: () throws(ConfigurationError) -> T) throws(ConfigurationError) -> T {
            do {
                return try body()
            } catch {
                throw ConfigurationError("\(origin): \(error.message)")
            }
        }

        let state = pick(flags.stateDirectory, "state-dir").map { URL(fileURLWithPath: $0.value, isDirectory: true) }
            ?? AgentConfiguration.defaultStateDirectory(environment: environment)
        let socket = pick(flags.socket, "socket")?.value ?? LocalSocket.defaultPath(environment: environment)
        var configuration = AgentConfiguration(stateDirectory: state, socketPath: socket)
        if let name = pick(flags.name, "name") {
            guard !name.value.trimmingCharacters(in: .whitespaces).isEmpty, name.value.utf8.count <= 64 else {
                throw ConfigurationError("\(name.origin): a device name has 1 to 64 bytes")
            }
            configuration.name = name.value
        }
        if let listen = pick(flags.listen, "listen") {
            configuration.listen = try checked(listen.origin) { () throws(ConfigurationError) in try HostPort(parsing: listen.value) }
        } else {
            configuration.listenFallsBack = true
        }
        let interfaces = list(flags.interfaces, "interface")
        if !interfaces.isEmpty {
            if interfaces.contains(where: { $0.value == "none" }) {
                guard interfaces.count == 1 else {
                    throw ConfigurationError("\(interfaces[0].origin): 'none' (no multicast) cannot be combined with interface names")
                }
                configuration.interfaces = []
            } else {
                for interface in interfaces where interface.value.contains(where: { $0 == "/" || $0.isWhitespace }) {
                    throw ConfigurationError("\(interface.origin): '\(interface.value)' is not an interface name (see 'ip -brief link')")
                }
                configuration.interfaces = interfaces.map(\.value)
            }
        }
        configuration.staticPeers = try list(flags.peers, "peer").map { peer throws(ConfigurationError) in
            try checked(peer.origin) { () throws(ConfigurationError) in try HostPort(parsing: peer.value) }
        }
        if let port = pick(flags.discoveryPort, "discovery-port") {
            guard let number = Int(port.value), (1...65_535).contains(number) else {
                throw ConfigurationError("\(port.origin): '\(port.value)' is not a port from 1 to 65535")
            }
            configuration.discoveryPort = number
        }
        if let dnsSD = pick(flags.dnsSD, "dns-sd") {
            if dnsSD.value == "off" {
                configuration.serviceDiscoveryPort = nil
            } else {
                guard let number = Int(dnsSD.value), (1...65_535).contains(number) else {
                    throw ConfigurationError("\(dnsSD.origin): '\(dnsSD.value)' is not a port from 1 to 65535, or 'off'")
                }
                configuration.serviceDiscoveryPort = number
            }
        }
        if let rotation = pick(flags.nameRotation, "name-rotation") {
            let period = try checked(rotation.origin) { () throws(ConfigurationError) in try Duration(parsing: rotation.value) }
            guard period >= .seconds(5), period <= .seconds(3600) else {
                throw ConfigurationError("\(rotation.origin): give from 5s to 1h (names seen for longer let a bystander follow a device)")
            }
            configuration.nameRotation = period
        }
        if let idle = pick(flags.linkIdle, "link-idle") {
            let period = try checked(idle.origin) { () throws(ConfigurationError) in try Duration(parsing: idle.value) }
            guard period >= .seconds(1), period <= .seconds(86_400) else {
                throw ConfigurationError("\(idle.origin): give from 1s to 24h (an idle link is closed after it, and opened again for the next continuation)")
            }
            configuration.linkIdle = period
        }
        if let deadline = pick(flags.saveDeadline, "save-deadline") {
            configuration.saveDeadline = try checked(deadline.origin) { () throws(ConfigurationError) in try Duration(parsing: deadline.value) }
        }
        if let deadline = pick(flags.fetchDeadline, "fetch-deadline") {
            configuration.fetchDeadline = try checked(deadline.origin) { () throws(ConfigurationError) in try Duration(parsing: deadline.value) }
        }
        if let limit = pick(flags.maximumPayload, "maximum-payload") {
            // The limit must leave room in a 1 MiB frame for the rest of the record and base64.
            guard let bytes = Int(limit.value), (1...512 * 1024).contains(bytes) else {
                throw ConfigurationError("\(limit.origin): '\(limit.value)' is not a number of bytes from 1 to 524288")
            }
            configuration.maximumPayload = bytes
        }
        if let browser = pick(flags.browser, "browser") {
            let words = browser.value.split(separator: " ").map(String.init)
            guard !words.isEmpty else { throw ConfigurationError("\(browser.origin): the browser command is empty") }
            configuration.browserCommand = words
        }
        if let browser = pick(flags.defaultBrowser, "default-browser") {
            guard browser.value.range(of: #"^[A-Za-z0-9][A-Za-z0-9.\-_]*$"#, options: .regularExpression) != nil else {
                throw ConfigurationError("\(browser.origin): '\(browser.value)' is not a bundle identifier (letters, digits, '.', '-' and '_')")
            }
            configuration.defaultBrowser = browser.value
        }
        for container in list(flags.containers, "container") {
            let parsed = try checked(container.origin) { () throws(ConfigurationError) in try ContainerFolder(parsing: container.value) }
            guard !configuration.containers.contains(where: { $0.identifier == parsed.identifier }) else {
                throw ConfigurationError("\(container.origin): container '\(parsed.identifier)' is given twice")
            }
            configuration.containers.append(parsed)
        }
        if let ca = pick(flags.associationCA, "association-ca") {
            do {
                configuration.associationTrust = try NIOSSLCertificate.fromPEMFile(ca.value)
            } catch {
                throw ConfigurationError("\(ca.origin): cannot read certificates (PEM) from \(ca.value): \(error)")
            }
            guard !configuration.associationTrust.isEmpty else {
                throw ConfigurationError("\(ca.origin): \(ca.value) holds no certificate (PEM)")
            }
        }
        if let refresh = pick(flags.associationRefresh, "association-refresh") {
            let period = try checked(refresh.origin) { () throws(ConfigurationError) in try Duration(parsing: refresh.value) }
            guard period >= .seconds(1) else { throw ConfigurationError("\(refresh.origin): give at least 1s") }
            configuration.associationRefresh = period
        }
        // Desktop notifications: on where there is a session bus, unless turned off.
        let notifications = pick(flags.notifications, "notifications")
        switch notifications?.value {
        case nil, "on": configuration.desktopBus = environment["DBUS_SESSION_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 }
        case "off": configuration.desktopBus = nil
        case let other?: throw ConfigurationError("\(notifications!.origin): '\(other)' is not 'on' or 'off'")
        }
        let clipboard = pick(flags.clipboard, "clipboard")
        switch clipboard?.value {
        case nil, "on": configuration.clipboard = true
        case "off": configuration.clipboard = false
        case let other?: throw ConfigurationError("\(clipboard!.origin): '\(other)' is not 'on' or 'off'")
        }
        if let expiry = pick(flags.clipboardExpiry, "clipboard-expiry") {
            let period = try checked(expiry.origin) { () throws(ConfigurationError) in try Duration(parsing: expiry.value) }
            guard period >= .seconds(1), period <= .seconds(3600) else {
                throw ConfigurationError("\(expiry.origin): give from 1s to 1h (how long a copy is offered to the account's other devices)")
            }
            configuration.clipboardLifetime = period
        }
        if let kinds = pick(flags.systemActivities, "system-activities") {
            configuration.systemActivities = try checked(kinds.origin) { () throws(ConfigurationError) in try Self.systemActivityKinds(kinds.value) }
        }
        if let limit = pick(flags.clipboardSizeLimit, "clipboard-size-limit") {
            configuration.clipboardSizeLimit = try checked(limit.origin) { () throws(ConfigurationError) in try Self.byteSize(limit.value) }
        }
        let development = pick(flags.developmentMode, "development-mode")
        switch development?.value {
        case nil, "off": configuration.allowsUnsignedApps = false
        case "on": configuration.allowsUnsignedApps = true
        case let other?: throw ConfigurationError("\(development!.origin): '\(other)' is not 'on' or 'off'")
        }
        configuration.idleRelease = .seconds(15)
        if let release = pick(flags.idleRelease, "idle-release") {
            if release.value == "off" {
                configuration.idleRelease = nil
            } else {
                let delay = try checked(release.origin) { () throws(ConfigurationError) in try Duration(parsing: release.value) }
                guard delay >= .seconds(1) else { throw ConfigurationError("\(release.origin): give at least 1s, or 'off'") }
                configuration.idleRelease = delay
            }
        }
        return configuration
    }
}
