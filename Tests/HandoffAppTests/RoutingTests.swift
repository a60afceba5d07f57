import Foundation
import Testing

@testable import HandoffApp
@testable import HandoffCore

private let team = "ABCDE12345"
private let otherTeam = "ZZZZZ99999"
private let browsingWeb = "NSUserActivityTypeBrowsingWeb"
private let page = URL(string: "https://example.com/notes/42")!

private func app(
    _ bundleIdentifier: String,
    team: String? = team,
    types: [String] = [],
    documents: [DocumentType] = [],
    domains: [String] = []
) throws -> AppManifest {
    AppManifest(
        bundleIdentifier: bundleIdentifier,
        teamIdentifier: team,
        activityTypes: types,
        documentTypes: documents,
        associatedDomains: try domains.map { entry throws(ManifestError) in try AssociatedDomain(parsing: entry) }
    )
}

private func browsing(_ url: URL?) -> IncomingActivity {
    IncomingActivity(teamIdentifier: otherTeam, activityType: browsingWeb, webpageURL: url, originBundleIdentifier: "com.apple.Safari")
}

/// The app an activity was routed to, or `nil` with the route recorded as an issue.
private func routedApp(_ route: ActivityRoute, sourceLocation: SourceLocation = #_sourceLocation) -> AppManifest? {
    guard case .app(let app, _) = route else {
        Issue.record("expected an app, got \(route)", sourceLocation: sourceLocation)
        return nil
    }
    return app
}

private func reason(of route: ActivityRoute) -> String {
    switch route {
    case .app(_, let reason), .webBrowser(_, let reason), .nowhere(let reason):
        reason
    }
}

@Suite("Routing an activity to an app of the same team")
struct SameTeamRoutingTests {
    @Test("An app of the activity's team that declares its type continues it")
    func sameTeamApp() throws {
        let editor = try app("com.example.editor", types: ["com.example.editor.editing"])
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.example.editor.editing"),
            installed: [try app("com.example.viewer", types: ["com.example.viewer.viewing"]), editor]
        )
        #expect(routedApp(route) == editor)
        #expect(reason(of: route).contains("'com.example.editor' of team '\(team)' declares activity type 'com.example.editor.editing'"))
    }

    @Test("A document type's NSUbiquitousDocumentUserActivityType is enough to continue an activity")
    func documentActivityType() throws {
        let editor = try app("com.example.editor", documents: [DocumentType(name: "Markdown", ubiquitousActivityType: "com.example.editor.editing")])
        let route = ActivityRouter.route(IncomingActivity(teamIdentifier: team, activityType: "com.example.editor.editing"), installed: [editor])
        #expect(routedApp(route) == editor)
    }

    @Test("The originating app wins among several apps of the team that declare the type")
    func originWins() throws {
        let apps = try ["com.example.a", "com.example.b", "com.example.c"].map { try app($0, types: ["com.example.shared"]) }
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.example.shared", originBundleIdentifier: "com.example.b"),
            installed: apps
        )
        #expect(routedApp(route)?.bundleIdentifier == "com.example.b")
        #expect(reason(of: route).contains("because the activity came from it"))
    }

    @Test("The lowest bundle identifier wins a tie, whatever the order of installed apps")
    func lowestBundleIdentifierWins() throws {
        let apps = try ["com.example.c", "com.example.a", "com.example.b"].map { try app($0, types: ["com.example.shared"]) }
        let activity = IncomingActivity(teamIdentifier: team, activityType: "com.example.shared", originBundleIdentifier: "com.example.elsewhere")
        let route = ActivityRouter.route(activity, installed: apps)
        #expect(routedApp(route)?.bundleIdentifier == "com.example.a")
        #expect(ActivityRouter.route(activity, installed: apps.reversed()) == route)
        #expect(reason(of: route).contains("sorts first"))
    }

    @Test("An app of another team is never chosen, and the reason names it and its team")
    func otherTeamIsSkipped() throws {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit"),
            installed: [try app("com.y.app", team: otherTeam, types: ["com.x.edit"])]
        )
        guard case .nowhere(let reason) = route else {
            Issue.record("expected nowhere, got \(route)")
            return
        }
        #expect(reason.contains("no installed app of team '\(team)' declares activity type 'com.x.edit' in NSUserActivityTypes"))
        #expect(reason.contains("'com.y.app' declares it but belongs to team '\(otherTeam)'"))
        #expect(reason.hasSuffix("and the activity has no web page"))
    }

    @Test("An app of the team is chosen over an app of another team")
    func sameTeamBeatsOtherTeam() throws {
        let mine = try app("com.x.editor", types: ["com.x.edit"])
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit"),
            installed: [try app("com.a.editor", team: otherTeam, types: ["com.x.edit"]), mine]
        )
        #expect(routedApp(route) == mine)
    }

    @Test("An activity without a team reaches no app, and the reason says so")
    func nilTeamMatchesNothing() throws {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: nil, activityType: "com.x.edit"),
            installed: [try app("com.x.editor", team: nil, types: ["com.x.edit"])]
        )
        guard case .nowhere(let reason) = route else {
            Issue.record("expected nowhere, got \(route)")
            return
        }
        #expect(reason.contains("has no team identifier"))
        #expect(reason.contains("'com.x.editor'"))
    }

    @Test("An activity with an empty team reaches no app, even one with an empty team")
    func emptyTeamMatchesNothing() throws {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: "", activityType: "com.x.edit"),
            installed: [try app("com.x.editor", team: "", types: ["com.x.edit"])]
        )
        guard case .nowhere(let reason) = route else {
            Issue.record("expected nowhere, got \(route)")
            return
        }
        #expect(reason.contains("has an empty team identifier"))
    }

    @Test("An app without a team never continues an activity of a team")
    func appWithoutTeamIsSkipped() throws {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit"),
            installed: [try app("com.x.editor", team: nil, types: ["com.x.edit"])]
        )
        guard case .nowhere(let reason) = route else {
            Issue.record("expected nowhere, got \(route)")
            return
        }
        #expect(reason.contains("'com.x.editor' declares it but has no team identifier"))
    }
}

@Suite("Routing a page from a web browser to an app")
struct BrowserToAppRoutingTests {
    @Test("A page opens in the app that claims its host and that the site approves")
    func approvedAppContinues() throws {
        let notes = try app("com.example.notes", domains: ["activitycontinuation:example.com"])
        var asked: [String] = []
        let route = ActivityRouter.route(browsing(page), installed: [notes]) { host, applicationIdentifier in
            asked.append("\(host) \(applicationIdentifier)")
            return true
        }
        #expect(routedApp(route) == notes)
        #expect(asked == ["example.com \(team).com.example.notes"])
    }

    @Test("An app the site does not approve is skipped, and the reason says so")
    func disapprovedAppIsSkipped() throws {
        let notes = try app("com.example.notes", domains: ["activitycontinuation:example.com"])
        let route = ActivityRouter.route(browsing(page), installed: [notes]) { _, _ in false }
        guard case .webBrowser(let url, let reason) = route else {
            Issue.record("expected the web browser, got \(route)")
            return
        }
        #expect(url == page)
        #expect(reason.contains("'com.example.notes' claims 'example.com' but the site does not approve '\(team).com.example.notes'"))
    }

    @Test("An approved app is chosen over a claiming app the site does not approve")
    func approvedBeatsDisapproved() throws {
        let approved = try app("com.example.notes", domains: ["activitycontinuation:example.com"])
        let disapproved = try app("com.example.aaa", domains: ["activitycontinuation:example.com"])
        let route = ActivityRouter.route(browsing(page), installed: [disapproved, approved]) { _, applicationIdentifier in
            applicationIdentifier == approved.applicationIdentifier
        }
        #expect(routedApp(route) == approved)
    }

    @Test("Without a site approval check no app is approved")
    func defaultApprovalRefuses() throws {
        let notes = try app("com.example.notes", domains: ["activitycontinuation:example.com"])
        guard case .webBrowser = ActivityRouter.route(browsing(page), installed: [notes]) else {
            Issue.record("expected the web browser")
            return
        }
    }

    @Test("The lowest bundle identifier wins between two approved apps")
    func approvedTie() throws {
        let apps = try ["com.example.z", "com.example.m"].map { try app($0, domains: ["activitycontinuation:example.com"]) }
        let route = ActivityRouter.route(browsing(page), installed: apps) { _, _ in true }
        #expect(routedApp(route)?.bundleIdentifier == "com.example.m")
    }

    @Test("A wildcard domain claims a subdomain of the page's host")
    func wildcardClaimsSubdomain() throws {
        let shop = try app("com.example.shop", domains: ["activitycontinuation:*.example.com"])
        var askedHost: String?
        let route = ActivityRouter.route(browsing(URL(string: "https://store.example.com/cart")!), installed: [shop]) { host, _ in
            askedHost = host
            return true
        }
        #expect(routedApp(route) == shop)
        #expect(askedHost == "store.example.com")
    }

    @Test("A wildcard domain does not claim the bare host")
    func wildcardSkipsBareHost() throws {
        let shop = try app("com.example.shop", domains: ["activitycontinuation:*.example.com"])
        let route = ActivityRouter.route(browsing(page), installed: [shop]) { _, _ in true }
        #expect(route == .webBrowser(page, reason: "no installed app claims 'example.com' with an 'activitycontinuation:' associated domain; opening \(page.absoluteString) in the default web browser"))
    }

    @Test("A port in the page's URL does not stop its host from matching")
    func portInPage() throws {
        let notes = try app("com.example.notes", domains: ["activitycontinuation:example.com:8443"])
        let route = ActivityRouter.route(browsing(URL(string: "https://example.com:8443/notes")!), installed: [notes]) { _, _ in true }
        #expect(routedApp(route) == notes)
    }

    @Test("A trailing dot and capitals in the page's host still match, and the site is asked about the plain host")
    func trailingDotInPage() throws {
        let notes = try app("com.example.notes", domains: ["activitycontinuation:example.com"])
        var askedHost: String?
        let route = ActivityRouter.route(browsing(URL(string: "https://Example.COM./notes")!), installed: [notes]) { host, _ in
            askedHost = host
            return true
        }
        #expect(routedApp(route) == notes)
        #expect(askedHost == "example.com")
    }

    @Test("A domain entry with ?mode=developer still claims its host")
    func developerModeDomain() throws {
        let notes = try app("com.example.notes", domains: ["activitycontinuation:example.com?mode=developer"])
        let route = ActivityRouter.route(browsing(page), installed: [notes]) { _, _ in true }
        #expect(routedApp(route) == notes)
    }

    @Test("A domain claimed only for another service does not count, and the reason says so")
    func otherServiceDoesNotCount() throws {
        let notes = try app("com.example.notes", domains: ["applinks:example.com", "webcredentials:example.com"])
        let route = ActivityRouter.route(browsing(page), installed: [notes]) { _, _ in true }
        guard case .webBrowser(_, let reason) = route else {
            Issue.record("expected the web browser, got \(route)")
            return
        }
        #expect(reason.contains("'com.example.notes' claims 'example.com' only for 'applinks', not 'activitycontinuation'"))
    }

    @Test("An app without a team cannot be approved by the site")
    func claimingAppWithoutTeam() throws {
        let notes = try app("com.example.notes", team: nil, domains: ["activitycontinuation:example.com"])
        var asked = false
        let route = ActivityRouter.route(browsing(page), installed: [notes]) { _, _ in
            asked = true
            return true
        }
        #expect(!asked)
        #expect(reason(of: route).contains("'com.example.notes' claims 'example.com' but has no team identifier"))
    }

    @Test("A browsing activity does not go to an app of its team that merely declares the browsing type")
    func browsingIgnoresTeam() throws {
        let browser = try app("org.example.browser", team: otherTeam, types: [browsingWeb])
        let route = ActivityRouter.route(browsing(page), installed: [browser])
        guard case .webBrowser(let url, _) = route else {
            Issue.record("expected the web browser, got \(route)")
            return
        }
        #expect(url == page)
    }

    @Test("A browsing activity without a web page goes nowhere")
    func browsingWithoutPage() {
        let route = ActivityRouter.route(browsing(nil), installed: [])
        #expect(route == .nowhere(reason: "activity type '\(browsingWeb)' needs an http or https webpageURL, but the activity has no web page"))
    }

    @Test("A browsing activity whose page is not http or https goes nowhere")
    func browsingNonWebPage() throws {
        let route = ActivityRouter.route(browsing(URL(string: "ftp://example.com/file")!), installed: [try app("com.example.notes", domains: ["activitycontinuation:example.com"])]) { _, _ in true }
        guard case .nowhere(let reason) = route else {
            Issue.record("expected nowhere, got \(route)")
            return
        }
        #expect(reason.contains("'ftp://example.com/file' is not an http or https page"))
    }
}

@Suite("Routing an activity to the web browser")
struct AppToBrowserRoutingTests {
    @Test("Without an app of the team, an activity with a web page opens in the web browser")
    func opensPageByURL() throws {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit", webpageURL: page),
            installed: [try app("com.y.app", team: otherTeam, types: ["com.x.edit"])]
        )
        guard case .webBrowser(let url, let reason) = route else {
            Issue.record("expected the web browser, got \(route)")
            return
        }
        #expect(url == page)
        #expect(reason.contains("no installed app of team '\(team)' declares activity type 'com.x.edit'"))
        #expect(reason.contains("'com.y.app' declares it but belongs to team '\(otherTeam)'"))
    }

    @Test("A default browser that declares the browsing type receives the activity itself")
    func defaultBrowserReceivesActivity() throws {
        let browser = try app("org.example.browser", team: otherTeam, types: [browsingWeb])
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit", webpageURL: page),
            installed: [browser],
            defaultBrowser: "org.example.browser"
        )
        #expect(routedApp(route) == browser)
        #expect(reason(of: route).contains("the default browser 'org.example.browser' declares '\(browsingWeb)'"))
    }

    @Test("A page from a browser that no app claims goes to the default browser app")
    func browsingGoesToDefaultBrowser() throws {
        let browser = try app("org.example.browser", types: [browsingWeb])
        let route = ActivityRouter.route(browsing(page), installed: [browser], defaultBrowser: "org.example.browser")
        #expect(routedApp(route) == browser)
    }

    @Test("A default browser that does not declare the browsing type gets the page by URL")
    func defaultBrowserWithoutBrowsingType() throws {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit", webpageURL: page),
            installed: [try app("org.example.browser", types: [])],
            defaultBrowser: "org.example.browser"
        )
        guard case .webBrowser(let url, let reason) = route else {
            Issue.record("expected the web browser, got \(route)")
            return
        }
        #expect(url == page)
        #expect(reason.contains("does not declare '\(browsingWeb)'"))
    }

    @Test("A default browser that is not installed gets the page by URL")
    func defaultBrowserNotInstalled() {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit", webpageURL: page),
            installed: [],
            defaultBrowser: "org.example.browser"
        )
        guard case .webBrowser(_, let reason) = route else {
            Issue.record("expected the web browser, got \(route)")
            return
        }
        #expect(reason.contains("'org.example.browser' is not installed"))
    }

    @Test("An app of the team wins over the web page")
    func appBeatsPage() throws {
        let editor = try app("com.x.editor", types: ["com.x.edit"])
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit", webpageURL: page),
            installed: [editor, try app("org.example.browser", types: [browsingWeb])],
            defaultBrowser: "org.example.browser"
        )
        #expect(routedApp(route) == editor)
    }

    @Test("A web page that is not http or https is not opened, and the reason says so")
    func nonWebPageGoesNowhere() {
        let route = ActivityRouter.route(
            IncomingActivity(teamIdentifier: team, activityType: "com.x.edit", webpageURL: URL(string: "file:///tmp/notes.md")!),
            installed: []
        )
        guard case .nowhere(let reason) = route else {
            Issue.record("expected nowhere, got \(route)")
            return
        }
        #expect(reason.hasSuffix("its webpageURL 'file:///tmp/notes.md' is not an http or https page"))
    }

    @Test("Nothing installed and no web page explains both")
    func nowhereExplainsItself() {
        let route = ActivityRouter.route(IncomingActivity(teamIdentifier: team, activityType: "com.x.edit"), installed: [])
        #expect(route == .nowhere(reason: "no installed app of team '\(team)' declares activity type 'com.x.edit' in NSUserActivityTypes or as a document type's NSUbiquitousDocumentUserActivityType, and the activity has no web page"))
    }
}
