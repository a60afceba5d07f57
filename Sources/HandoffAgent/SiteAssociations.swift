import Foundation
import Synchronization

/// Which apps web sites approve for web-to-app continuation: a page on a site continues in
/// an app only when the site's association file lists the app, and the app lists the site
/// among its associated domains (`activitycontinuation:`).
package protocol SiteAssociations: Sendable {
    /// The application identifiers (`TEAMID.bundle.id`) among `candidates` that the site at
    /// `host` (on `port`, when the page named one) approves.
    func approved(_ candidates: Set<String>, forHost host: String, port: Int?) async -> Set<String>
}

/// Approves no app: every web page opens in the browser. What the agent does until it
/// fetches sites' association files.
package struct NoSiteAssociations: SiteAssociations {
    package init() {}

    package func approved(_ candidates: Set<String>, forHost host: String, port: Int?) async -> Set<String> { [] }
}

/// Approvals given in code rather than fetched from the sites, as a test states what a
/// site's association file would say.
package final class FixedSiteAssociations: SiteAssociations {
    private let approvals = Mutex<[String: Set<String>]>([:])

    package init() {}

    /// Records that the site at `host` approves the app `applicationIdentifier`.
    package func approve(_ applicationIdentifier: String, forSite host: String) {
        _ = approvals.withLock { $0[host.lowercased(), default: []].insert(applicationIdentifier) }
    }

    package func approved(_ candidates: Set<String>, forHost host: String, port: Int?) async -> Set<String> {
        approvals.withLock { $0[host.lowercased()] ?? [] }.intersection(candidates)
    }
}
