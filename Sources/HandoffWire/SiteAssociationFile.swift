import Foundation

/// Why an association file approves nothing.
public struct SiteAssociationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A web site's `apple-app-site-association` file, read as Apple reads it, so that a developer
/// can audit their site's file and Handoff can decide what each app may do there.
///
/// The JSON must be strict (`StrictJSON`: no trailing comma, no byte-order mark). Each section
/// is read on its own: a malformed application identifier, or an `applinks` of the wrong
/// shape, is left out and named in `problems`, and never costs the other sections, as one bad
/// entry does not cost the others on Apple platforms. Both shapes of `applinks` are read: the
/// iOS 9 `details` with `appID` and `paths` (`NOT ` excludes), and the iOS 13 one with `appIDs`
/// and `components` (`/`, `?`, `#`, `exclude`, `caseSensitive`, `percentsEncoded`). See `docs/web.md`.
public struct SiteAssociationFile: Sendable, Hashable {
    /// The largest file read, as Apple's own limit.
    public static let maximumSize = 128 * 1024

    /// A section that lists apps: `activitycontinuation`, `webcredentials`, `appclips`.
    public struct AppList: Sendable, Hashable {
        /// Its application identifiers (`TEAMID.bundle.id`), well formed ones only, in order.
        public var apps: [String]
        public init(apps: [String]) { self.apps = apps }
    }

    /// `activitycontinuation`: the apps that may continue the site's pages (web to app).
    public var activityContinuation: AppList?
    /// `webcredentials`: the apps that may use the site's saved passwords.
    public var webCredentials: AppList?
    /// `appclips`: the app clips the site may open.
    public var appClips: AppList?
    /// `applinks`: which of the site's addresses open in which app (universal links).
    public var appLinks: AppLinks?
    /// What was left out and why, each naming where in the file it is.
    public var problems: [String]

    /// The application identifiers approved for activity continuation.
    public var activityContinuationApps: Set<String> { Set(activityContinuation?.apps ?? []) }

    public init(activityContinuationApps: Set<String>) {
        activityContinuation = AppList(apps: activityContinuationApps.sorted())
        problems = []
    }

    /// Reads the JSON bytes of an unsigned file. Throws only when nothing can be read: the file
    /// is too large, not strict JSON (the message gives the line and column), or not an object.
    public init(json bytes: some Collection<UInt8>) throws(SiteAssociationError) {
        guard bytes.count <= Self.maximumSize else {
            throw SiteAssociationError("the file is \(bytes.count) bytes, over the limit of \(Self.maximumSize)")
        }
        let root: JSONValue
        do {
            root = try StrictJSON.parse(bytes)
        } catch {
            throw SiteAssociationError("the file is not valid JSON: \(error)")
        }
        guard case .object = root else {
            throw SiteAssociationError("the file is not a JSON object (its top level is \(root.kind))")
        }
        var problems = ProblemList()
        activityContinuation = Self.appList(root["activitycontinuation"], section: "activitycontinuation", problems: &problems)
        webCredentials = Self.appList(root["webcredentials"], section: "webcredentials", problems: &problems)
        appClips = Self.appList(root["appclips"], section: "appclips", problems: &problems)
        appLinks = root["applinks"].flatMap { AppLinks($0, problems: &problems) }
        self.problems = problems.finished
    }

    /// `TEAMID.bundle.id`: a team identifier, a dot, and a bundle identifier.
    public static func isApplicationIdentifier(_ text: String) -> Bool {
        text.range(of: #"^[A-Za-z0-9]+\.[A-Za-z0-9][A-Za-z0-9.\-_]*$"#, options: .regularExpression) != nil && text.utf8.count <= 255
    }

    /// The apps this file lets open `url` (a universal link), in the file's order.
    public func appLinkApps(for url: URL) -> [String] {
        guard let appLinks else { return [] }
        var apps: [String] = []
        for detail in appLinks.details {
            for app in detail.appIDs where !apps.contains(app) && detail.opens(url, defaults: appLinks.defaults) == true {
                apps.append(app)
            }
        }
        return apps
    }

    static func appList(_ value: JSONValue?, section: String, problems: inout ProblemList) -> AppList? {
        guard let value else { return nil }
        guard case .object = value else {
            problems.add("'\(section)' is \(value.kind), not an object; the section is ignored")
            return nil
        }
        guard let listed = value["apps"] else { return AppList(apps: []) }
        guard case .array(let items) = listed else {
            problems.add("'\(section).apps' is \(listed.kind), not an array; the section is ignored")
            return nil
        }
        return AppList(apps: applicationIdentifiers(items, at: "\(section).apps", problems: &problems))
    }

    static func applicationIdentifiers(_ items: [JSONValue], at path: String, problems: inout ProblemList) -> [String] {
        var apps: [String] = []
        for (index, item) in items.enumerated() {
            guard case .string(let identifier) = item, isApplicationIdentifier(identifier) else {
                let shown: String
                if case .string(let text) = item { shown = "'\(ProblemList.quoted(text))'" } else { shown = item.kind }
                problems.add("'\(path)[\(index)]' is \(shown), not an application identifier such as ABCDE12345.com.example.app; it is ignored")
                continue
            }
            apps.append(identifier)
        }
        return apps
    }
}

// MARK: - applinks

/// The `applinks` section: for each group of apps, which of the site's addresses open in them.
public struct AppLinks: Sendable, Hashable {
    /// `defaults` (iOS 14): how components without their own flags match.
    public struct Defaults: Sendable, Hashable {
        /// Letters must match in case. True unless the file says otherwise.
        public var caseSensitive: Bool
        /// Patterns are written percent-encoded and compared with the address as sent. True unless the file says otherwise.
        public var percentsEncoded: Bool
        public init(caseSensitive: Bool = true, percentsEncoded: Bool = true) {
            self.caseSensitive = caseSensitive
            self.percentsEncoded = percentsEncoded
        }
    }

    public var defaults: Defaults
    public var details: [AppLinkDetail]

    public init(defaults: Defaults = Defaults(), details: [AppLinkDetail]) {
        self.defaults = defaults
        self.details = details
    }

    init?(_ value: JSONValue, problems: inout ProblemList) {
        guard case .object = value else {
            problems.add("'applinks' is \(value.kind), not an object; the section is ignored")
            return nil
        }
        defaults = Self.defaults(value["defaults"], base: Defaults(), at: "applinks.defaults", problems: &problems)
        guard let listed = value["details"] else {
            details = []
            return
        }
        // The iOS 9 files also allowed details as an object keyed by application identifier.
        var entries: [(path: String, value: JSONValue, appID: String?)] = []
        switch listed {
        case .array(let items):
            entries = items.enumerated().map { ("applinks.details[\($0.offset)]", $0.element, nil) }
        case .object(let members):
            entries = members.map { ("applinks.details.\(ProblemList.quoted($0.key))", $0.value, $0.key) }
        default:
            problems.add("'applinks.details' is \(listed.kind), not an array; the section is ignored")
            return nil
        }
        var details: [AppLinkDetail] = []
        for entry in entries {
            if let detail = AppLinkDetail(entry.value, appID: entry.appID, at: entry.path, defaults: defaults, problems: &problems) {
                details.append(detail)
            }
        }
        self.details = details
    }

    static func defaults(_ value: JSONValue?, base: Defaults, at path: String, problems: inout ProblemList) -> Defaults {
        guard let value else { return base }
        guard case .object = value else {
            problems.add("'\(path)' is \(value.kind), not an object; it is ignored")
            return base
        }
        var defaults = base
        if let flag = boolean(value["caseSensitive"], at: "\(path).caseSensitive", problems: &problems) { defaults.caseSensitive = flag }
        if let flag = boolean(value["percentsEncoded"], at: "\(path).percentsEncoded", problems: &problems) { defaults.percentsEncoded = flag }
        return defaults
    }

    static func boolean(_ value: JSONValue?, at path: String, problems: inout ProblemList) -> Bool? {
        guard let value else { return nil }
        guard case .bool(let flag) = value else {
            problems.add("'\(path)' is \(value.kind), not true or false; it is ignored")
            return nil
        }
        return flag
    }

    static func string(_ value: JSONValue?, at path: String, problems: inout ProblemList) -> String? {
        guard let value else { return nil }
        guard case .string(let text) = value else {
            problems.add("'\(path)' is \(value.kind), not a string; it is ignored")
            return nil
        }
        return text
    }
}

/// One entry of `applinks.details`: apps, and the addresses that open in them.
public struct AppLinkDetail: Sendable, Hashable {
    /// `appIDs` (or the iOS 9 `appID`).
    public var appIDs: [String]
    /// The iOS 9 `paths`: patterns over the path, in order; `NOT ` before one excludes.
    public var paths: [String]?
    /// The iOS 13 `components`, in order; used instead of `paths` when present.
    public var components: [AppLinkComponent]?
    /// This entry's `defaults`, over the section's.
    public var defaults: AppLinks.Defaults?

    public init(appIDs: [String], paths: [String]? = nil, components: [AppLinkComponent]? = nil, defaults: AppLinks.Defaults? = nil) {
        self.appIDs = appIDs
        self.paths = paths
        self.components = components
        self.defaults = defaults
    }

    /// Whether `url` opens in this entry's apps: the first component (or path) that matches
    /// decides, and an excluding one says no; `false` when none matches.
    public func opens(_ url: URL, defaults sectionDefaults: AppLinks.Defaults = AppLinks.Defaults()) -> Bool {
        let defaults = self.defaults ?? sectionDefaults
        if let components {
            for component in components where component.matches(url, defaults: defaults) {
                return !component.exclude
            }
            return false
        }
        let path = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path
        for pattern in paths ?? [] {
            if pattern.hasPrefix("NOT ") {
                if WildcardPattern.matches(String(pattern.dropFirst(4)), path, caseSensitive: true) { return false }
            } else if WildcardPattern.matches(pattern, path, caseSensitive: true) {
                return true
            }
        }
        return false
    }

    init?(_ value: JSONValue, appID keyedAppID: String?, at path: String, defaults sectionDefaults: AppLinks.Defaults, problems: inout ProblemList) {
        guard case .object = value else {
            problems.add("'\(path)' is \(value.kind), not an object; it is ignored")
            return nil
        }
        var appIDs: [String] = []
        if let keyedAppID {
            appIDs = SiteAssociationFile.applicationIdentifiers([.string(keyedAppID)], at: path, problems: &problems)
        }
        if let listed = value["appIDs"] {
            if case .array(let items) = listed {
                appIDs += SiteAssociationFile.applicationIdentifiers(items, at: "\(path).appIDs", problems: &problems)
            } else {
                problems.add("'\(path).appIDs' is \(listed.kind), not an array; it is ignored")
            }
        }
        if let single = value["appID"] {
            appIDs += SiteAssociationFile.applicationIdentifiers([single], at: "\(path).appID", problems: &problems)
        }
        guard !appIDs.isEmpty else {
            problems.add("'\(path)' names no well-formed application identifier; it is ignored")
            return nil
        }
        self.appIDs = appIDs
        defaults = value["defaults"].map { AppLinks.defaults($0, base: sectionDefaults, at: "\(path).defaults", problems: &problems) }

        if let listed = value["components"] {
            if case .array(let items) = listed {
                var components: [AppLinkComponent] = []
                for (index, item) in items.enumerated() {
                    if let component = AppLinkComponent(item, at: "\(path).components[\(index)]", problems: &problems) { components.append(component) }
                }
                self.components = components
            } else {
                problems.add("'\(path).components' is \(listed.kind), not an array; it is ignored")
            }
        }
        if let listed = value["paths"] {
            if case .array(let items) = listed {
                paths = items.enumerated().compactMap { item in
                    AppLinks.string(item.element, at: "\(path).paths[\(item.offset)]", problems: &problems)
                }
            } else {
                problems.add("'\(path).paths' is \(listed.kind), not an array; it is ignored")
            }
        }
    }
}

/// One entry of an iOS 13 `components` list: patterns for the path (`/`), the query (`?`,
/// a pattern or one per query item) and the fragment (`#`). A pattern left out matches
/// anything. In patterns, `*` matches any run of characters (none included) and `?` one.
public struct AppLinkComponent: Sendable, Hashable {
    /// The `?` pattern: over the whole query, or per item (each named item must be there and match).
    public enum Query: Sendable, Hashable {
        case whole(String)
        case items([String: String])
    }

    public var path: String?
    public var query: Query?
    public var fragment: String?
    /// An address that matches does not open in the app.
    public var exclude: Bool
    public var caseSensitive: Bool?
    public var percentsEncoded: Bool?
    public var comment: String?

    public init(
        path: String? = nil, query: Query? = nil, fragment: String? = nil, exclude: Bool = false, caseSensitive: Bool? = nil,
        percentsEncoded: Bool? = nil, comment: String? = nil
    ) {
        self.path = path
        self.query = query
        self.fragment = fragment
        self.exclude = exclude
        self.caseSensitive = caseSensitive
        self.percentsEncoded = percentsEncoded
        self.comment = comment
    }

    /// Whether the address matches every pattern the component has.
    public func matches(_ url: URL, defaults: AppLinks.Defaults = AppLinks.Defaults()) -> Bool {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return false }
        let caseSensitive = self.caseSensitive ?? defaults.caseSensitive
        let encoded = percentsEncoded ?? defaults.percentsEncoded
        func form(_ raw: String?, _ decoded: String?) -> String { (encoded ? raw : decoded) ?? "" }

        if let path, !WildcardPattern.matches(path, form(parts.percentEncodedPath, parts.path), caseSensitive: caseSensitive) { return false }
        if let fragment, !WildcardPattern.matches(fragment, form(parts.percentEncodedFragment, parts.fragment), caseSensitive: caseSensitive) {
            return false
        }
        switch query {
        case nil:
            break
        case .whole(let pattern):
            if !WildcardPattern.matches(pattern, form(parts.percentEncodedQuery, parts.query), caseSensitive: caseSensitive) { return false }
        case .items(let patterns):
            let items = (encoded ? parts.percentEncodedQueryItems : parts.queryItems) ?? []
            for (name, pattern) in patterns {
                let matching = items.contains { item in
                    (caseSensitive ? item.name == name : item.name.lowercased() == name.lowercased())
                        && WildcardPattern.matches(pattern, item.value ?? "", caseSensitive: caseSensitive)
                }
                if !matching { return false }
            }
        }
        return true
    }

    init?(_ value: JSONValue, at path: String, problems: inout ProblemList) {
        guard case .object = value else {
            problems.add("'\(path)' is \(value.kind), not an object; it is ignored")
            return nil
        }
        self.path = AppLinks.string(value["/"], at: "\(path)./", problems: &problems)
        fragment = AppLinks.string(value["#"], at: "\(path).#", problems: &problems)
        switch value["?"] {
        case nil:
            query = nil
        case .string(let pattern):
            query = .whole(pattern)
        case .object(let members):
            var items: [String: String] = [:]
            for member in members {
                if let pattern = AppLinks.string(member.value, at: "\(path).?.\(ProblemList.quoted(member.key))", problems: &problems) { items[member.key] = pattern }
            }
            query = .items(items)
        case let other?:
            problems.add("'\(path).?' is \(other.kind), not a string or an object; the component is ignored")
            return nil
        }
        exclude = AppLinks.boolean(value["exclude"], at: "\(path).exclude", problems: &problems) ?? false
        caseSensitive = AppLinks.boolean(value["caseSensitive"], at: "\(path).caseSensitive", problems: &problems)
        percentsEncoded = AppLinks.boolean(value["percentsEncoded"], at: "\(path).percentsEncoded", problems: &problems)
        comment = AppLinks.string(value["comment"], at: "\(path).comment", problems: &problems)
    }
}

/// Apple's patterns: `*` is any run of characters, none included; `?` is exactly one.
enum WildcardPattern {
    static func matches(_ pattern: String, _ text: String, caseSensitive: Bool) -> Bool {
        let pattern = Array(caseSensitive ? pattern : pattern.lowercased())
        let text = Array(caseSensitive ? text : text.lowercased())
        // Iterative matching with one backtrack point: linear in practice, never exponential.
        var p = 0
        var t = 0
        var star: Int?
        var resume = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == "?" || pattern[p] == text[t] {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == "*" {
                star = p
                resume = t
                p += 1
            } else if let star {
                p = star + 1
                resume += 1
                t = resume
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == "*" { p += 1 }
        return p == pattern.count
    }
}

/// What a file's reading left out, as a person reads it: at most 50 entries (then how many
/// more), each quoted text shortened and its control characters escaped, so that a hostile
/// file cannot make the list huge or write to a terminal.
struct ProblemList {
    static let limit = 50
    private(set) var list: [String] = []
    private var more = 0

    mutating func add(_ problem: @autoclosure () -> String) {
        guard list.count < Self.limit else {
            more += 1
            return
        }
        list.append(problem())
    }

    var finished: [String] {
        more == 0 ? list : list + ["and \(more) more"]
    }

    /// A text from the file, shown: at most 60 characters, control characters escaped.
    static func quoted(_ text: String) -> String {
        var shown = ""
        for scalar in text.unicodeScalars.prefix(60) {
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > 60 ? shown + "…" : shown
    }
}
