import Foundation

/// What an app's entitlements file grants it, as far as Handoff reads it: its team, its
/// application identifier, its associated domains and keychain groups.
///
/// The file may be as Xcode writes it, with `$(AppIdentifierPrefix)`, `$(TeamIdentifierPrefix)`
/// and `$(CFBundleIdentifier)` in its values: they are expanded from the build settings given.
/// A malformed key is ignored with a warning, as on Apple platforms; a variable without a
/// value refuses the file.
public struct Entitlements: Sendable, Hashable {
    /// The team, from the first of: `com.apple.developer.team-identifier`, the prefix of
    /// `application-identifier`, the `DEVELOPMENT_TEAM` build setting. `teamSource` says which.
    public var teamIdentifier: String?
    /// Where `teamIdentifier` came from.
    public var teamSource: TeamSource?
    /// `application-identifier` (`com.apple.application-identifier` on macOS), expanded:
    /// `TEAMID.bundle.identifier`.
    public var applicationIdentifier: String?
    /// Every entry of `com.apple.developer.associated-domains`, whatever its service.
    public var associatedDomains: [AssociatedDomain]
    /// `keychain-access-groups`, expanded.
    public var keychainAccessGroups: [String]
    /// Keys that were malformed and ignored.
    public var warnings: [ManifestWarning]

    /// Describes entitlements directly, without reading any file.
    public init(
        teamIdentifier: String? = nil,
        teamSource: TeamSource? = nil,
        applicationIdentifier: String? = nil,
        associatedDomains: [AssociatedDomain] = [],
        keychainAccessGroups: [String] = []
    ) {
        self.teamIdentifier = teamIdentifier
        self.teamSource = teamSource
        self.applicationIdentifier = applicationIdentifier
        self.associatedDomains = associatedDomains
        self.keychainAccessGroups = keychainAccessGroups
        self.warnings = []
    }

    /// Reads an entitlements plist (XML or binary).
    ///
    /// `bundleIdentifier` is the app's (its Info.plist's `CFBundleIdentifier`): it is
    /// `$(CFBundleIdentifier)`, and the bundle part of `application-identifier` must name it.
    /// Without it, the file is read on its own and that check is not made.
    public init(
        plist data: Data,
        file: String = "entitlements",
        settings: BuildSettings = BuildSettings(),
        bundleIdentifier: String? = nil
    ) throws(ManifestError) {
        var settings = settings
        if let bundleIdentifier { try? settings.set("CFBundleIdentifier", bundleIdentifier) }
        let warnings = ManifestWarnings()
        let granted = try PlistDictionary(reading: data, file: file, settings: settings, warnings: warnings)

        var applicationIdentifier: (key: String, value: String, team: String)?
        for key in EntitlementKey.applicationIdentifiers {
            guard let value = try granted.string(key, nonEmpty: true, example: "'TEAMID.bundle.identifier'") else { continue }
            guard let dot = value.firstIndex(of: "."), dot != value.startIndex, value.index(after: dot) != value.endIndex else {
                granted.warn(key: key, "'\(value)' has no team prefix; expected 'TEAMID.bundle.identifier'")
                continue
            }
            let bundlePart = String(value[value.index(after: dot)...])
            if let bundleIdentifier, !Self.applicationIdentifier(bundlePart, names: bundleIdentifier) {
                throw granted.error(
                    key: key,
                    "'\(value)' is the identifier of app '\(bundlePart)', but the Info.plist's CFBundleIdentifier is '\(bundleIdentifier)'; these entitlements belong to another app (or write '$(AppIdentifierPrefix)$(CFBundleIdentifier)')"
                )
            }
            applicationIdentifier = (key, value, String(value[..<dot]))
            break
        }
        self.applicationIdentifier = applicationIdentifier?.value

        if let team = try granted.string(EntitlementKey.teamIdentifier, nonEmpty: true, example: "a team identifier such as 'ABCDE12345'") {
            if let applicationIdentifier, applicationIdentifier.team != team {
                granted.warn(
                    key: applicationIdentifier.key,
                    "its team '\(applicationIdentifier.team)' is not com.apple.developer.team-identifier's ('\(team)'); the team is '\(team)'")
            }
            teamIdentifier = team
            teamSource = .teamIdentifierEntitlement
        } else if let applicationIdentifier {
            teamIdentifier = applicationIdentifier.team
            teamSource = .applicationIdentifier(key: applicationIdentifier.key)
        } else if let team = try? settings.value(of: "DEVELOPMENT_TEAM"), !team.isBlank {
            teamIdentifier = team
            teamSource = .developmentTeamSetting
        } else {
            teamIdentifier = nil
            teamSource = nil
        }

        var domains: [AssociatedDomain] = []
        for (index, entry) in (try granted.strings(EntitlementKey.associatedDomains) ?? []).enumerated() {
            do throws(ManifestError) {
                domains.append(try AssociatedDomain(parsing: entry))
            } catch {
                granted.warn(key: "\(EntitlementKey.associatedDomains)[\(index)]", error.problem)
            }
        }
        associatedDomains = domains
        keychainAccessGroups = try granted.strings(EntitlementKey.keychainAccessGroups, nonEmpty: true) ?? []
        self.warnings = warnings.list
    }

    /// Whether the bundle part of an application identifier names `bundleIdentifier`: the
    /// same, or a wildcard (`com.example.*`, `*`) covering it.
    static func applicationIdentifier(_ bundlePart: String, names bundleIdentifier: String) -> Bool {
        if bundlePart.hasSuffix("*") { return bundleIdentifier.hasPrefix(bundlePart.dropLast()) }
        return bundlePart == bundleIdentifier
    }
}

/// Where an app's team identifier was read.
public enum TeamSource: Sendable, Hashable, CustomStringConvertible {
    /// The `com.apple.developer.team-identifier` entitlement.
    case teamIdentifierEntitlement
    /// The prefix of `application-identifier` (or the macOS `com.apple.application-identifier`).
    case applicationIdentifier(key: String)
    /// The `DEVELOPMENT_TEAM` build setting, as Xcode's signing settings give it.
    case developmentTeamSetting

    public var description: String {
        switch self {
        case .teamIdentifierEntitlement: return "the entitlement com.apple.developer.team-identifier"
        case .applicationIdentifier(let key): return "the prefix of the entitlement \(key)"
        case .developmentTeamSetting: return "the build setting DEVELOPMENT_TEAM"
        }
    }
}

enum EntitlementKey {
    static let teamIdentifier = "com.apple.developer.team-identifier"
    /// iOS spells it without the prefix, macOS with it.
    static let applicationIdentifiers = ["application-identifier", "com.apple.application-identifier"]
    static let associatedDomains = "com.apple.developer.associated-domains"
    static let keychainAccessGroups = "keychain-access-groups"
}

// MARK: - AssociatedDomain

/// One entry of the `com.apple.developer.associated-domains` entitlement, such as
/// `activitycontinuation:example.com` or `applinks:*.example.com?mode=developer`.
///
/// Handoff from a web browser only considers entries whose service is `activitycontinuation`.
public struct AssociatedDomain: Sendable, Hashable {
    /// The service before the first colon: `activitycontinuation`, `applinks`, `webcredentials`…
    public var service: String
    /// The claimed host, lowercased, without a `*.` prefix, port, `?mode=` suffix or trailing dot.
    public var host: String
    /// The entry was `*.host`: it claims every subdomain of `host` but, as on Apple
    /// platforms, not `host` itself.
    public var includesSubdomains: Bool

    /// Parses an entitlement entry of the form `service:host`, where the host may start with
    /// `*.`, carry a port (`host:8443`, which is dropped) and end with `?mode=developer`
    /// or another mode (also dropped).
    ///
    /// Errors name the file `entitlements`; `AppManifest` replaces that with the file it
    /// read and the entry's index.
    public init(parsing entry: String) throws(ManifestError) {
        func invalid(_ problem: String) -> ManifestError {
            ManifestError(file: "entitlements", key: EntitlementKey.associatedDomains, problem: problem)
        }
        let example = "write it as 'service:host', for example 'activitycontinuation:example.com'"

        guard let colon = entry.firstIndex(of: ":") else {
            throw invalid("entry '\(entry)' has no service; \(example)")
        }
        let service = String(entry[..<colon])
        guard !service.isBlank else {
            throw invalid("entry '\(entry)' has an empty service; \(example)")
        }

        var rest = Substring(entry[entry.index(after: colon)...])
        if let question = rest.firstIndex(of: "?") {
            guard rest[question...].hasPrefix("?mode=") else {
                throw invalid("entry '\(entry)' ends with '\(rest[question...])'; the only suffix allowed is '?mode=…', such as '?mode=developer'")
            }
            rest = rest[..<question]
        }
        if let portColon = rest.lastIndex(of: ":") {
            let port = rest[rest.index(after: portColon)...]
            guard !port.isEmpty, port.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw invalid("entry '\(entry)' has port '\(port)'; a port must be a number, as in 'example.com:8443'")
            }
            rest = rest[..<portColon]
        }

        var includesSubdomains = false
        if rest.hasPrefix("*.") {
            includesSubdomains = true
            rest = rest.dropFirst(2)
        }
        let host = Self.normalize(host: rest)
        guard !host.isEmpty else {
            throw invalid("entry '\(entry)' has an empty host; \(example)")
        }
        if let bad = host.first(where: { $0.isWhitespace || "/*@#?".contains($0) }) {
            throw invalid("entry '\(entry)' has '\(bad)' in its host; expected a domain name such as 'example.com' or '*.example.com'")
        }

        self.service = service
        self.host = host
        self.includesSubdomains = includesSubdomains
    }

    /// Whether this entry claims `host`, compared case-insensitively and ignoring a trailing dot.
    /// A `*.example.com` entry matches `a.example.com` and `a.b.example.com` but not `example.com`.
    public func matches(host candidate: String) -> Bool {
        let candidate = Self.normalize(host: candidate)
        guard !candidate.isEmpty else { return false }
        if includesSubdomains {
            return candidate.hasSuffix("." + host)
        }
        return candidate == host
    }

    /// Lowercases a host name and drops one trailing dot, so `Example.COM.` and `example.com` compare equal.
    static func normalize(host: some StringProtocol) -> String {
        let lowered = host.lowercased()
        return lowered.hasSuffix(".") ? String(lowered.dropLast()) : lowered
    }
}


