import Foundation

/// A synced container of this device, as the agent is configured (`--container ID=PATH`).
public struct LocalContainer: Codable, Sendable, Hashable {
    public var identifier: String
    public var folder: String

    public init(identifier: String, folder: String) {
        self.identifier = identifier
        self.folder = folder
    }
}

/// Where a delivered activity came from.
public struct LocalOrigin: Codable, Sendable, Hashable {
    public var device: UUID
    public var deviceName: String
    public var activity: UUID

    public init(device: UUID, deviceName: String, activity: UUID) {
        self.device = device
        self.deviceName = deviceName
        self.activity = activity
    }
}

/// This device, as the agent reports it.
public struct LocalDevice: Codable, Sendable, Hashable {
    public var id: UUID
    public var name: String
    /// Whether this is the device answering.
    public var isThisDevice: Bool
    /// Whether its beacons are heard now.
    public var isNearby: Bool
    /// The address its beacons come from, when nearby.
    public var address: String?
    /// Seconds since its last beacon, when nearby.
    public var lastHeard: Double?
    public var fingerprint: String?

    public init(id: UUID, name: String, isThisDevice: Bool, isNearby: Bool, address: String? = nil, lastHeard: Double? = nil, fingerprint: String? = nil) {
        self.id = id
        self.name = name
        self.isThisDevice = isThisDevice
        self.isNearby = isNearby
        self.address = address
        self.lastHeard = lastHeard
        self.fingerprint = fingerprint
    }
}

/// An activity offered by another device of the account.
public struct LocalNearbyActivity: Codable, Sendable, Hashable {
    public var device: UUID
    public var deviceName: String
    public var activity: ActivityAnnouncement
    /// Seconds since the activity was last announced.
    public var age: Double
    /// Which app here would continue it (its bundle identifier), or `browser`, or nil.
    public var handler: String?
    /// Why that handler, or why none.
    public var reason: String

    public init(device: UUID, deviceName: String, activity: ActivityAnnouncement, age: Double, handler: String?, reason: String) {
        self.device = device
        self.deviceName = deviceName
        self.activity = activity
        self.age = age
        self.handler = handler
        self.reason = reason
    }
}

/// An installed app.
public struct LocalApp: Codable, Sendable, Hashable {
    public var bundleIdentifier: String
    public var teamIdentifier: String?
    public var executable: String
    public var activityTypes: [String]
    /// How many processes of it are connected now.
    public var running: Int
    /// The team whose key signed the app; absent for an unsigned app (development mode).
    public var signedBy: String?
    /// Where the team identifier was read ("the build setting DEVELOPMENT_TEAM"…).
    public var teamSource: String?
    /// True when the executable is no longer the one installed (and signed): the agent
    /// neither starts it nor takes its processes for the app. Absent while it is.
    public var executableChanged: Bool?

    public init(
        bundleIdentifier: String, teamIdentifier: String?, executable: String, activityTypes: [String], running: Int, signedBy: String? = nil,
        teamSource: String? = nil, executableChanged: Bool? = nil
    ) {
        self.executableChanged = executableChanged
        self.signedBy = signedBy
        self.teamSource = teamSource
        self.bundleIdentifier = bundleIdentifier
        self.teamIdentifier = teamIdentifier
        self.executable = executable
        self.activityTypes = activityTypes
        self.running = running
    }
}

/// The agent's state in one answer.
/// A device's removal from its account, as it learned it.
public struct LocalRemoval: Codable, Sendable, Hashable {
    /// The account's name.
    public var account: String
    /// The member that removed it.
    public var by: String
    public var at: Date

    public init(account: String, by: String, at: Date) {
        self.account = account
        self.by = by
        self.at = at
    }
}

/// A clipboard offered in the account, as `status` shows it and `paste` pastes it: who copied
/// it, when, until when, and the types it can be pasted as.
public struct LocalClipboard: Codable, Sendable, Hashable {
    /// The device it was copied on, and its name.
    public var device: UUID
    public var deviceName: String
    /// Whether it was copied on this device.
    public var local: Bool
    public var generation: UInt64
    public var copiedAt: Date
    public var expires: Date
    public var types: [LocalClipboardType]

    public init(device: UUID, deviceName: String, local: Bool, generation: UInt64, copiedAt: Date, expires: Date, types: [LocalClipboardType]) {
        self.device = device
        self.deviceName = deviceName
        self.local = local
        self.generation = generation
        self.copiedAt = copiedAt
        self.expires = expires
        self.types = types
    }
}

/// One type a clipboard can be pasted as, and its size in bytes.
public struct LocalClipboardType: Codable, Sendable, Hashable {
    public var name: String
    public var size: UInt64

    public init(name: String, size: UInt64) {
        self.name = name
        self.size = size
    }
}

public struct LocalStatus: Codable, Sendable, Hashable {
    public var version: String
    public var device: LocalDevice
    public var account: String?
    public var members: Int
    public var nearby: Int
    public var linkPort: Int
    public var interfaces: [String]
    public var staticPeers: [String]
    public var apps: Int
    public var currentActivity: ActivityAnnouncement?
    /// What discovery has received since the agent started.
    public var discovery: LocalDiscoveryCounters?
    /// With no account: the one this device was last removed from, if it was.
    public var removed: LocalRemoval?
    /// What a paste here would paste: the newest clipboard of the account, if one is offered.
    public var clipboard: LocalClipboard?
    /// Whether this device shares its clipboard (`--clipboard`).
    public var clipboardOn: Bool?

    public init(
        version: String, device: LocalDevice, account: String?, members: Int, nearby: Int, linkPort: Int,
        interfaces: [String], staticPeers: [String], apps: Int, currentActivity: ActivityAnnouncement?, discovery: LocalDiscoveryCounters? = nil,
        removed: LocalRemoval? = nil, clipboard: LocalClipboard? = nil, clipboardOn: Bool? = nil
    ) {
        self.removed = removed
        self.clipboard = clipboard
        self.clipboardOn = clipboardOn
        self.version = version
        self.device = device
        self.account = account
        self.members = members
        self.nearby = nearby
        self.linkPort = linkPort
        self.interfaces = interfaces
        self.staticPeers = staticPeers
        self.apps = apps
        self.currentActivity = currentActivity
        self.discovery = discovery
    }
}

/// Beacons received, by what became of them.
public struct LocalDiscoveryCounters: Codable, Sendable, Hashable {
    public var datagrams: Int
    /// Did not open with the account's keys: another account, noise, forgeries.
    public var unopened: Int
    /// Opened, but a sequence already seen: replays.
    public var replayed: Int
    /// Opened, but too far from this device's clock.
    public var outsideWindow: Int
    public var accepted: Int
    /// How often the DNS-SD service's random names changed since the agent started: every 13.5
    /// to 15 minutes, after interface changes, and after a conflict once announced (not during
    /// probing); nil with DNS-SD off, or from an agent that does not say.
    public var nameRotations: Int?

    public init(datagrams: Int, unopened: Int, replayed: Int, outsideWindow: Int, accepted: Int, nameRotations: Int? = nil) {
        self.datagrams = datagrams
        self.unopened = unopened
        self.replayed = replayed
        self.outsideWindow = outsideWindow
        self.accepted = accepted
        self.nameRotations = nameRotations
    }
}

/// What became of trying a link to an address.
public struct LocalProbe: Codable, Sendable, Hashable {
    /// Whether anything answered on the port.
    public var reachable: Bool
    /// Whether it is a device of this account that accepts this one.
    public var member: Bool
    /// Its name, when it is a member.
    public var device: String?
    public var message: String

    public init(reachable: Bool, member: Bool, device: String?, message: String) {
        self.reachable = reachable
        self.member = member
        self.device = device
        self.message = message
    }
}

/// What a finished continuation did.
public struct LocalContinued: Codable, Sendable, Hashable {
    public var continuation: UUID
    public var device: String
    public var activity: ActivityAnnouncement
    /// The app that received it (its bundle identifier), or nil when a web page was opened.
    public var app: String?
    public var webpageURL: String?
    /// Seconds from the request to the app holding the activity.
    public var seconds: Double

    public init(continuation: UUID, device: String, activity: ActivityAnnouncement, app: String?, webpageURL: String?, seconds: Double) {
        self.continuation = continuation
        self.device = device
        self.activity = activity
        self.app = app
        self.webpageURL = webpageURL
        self.seconds = seconds
    }
}

/// A change among the activities nearby, for watchers.
public struct LocalEvent: Codable, Sendable, Hashable {
    public enum Change: String, Codable, Sendable, Hashable {
        case appeared, changed, gone
    }

    public var change: Change
    public var device: UUID
    public var deviceName: String
    /// The activity (absent when `gone`).
    public var activity: LocalNearbyActivity?

    public init(change: Change, device: UUID, deviceName: String, activity: LocalNearbyActivity?) {
        self.change = change
        self.device = device
        self.deviceName = deviceName
        self.activity = activity
    }
}

/// An invitation to join the account, made by `invite`.
public struct LocalInvitation: Codable, Sendable, Hashable {
    public var id: UUID
    /// What the new device passes to `handoff join`.
    public var code: String
    /// `interactive` or `token`.
    public var kind: String
    /// Seconds since 1970.
    public var expires: Date
    /// Where the new device will reach this one.
    public var host: String
    public var port: Int

    public init(id: UUID, code: String, kind: String, expires: Date, host: String, port: Int) {
        self.id = id
        self.code = code
        self.kind = kind
        self.expires = expires
        self.host = host
        self.port = port
    }
}

/// A device asking to join with an interactive invitation.
public struct LocalJoinRequest: Codable, Sendable, Hashable {
    public var name: String
    public var verification: String
    public var fingerprint: String

    public init(name: String, verification: String, fingerprint: String) {
        self.name = name
        self.verification = verification
        self.fingerprint = fingerprint
    }
}

/// What a web site's association file lets apps do there, as `handoff doctor --site` shows it.
public struct LocalSiteAssociation: Codable, Sendable, Hashable {
    /// The site asked about: `host` or `host:port`.
    public var site: String
    /// The address the file was read from.
    public var source: String?
    /// It came in the signed (2014) form and its signature held.
    public var signed: Bool?
    /// Why the site has no file that can be used.
    public var error: String?
    /// Parts of the file left out, and why.
    public var problems: [String]
    /// Every app the file names, and every app installed here that claims the site.
    public var apps: [LocalSiteApp]

    public init(site: String, source: String? = nil, signed: Bool? = nil, error: String? = nil, problems: [String] = [], apps: [LocalSiteApp] = []) {
        self.site = site
        self.source = source
        self.signed = signed
        self.error = error
        self.problems = problems
        self.apps = apps
    }
}

/// One app in a site's association file, or installed here and claiming the site.
public struct LocalSiteApp: Codable, Sendable, Hashable {
    /// `TEAMID.bundle.id`.
    public var applicationIdentifier: String
    /// An app installed here has this identifier.
    public var installed: Bool
    /// The installed app's associated-domains entries that name this site.
    public var claims: [String]
    /// Listed in `activitycontinuation`.
    public var activityContinuation: Bool
    /// Listed, installed, and claiming `activitycontinuation:` for the site: its pages continue in it.
    public var continuesPages: Bool
    /// Listed in `webcredentials`.
    public var webCredentials: Bool
    /// Listed in `appclips`.
    public var appClip: Bool
    /// The universal-link patterns of the `applinks` entries that list it, in order.
    public var appLinks: [String]
    /// Whether the address asked about opens in it, when one was given.
    public var opensURL: Bool?

    public init(
        applicationIdentifier: String, installed: Bool, claims: [String], activityContinuation: Bool, continuesPages: Bool, webCredentials: Bool,
        appClip: Bool, appLinks: [String], opensURL: Bool? = nil
    ) {
        self.applicationIdentifier = applicationIdentifier
        self.installed = installed
        self.claims = claims
        self.activityContinuation = activityContinuation
        self.continuesPages = continuesPages
        self.webCredentials = webCredentials
        self.appClip = appClip
        self.appLinks = appLinks
        self.opensURL = opensURL
    }
}

/// One finding of `doctor`: what was looked at, how it is, and what to do about it.
public struct LocalCheck: Codable, Sendable, Hashable {
    public enum Status: String, Codable, Sendable, Hashable {
        /// As it should be.
        case ok
        /// Works, but something may keep devices from seeing each other.
        case warning
        /// Keeps devices from seeing or reaching each other.
        case problem
    }

    /// What was looked at: `agent`, `account`, `interface`, `loop`, `peer`, `other-accounts`,
    /// `clock` or `static-peer`.
    public var area: String
    /// Which one (an interface's name, a device's name, an address), when there are several.
    public var subject: String?
    public var status: Status
    /// What was found, in plain words.
    public var finding: String
    /// What to do, when something is to be done.
    public var advice: String?

    public init(area: String, subject: String? = nil, status: Status, finding: String, advice: String? = nil) {
        self.area = area
        self.subject = subject
        self.status = status
        self.finding = finding
        self.advice = advice
    }
}
