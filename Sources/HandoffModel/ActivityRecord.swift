import Foundation

/// A saved activity as it travels to the continuing device: every property the continuing
/// app reads, with `userInfo` in Handoff's binary encoding (`docs/userinfo-encoding.md`;
/// base64 in the local socket's JSON). URLs are kept as the app's strings: the receiving
/// side decides what a URL it cannot parse means.
public struct ActivityRecord: Codable, Sendable, Hashable {
    public var activity: ActivityAnnouncement
    public var webpageURL: String?
    public var referrerURL: String?
    public var keywords: [String]
    public var requiredUserInfoKeys: [String]?
    public var persistentIdentifier: String?
    public var targetContentIdentifier: String?
    public var isEligibleForSearch: Bool
    public var isEligibleForPublicIndexing: Bool
    public var isEligibleForPrediction: Bool
    public var userInfo: Data?
    /// In a delivered record: the file URLs in `userInfo` that were not translated to this
    /// device's paths (outside every synced container on the origin, or in one this device
    /// does not have), as they came.
    public var untranslatedFileURLs: [String]?

    public init(
        activity: ActivityAnnouncement, webpageURL: String? = nil, referrerURL: String? = nil, keywords: [String] = [],
        requiredUserInfoKeys: [String]? = nil, persistentIdentifier: String? = nil, targetContentIdentifier: String? = nil,
        isEligibleForSearch: Bool = false, isEligibleForPublicIndexing: Bool = false, isEligibleForPrediction: Bool = false,
        userInfo: Data? = nil, untranslatedFileURLs: [String]? = nil
    ) {
        self.untranslatedFileURLs = untranslatedFileURLs
        self.activity = activity
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

    enum CodingKeys: String, CodingKey {
        case activity, webpageURL, referrerURL, keywords, requiredUserInfoKeys, persistentIdentifier, targetContentIdentifier
        case isEligibleForSearch, isEligibleForPublicIndexing, isEligibleForPrediction, userInfo, untranslatedFileURLs
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        activity = try c.decode(ActivityAnnouncement.self, forKey: .activity)
        webpageURL = try c.decodeIfPresent(String.self, forKey: .webpageURL)
        referrerURL = try c.decodeIfPresent(String.self, forKey: .referrerURL)
        keywords = try c.decodeIfPresent([String].self, forKey: .keywords) ?? []
        requiredUserInfoKeys = try c.decodeIfPresent([String].self, forKey: .requiredUserInfoKeys)
        persistentIdentifier = try c.decodeIfPresent(String.self, forKey: .persistentIdentifier)
        targetContentIdentifier = try c.decodeIfPresent(String.self, forKey: .targetContentIdentifier)
        isEligibleForSearch = try c.decodeIfPresent(Bool.self, forKey: .isEligibleForSearch) ?? false
        isEligibleForPublicIndexing = try c.decodeIfPresent(Bool.self, forKey: .isEligibleForPublicIndexing) ?? false
        isEligibleForPrediction = try c.decodeIfPresent(Bool.self, forKey: .isEligibleForPrediction) ?? false
        userInfo = try c.decodeIfPresent(Data.self, forKey: .userInfo)
        untranslatedFileURLs = try c.decodeIfPresent([String].self, forKey: .untranslatedFileURLs)
    }
}
