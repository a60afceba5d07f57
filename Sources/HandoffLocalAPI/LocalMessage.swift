import Foundation

/// The answer to a request: `ok` with what was asked for, or the error.
public struct LocalReply: Codable, Sendable, Hashable {
    /// True when the request succeeded; `error` says why not otherwise.
    public var ok: Bool
    public var error: LocalError?
    public var version: Int?
    public var device: LocalDevice?
    /// The installed app the agent recognised the client as (for `hello` from an app).
    public var app: LocalApp?
    public var status: LocalStatus?
    public var devices: [LocalDevice]?
    public var activities: [LocalNearbyActivity]?
    public var apps: [LocalApp]?
    public var continued: LocalContinued?
    public var account: String?
    public var invitation: LocalInvitation?
    public var joinRequest: LocalJoinRequest?
    /// The number to compare on both screens while joining interactively.
    public var verification: String?
    public var probe: LocalProbe?
    /// What `doctor` found, in the order it looked.
    public var checks: [LocalCheck]?
    /// What a web site's association file lets each app do (`siteAssociation`).
    public var siteAssociation: LocalSiteAssociation?
    /// This device's synced containers (in the reply to an app's `hello`).
    public var containers: [LocalContainer]?
    /// What the request did that a person should know of (an app installed unsigned).
    public var warnings: [String]?
    /// The clipboard a `paste` pastes, or a `copy` offered.
    public var clipboard: LocalClipboard?
    /// The type a `paste` pastes, and its size: the bytes that follow.
    public var pasting: LocalClipboardType?

    public init(
        error: LocalError? = nil, version: Int? = nil, device: LocalDevice? = nil, app: LocalApp? = nil, status: LocalStatus? = nil,
        devices: [LocalDevice]? = nil, activities: [LocalNearbyActivity]? = nil, apps: [LocalApp]? = nil,
        continued: LocalContinued? = nil, account: String? = nil, invitation: LocalInvitation? = nil,
        joinRequest: LocalJoinRequest? = nil, verification: String? = nil, probe: LocalProbe? = nil, checks: [LocalCheck]? = nil,
        containers: [LocalContainer]? = nil
    ) {
        self.containers = containers
        self.ok = error == nil
        self.error = error
        self.version = version
        self.device = device
        self.app = app
        self.status = status
        self.devices = devices
        self.activities = activities
        self.apps = apps
        self.continued = continued
        self.account = account
        self.invitation = invitation
        self.joinRequest = joinRequest
        self.verification = verification
        self.probe = probe
        self.checks = checks
    }

    public static func failure(_ error: LocalError) -> LocalReply { LocalReply(error: error) }

}

/// A request a client sends and the agent answers with one `reply` carrying the same number.
public enum LocalCall: Sendable, Hashable {
    /// The first message on every connection.
    case hello(version: Int, role: LocalRole, bundleIdentifier: String?)
    case status
    /// The account's members.
    case devices
    /// The activities other devices offer now.
    case nearby
    /// Continues an activity offered nearby (`activity`), or the most recent one (`nil`).
    /// The reply comes when the receiving app holds the activity, or with the failure.
    case `continue`(activity: UUID?)
    /// Subscribes to `event` messages about the activities nearby; the reply comes first.
    case watch
    case apps
    /// Installs the app in `directory` (its `Info.plist`, entitlements and executable).
    /// `settings`: Xcode build settings (`NAME` to `VALUE`) the app's files use; see docs/porting.md.
    case installApp(directory: String, settings: [String: String] = [:])
    case removeApp(bundleIdentifier: String)
    /// Makes this device the first member of a new account.
    case createAccount(name: String)
    /// Invites a device to the account: an interactive code, or a token for scripts
    /// (`token`). `host` is the address the new device reaches this one at (default: this
    /// device's first address on its discovery interfaces); `lifetime` in seconds.
    case invite(token: Bool, host: String?, lifetime: Double?)
    /// Waits until a device asks to join with invitation `invitation`; the reply names it
    /// and gives the verification number.
    case awaitJoin(invitation: UUID)
    /// Lets the device that asked to join with `invitation` in (`accept`), or turns it away.
    case confirmJoin(invitation: UUID, accept: Bool)
    /// Starts joining the account of the device whose invitation `code` is; the reply gives
    /// the verification number at once.
    case join(code: String)
    /// Waits for the join started with `join` to end: the reply names the account.
    case awaitJoinResult
    /// Removes a device from the account, by name: a signed change sent to every member, and
    /// a new beacon key.
    case removeDevice(name: String)
    /// Tries a link to `host:port` with this device's identity: is something there, and is it
    /// a device of this account that accepts this one?
    case probe(host: String, port: Int)
    /// Looks at what discovery and links need, in order, and says what it found (`checks`).
    case doctor
    /// Fetches a web site's association file now and says what each app may do there
    /// (`siteAssociation`); `url`, when given, is checked against its universal links.
    case siteAssociation(host: String, url: String?)
    /// The first message of a connection that carries the continuation streams of
    /// `continuation`, opened by the app that continued it. The reply comes once the
    /// originating app took the streams; the connection then carries stream frames
    /// (`LocalStreamFrame`).
    case openStream(version: Int, continuation: UUID)
    /// The first message of a connection that carries the streams the agent asked this app to
    /// take (`streamRequest`); stream frames follow the reply.
    case acceptStream(version: Int, stream: UUID)
    /// The first message of a connection that offers what follows it as this device's
    /// clipboard, as type `clipboardType`: data frames, then an end; the agent answers the end
    /// with an end once the account's devices are told (or a failure). See docs/clipboard.md.
    case copy(version: Int, clipboardType: String)
    /// The first message of a connection that pastes the account's newest clipboard, as
    /// `clipboardType` (nil: the first text type offered, else the first type). The reply says
    /// what is pasted and its size; data frames and an end follow, or a failure.
    case paste(version: Int, clipboardType: String?)
    /// Makes what was just copied in the person's session this device's clipboard, offered as
    /// `types` (their sizes as the copying app gave them), with this connection as its
    /// provider: the agent asks it for one type's bytes when a device pastes it
    /// (`clipboardRequest`). The offer ends when this connection closes. See docs/clipboard.md.
    case offerClipboard(types: [LocalClipboardType])
    /// Subscribes to `clipboardChanged` messages: the reply carries the clipboard now.
    /// `session` says which clipboard the watcher serves ("Wayland wayland-1,
    /// zwlr_data_control_manager_v1"), for `doctor`.
    case watchClipboard(session: String?)
    /// The first message of a connection that carries the bytes a `clipboardRequest` asked
    /// for: data frames, then an end.
    case provideClipboard(version: Int, read: UUID)
    /// Says this connection (the graphical session's service) opens system activities of
    /// `types` (`SystemActivityType`) continued here: each comes as a `deliver`, its file URLs
    /// in this device's containers. The reply carries the containers. See
    /// docs/system-activities.md.
    case handleSystemActivities(types: [String])
    /// What a session that handles system activities is offering, or why not ("mpv plays
    /// 'song.ogg', not offered: it is outside every synced container"): one line, for `doctor`.
    case systemActivityStatus(status: String)
}

/// The activity types of the apps that never link Handoff, which the session service publishes
/// and opens (docs/system-activities.md).
public enum SystemActivityType {
    public static let prefix = "org.handoff.system."
    /// A document of the recently-used list inside a synced container: `userInfo` has `url`
    /// (the file), and `mimeType`, `application` and `exec` where the list gives them.
    public static let document = "org.handoff.system.document"
    /// What a media player (MPRIS) is playing: `userInfo` has `url` (a file in a synced container,
    /// or an `http(s)` address), `position` (seconds, at the fetch) and `playing`, and `title`,
    /// `artists`, `album`, `length`, `desktopEntry` and `player` where the player gives them.
    public static let media = "org.handoff.system.media"
    public static let all: Set<String> = [document, media]

    /// The kind `--system-activities` names a type by: `documents`, `media`.
    public static func kind(of type: String) -> String? {
        switch type {
        case document: return "documents"
        case media: return "media"
        default: return nil
        }
    }
}

/// The frames of a stream connection after its first reply: raw bytes, not JSON. See
/// `docs/local-api.md`, Continuation streams.
public enum LocalStreamFrame {
    /// Bytes of the stream (`D`).
    public static let data: UInt8 = 0x44
    /// The sender writes no more (`E`): its output stream closed.
    public static let end: UInt8 = 0x45
    /// The sender reads no more (`S`): its input stream closed.
    public static let stop: UInt8 = 0x53
    /// The stream failed both ways (`X`, from the agent only); the payload says why, in UTF-8.
    public static let failed: UInt8 = 0x58
    /// The most bytes one data frame carries.
    public static let maximumData = 512 * 1024
}

/// One message of the local API. Each is a JSON object with a `type` key, carried in a frame
/// of kind `LocalMessage.frameKind`. See `docs/local-api.md`.
public enum LocalMessage: Sendable, Hashable {
    // From clients.
    case call(request: UInt64, LocalCall)
    /// The app's current activity, new or changed.
    case becameCurrent(ActivityAnnouncement)
    case resigned(activity: UUID)
    case invalidated(activity: UUID)
    /// The app's answer to `save`.
    case saved(request: UInt64, ActivityRecord)
    case saveFailed(request: UInt64, LocalError)
    /// The app does not take the streams the agent asked it to (`streamRequest`).
    case streamRefused(stream: UUID, error: LocalError)
    /// The answer to `prove`: the nonce the agent sent, written by the process that connected.
    case proof(nonce: Data)
    /// The provider of this device's clipboard cannot give what `clipboardRequest` asked.
    case clipboardRefused(read: UUID, error: LocalError)
    /// A session service's answer to `deliver` of a system activity: it opened what came (no
    /// error: its app is starting, or a running player took it), or why it did not.
    case delivered(continuation: UUID, error: LocalError?)

    // From the agent.
    case reply(request: UInt64, LocalReply)
    /// Sent after `hello` and before its reply: the client answers `proof` with this nonce, so
    /// that the agent knows the process that connected wrote it (see `docs/local-api.md`).
    case prove(nonce: Data)
    /// Asks an app to save activity `activity` now and answer with `saved` or `saveFailed`.
    case save(request: UInt64, activity: UUID)
    /// A continuation is coming for this app: the app hears `willContinueUserActivityWithType`.
    case willContinue(continuation: UUID, activityType: String)
    /// The continued activity, for the app's `continue` call.
    case deliver(continuation: UUID, record: ActivityRecord, origin: LocalOrigin)
    /// The continuation failed: the app hears `didFailToContinueUserActivityWithType`.
    case fail(continuation: UUID, activityType: String, error: LocalError)
    /// The app's activity was continued on another device.
    case wasContinued(activity: UUID)
    /// A change nearby, for clients that called `watch`.
    case event(LocalEvent)
    /// An app on another device asks for continuation streams to activity `activity`: the app
    /// opens a connection with `acceptStream`, or answers `streamRefused`.
    case streamRequest(stream: UUID, activity: UUID)
    /// A device pastes type `clipboardType` of the clipboard this client provides: it opens a
    /// connection with `provideClipboard` and sends exactly `size` bytes, or answers
    /// `clipboardRefused`, within 2 seconds.
    case clipboardRequest(read: UUID, clipboardType: String, size: UInt64)
    /// The clipboard a paste here would paste changed (nil: there is none now), for clients
    /// that called `watchClipboard`.
    case clipboardChanged(LocalClipboard?)

    /// The frame kind of a JSON message: ASCII `J`.
    public static let frameKind = LocalProtocol.frameKind
    /// The protocol version this build speaks; `hello` carries it.
    public static let version = LocalProtocol.version
    /// The largest frame either side accepts.
    public static let maximumFrame = LocalProtocol.maximumFrame

    /// The frame that carries this message. Encoding cannot fail: non-finite numbers (which
    /// JSON has no word for) are written as strings rather than trapping.
    /// The messages a continuation carries are written by hand (`LocalMessageJSON`), the same
    /// bytes `JSONEncoder` writes, in a tenth of the time.
    public var frame: Frame {
        if LocalMessageJSON.enabled, let payload = LocalMessageJSON.encode(self) { return Frame(kind: Self.frameKind, payload: payload) }
        return foundationFrame
    }

    /// The frame as Foundation's `JSONEncoder` writes it (what `frame` matches).
    package var foundationFrame: Frame {
        do {
            return Frame(kind: Self.frameKind, payload: Array(try LocalMessage.encoder.encode(self)))
        } catch {
            preconditionFailure("a local message always encodes (non-finite numbers become strings): \(error)")
        }
    }

    /// Reads a message from a frame, or says what is wrong with it. Never traps. The messages a
    /// continuation carries, plainly written, are read by hand; everything else, and anything
    /// unusual, by `JSONDecoder`.
    public init(frame: Frame) throws(LocalError) {
        guard frame.kind == Self.frameKind else {
            throw LocalError(.badRequest, "frame kind \(frame.kind) is not a local API message (expected \(Self.frameKind), JSON)")
        }
        if LocalMessageJSON.enabled, let message = LocalMessageJSON.decode(frame.payload) {
            self = message
        } else {
            try self.init(foundationFrame: frame)
        }
        try checkRanges()
    }

    /// Refuses a value that decodes but that no receiver can act on, naming its field: each
    /// reader checks the types; this checks the ranges, once, for both of them.
    func checkRanges() throws(LocalError) {
        switch self {
        case .call(_, .probe(_, let port)):
            guard (1...65_535).contains(port) else { throw LocalError(.badRequest, "'port' should be an integer from 1 to 65535, not \(port)") }
        case .call(_, .invite(_, _, let lifetime?)):
            guard lifetime > 0, lifetime <= 86_400 else {
                throw LocalError(.badRequest, "'lifetime' should be a number of seconds above 0 and at most 86400 (24 hours), not \(lifetime)")
            }
        case .becameCurrent(let activity):
            try Self.checkRanges(activity)
        case .saved(_, let record):
            try Self.checkRanges(record.activity)
        default:
            break
        }
    }

    /// The dates an activity may carry: Foundation's `distantPast` to `distantFuture`.
    private static func checkRanges(_ activity: ActivityAnnouncement) throws(LocalError) {
        guard let date = activity.expirationDate else { return }
        guard date >= Date.distantPast, date <= Date.distantFuture else {
            throw LocalError(
                .badRequest,
                "'expirationDate' should be seconds since 1970 from \(Date.distantPast.timeIntervalSince1970) to \(Date.distantFuture.timeIntervalSince1970) (Date.distantPast to Date.distantFuture), not \(date.timeIntervalSince1970)"
            )
        }
    }

    /// Reads a message with Foundation's `JSONDecoder` only (what `init(frame:)` matches).
    package init(foundationFrame frame: Frame) throws(LocalError) {
        do {
            self = try LocalMessage.decoder.decode(LocalMessage.self, from: Data(frame.payload))
        } catch let error as LocalError {
            throw error
        } catch let error as DecodingError {
            throw LocalError(.badRequest, LocalMessage.describe(error, in: frame.payload))
        } catch {
            throw LocalError(.badRequest, "the message is not valid JSON: \(error)")
        }
    }

    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
        return encoder
    }()

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }()

    /// What is wrong, as `describe(_:)` says it; where the decoder names no field (a number
    /// that fits no integer field, as Foundation reports it), the bytes are looked at again so
    /// that valid JSON is never called invalid.
    static func describe(_ error: DecodingError, in payload: [UInt8]) -> String {
        guard case .dataCorrupted(let context) = error, context.codingPath.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any]
        else { return describe(error) }
        if let request = object["request"], !isRequestNumber(request) { return "'request' should be an integer from 1 to 2^53 - 1" }
        return "the message is valid JSON, but a value in it is not one its field takes: \(context.debugDescription)"
    }

    /// Whether a JSON value is a request number: an integer from 1 to 2^53 - 1.
    private static func isRequestNumber(_ value: Any) -> Bool {
        guard let number = value as? NSNumber, !(value is Bool) else { return false }
        let double = number.doubleValue
        return double >= 1 && double < 9_007_199_254_740_992 && double == double.rounded() && "\(number)".allSatisfy(\.isNumber)
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.isEmpty ? "the message" : "'" + keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".") + "'"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath)) lacks '\(key.stringValue)'"
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            if context.codingPath.isEmpty { return "the message is not a JSON object" }
            return "\(path(context.codingPath)) should be \(jsonName(type))"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "the message is not valid JSON" }
            if context.debugDescription.contains("UUID") {
                return "\(path(context.codingPath)) should be a UUID such as 6ba7b810-9dad-11d1-80b4-00c04fd430c8"
            }
            if context.codingPath.last?.stringValue == "role" { return "'role' should be \"app\" or \"control\"" }
            if context.codingPath.last?.stringValue == "request" { return "'request' should be an integer from 1 to 2^53 - 1" }
            return "\(path(context.codingPath)) has a value that is not allowed: \(context.debugDescription)"
        @unknown default:
            return "the message could not be read: \(error)"
        }
    }

    private static func jsonName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type, is UUID.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Int.Type, is UInt64.Type, is Double.Type, is Date.Type: return "a number"
        case is Data.Type: return "a base64 string"
        default: return "an object of another shape"
        }
    }
}

extension LocalMessage: Codable {
    enum Key: String, CodingKey {
        case type, request, version, role, bundleIdentifier, activity, directory, name, token, host, lifetime, invitation, accept, code, port
        case record, error, reply, continuation, activityType, origin, event, stream, nonce, clipboardType, types, read, size, clipboard, session, status
        case settings, url
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let type = try c.decode(String.self, forKey: .type)
        func request() throws -> UInt64 { try c.decode(UInt64.self, forKey: .request) }
        switch type {
        case "hello":
            self = .call(
                request: try request(),
                .hello(
                    version: try c.decode(Int.self, forKey: .version), role: try c.decode(LocalRole.self, forKey: .role),
                    bundleIdentifier: try c.decodeIfPresent(String.self, forKey: .bundleIdentifier)))
        case "status": self = .call(request: try request(), .status)
        case "devices": self = .call(request: try request(), .devices)
        case "nearby": self = .call(request: try request(), .nearby)
        case "continue": self = .call(request: try request(), .continue(activity: try c.decodeIfPresent(UUID.self, forKey: .activity)))
        case "watch": self = .call(request: try request(), .watch)
        case "apps": self = .call(request: try request(), .apps)
        case "installApp":
            self = .call(
                request: try request(),
                .installApp(
                    directory: try c.decode(String.self, forKey: .directory),
                    settings: try c.decodeIfPresent([String: String].self, forKey: .settings) ?? [:]))
        case "removeApp": self = .call(request: try request(), .removeApp(bundleIdentifier: try c.decode(String.self, forKey: .bundleIdentifier)))
        case "createAccount": self = .call(request: try request(), .createAccount(name: try c.decode(String.self, forKey: .name)))
        case "invite":
            self = .call(
                request: try request(),
                .invite(
                    token: try c.decodeIfPresent(Bool.self, forKey: .token) ?? false, host: try c.decodeIfPresent(String.self, forKey: .host),
                    lifetime: try c.decodeIfPresent(Double.self, forKey: .lifetime)))
        case "awaitJoin": self = .call(request: try request(), .awaitJoin(invitation: try c.decode(UUID.self, forKey: .invitation)))
        case "confirmJoin":
            self = .call(request: try request(), .confirmJoin(invitation: try c.decode(UUID.self, forKey: .invitation), accept: try c.decode(Bool.self, forKey: .accept)))
        case "join": self = .call(request: try request(), .join(code: try c.decode(String.self, forKey: .code)))
        case "awaitJoinResult": self = .call(request: try request(), .awaitJoinResult)
        case "removeDevice": self = .call(request: try request(), .removeDevice(name: try c.decode(String.self, forKey: .name)))
        case "probe": self = .call(request: try request(), .probe(host: try c.decode(String.self, forKey: .host), port: try c.decode(Int.self, forKey: .port)))
        case "doctor": self = .call(request: try request(), .doctor)
        case "siteAssociation":
            self = .call(request: try request(), .siteAssociation(host: try c.decode(String.self, forKey: .host), url: try c.decodeIfPresent(String.self, forKey: .url)))
        case "openStream":
            self = .call(
                request: try request(),
                .openStream(version: try c.decode(Int.self, forKey: .version), continuation: try c.decode(UUID.self, forKey: .continuation)))
        case "acceptStream":
            self = .call(request: try request(), .acceptStream(version: try c.decode(Int.self, forKey: .version), stream: try c.decode(UUID.self, forKey: .stream)))
        case "copy":
            self = .call(
                request: try request(),
                .copy(version: try c.decode(Int.self, forKey: .version), clipboardType: try c.decode(String.self, forKey: .clipboardType)))
        case "paste":
            self = .call(
                request: try request(),
                .paste(version: try c.decode(Int.self, forKey: .version), clipboardType: try c.decodeIfPresent(String.self, forKey: .clipboardType)))
        case "offerClipboard": self = .call(request: try request(), .offerClipboard(types: try c.decode([LocalClipboardType].self, forKey: .types)))
        case "watchClipboard": self = .call(request: try request(), .watchClipboard(session: try c.decodeIfPresent(String.self, forKey: .session)))
        case "handleSystemActivities": self = .call(request: try request(), .handleSystemActivities(types: try c.decode([String].self, forKey: .types)))
        case "systemActivityStatus": self = .call(request: try request(), .systemActivityStatus(status: try c.decode(String.self, forKey: .status)))
        case "provideClipboard":
            self = .call(
                request: try request(), .provideClipboard(version: try c.decode(Int.self, forKey: .version), read: try c.decode(UUID.self, forKey: .read)))
        case "clipboardRefused": self = .clipboardRefused(read: try c.decode(UUID.self, forKey: .read), error: try c.decode(LocalError.self, forKey: .error))
        case "clipboardRequest":
            self = .clipboardRequest(
                read: try c.decode(UUID.self, forKey: .read), clipboardType: try c.decode(String.self, forKey: .clipboardType),
                size: try c.decode(UInt64.self, forKey: .size))
        case "clipboardChanged": self = .clipboardChanged(try c.decodeIfPresent(LocalClipboard.self, forKey: .clipboard))
        case "streamRefused":
            self = .streamRefused(stream: try c.decode(UUID.self, forKey: .stream), error: try c.decode(LocalError.self, forKey: .error))
        case "streamRequest":
            self = .streamRequest(stream: try c.decode(UUID.self, forKey: .stream), activity: try c.decode(UUID.self, forKey: .activity))
        case "becameCurrent": self = .becameCurrent(try c.decode(ActivityAnnouncement.self, forKey: .activity))
        case "resigned": self = .resigned(activity: try c.decode(UUID.self, forKey: .activity))
        case "invalidated": self = .invalidated(activity: try c.decode(UUID.self, forKey: .activity))
        case "saved": self = .saved(request: try request(), try c.decode(ActivityRecord.self, forKey: .record))
        case "saveFailed": self = .saveFailed(request: try request(), try c.decode(LocalError.self, forKey: .error))
        case "delivered":
            self = .delivered(continuation: try c.decode(UUID.self, forKey: .continuation), error: try c.decodeIfPresent(LocalError.self, forKey: .error))
        case "reply": self = .reply(request: try request(), try LocalReply(from: decoder))
        case "save": self = .save(request: try request(), activity: try c.decode(UUID.self, forKey: .activity))
        case "willContinue":
            self = .willContinue(continuation: try c.decode(UUID.self, forKey: .continuation), activityType: try c.decode(String.self, forKey: .activityType))
        case "deliver":
            self = .deliver(
                continuation: try c.decode(UUID.self, forKey: .continuation), record: try c.decode(ActivityRecord.self, forKey: .record),
                origin: try c.decode(LocalOrigin.self, forKey: .origin))
        case "fail":
            self = .fail(
                continuation: try c.decode(UUID.self, forKey: .continuation), activityType: try c.decode(String.self, forKey: .activityType),
                error: try c.decode(LocalError.self, forKey: .error))
        case "wasContinued": self = .wasContinued(activity: try c.decode(UUID.self, forKey: .activity))
        case "prove": self = .prove(nonce: try c.decode(Data.self, forKey: .nonce))
        case "proof": self = .proof(nonce: try c.decode(Data.self, forKey: .nonce))
        case "event": self = .event(try c.decode(LocalEvent.self, forKey: .event))
        default:
            throw LocalError(.badRequest, "unknown message type '\(type)'")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        switch self {
        case .call(let request, let call):
            try c.encode(request, forKey: .request)
            switch call {
            case .hello(let version, let role, let bundleIdentifier):
                try c.encode("hello", forKey: .type)
                try c.encode(version, forKey: .version)
                try c.encode(role, forKey: .role)
                try c.encodeIfPresent(bundleIdentifier, forKey: .bundleIdentifier)
            case .status: try c.encode("status", forKey: .type)
            case .devices: try c.encode("devices", forKey: .type)
            case .nearby: try c.encode("nearby", forKey: .type)
            case .continue(let activity):
                try c.encode("continue", forKey: .type)
                try c.encodeIfPresent(activity, forKey: .activity)
            case .watch: try c.encode("watch", forKey: .type)
            case .apps: try c.encode("apps", forKey: .type)
            case .installApp(let directory, let settings):
                try c.encode("installApp", forKey: .type)
                try c.encode(directory, forKey: .directory)
                if !settings.isEmpty { try c.encode(settings, forKey: .settings) }
            case .removeApp(let bundleIdentifier):
                try c.encode("removeApp", forKey: .type)
                try c.encode(bundleIdentifier, forKey: .bundleIdentifier)
            case .createAccount(let name):
                try c.encode("createAccount", forKey: .type)
                try c.encode(name, forKey: .name)
            case .invite(let token, let host, let lifetime):
                try c.encode("invite", forKey: .type)
                try c.encode(token, forKey: .token)
                try c.encodeIfPresent(host, forKey: .host)
                try c.encodeIfPresent(lifetime, forKey: .lifetime)
            case .awaitJoin(let invitation):
                try c.encode("awaitJoin", forKey: .type)
                try c.encode(invitation, forKey: .invitation)
            case .confirmJoin(let invitation, let accept):
                try c.encode("confirmJoin", forKey: .type)
                try c.encode(invitation, forKey: .invitation)
                try c.encode(accept, forKey: .accept)
            case .join(let code):
                try c.encode("join", forKey: .type)
                try c.encode(code, forKey: .code)
            case .awaitJoinResult:
                try c.encode("awaitJoinResult", forKey: .type)
            case .removeDevice(let name):
                try c.encode("removeDevice", forKey: .type)
                try c.encode(name, forKey: .name)
            case .probe(let host, let port):
                try c.encode("probe", forKey: .type)
                try c.encode(host, forKey: .host)
                try c.encode(port, forKey: .port)
            case .doctor:
                try c.encode("doctor", forKey: .type)
            case .siteAssociation(let host, let url):
                try c.encode("siteAssociation", forKey: .type)
                try c.encode(host, forKey: .host)
                try c.encodeIfPresent(url, forKey: .url)
            case .openStream(let version, let continuation):
                try c.encode("openStream", forKey: .type)
                try c.encode(version, forKey: .version)
                try c.encode(continuation, forKey: .continuation)
            case .acceptStream(let version, let stream):
                try c.encode("acceptStream", forKey: .type)
                try c.encode(version, forKey: .version)
                try c.encode(stream, forKey: .stream)
            case .copy(let version, let clipboardType):
                try c.encode("copy", forKey: .type)
                try c.encode(version, forKey: .version)
                try c.encode(clipboardType, forKey: .clipboardType)
            case .paste(let version, let clipboardType):
                try c.encode("paste", forKey: .type)
                try c.encode(version, forKey: .version)
                try c.encodeIfPresent(clipboardType, forKey: .clipboardType)
            case .offerClipboard(let types):
                try c.encode("offerClipboard", forKey: .type)
                try c.encode(types, forKey: .types)
            case .watchClipboard(let session):
                try c.encode("watchClipboard", forKey: .type)
                try c.encodeIfPresent(session, forKey: .session)
            case .provideClipboard(let version, let read):
                try c.encode("provideClipboard", forKey: .type)
                try c.encode(version, forKey: .version)
                try c.encode(read, forKey: .read)
            case .handleSystemActivities(let types):
                try c.encode("handleSystemActivities", forKey: .type)
                try c.encode(types, forKey: .types)
            case .systemActivityStatus(let status):
                try c.encode("systemActivityStatus", forKey: .type)
                try c.encode(status, forKey: .status)
            }
        case .becameCurrent(let activity):
            try c.encode("becameCurrent", forKey: .type)
            try c.encode(activity, forKey: .activity)
        case .resigned(let activity):
            try c.encode("resigned", forKey: .type)
            try c.encode(activity, forKey: .activity)
        case .invalidated(let activity):
            try c.encode("invalidated", forKey: .type)
            try c.encode(activity, forKey: .activity)
        case .saved(let request, let record):
            try c.encode("saved", forKey: .type)
            try c.encode(request, forKey: .request)
            try c.encode(record, forKey: .record)
        case .saveFailed(let request, let error):
            try c.encode("saveFailed", forKey: .type)
            try c.encode(request, forKey: .request)
            try c.encode(error, forKey: .error)
        case .delivered(let continuation, let error):
            try c.encode("delivered", forKey: .type)
            try c.encode(continuation, forKey: .continuation)
            try c.encodeIfPresent(error, forKey: .error)
        case .reply(let request, let reply):
            try c.encode("reply", forKey: .type)
            try c.encode(request, forKey: .request)
            try reply.encode(to: encoder)
        case .save(let request, let activity):
            try c.encode("save", forKey: .type)
            try c.encode(request, forKey: .request)
            try c.encode(activity, forKey: .activity)
        case .willContinue(let continuation, let activityType):
            try c.encode("willContinue", forKey: .type)
            try c.encode(continuation, forKey: .continuation)
            try c.encode(activityType, forKey: .activityType)
        case .deliver(let continuation, let record, let origin):
            try c.encode("deliver", forKey: .type)
            try c.encode(continuation, forKey: .continuation)
            try c.encode(record, forKey: .record)
            try c.encode(origin, forKey: .origin)
        case .fail(let continuation, let activityType, let error):
            try c.encode("fail", forKey: .type)
            try c.encode(continuation, forKey: .continuation)
            try c.encode(activityType, forKey: .activityType)
            try c.encode(error, forKey: .error)
        case .wasContinued(let activity):
            try c.encode("wasContinued", forKey: .type)
            try c.encode(activity, forKey: .activity)
        case .event(let event):
            try c.encode("event", forKey: .type)
            try c.encode(event, forKey: .event)
        case .streamRefused(let stream, let error):
            try c.encode("streamRefused", forKey: .type)
            try c.encode(stream, forKey: .stream)
            try c.encode(error, forKey: .error)
        case .streamRequest(let stream, let activity):
            try c.encode("streamRequest", forKey: .type)
            try c.encode(stream, forKey: .stream)
            try c.encode(activity, forKey: .activity)
        case .clipboardRefused(let read, let error):
            try c.encode("clipboardRefused", forKey: .type)
            try c.encode(read, forKey: .read)
            try c.encode(error, forKey: .error)
        case .clipboardRequest(let read, let clipboardType, let size):
            try c.encode("clipboardRequest", forKey: .type)
            try c.encode(read, forKey: .read)
            try c.encode(clipboardType, forKey: .clipboardType)
            try c.encode(size, forKey: .size)
        case .clipboardChanged(let clipboard):
            try c.encode("clipboardChanged", forKey: .type)
            try c.encodeIfPresent(clipboard, forKey: .clipboard)
        case .prove(let nonce):
            try c.encode("prove", forKey: .type)
            try c.encode(nonce, forKey: .nonce)
        case .proof(let nonce):
            try c.encode("proof", forKey: .type)
            try c.encode(nonce, forKey: .nonce)
        }
    }
}
