import Foundation

/// What an installed app tells Handoff about itself: who it is, which team signed it,
/// which activities it can continue and which web domains it claims.
///
/// A manifest comes from the app's `Info.plist` and, optionally, its entitlements, so that
/// an app written for Apple platforms can be described with the files it already has.
/// Routing an incoming activity to an app (see `ActivityRouter`) only needs this value.
public struct AppManifest: Sendable, Hashable {
    /// `CFBundleIdentifier`, for example `com.example.editor`.
    public var bundleIdentifier: String
    /// `CFBundleExecutable`: the program to launch, when the app names one.
    public var executable: String?
    /// The developer team that signed the app. Activities only continue between apps of the same team.
    public var teamIdentifier: String?
    /// `NSUserActivityTypes`, in the order the app lists them.
    public var activityTypes: [String]
    /// `CFBundleDocumentTypes`, in the order the app lists them.
    public var documentTypes: [DocumentType]
    /// Every entry of the `com.apple.developer.associated-domains` entitlement, whatever its service.
    public var associatedDomains: [AssociatedDomain]
    /// Where `teamIdentifier` was read: an entitlement, or the `DEVELOPMENT_TEAM` build setting.
    public var teamSource: TeamSource?
    /// `UIApplicationSceneManifest`: present when the app uses scenes (see `Scene` in HandoffApp).
    public var sceneManifest: SceneManifest?
    /// Keys of the files that were malformed and ignored, as Apple platforms ignore them.
    public var warnings: [ManifestWarning]

    /// Describes an app directly, without reading any file.
    public init(
        bundleIdentifier: String,
        executable: String? = nil,
        teamIdentifier: String? = nil,
        activityTypes: [String] = [],
        documentTypes: [DocumentType] = [],
        associatedDomains: [AssociatedDomain] = [],
        sceneManifest: SceneManifest? = nil
    ) {
        self.sceneManifest = sceneManifest
        self.bundleIdentifier = bundleIdentifier
        self.executable = executable
        self.teamIdentifier = teamIdentifier
        self.activityTypes = activityTypes
        self.documentTypes = documentTypes
        self.associatedDomains = associatedDomains
        self.teamSource = teamIdentifier == nil ? nil : .teamIdentifierEntitlement
        self.warnings = []
    }

    /// Reads a manifest from the bytes of an `Info.plist` (XML or binary) and, when the app
    /// has one, its entitlements plist, expanding the build settings they use
    /// (`$(PRODUCT_BUNDLE_IDENTIFIER)`…) from `settings`.
    ///
    /// The names only appear in errors and warnings, so pass whatever helps a person find the
    /// file. Keys this type does not know are ignored; a key it knows but cannot read is
    /// ignored with a warning in `warnings`, as Apple platforms ignore it, except the bundle
    /// identifier and the executable, which an app cannot run without.
    public init(
        infoPlist: Data,
        infoPlistName: String = "Info.plist",
        entitlements: Data? = nil,
        entitlementsName: String = "entitlements",
        settings: BuildSettings = BuildSettings()
    ) throws(ManifestError) {
        let warnings = ManifestWarnings()
        let info = try PlistDictionary(reading: infoPlist, file: infoPlistName, settings: settings, warnings: warnings)

        guard let bundleIdentifier = try info.requiredString(InfoKey.bundleIdentifier) else {
            throw info.error(
                key: InfoKey.bundleIdentifier,
                "missing; every app needs a bundle identifier such as 'com.example.editor'"
            )
        }
        guard !bundleIdentifier.isBlank else {
            throw info.error(
                key: InfoKey.bundleIdentifier,
                "is empty; every app needs a bundle identifier such as 'com.example.editor'"
            )
        }
        self.bundleIdentifier = bundleIdentifier
        self.executable = try info.requiredString(InfoKey.executable)
        self.activityTypes = try info.strings(InfoKey.activityTypes, nonEmpty: true) ?? []

        var documentTypes: [DocumentType] = []
        for entry in info.dictionaries(InfoKey.documentTypes) ?? [] {
            documentTypes.append(try DocumentType(entry))
        }
        self.documentTypes = documentTypes
        if let scenes = info.dictionary(InfoKey.sceneManifest) {
            self.sceneManifest = try SceneManifest(scenes)
        } else {
            self.sceneManifest = nil
        }

        if let entitlements {
            let granted = try Entitlements(plist: entitlements, file: entitlementsName, settings: settings, bundleIdentifier: bundleIdentifier)
            self.teamIdentifier = granted.teamIdentifier
            self.teamSource = granted.teamSource
            self.associatedDomains = granted.associatedDomains
            self.warnings = warnings.list + granted.warnings
        } else {
            let team = try? settings.value(of: "DEVELOPMENT_TEAM")
            self.teamIdentifier = team.flatMap { $0.isBlank ? nil : $0 }
            self.teamSource = self.teamIdentifier == nil ? nil : .developmentTeamSetting
            self.associatedDomains = []
            self.warnings = warnings.list
        }
    }

    /// The file in an app directory that holds the build settings its `Info.plist` and
    /// entitlements are expanded with; `handoff apps sign --setting/--xcconfig` writes it, and
    /// the signature covers it.
    public static let buildSettingsFile = "Handoff.xcconfig"

    /// Reads an app directory: its `Info.plist`, its entitlements when there are any, and the
    /// build settings in its `Handoff.xcconfig` with `settings` over them.
    ///
    /// The Info.plist is the file the build setting `INFOPLIST_FILE` names, else `Info.plist`,
    /// else the one file named as Xcode names them (`MyApp-Info.plist`). The entitlements are
    /// the file `CODE_SIGN_ENTITLEMENTS` names, else the one `Entitlements.plist` or
    /// `*.entitlements`. Several candidates are an error that lists them and says which
    /// setting chooses, because picking one would silently ignore the others. An app without
    /// entitlements is fine: its team can come from `DEVELOPMENT_TEAM`, and it claims no domains.
    public init(directory: URL, settings given: BuildSettings = BuildSettings()) throws(ManifestError) {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw ManifestError(file: directory.path, key: nil, problem: "no such directory; expected an app directory holding an Info.plist")
        }

        var settings = BuildSettings()
        let settingsURL = directory.appendingPathComponent(Self.buildSettingsFile)
        if fileManager.fileExists(atPath: settingsURL.path) {
            do throws(BuildSettingsError) {
                try settings.read(xcconfig: settingsURL, confinedTo: directory)
            } catch {
                throw ManifestError(file: error.source, key: nil, problem: error.problem)
            }
        }
        for (name, value) in given.values.sorted(by: { $0.key < $1.key }) {
            try? settings.set(name, value)
        }

        let names: [String]
        do {
            names = try fileManager.contentsOfDirectory(atPath: directory.path).filter { !$0.hasPrefix(".") }.sorted()
        } catch {
            throw ManifestError(file: directory.path, key: nil, problem: "cannot list the directory: \(error.localizedDescription)")
        }

        let infoURL: URL
        if let named = try Self.namedFile("INFOPLIST_FILE", in: directory, settings: settings) {
            infoURL = named
        } else if names.contains("Info.plist") {
            infoURL = directory.appendingPathComponent("Info.plist")
        } else {
            // Hidden files such as "._App-Info.plist" are copying leftovers.
            let candidates = names.filter { $0.hasSuffix("-Info.plist") }
            guard candidates.count <= 1 else {
                throw ManifestError(
                    file: directory.path, key: nil,
                    problem: "found \(Self.list(candidates)) and no Info.plist; choose one with the build setting INFOPLIST_FILE (--setting INFOPLIST_FILE=\(candidates[0]))")
            }
            guard let only = candidates.first else {
                throw ManifestError(
                    file: directory.appendingPathComponent("Info.plist").path, key: nil,
                    problem: "no such file; every app directory needs an Info.plist (or one NAME-Info.plist, or the file the build setting INFOPLIST_FILE names)")
            }
            infoURL = directory.appendingPathComponent(only)
        }
        let info = try Self.contents(of: infoURL)

        var entitlementsURL: URL?
        if let named = try Self.namedFile("CODE_SIGN_ENTITLEMENTS", in: directory, settings: settings) {
            entitlementsURL = named
        } else {
            let candidates = names.filter { $0 == "Entitlements.plist" || $0.hasSuffix(".entitlements") }
            if candidates.count > 1 {
                throw ManifestError(
                    file: directory.path,
                    key: nil,
                    problem: "found \(Self.list(candidates)); keep a single entitlements file so it is clear which one applies, or choose one with the build setting CODE_SIGN_ENTITLEMENTS (--setting CODE_SIGN_ENTITLEMENTS=\(candidates[0]))"
                )
            }
            entitlementsURL = candidates.first.map { directory.appendingPathComponent($0) }
        }

        var entitlements: Data?
        if let entitlementsURL {
            entitlements = try Self.contents(of: entitlementsURL)
        }
        try self.init(
            infoPlist: info,
            infoPlistName: infoURL.path,
            entitlements: entitlements,
            entitlementsName: entitlementsURL?.path ?? "entitlements",
            settings: settings
        )
    }

    /// Every activity type this app can continue: `NSUserActivityTypes` plus the
    /// `NSUbiquitousDocumentUserActivityType` of each document type, which document-based
    /// apps need not repeat in `NSUserActivityTypes`.
    public var continuableActivityTypes: Set<String> {
        Set(activityTypes).union(documentTypes.compactMap(\.ubiquitousActivityType))
    }

    /// `TEAMID.bundle.identifier`, the form a site's `apple-app-site-association` file uses
    /// to approve an app; `nil` while the team is unknown.
    public var applicationIdentifier: String? {
        guard let teamIdentifier, !teamIdentifier.isBlank else { return nil }
        return "\(teamIdentifier).\(bundleIdentifier)"
    }

    /// The activity type this app's documents of the given kind hand off as, if any.
    ///
    /// `contentType` may be a uniform type identifier (`LSItemContentTypes`), a file name
    /// extension (`CFBundleTypeExtensions`, with or without the leading dot) or a document
    /// type's `CFBundleTypeName`, tried in that order across all document types.
    /// Identifiers and extensions compare case-insensitively, as on Apple platforms;
    /// names compare exactly.
    public func documentActivityType(forContentType contentType: String) -> String? {
        let handingOff = documentTypes.filter { $0.ubiquitousActivityType != nil }
        let lowered = contentType.lowercased()
        let asExtension = lowered.hasPrefix(".") ? String(lowered.dropFirst()) : lowered

        let match =
            handingOff.first { $0.contentTypes.contains { $0.lowercased() == lowered } }
            ?? handingOff.first { $0.extensions.contains { $0.lowercased() == asExtension } }
            ?? handingOff.first { $0.name == contentType }
        return match?.ubiquitousActivityType
    }
}

// MARK: - Reading the files

extension AppManifest {
    private static func contents(of url: URL) throws(ManifestError) -> Data {
        do {
            return try Data(contentsOf: url)
        } catch {
            throw ManifestError(file: url.path, key: nil, problem: "cannot read the file: \(error.localizedDescription)")
        }
    }

    /// The app directory's file a build setting names (`INFOPLIST_FILE`,
    /// `CODE_SIGN_ENTITLEMENTS`), relative to the directory and inside it; `nil` when unset.
    private static func namedFile(_ setting: String, in directory: URL, settings: BuildSettings) throws(ManifestError) -> URL? {
        let shown = directory.appendingPathComponent(buildSettingsFile).path
        let path: String
        do {
            guard let value = try settings.value(of: setting), !value.isBlank else { return nil }
            path = value
        } catch {
            let problem: String
            switch error {
            case .unset(let name): problem = "\(setting) uses build setting \(name), which has no value: \(BuildSettings.hint(for: name))"
            case .invalid(let text): problem = text
            }
            throw ManifestError(file: shown, key: setting, problem: problem)
        }
        guard !path.hasPrefix("/"), !path.split(separator: "/").contains("..") else {
            throw ManifestError(file: shown, key: setting, problem: "'\(path)' must be a path inside the app directory, relative to it")
        }
        let url = directory.appendingPathComponent(path)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw ManifestError(file: url.path, key: nil, problem: "no such file; the build setting \(setting) names it")
        }
        return url
    }

    private static func list(_ names: [String]) -> String {
        names.map { "'\($0)'" }.joined(separator: " and ")
    }
}

private enum InfoKey {
    static let bundleIdentifier = "CFBundleIdentifier"
    static let executable = "CFBundleExecutable"
    static let activityTypes = "NSUserActivityTypes"
    static let documentTypes = "CFBundleDocumentTypes"
    static let documentTypeName = "CFBundleTypeName"
    static let contentTypes = "LSItemContentTypes"
    static let extensions = "CFBundleTypeExtensions"
    static let role = "CFBundleTypeRole"
    static let ubiquitousActivityType = "NSUbiquitousDocumentUserActivityType"
    static let sceneManifest = "UIApplicationSceneManifest"
    static let supportsMultipleScenes = "UIApplicationSupportsMultipleScenes"
    static let sceneConfigurations = "UISceneConfigurations"
    static let sceneConfigurationName = "UISceneConfigurationName"
    static let sceneDelegateClassName = "UISceneDelegateClassName"
    static let sceneClassName = "UISceneClassName"
}

// MARK: - SceneManifest

/// `UIApplicationSceneManifest`: that the app uses scenes, and the scene configurations of
/// each session role, with the classes they name.
public struct SceneManifest: Sendable, Hashable {
    /// One entry of `UISceneConfigurations`.
    public struct Configuration: Sendable, Hashable {
        /// `UISceneConfigurationName`.
        public var name: String?
        /// `UISceneDelegateClassName`, such as `MapViewer.SceneDelegate` (Xcode writes
        /// `$(PRODUCT_MODULE_NAME).SceneDelegate`).
        public var delegateClassName: String?
        /// `UISceneClassName`.
        public var sceneClassName: String?

        public init(name: String? = nil, delegateClassName: String? = nil, sceneClassName: String? = nil) {
            self.name = name
            self.delegateClassName = delegateClassName
            self.sceneClassName = sceneClassName
        }
    }

    /// `UIApplicationSupportsMultipleScenes`.
    public var supportsMultipleScenes: Bool
    /// `UISceneConfigurations`: each session role (`UIWindowSceneSessionRoleApplication`) to its configurations.
    public var configurations: [String: [Configuration]]

    public init(supportsMultipleScenes: Bool = false, configurations: [String: [Configuration]] = [:]) {
        self.supportsMultipleScenes = supportsMultipleScenes
        self.configurations = configurations
    }

    /// The configuration of `role` named `name`, or the role's first when `name` is nil.
    public func configuration(named name: String?, role: String) -> Configuration? {
        let candidates = configurations[role] ?? []
        guard let name else { return candidates.first }
        return candidates.first { $0.name == name }
    }

    fileprivate init(_ entry: PlistDictionary) throws(ManifestError) {
        supportsMultipleScenes = entry.bool(InfoKey.supportsMultipleScenes) ?? false
        var configurations: [String: [Configuration]] = [:]
        if let roles = entry.dictionary(InfoKey.sceneConfigurations) {
            for role in roles.values.keys.sorted() {
                var listed: [Configuration] = []
                for configuration in roles.dictionaries(role) ?? [] {
                    listed.append(
                        Configuration(
                            name: try configuration.string(InfoKey.sceneConfigurationName),
                            delegateClassName: try configuration.string(InfoKey.sceneDelegateClassName, nonEmpty: true),
                            sceneClassName: try configuration.string(InfoKey.sceneClassName, nonEmpty: true)))
                }
                configurations[role] = listed
            }
        }
        self.configurations = configurations
    }
}

// MARK: - DocumentType

/// One entry of `CFBundleDocumentTypes`: a kind of document the app opens and, for
/// document-based apps, the activity type its open documents hand off as.
public struct DocumentType: Sendable, Hashable {
    /// `CFBundleTypeName`, for example `Markdown Document`.
    public var name: String?
    /// `LSItemContentTypes`: uniform type identifiers such as `net.daringfireball.markdown`.
    public var contentTypes: [String]
    /// `CFBundleTypeExtensions`: file name extensions without the dot, such as `md`.
    public var extensions: [String]
    /// `CFBundleTypeRole`: `Editor`, `Viewer`, `Shell` or `None`.
    public var role: String?
    /// `NSUbiquitousDocumentUserActivityType`: the activity type of an open document of this kind.
    public var ubiquitousActivityType: String?

    /// Describes a document type directly, without reading any file.
    public init(
        name: String? = nil,
        contentTypes: [String] = [],
        extensions: [String] = [],
        role: String? = nil,
        ubiquitousActivityType: String? = nil
    ) {
        self.name = name
        self.contentTypes = contentTypes
        self.extensions = extensions
        self.role = role
        self.ubiquitousActivityType = ubiquitousActivityType
    }

    fileprivate init(_ entry: PlistDictionary) throws(ManifestError) {
        self.name = try entry.string(InfoKey.documentTypeName)
        self.contentTypes = try entry.strings(InfoKey.contentTypes, nonEmpty: true) ?? []
        self.extensions = try entry.strings(InfoKey.extensions, nonEmpty: true) ?? []
        self.role = try entry.string(InfoKey.role)
        self.ubiquitousActivityType = try entry.string(
            InfoKey.ubiquitousActivityType, nonEmpty: true, example: "an activity type such as 'com.example.editor.editing'")
    }
}

