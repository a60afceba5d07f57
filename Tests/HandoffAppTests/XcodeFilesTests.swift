import Foundation
import Testing

@testable import HandoffApp
@testable import HandoffCore

/// An iOS app's Info.plist as Xcode's templates write it: every identifier a build setting.
private let xcodeInfoPlist = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    	<key>CFBundleDevelopmentRegion</key>
    	<string>$(DEVELOPMENT_LANGUAGE)</string>
    	<key>CFBundleExecutable</key>
    	<string>$(EXECUTABLE_NAME)</string>
    	<key>CFBundleIdentifier</key>
    	<string>$(PRODUCT_BUNDLE_IDENTIFIER)</string>
    	<key>CFBundleName</key>
    	<string>$(PRODUCT_NAME)</string>
    	<key>CFBundlePackageType</key>
    	<string>$(PRODUCT_BUNDLE_PACKAGE_TYPE)</string>
    	<key>CFBundleShortVersionString</key>
    	<string>$(MARKETING_VERSION)</string>
    	<key>CFBundleVersion</key>
    	<string>$(CURRENT_PROJECT_VERSION)</string>
    	<key>NSUserActivityTypes</key>
    	<array>
    		<string>$(PRODUCT_BUNDLE_IDENTIFIER).editing</string>
    		<string>${PRODUCT_BUNDLE_IDENTIFIER}.viewing</string>
    	</array>
    	<key>CFBundleDocumentTypes</key>
    	<array>
    		<dict>
    			<key>CFBundleTypeName</key>
    			<string>Note</string>
    			<key>LSItemContentTypes</key>
    			<array>
    				<string>$(PRODUCT_BUNDLE_IDENTIFIER:lower).note</string>
    			</array>
    			<key>NSUbiquitousDocumentUserActivityType</key>
    			<string>$(PRODUCT_BUNDLE_IDENTIFIER).note.editing</string>
    		</dict>
    	</array>
    	<key>UIApplicationSceneManifest</key>
    	<dict>
    		<key>UIApplicationSupportsMultipleScenes</key>
    		<false/>
    	</dict>
    </dict>
    </plist>
    """

/// Entitlements as Xcode writes them: no team key, the identifiers built from settings.
private let xcodeEntitlements = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
    	<key>application-identifier</key>
    	<string>$(AppIdentifierPrefix)$(CFBundleIdentifier)</string>
    	<key>com.apple.developer.associated-domains</key>
    	<array>
    		<string>activitycontinuation:notes.example.com</string>
    		<string>applinks:notes.example.com</string>
    	</array>
    	<key>keychain-access-groups</key>
    	<array>
    		<string>$(AppIdentifierPrefix)com.example.shared</string>
    	</array>
    </dict>
    </plist>
    """

private let projectSettings = """
    // Notes.xcconfig, as the project holds it
    PRODUCT_NAME = Notes
    PRODUCT_BUNDLE_IDENTIFIER = com.example.$(PRODUCT_NAME:rfc1034identifier)
    MARKETING_VERSION = 1.4
    """

private func folder() throws -> URL {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-xcode-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}

@Suite("Info.plists and entitlements as Xcode writes them")
struct XcodeFilesTests {
    @Test("Every build setting the manifest reads is expanded from an .xcconfig and a setting; the team comes from application-identifier and says so")
    func expandsProject() throws {
        let root = try folder()
        defer { try? FileManager.default.removeItem(at: root) }
        try projectSettings.write(to: root.appendingPathComponent("Notes.xcconfig"), atomically: true, encoding: .utf8)
        var settings = BuildSettings()
        try settings.read(xcconfig: root.appendingPathComponent("Notes.xcconfig"))
        try settings.assign("DEVELOPMENT_TEAM=ABCDE12345")

        let manifest = try AppManifest(
            infoPlist: Data(xcodeInfoPlist.utf8), entitlements: Data(xcodeEntitlements.utf8), entitlementsName: "Notes.entitlements", settings: settings)
        #expect(manifest.bundleIdentifier == "com.example.Notes")
        #expect(manifest.executable == "Notes")
        #expect(manifest.activityTypes == ["com.example.Notes.editing", "com.example.Notes.viewing"])
        #expect(manifest.documentTypes.first?.contentTypes == ["com.example.notes.note"])
        #expect(manifest.continuableActivityTypes.contains("com.example.Notes.note.editing"))
        #expect(manifest.teamIdentifier == "ABCDE12345")
        #expect(manifest.teamSource == .applicationIdentifier(key: "application-identifier"))
        #expect(manifest.applicationIdentifier == "ABCDE12345.com.example.Notes")
        #expect(manifest.associatedDomains.map(\.host) == ["notes.example.com", "notes.example.com"])
        #expect(manifest.warnings.isEmpty)
        // CFBundleVersion's $(CURRENT_PROJECT_VERSION) has no value, but the manifest does not read it.
    }

    @Test("A variable left without a value refuses the manifest, naming the variable, the key and how to give it a value")
    func unsetRefuses() throws {
        let error = try #require(throws: ManifestError.self) {
            try AppManifest(infoPlist: Data(xcodeInfoPlist.utf8), infoPlistName: "Notes/Info.plist", settings: try BuildSettings(["PRODUCT_NAME": "Notes"]))
        }
        #expect(error.file == "Notes/Info.plist")
        #expect(error.key == "CFBundleIdentifier")
        #expect(error.problem.contains("build setting PRODUCT_BUNDLE_IDENTIFIER, which has no value"))
        #expect(error.problem.contains("--setting PRODUCT_BUNDLE_IDENTIFIER=VALUE"))
        #expect(error.problem.contains(".xcconfig"))
        // No internal type name or source path in what a person reads.
        #expect(!error.description.contains("BuildSetting"))
        #expect(!error.description.contains(".swift"))
    }

    @Test("An activity type with a variable is never kept as written: without settings it refuses the manifest (it used to become 'TEAM.$(PRODUCT_BUNDLE_IDENTIFIER)')")
    func unexpandedActivityTypeRefused() throws {
        let info = """
            <plist version="1.0"><dict>
            <key>CFBundleIdentifier</key><string>com.example.notes</string>
            <key>NSUserActivityTypes</key><array><string>$(PRODUCT_BUNDLE_IDENTIFIER).editing</string></array>
            </dict></plist>
            """
        let error = try #require(throws: ManifestError.self) { try AppManifest(infoPlist: Data(info.utf8)) }
        #expect(error.key == "NSUserActivityTypes[0]")
        #expect(error.problem.contains("PRODUCT_BUNDLE_IDENTIFIER"))
    }

    @Test("EXECUTABLE_NAME comes from PRODUCT_NAME when not given, and its absence names both")
    func executableName() throws {
        let error = try #require(throws: ManifestError.self) {
            try AppManifest(infoPlist: Data(xcodeInfoPlist.utf8), settings: try BuildSettings(["PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes"]))
        }
        #expect(error.key == "CFBundleExecutable")
        #expect(error.problem.contains("give EXECUTABLE_NAME, or PRODUCT_NAME"))
    }

    @Test("$(AppIdentifierPrefix) without DEVELOPMENT_TEAM refuses the entitlements, saying to give DEVELOPMENT_TEAM")
    func appIdentifierPrefixNeedsTeam() throws {
        let error = try #require(throws: ManifestError.self) {
            try AppManifest(
                infoPlist: Data(xcodeInfoPlist.utf8), entitlements: Data(xcodeEntitlements.utf8), entitlementsName: "Notes.entitlements",
                settings: try BuildSettings(["PRODUCT_NAME": "Notes", "PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes"]))
        }
        #expect(error.file == "Notes.entitlements")
        #expect(error.key == "application-identifier")
        #expect(error.problem.contains("give DEVELOPMENT_TEAM"))
    }

    @Test("An application-identifier for another app refuses the entitlements, naming both identifiers")
    func applicationIdentifierOfAnotherApp() throws {
        let entitlements = try PropertyListSerialization.data(
            fromPropertyList: ["application-identifier": "ABCDE12345.com.example.other"], format: .xml, options: 0)
        let error = try #require(throws: ManifestError.self) {
            try AppManifest(
                infoPlist: Data(xcodeInfoPlist.utf8), entitlements: entitlements,
                settings: try BuildSettings(["PRODUCT_NAME": "Notes", "PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes"]))
        }
        #expect(error.problem.contains("'com.example.other'"))
        #expect(error.problem.contains("'com.example.notes'"))
        // A wildcard covering the app is its own.
        let wildcard = try PropertyListSerialization.data(fromPropertyList: ["application-identifier": "ABCDE12345.com.example.*"], format: .xml, options: 0)
        let manifest = try AppManifest(
            infoPlist: Data(xcodeInfoPlist.utf8), entitlements: wildcard,
            settings: try BuildSettings(["PRODUCT_NAME": "Notes", "PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes"]))
        #expect(manifest.teamIdentifier == "ABCDE12345")
    }

    @Test("The team: the team-identifier entitlement first, then application-identifier, then the DEVELOPMENT_TEAM setting; each says where it came from")
    func teamOrder() throws {
        let info = Data("<plist version=\"1.0\"><dict><key>CFBundleIdentifier</key><string>com.example.notes</string></dict></plist>".utf8)
        func entitlements(_ keys: [String: Any]) throws -> Data { try PropertyListSerialization.data(fromPropertyList: keys, format: .xml, options: 0) }
        let team = try BuildSettings(["DEVELOPMENT_TEAM": "SETTINGTEAM"])

        let explicit = try AppManifest(
            infoPlist: info, entitlements: try entitlements(["com.apple.developer.team-identifier": "TEAMKEY", "application-identifier": "TEAMKEY.com.example.notes"]),
            settings: team)
        #expect(explicit.teamIdentifier == "TEAMKEY")
        #expect(explicit.teamSource == .teamIdentifierEntitlement)
        let fromIdentifier = try AppManifest(infoPlist: info, entitlements: try entitlements(["application-identifier": "APPID.com.example.notes"]), settings: team)
        #expect(fromIdentifier.teamIdentifier == "APPID")
        #expect(fromIdentifier.teamSource?.description == "the prefix of the entitlement application-identifier")
        let fromSetting = try AppManifest(
            infoPlist: info, entitlements: try entitlements(["com.apple.developer.associated-domains": ["activitycontinuation:example.com"]]), settings: team)
        #expect(fromSetting.teamIdentifier == "SETTINGTEAM")
        #expect(fromSetting.teamSource == .developmentTeamSetting)
        let withoutEntitlements = try AppManifest(infoPlist: info, settings: team)
        #expect(withoutEntitlements.teamIdentifier == "SETTINGTEAM")
        #expect(withoutEntitlements.teamSource?.description == "the build setting DEVELOPMENT_TEAM")
    }

    @Test("An entitlements file can be read on its own: its team, application identifier, domains and keychain groups")
    func entitlementsAlone() throws {
        let granted = try Entitlements(
            plist: Data(xcodeEntitlements.utf8), file: "Notes.entitlements",
            settings: try BuildSettings(["DEVELOPMENT_TEAM": "ABCDE12345", "CFBundleIdentifier": "com.example.notes"]))
        #expect(granted.teamIdentifier == "ABCDE12345")
        #expect(granted.applicationIdentifier == "ABCDE12345.com.example.notes")
        #expect(granted.keychainAccessGroups == ["ABCDE12345.com.example.shared"])
        #expect(granted.associatedDomains.map(\.service) == ["activitycontinuation", "applinks"])
        // Without the app's identifier, $(CFBundleIdentifier) is named as missing.
        let error = try #require(throws: ManifestError.self) {
            try Entitlements(plist: Data(xcodeEntitlements.utf8), settings: try BuildSettings(["DEVELOPMENT_TEAM": "ABCDE12345"]))
        }
        #expect(error.problem.contains("CFBundleIdentifier"))
    }
}

@Suite("App directories as Xcode lays them out")
struct XcodeDirectoryTests {
    /// An app directory with the given files (name to contents).
    private func directory(_ files: [String: String]) throws -> URL {
        let root = try folder()
        for (name, contents) in files {
            let url = root.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try contents.write(to: url, atomically: true, encoding: .utf8)
        }
        return root
    }

    private let settings = "PRODUCT_NAME = Notes\nPRODUCT_BUNDLE_IDENTIFIER = com.example.notes\nDEVELOPMENT_TEAM = ABCDE12345\n"

    @Test("NAME-Info.plist and NAME.entitlements are found, and Handoff.xcconfig in the directory expands them")
    func findsXcodeNames() throws {
        let app = try directory(["Notes-Info.plist": xcodeInfoPlist, "Notes.entitlements": xcodeEntitlements, "Handoff.xcconfig": settings])
        defer { try? FileManager.default.removeItem(at: app) }
        let manifest = try AppManifest(directory: app)
        #expect(manifest.bundleIdentifier == "com.example.notes")
        #expect(manifest.applicationIdentifier == "ABCDE12345.com.example.notes")
    }

    @Test("Settings given over the directory's own win")
    func givenSettingsWin() throws {
        let app = try directory(["Info.plist": xcodeInfoPlist, "Handoff.xcconfig": settings])
        defer { try? FileManager.default.removeItem(at: app) }
        let manifest = try AppManifest(directory: app, settings: try BuildSettings(["PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes.beta"]))
        #expect(manifest.bundleIdentifier == "com.example.notes.beta")
    }

    @Test("Several NAME-Info.plist files are an error that lists them and says INFOPLIST_FILE chooses; the setting then chooses")
    func severalInfoPlists() throws {
        let app = try directory(["Notes-Info.plist": xcodeInfoPlist, "NotesWidget-Info.plist": xcodeInfoPlist, "Handoff.xcconfig": settings])
        defer { try? FileManager.default.removeItem(at: app) }
        let error = try #require(throws: ManifestError.self) { try AppManifest(directory: app) }
        #expect(error.problem.contains("'Notes-Info.plist' and 'NotesWidget-Info.plist'"))
        #expect(error.problem.contains("INFOPLIST_FILE"))
        let chosen = try AppManifest(directory: app, settings: try BuildSettings(["INFOPLIST_FILE": "Notes-Info.plist"]))
        #expect(chosen.bundleIdentifier == "com.example.notes")
    }

    @Test("Several entitlements files: CODE_SIGN_ENTITLEMENTS chooses one, and its absence is named in the error")
    func severalEntitlements() throws {
        let debug = xcodeEntitlements.replacingOccurrences(of: "$(AppIdentifierPrefix)$(CFBundleIdentifier)", with: "DEBUGTEAM.com.example.notes")
        let app = try directory([
            "Info.plist": xcodeInfoPlist, "Notes.entitlements": xcodeEntitlements, "NotesDebug.entitlements": debug, "Handoff.xcconfig": settings,
        ])
        defer { try? FileManager.default.removeItem(at: app) }
        let error = try #require(throws: ManifestError.self) { try AppManifest(directory: app) }
        #expect(error.problem.contains("CODE_SIGN_ENTITLEMENTS"))
        let chosen = try AppManifest(directory: app, settings: try BuildSettings(["CODE_SIGN_ENTITLEMENTS": "NotesDebug.entitlements"]))
        #expect(chosen.teamIdentifier == "DEBUGTEAM")
    }

    @Test("A file a setting names must be inside the directory, and so must a file Handoff.xcconfig includes")
    func staysInside() throws {
        let app = try directory(["Info.plist": xcodeInfoPlist, "Handoff.xcconfig": settings + "#include \"../Outside.xcconfig\"\n"])
        defer { try? FileManager.default.removeItem(at: app) }
        try "A = 1\n".write(to: app.deletingLastPathComponent().appendingPathComponent("Outside.xcconfig"), atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: app.deletingLastPathComponent().appendingPathComponent("Outside.xcconfig")) }
        let include = try #require(throws: ManifestError.self) { try AppManifest(directory: app) }
        #expect(include.problem.contains("outside"))

        try settings.write(to: app.appendingPathComponent("Handoff.xcconfig"), atomically: true, encoding: .utf8)
        let named = try #require(throws: ManifestError.self) {
            try AppManifest(directory: app, settings: try BuildSettings(["INFOPLIST_FILE": "../Info.plist"]))
        }
        #expect(named.key == "INFOPLIST_FILE")
        #expect(named.problem.contains("inside the app directory"))
    }
}
