import Foundation
import HandoffModel
import Logging

/// An identifier an app gives an activity so that it can find or delete it later.
public typealias NSUserActivityPersistentIdentifier = String

/// The state of what a person is doing in an app, which another of their devices can continue.
///
/// This is Apple's `NSUserActivity` contract with Apple's names. Make one for each thing a
/// person does, keep its `userInfo` current (directly, or lazily through `needsSave` and the
/// delegate), and call `becomeCurrent()` while the person is doing it. Every property may be
/// read and written from any thread.
open class UserActivity: @unchecked Sendable {
    // @unchecked: every mutable property lives in `state`, read and written only under `lock`;
    // `center` and the identifiers are immutable after init.

    /// The kind of activity, such as `com.example.editor.editing`. Fixed at creation.
    public let activityType: String

    /// Identifies this activity object across devices for one continuation.
    package let id: UUID
    package let center: ActivityCenter
    /// Set on an activity that arrived from another device.
    package let continuation: ContinuationContext?

    // NSLock rather than Mutex: what it guards holds values that are not Sendable (`Any` in a
    // userInfo, delegates, activities), read out under the lock; Mutex hands out only what it
    // can send.
    private let lock = NSLock()
    private var state = State()

    private struct State {
        var title: String?
        var userInfo: [AnyHashable: Any]?
        var requiredUserInfoKeys: Set<String>?
        var needsSave = false
        var webpageURL: URL?
        var referrerURL: URL?
        var expirationDate: Date?
        var keywords: Set<String> = []
        var isEligibleForHandoff = true
        var isEligibleForSearch = false
        var isEligibleForPublicIndexing = false
        var isEligibleForPrediction = false
        var persistentIdentifier: NSUserActivityPersistentIdentifier?
        var targetContentIdentifier: String?
        var supportsContinuationStreams = false
        weak var delegate: (any UserActivityDelegate)?
        var isInvalidated = false
        var saveHandler: (@MainActor @Sendable (UserActivity) -> Void)?
    }

    /// Makes an activity of the given type. An empty type is a programming error and stops
    /// the app with a message, as Apple's does; use `init(validatingActivityType:)` to handle it.
    public convenience init(activityType: String) {
        do {
            try self.init(validatingActivityType: activityType)
        } catch {
            preconditionFailure("\(error)")
        }
    }

    /// Makes an activity, throwing instead of stopping when the type is empty.
    public init(validatingActivityType activityType: String) throws(UserActivityError) {
        guard !activityType.isEmpty else { throw .emptyActivityType }
        self.activityType = activityType
        self.id = UUID()
        self.center = ActivityCenter.forNewActivities
        self.continuation = nil
        self.untranslatedFileURLs = []
    }

    /// An activity that arrived from another device, bound to the app that continues it.
    package init(record: ActivityRecord, userInfo: [AnyHashable: Any]?, center: ActivityCenter, continuation: ContinuationContext) {
        self.activityType = record.activity.activityType
        self.id = record.activity.id
        self.center = center
        self.continuation = continuation
        state.title = record.activity.title
        state.userInfo = userInfo
        state.requiredUserInfoKeys = record.requiredUserInfoKeys.map(Set.init)
        state.webpageURL = record.webpageURL.flatMap(URL.init(string:))
        state.referrerURL = record.referrerURL.flatMap(URL.init(string:))
        state.expirationDate = record.activity.expirationDate
        state.keywords = Set(record.keywords)
        state.isEligibleForSearch = record.isEligibleForSearch
        state.isEligibleForPublicIndexing = record.isEligibleForPublicIndexing
        state.isEligibleForPrediction = record.isEligibleForPrediction
        state.persistentIdentifier = record.persistentIdentifier
        state.targetContentIdentifier = record.targetContentIdentifier
        state.supportsContinuationStreams = record.activity.supportsContinuationStreams
        untranslatedFileURLs = (record.untranslatedFileURLs ?? []).compactMap(URL.init(string:))
    }

    /// On a continued activity: the file URLs in `userInfo` that are the originating device's
    /// paths, not this device's. A file inside a synced container the two devices share (the
    /// agents' `--container`) arrives as this device's own path and is not listed; any other
    /// file URL arrives unchanged and is listed here, so the app can tell a file it can open
    /// from one that only exists on the other device. Empty on an activity made here.
    public let untranslatedFileURLs: [URL]

    private func read<T>(_ body: (State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(state)
    }

    /// Changes state; when `announces` and the activity is current, its device hears of it.
    private func write(announces: Bool = false, _ body: (inout State) -> Void) {
        lock.lock()
        body(&state)
        lock.unlock()
        if announces { center.activityChanged(self) }
    }

    // MARK: Properties

    /// A title a person can read, such as a document's name, shown on the other devices.
    open var title: String? {
        get { read { $0.title } }
        set { write(announces: true) { $0.title = newValue } }
    }

    /// The state another device needs to continue the activity. Only property-list values
    /// (see `UserInfoValue`) can travel; anything else fails the continuation with a message
    /// naming its key.
    open var userInfo: [AnyHashable: Any]? {
        get { read { $0.userInfo } }
        set { write { $0.userInfo = newValue } }
    }

    /// Merges entries into `userInfo`; for a key present in both, the new value wins.
    open func addUserInfoEntries(from otherDictionary: [AnyHashable: Any]) {
        write { state in
            var merged = state.userInfo ?? [:]
            merged.merge(otherDictionary) { _, new in new }
            state.userInfo = merged
        }
    }

    /// The `userInfo` keys the continuing app cannot do without. Every key travels; a save
    /// that lacks one of these is logged as a warning on the originating device.
    open var requiredUserInfoKeys: Set<String>? {
        get { read { $0.requiredUserInfoKeys } }
        set { write { $0.requiredUserInfoKeys = newValue } }
    }

    /// Set this when the state changed: before the activity is next sent, the delegate's
    /// `userActivityWillSave(_:)` (or the responders' `updateUserActivityState(_:)`) is
    /// called once, however many times it was set.
    open var needsSave: Bool {
        get { read { $0.needsSave } }
        set { write { $0.needsSave = newValue } }
    }

    /// The web page for this activity: a device with no app for it opens the page instead.
    /// Only `http` and `https` URLs are accepted; any other is a programming error that stops
    /// the app with a message naming it, as Apple's raises. Use `setWebpageURL(_:)` to handle it.
    open var webpageURL: URL? {
        get { read { $0.webpageURL } }
        set {
            do {
                try setWebpageURL(newValue)
            } catch {
                preconditionFailure("\(error)")
            }
        }
    }

    /// Sets `webpageURL`, throwing for a URL that is not absolute `http` or `https`.
    open func setWebpageURL(_ url: URL?) throws(UserActivityError) {
        if let url, !url.isWebPage {
            throw .unsupportedWebpageURL(url.absoluteString)
        }
        write(announces: true) { $0.webpageURL = url }
    }

    /// The page that linked to `webpageURL`, if any.
    open var referrerURL: URL? {
        get { read { $0.referrerURL } }
        set { write { $0.referrerURL = newValue } }
    }

    /// After this date the activity is no longer offered to other devices.
    open var expirationDate: Date? {
        get { read { $0.expirationDate } }
        set { write(announces: true) { $0.expirationDate = newValue } }
    }

    /// Words that describe the activity, for search.
    open var keywords: Set<String> {
        get { read { $0.keywords } }
        set { write { $0.keywords = newValue } }
    }

    /// Whether other devices may continue the activity. True by default.
    open var isEligibleForHandoff: Bool {
        get { read { $0.isEligibleForHandoff } }
        set { write(announces: true) { $0.isEligibleForHandoff = newValue } }
    }

    /// Whether the activity may be indexed for search on this device. Kept and carried; no
    /// search index exists on Linux yet.
    open var isEligibleForSearch: Bool {
        get { read { $0.isEligibleForSearch } }
        set { write { $0.isEligibleForSearch = newValue } }
    }

    /// Whether the activity may be indexed publicly. Kept and carried.
    open var isEligibleForPublicIndexing: Bool {
        get { read { $0.isEligibleForPublicIndexing } }
        set { write { $0.isEligibleForPublicIndexing = newValue } }
    }

    /// Whether the activity may be suggested later. Kept and carried.
    open var isEligibleForPrediction: Bool {
        get { read { $0.isEligibleForPrediction } }
        set { write { $0.isEligibleForPrediction = newValue } }
    }

    /// The app's own identifier for this activity.
    open var persistentIdentifier: NSUserActivityPersistentIdentifier? {
        get { read { $0.persistentIdentifier } }
        set { write { $0.persistentIdentifier = newValue } }
    }

    /// Identifies the content, so a continuing app can pick the right window. Setting it does
    /// not set `needsSave`.
    open var targetContentIdentifier: String? {
        get { read { $0.targetContentIdentifier } }
        set { write { $0.targetContentIdentifier = newValue } }
    }

    /// Whether the continuing app may open streams back to this activity.
    open var supportsContinuationStreams: Bool {
        get { read { $0.supportsContinuationStreams } }
        set { write(announces: true) { $0.supportsContinuationStreams = newValue } }
    }

    /// The object told when the activity is saved, continued, or asked for streams. Held weakly.
    open weak var delegate: (any UserActivityDelegate)? {
        get { read { $0.delegate } }
        set { write { $0.delegate = newValue } }
    }

    // MARK: Lifecycle

    /// Makes this the app's current activity, the one its other devices are offered. It
    /// replaces the app's previous current activity. Does nothing after `invalidate()`.
    open func becomeCurrent() {
        guard !isInvalidated else {
            center.logger.debug("becomeCurrent() on an invalidated activity does nothing", metadata: ["type": "\(activityType)"])
            return
        }
        center.makeCurrent(self)
    }

    /// Stops offering this activity if it is current; otherwise does nothing.
    open func resignCurrent() {
        center.resign(self)
    }

    /// Ends the activity for good: it resigns, disappears from other devices, and can never
    /// become current again. Calling it again does nothing.
    open func invalidate() {
        var first = false
        write { state in
            first = !state.isInvalidated
            state.isInvalidated = true
        }
        if first { center.invalidate(self) }
    }

    /// Whether `invalidate()` was called.
    package var isInvalidated: Bool { read { $0.isInvalidated } }

    /// Whether this is its app's current activity.
    package var isCurrent: Bool { center.currentActivity === self }

    // MARK: Continuation streams

    /// On the continuing device, opens a pair of streams to the originating app, whose
    /// delegate receives the other ends. The handler gets the streams or an error.
    open func getContinuationStreams(completionHandler: @escaping @Sendable (InputStream?, OutputStream?, (any Error)?) -> Void) {
        Task {
            do {
                let pair = try await openContinuationStreams()
                completionHandler(pair.input, pair.output, nil)
            } catch {
                completionHandler(nil, nil, error)
            }
        }
    }

    /// The async form of `getContinuationStreams(completionHandler:)`.
    open func continuationStreams() async throws -> (InputStream, OutputStream) {
        let pair = try await openContinuationStreams()
        return (pair.input, pair.output)
    }

    private func openContinuationStreams() async throws(CocoaError) -> StreamPair {
        guard let continuation else {
            throw .handoff(.userActivityHandoffFailed, "continuation streams can only be opened on a continued activity, inside the app that continued it; '\(activityType)' was made on this device")
        }
        guard supportsContinuationStreams else {
            throw .handoff(.userActivityHandoffFailed, "activity '\(activityType)' does not support continuation streams: the originating app must set supportsContinuationStreams before becomeCurrent()")
        }
        do {
            return try await center.openStreams(continuation)
        } catch {
            throw error.cocoaError
        }
    }

    // MARK: Saving, for the app frameworks and the agent

    /// Installed by the app framework when responders or a document manage this activity.
    package var saveHandler: (@MainActor @Sendable (UserActivity) -> Void)? {
        get { read { $0.saveHandler } }
        set { write { $0.saveHandler = newValue } }
    }

    /// Brings the activity up to date if `needsSave` is set: the framework's responders first,
    /// then the delegate. The flag is cleared before the calls so that they may set it again.
    @MainActor package func saveIfNeeded() {
        var handler: (@MainActor @Sendable (UserActivity) -> Void)?
        var delegate: (any UserActivityDelegate)?
        var needed = false
        write { state in
            needed = state.needsSave
            state.needsSave = false
            handler = state.saveHandler
            delegate = state.delegate
        }
        guard needed else { return }
        handler?(self)
        delegate?.userActivityWillSave(self)
    }

    /// The identity other devices are told about.
    package func announcement(bundleIdentifier: String?, teamIdentifier: String?) -> ActivityAnnouncement {
        read { state in
            ActivityAnnouncement(
                id: id, activityType: activityType, title: state.title, bundleIdentifier: bundleIdentifier,
                teamIdentifier: teamIdentifier, hasWebpageURL: state.webpageURL != nil,
                supportsContinuationStreams: state.supportsContinuationStreams, expirationDate: state.expirationDate)
        }
    }

    /// Whether the activity may be offered to other devices now.
    package var isOfferable: Bool {
        read { !$0.isInvalidated && $0.isEligibleForHandoff && !($0.expirationDate.map { $0 <= Date() } ?? false) }
    }

    /// The activity as it travels, with `userInfo` encoded. Throws naming a value that
    /// cannot travel.
    package func record(bundleIdentifier: String?, teamIdentifier: String?) throws(UserInfoError) -> ActivityRecord {
        let (snapshot, info) = read { ($0, $0.userInfo) }
        var encoded: Data?
        if let info {
            encoded = try UserInfoCoding.encode(info)
        }
        return ActivityRecord(
            activity: announcement(bundleIdentifier: bundleIdentifier, teamIdentifier: teamIdentifier),
            webpageURL: snapshot.webpageURL?.absoluteString, referrerURL: snapshot.referrerURL?.absoluteString,
            keywords: snapshot.keywords.sorted(), requiredUserInfoKeys: snapshot.requiredUserInfoKeys?.sorted(), persistentIdentifier: snapshot.persistentIdentifier,
            targetContentIdentifier: snapshot.targetContentIdentifier, isEligibleForSearch: snapshot.isEligibleForSearch,
            isEligibleForPublicIndexing: snapshot.isEligibleForPublicIndexing,
            isEligibleForPrediction: snapshot.isEligibleForPrediction, userInfo: encoded)
    }
}

/// A misuse of `UserActivity` that Apple's API raises an exception for.
public enum UserActivityError: Error, Sendable, Hashable, CustomStringConvertible {
    case emptyActivityType
    case unsupportedWebpageURL(String)

    public var description: String {
        switch self {
        case .emptyActivityType:
            return "a user activity needs a non-empty activityType, such as 'com.example.app.editing'"
        case .unsupportedWebpageURL(let url):
            return "webpageURL must be an absolute http or https URL; '\(url)' is not"
        }
    }
}

/// Activities compare by identity, as `NSUserActivity` objects do, so that they can be kept
/// in sets (`UIScene.ConnectionOptions.userActivities`).
extension UserActivity: Hashable {
    public static func == (lhs: UserActivity, rhs: UserActivity) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
