import Foundation

/// What a device says about its current activity to the other devices of the account:
/// who it is, never its state. The state is fetched only when a person continues it.
public struct ActivityAnnouncement: Sendable, Hashable {
    public var id: UUID
    public var activityType: String
    public var title: String?
    public var bundleIdentifier: String?
    public var teamIdentifier: String?
    public var hasWebpageURL: Bool
    public var supportsContinuationStreams: Bool
    public var expirationDate: Date?

    public init(
        id: UUID, activityType: String, title: String? = nil, bundleIdentifier: String? = nil,
        teamIdentifier: String? = nil, hasWebpageURL: Bool = false, supportsContinuationStreams: Bool = false,
        expirationDate: Date? = nil
    ) {
        self.id = id
        self.activityType = activityType
        self.title = title
        self.bundleIdentifier = bundleIdentifier
        self.teamIdentifier = teamIdentifier
        self.hasWebpageURL = hasWebpageURL
        self.supportsContinuationStreams = supportsContinuationStreams
        self.expirationDate = expirationDate
    }

    /// Whether the activity's expiration date has passed: an expired activity is never offered.
    public func isExpired(at now: Date = Date()) -> Bool {
        expirationDate.map { $0 <= now } ?? false
    }
}

/// A saved activity as it travels to the continuing device: every property the continuing
/// app reads, with `userInfo` in Handoff's binary encoding.
public struct ActivityRecord: Sendable, Hashable {
    public var announcement: ActivityAnnouncement
    public var webpageURL: URL?
    public var referrerURL: URL?
    public var keywords: Set<String>
    public var requiredUserInfoKeys: Set<String>?
    public var persistentIdentifier: String?
    public var targetContentIdentifier: String?
    public var isEligibleForSearch: Bool
    public var isEligibleForPublicIndexing: Bool
    public var isEligibleForPrediction: Bool
    /// `userInfo` encoded with `UserInfoCoding`; `nil` when the activity has none.
    public var userInfo: Data?
    /// File URLs in `userInfo` that arrived as the origin had them, not as this device's paths
    /// (see `UserActivity.untranslatedFileURLs`).
    public var untranslatedFileURLs: [URL] = []

    public init(
        announcement: ActivityAnnouncement, webpageURL: URL? = nil, referrerURL: URL? = nil,
        keywords: Set<String> = [], requiredUserInfoKeys: Set<String>? = nil, persistentIdentifier: String? = nil,
        targetContentIdentifier: String? = nil, isEligibleForSearch: Bool = false,
        isEligibleForPublicIndexing: Bool = false, isEligibleForPrediction: Bool = false, userInfo: Data? = nil
    ) {
        self.announcement = announcement
        self.webpageURL = webpageURL
        self.referrerURL = referrerURL
        self.keywords = keywords
        self.requiredUserInfoKeys = requiredUserInfoKeys
        self.persistentIdentifier = persistentIdentifier
        self.targetContentIdentifier = targetContentIdentifier
        self.isEligibleForSearch = isEligibleForSearch
        self.isEligibleForPublicIndexing = isEligibleForPublicIndexing
        self.isEligibleForPrediction = isEligibleForPrediction
        self.userInfo = userInfo
    }

    /// The size that counts against the payload limit: the encoded `userInfo`.
    public var payloadSize: Int { userInfo?.count ?? 0 }
}
