import Foundation

/// The service an associated domain needs for Handoff from a web browser to an app.
private let activityContinuationService = "activitycontinuation"

/// The parts of an activity offered by another device that decide where it continues.
public struct IncomingActivity: Sendable, Hashable {
    /// The team of the app that created the activity. Only apps of the same team may continue it.
    public var teamIdentifier: String?
    /// The activity type, such as `com.example.editor.editing` or `NSUserActivityTypeBrowsingWeb`.
    public var activityType: String
    /// The web page showing the same thing, if the activity has one.
    public var webpageURL: URL?
    /// The bundle identifier of the app that created the activity, used to break ties.
    public var originBundleIdentifier: String?

    public init(
        teamIdentifier: String?,
        activityType: String,
        webpageURL: URL? = nil,
        originBundleIdentifier: String? = nil
    ) {
        self.teamIdentifier = teamIdentifier
        self.activityType = activityType
        self.webpageURL = webpageURL
        self.originBundleIdentifier = originBundleIdentifier
    }
}

/// Where an incoming activity continues, with a sentence saying why, for logs and for the person.
public enum ActivityRoute: Sendable, Equatable {
    /// Launch this app and give it the activity.
    case app(AppManifest, reason: String)
    /// No app continues the activity: open the page in the person's default web browser.
    case webBrowser(URL, reason: String)
    /// Nothing here can continue the activity; the reason says what would make it work.
    case nowhere(reason: String)
}

/// Chooses which installed app, if any, continues an incoming activity.
public enum ActivityRouter {
    /// Routes `activity` to one of the `installed` apps, the web browser, or nowhere.
    ///
    /// The rules, in order:
    ///
    /// 1. **Native app to native app.** For any type other than `NSUserActivityTypeBrowsingWeb`,
    ///    the candidates are the apps of the activity's team (both team identifiers present
    ///    and equal) whose `continuableActivityTypes` contain the type. An activity without
    ///    a team, or with an empty one, matches no app.
    /// 2. **Web browser to native app.** For `NSUserActivityTypeBrowsingWeb` with an http or
    ///    https `webpageURL`, the candidates are the apps with an `activitycontinuation`
    ///    associated domain matching the URL's host, and that the site approves:
    ///    `siteApproves(host, applicationIdentifier)` returns true, which a caller answers
    ///    from the site's `apple-app-site-association` file. An app without a team cannot be
    ///    approved. Apps that claim the host but are not approved are skipped, and the final
    ///    reason names them.
    /// 3. **Native app to web browser.** Otherwise, when `webpageURL` is http or https: if
    ///    `defaultBrowser` is the bundle identifier of an installed app that lists
    ///    `NSUserActivityTypeBrowsingWeb` in its `activityTypes`, that app receives the
    ///    activity itself; if not, the page is opened by its URL.
    /// 4. **Nowhere.** Otherwise, the reason says what is missing, naming apps that declare
    ///    the type for another team.
    ///
    /// Among several candidates of rule 1 or 2, the app whose bundle identifier equals
    /// `originBundleIdentifier` wins; otherwise the lowest bundle identifier, so the choice
    /// never depends on the order of `installed`.
    public static func route(
        _ activity: IncomingActivity,
        installed: [AppManifest],
        defaultBrowser: String? = nil,
        siteApproves: (_ host: String, _ applicationIdentifier: String) -> Bool = { _, _ in false }
    ) -> ActivityRoute {
        let page = webPage(activity.webpageURL)
        let whyNoNativeApp: String

        if activity.activityType == NSUserActivityTypeBrowsingWeb {
            guard let page else {
                return .nowhere(reason: "activity type '\(NSUserActivityTypeBrowsingWeb)' needs an http or https webpageURL, but \(describeMissingPage(activity.webpageURL))")
            }
            switch appClaiming(page, installed: installed, origin: activity.originBundleIdentifier, siteApproves: siteApproves) {
            case .chosen(let app, let reason):
                return .app(app, reason: reason)
            case .none(let why):
                whyNoNativeApp = why
            }
        } else {
            switch appDeclaring(activity, installed: installed) {
            case .chosen(let app, let reason):
                return .app(app, reason: reason)
            case .none(let why):
                whyNoNativeApp = why
            }
        }

        guard let page else {
            return .nowhere(reason: "\(whyNoNativeApp), and \(describeMissingPage(activity.webpageURL))")
        }
        return browserRoute(for: page, whyNoNativeApp: whyNoNativeApp, installed: installed, defaultBrowser: defaultBrowser)
    }

    /// The outcome of looking for a native app: the app with why it was chosen, or why none was.
    private enum Choice {
        case chosen(AppManifest, reason: String)
        case none(String)
    }

    /// Rule 1: an app of the same team that declares the activity type.
    private static func appDeclaring(_ activity: IncomingActivity, installed: [AppManifest]) -> Choice {
        let type = activity.activityType
        let declaring = installed.filter { $0.continuableActivityTypes.contains(type) }

        guard let team = activity.teamIdentifier, !team.isBlank else {
            let named = declaring.isEmpty ? "" : " (\(declaring.map { "'\($0.bundleIdentifier)'" }.sorted().joined(separator: ", ")) declares it)"
            let missing = activity.teamIdentifier == nil ? "has no team identifier" : "has an empty team identifier"
            return .none("the activity \(missing), so no app may continue activity type '\(type)'\(named)")
        }

        let sameTeam = declaring.filter { $0.teamIdentifier == team }
        if case let (app, tieBreak)? = pick(sameTeam, origin: activity.originBundleIdentifier) {
            return .chosen(app, reason: "'\(app.bundleIdentifier)' of team '\(team)' declares activity type '\(type)'\(tieBreak)")
        }

        var why = "no installed app of team '\(team)' declares activity type '\(type)' in NSUserActivityTypes or as a document type's NSUbiquitousDocumentUserActivityType"
        let otherTeams = declaring.sorted { $0.bundleIdentifier < $1.bundleIdentifier }.map { app in
            if let other = app.teamIdentifier, !other.isBlank {
                return "'\(app.bundleIdentifier)' declares it but belongs to team '\(other)'"
            }
            return "'\(app.bundleIdentifier)' declares it but has no team identifier"
        }
        if !otherTeams.isEmpty {
            why += " (" + otherTeams.joined(separator: "; ") + ")"
        }
        return .none(why)
    }

    /// Rule 2: an app that claims the page's host for activity continuation and that the site approves.
    private static func appClaiming(
        _ page: URL,
        installed: [AppManifest],
        origin: String?,
        siteApproves: (String, String) -> Bool
    ) -> Choice {
        let host = AssociatedDomain.normalize(host: page.host ?? "")
        var approved: [AppManifest] = []
        var refusals: [String] = []

        for app in installed.sorted(by: { $0.bundleIdentifier < $1.bundleIdentifier }) {
            let claims = app.associatedDomains.filter { $0.matches(host: host) }
            guard claims.contains(where: { $0.service == activityContinuationService }) else {
                if let other = claims.first {
                    refusals.append("'\(app.bundleIdentifier)' claims '\(host)' only for '\(other.service)', not '\(activityContinuationService)'")
                }
                continue
            }
            guard let applicationIdentifier = app.applicationIdentifier else {
                refusals.append("'\(app.bundleIdentifier)' claims '\(host)' but has no team identifier, so the site cannot approve it")
                continue
            }
            if siteApproves(host, applicationIdentifier) {
                approved.append(app)
            } else {
                refusals.append("'\(app.bundleIdentifier)' claims '\(host)' but the site does not approve '\(applicationIdentifier)' in its apple-app-site-association file")
            }
        }

        if case let (app, tieBreak)? = pick(approved, origin: origin) {
            return .chosen(app, reason: "'\(app.bundleIdentifier)' claims '\(host)' with an '\(activityContinuationService)' associated domain and the site approves it\(tieBreak)")
        }
        if refusals.isEmpty {
            return .none("no installed app claims '\(host)' with an '\(activityContinuationService):' associated domain")
        }
        return .none(refusals.joined(separator: "; "))
    }

    /// Rule 3: the default browser takes the activity itself when it can; otherwise the page opens by URL.
    private static func browserRoute(
        for page: URL,
        whyNoNativeApp: String,
        installed: [AppManifest],
        defaultBrowser: String?
    ) -> ActivityRoute {
        guard let defaultBrowser else {
            return .webBrowser(page, reason: "\(whyNoNativeApp); opening \(page.absoluteString) in the default web browser")
        }
        guard let browser = installed.first(where: { $0.bundleIdentifier == defaultBrowser }) else {
            return .webBrowser(page, reason: "\(whyNoNativeApp); the default browser '\(defaultBrowser)' is not installed, so \(page.absoluteString) is opened by its URL")
        }
        guard browser.activityTypes.contains(NSUserActivityTypeBrowsingWeb) else {
            return .webBrowser(page, reason: "\(whyNoNativeApp); the default browser '\(defaultBrowser)' does not declare '\(NSUserActivityTypeBrowsingWeb)' in NSUserActivityTypes, so \(page.absoluteString) is opened by its URL")
        }
        return .app(browser, reason: "\(whyNoNativeApp); the default browser '\(defaultBrowser)' declares '\(NSUserActivityTypeBrowsingWeb)', so it continues \(page.absoluteString)")
    }

    /// The candidate that came up with the activity, else the lowest bundle identifier,
    /// with a clause explaining the choice when there was one to make.
    private static func pick(_ candidates: [AppManifest], origin: String?) -> (AppManifest, String)? {
        let sorted = candidates.sorted { $0.bundleIdentifier < $1.bundleIdentifier }
        guard let lowest = sorted.first else { return nil }
        guard sorted.count > 1 else { return (lowest, "") }

        func others(than chosen: AppManifest) -> String {
            sorted.filter { $0 != chosen }.map { "'\($0.bundleIdentifier)'" }.joined(separator: ", ")
        }
        if let origin, let original = sorted.first(where: { $0.bundleIdentifier == origin }) {
            return (original, "; chosen over \(others(than: original)) because the activity came from it")
        }
        return (lowest, "; chosen over \(others(than: lowest)) because its bundle identifier sorts first")
    }

    /// The URL if it is a web page Handoff can open: http or https with a host.
    private static func webPage(_ url: URL?) -> URL? {
        guard let url, url.isWebPage else { return nil }
        return url
    }

    private static func describeMissingPage(_ url: URL?) -> String {
        guard let url else { return "the activity has no web page" }
        return "its webpageURL '\(url.absoluteString)' is not an http or https page"
    }
}

extension URL {
    /// Whether this is a page a browser can open: an absolute http or https URL with a host,
    /// the scheme compared without regard to case.
    package var isWebPage: Bool {
        let scheme = scheme?.lowercased()
        guard scheme == "http" || scheme == "https", let host, !host.isEmpty else { return false }
        return true
    }
}
