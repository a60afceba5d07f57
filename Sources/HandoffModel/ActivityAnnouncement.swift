import Foundation

/// An activity's identity, as its app announces it and as the devices of an account are told
/// of it: who it is, never its state. The state is fetched only when a person continues it.
///
/// One type for every layer: the app library makes it, the local socket carries it as JSON
/// (`docs/local-api.md`), and `HandoffWire` encodes it for links.
public struct ActivityAnnouncement: Codable, Sendable, Hashable {
    public var id: UUID
    public var activityType: String
    public var title: String?
    /// Filled in by the agent from the app's verified manifest; what a client sends is ignored
    /// unless the client is a script (see `docs/local-api.md`).
    public var bundleIdentifier: String?
    public var teamIdentifier: String?
    public var hasWebpageURL: Bool
    public var supportsContinuationStreams: Bool
    /// Seconds since 1970. Always a finite date or nil: an app's date that is not a number, or
    /// infinitely far ahead, means no expiration; one infinitely far back, already expired
    /// (JSON has no such numbers, and Foundation's encoder refuses them in dates).
    public var expirationDate: Date? {
        didSet { expirationDate = Self.finite(expirationDate) }
    }

    /// `date` as a finite date, or nil (see `expirationDate`).
    public static func finite(_ date: Date?) -> Date? {
        guard let date, !date.timeIntervalSinceReferenceDate.isFinite else { return date }
        return date.timeIntervalSinceReferenceDate == -.infinity ? Date.distantPast : nil
    }

    public init(
        id: UUID, activityType: String, title: String? = nil, bundleIdentifier: String? = nil, teamIdentifier: String? = nil,
        hasWebpageURL: Bool = false, supportsContinuationStreams: Bool = false, expirationDate: Date? = nil
    ) {
        self.id = id
        self.activityType = activityType
        self.title = title
        self.bundleIdentifier = bundleIdentifier
        self.teamIdentifier = teamIdentifier
        self.hasWebpageURL = hasWebpageURL
        self.supportsContinuationStreams = supportsContinuationStreams
        self.expirationDate = Self.finite(expirationDate)
    }

    /// Whether the expiration date has passed: an expired activity is never offered.
    public func isExpired(at now: Date = Date()) -> Bool {
        expirationDate.map { $0 <= now } ?? false
    }

    enum CodingKeys: String, CodingKey {
        case id, activityType, title, bundleIdentifier, teamIdentifier, hasWebpageURL, supportsContinuationStreams, expirationDate
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(UUID.self, forKey: .id)
        activityType = try c.decode(String.self, forKey: .activityType)
        title = try c.decodeIfPresent(String.self, forKey: .title)
        bundleIdentifier = try c.decodeIfPresent(String.self, forKey: .bundleIdentifier)
        teamIdentifier = try c.decodeIfPresent(String.self, forKey: .teamIdentifier)
        hasWebpageURL = try c.decodeIfPresent(Bool.self, forKey: .hasWebpageURL) ?? false
        supportsContinuationStreams = try c.decodeIfPresent(Bool.self, forKey: .supportsContinuationStreams) ?? false
        expirationDate = Self.finite(try c.decodeIfPresent(Date.self, forKey: .expirationDate))
    }
}
