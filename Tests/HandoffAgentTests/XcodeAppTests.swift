import Foundation
import HandoffCore
import HandoffLocalAPI
import HandoffSigning
import HandoffTesting
import Testing

@testable import HandoffAgent

/// An app directory laid out as an Xcode project's files are: `NAME-Info.plist` and
/// `NAME.entitlements` full of build settings, no team key, an executable.
private func makeXcodeApp(in root: URL, activityTypes: String = "<array><string>$(PRODUCT_BUNDLE_IDENTIFIER).editing</string></array>") throws -> URL {
    let folder = root.appendingPathComponent("Notes-\(UUID().uuidString.prefix(6))", isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict>
        <key>CFBundleIdentifier</key><string>$(PRODUCT_BUNDLE_IDENTIFIER)</string>
        <key>CFBundleExecutable</key><string>$(EXECUTABLE_NAME)</string>
        <key>CFBundleShortVersionString</key><string>$(MARKETING_VERSION)</string>
        <key>NSUserActivityTypes</key>\(activityTypes)
        </dict></plist>
        """.write(to: folder.appendingPathComponent("Notes-Info.plist"), atomically: true, encoding: .utf8)
    try """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict>
        <key>application-identifier</key><string>$(AppIdentifierPrefix)$(CFBundleIdentifier)</string>
        <key>com.apple.developer.associated-domains</key><array><string>activitycontinuation:notes.example.com</string></array>
        </dict></plist>
        """.write(to: folder.appendingPathComponent("Notes.entitlements"), atomically: true, encoding: .utf8)
    let executable = folder.appendingPathComponent("Notes")
    try "#!/bin/sh\nexit 0\n".write(to: executable, atomically: true, encoding: .utf8)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: executable.path)
    return folder
}

@Suite("Apps with Xcode's files")
struct XcodeAppTests {
    let root: URL

    init() throws {
        root = URL(fileURLWithPath: "/tmp/hx-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    @Test("With the CLI: sign with an .xcconfig and DEVELOPMENT_TEAM, verify and install; the agent lists the expanded identifiers and where the team came from")
    func signAndInstall() async throws {
        let handoff = try #require(builtExecutable("handoff"))
        try await withHarness { harness in
            let device = try await harness.start("xcode") { $0.allowsUnsignedApps = false }
            let keyFile = root.appendingPathComponent("team.key").path
            _ = try await runCommand(handoff, ["team", "create", "--key", keyFile])
            let team = TeamKey.identifier(of: try TeamKey(pemRepresentation: String(contentsOfFile: keyFile, encoding: .utf8), file: keyFile).privateKey.publicKey)
            let app = try makeXcodeApp(in: root)
            let xcconfig = root.appendingPathComponent("Notes.xcconfig")
            try "PRODUCT_NAME = Notes\nPRODUCT_BUNDLE_IDENTIFIER = com.example.$(PRODUCT_NAME:lower)\n".write(to: xcconfig, atomically: true, encoding: .utf8)

            // Without the settings, the message names the variable and how to give it.
            let (unset, unsetText) = try await runCommand(handoff, ["apps", "sign", app.path, "--key", keyFile])
            #expect(unset == 1)
            #expect(unsetText.contains("PRODUCT_BUNDLE_IDENTIFIER, which has no value"), "\(unsetText)")
            #expect(!FileManager.default.fileExists(atPath: app.appendingPathComponent("Handoff.xcconfig").path))

            // The team comes from DEVELOPMENT_TEAM through $(AppIdentifierPrefix).
            let (signed, signedText) = try await runCommand(
                handoff, ["apps", "sign", app.path, "--key", keyFile, "--xcconfig", xcconfig.path, "--setting", "DEVELOPMENT_TEAM=\(team)"])
            #expect(signed == 0, "\(signedText)")
            #expect(signedText.contains("Signed com.example.notes as team \(team) (the team from the prefix of the entitlement application-identifier)"), "\(signedText)")
            let (verified, verifiedText) = try await runCommand(handoff, ["apps", "verify", app.path])
            #expect(verified == 0 && verifiedText.contains("com.example.notes, signed by team \(team)"), "\(verifiedText)")

            // Settings that differ from those it was signed with are refused; the same ones are fine.
            let (differs, differsText) = try await runCommand(
                handoff, ["apps", "install", app.path, "--socket", device.socket, "--setting", "PRODUCT_BUNDLE_IDENTIFIER=com.example.other"])
            #expect(differs == 1 && differsText.contains("PRODUCT_BUNDLE_IDENTIFIER given here differs"), "\(differsText)")
            let (installed, installedText) = try await runCommand(
                handoff, ["apps", "install", app.path, "--socket", device.socket, "--setting", "DEVELOPMENT_TEAM=\(team)"])
            #expect(installed == 0, "\(installedText)")
            #expect(installedText.contains("team \(team) from the prefix of the entitlement application-identifier"), "\(installedText)")
            let apps = try await device.call(.apps).apps ?? []
            #expect(apps.map(\.bundleIdentifier) == ["com.example.notes"])
            #expect(apps.first?.activityTypes == ["com.example.notes.editing"])
            #expect(apps.first?.signedBy == team)
        }
    }

    @Test("An unsigned app in development mode takes its settings at install, keeps them in its copy, and a malformed key is a warning, not a refusal")
    func developmentInstall() throws {
        let state = root.appendingPathComponent("state")
        let registry = AppRegistry(stateDirectory: state, allowsUnsignedApps: true)
        let app = try makeXcodeApp(in: root, activityTypes: "<dict><key>com.example.notes.open</key><string>Open</string></dict>")
        let (installed, _) = try registry.install(
            from: app, settings: ["PRODUCT_NAME": "Notes", "PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes", "DEVELOPMENT_TEAM": "EXAMPLETEAM"])
        #expect(installed.manifest.bundleIdentifier == "com.example.notes")
        #expect(installed.manifest.teamIdentifier == "EXAMPLETEAM")
        #expect(installed.manifest.warnings.map(\.key) == ["NSUserActivityTypes"])
        #expect(installed.manifest.warnings.first?.file.hasSuffix("Notes-Info.plist") == true)
        // Read again as the agent does when it starts: the copy holds the settings.
        let loaded = registry.load()
        #expect(loaded.problems.isEmpty, "\(loaded.problems)")
        #expect(loaded.apps.map(\.manifest.bundleIdentifier) == ["com.example.notes"])
        // The source directory was not changed.
        #expect(!FileManager.default.fileExists(atPath: app.appendingPathComponent("Handoff.xcconfig").path))
    }
}

extension XcodeAppTests {
    @Test("MapViewer's iOS scene form, installed from its Xcode-style files and .xcconfig, continues the app delegate form's activities on another agent: launched, the activity reaches willConnectTo; running, scene(_:continue:)")
    func sceneFormEndToEnd() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            try await harness.installMapViewer(on: a)

            // The scene form on beta: its files as the project holds them, expanded from its .xcconfig.
            let binary = try #require(builtExecutable("MapViewerScenes"), "MapViewerScenes was not built next to the tests")
            let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Examples/MapViewerScenes/App").standardizedFileURL
            let folder = harness.root.appendingPathComponent("MapViewerScenes-app", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for file in ["Info.plist", "MapViewerScenes.entitlements"] {
                try FileManager.default.copyItem(at: sources.appendingPathComponent(file), to: folder.appendingPathComponent(file))
            }
            try FileManager.default.copyItem(at: binary, to: folder.appendingPathComponent("MapViewerScenes"))
            var settings = BuildSettings()
            try settings.read(xcconfig: sources.appendingPathComponent("MapViewerScenes.xcconfig"))
            let installed = try #require(try await b.call(.installApp(directory: folder.path, settings: settings.values)).app)
            #expect(installed.bundleIdentifier == "com.example.handoff.MapViewer")
            #expect(installed.executable.hasSuffix("/MapViewerScenes"))

            let origin = try harness.runMapViewer(on: a)
            origin.send("show 37.7887 -122.4075 0.02")
            let offered = await eventually { (try? await b.nearby().first?.activity.activityType) == mapViewing }
            try #require(offered, "beta never listed alpha's activity")
            let offer = try #require(try await b.nearby().first)
            let continued = try #require(try await b.call(.continue(activity: offer.activity.id)).continued)
            #expect(continued.app == "com.example.handoff.MapViewer")
            let restored = await eventually { b.mapViewerEvents.contains { $0.contains("map shows center 37.7887, -122.4075") } }
            #expect(restored, "events on beta: \(b.mapViewerEvents)")
            #expect(b.mapViewerEvents.contains("connected with \(mapViewing)"), "events on beta: \(b.mapViewerEvents)")
            #expect(!b.mapViewerEvents.contains { $0.hasPrefix("continue ") || $0.hasPrefix("will continue ") }, "events on beta: \(b.mapViewerEvents)")

            // Running now: the next continuation reaches the connected scene.
            origin.send("edit stonestown")
            origin.send("favorite on")
            let editing = await eventually { (try? await b.nearby().first?.activity.title) == "Editing Stonestown" }
            try #require(editing)
            let second = try #require(try await b.nearby().first)
            try await b.call(.continue(activity: second.activity.id))
            #expect(await eventually { b.mapViewerEvents.contains("editor open for Stonestown, favorite: true") }, "events on beta: \(b.mapViewerEvents)")
            let storeEditing = "com.example.handoff.MapViewer.store-editing"
            let tail = b.mapViewerEvents.drop { $0 != "will continue \(storeEditing)" }
            #expect(Array(tail.prefix(2)) == ["will continue \(storeEditing)", "continue \(storeEditing)"], "events on beta: \(b.mapViewerEvents)")
            #expect(await eventually { origin.log.contains("editor for Stonestown closed: continued on another device") }, "events on alpha: \(origin.log)")
        }
    }
}

extension XcodeAppTests {
    @Test("A signed app installs with the very settings it was signed with, even those its Handoff.xcconfig had to guard (// and a trailing ;)")
    func signedWithGuardedSettings() throws {
        let key = TeamKey.generate()
        let app = try makeXcodeApp(in: root)
        let settings = try BuildSettings([
            "PRODUCT_NAME": "Notes", "PRODUCT_BUNDLE_IDENTIFIER": "com.example.notes", "DEVELOPMENT_TEAM": key.teamIdentifier,
            "WEBSITE": "https://notes.example.com", "FLAGS": "-a;",
        ])
        try settings.xcconfigText().write(to: app.appendingPathComponent("Handoff.xcconfig"), atomically: true, encoding: .utf8)
        try AppSignature.sign(app, with: key)
        let registry = AppRegistry(stateDirectory: root.appendingPathComponent("signed-state"), allowsUnsignedApps: false)
        let (installed, _) = try registry.install(from: app, settings: ["WEBSITE": "https://notes.example.com", "FLAGS": "-a;"])
        #expect(installed.signedBy == key.teamIdentifier)
        #expect(throws: AppRegistryError.self) { try registry.install(from: app, settings: ["WEBSITE": "https://other.example.com"]) }
    }
}

