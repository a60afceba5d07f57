import Foundation
import HandoffLocalAPI
import HandoffSigning
import HandoffWire
import Testing

@testable import HandoffAgent

/// An app directory for signing tests: Info.plist, entitlements naming `team`, and an
/// executable script, in a fresh folder under `root`.
func makeApp(in root: URL, team: String?, name: String = "Notes", bundle: String = "com.example.notes") throws -> URL {
    let folder = root.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(6)).app", isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try """
        <?xml version="1.0" encoding="UTF-8"?>
        <plist version="1.0"><dict>
        <key>CFBundleIdentifier</key><string>\(bundle)</string>
        <key>CFBundleExecutable</key><string>\(name)</string>
        <key>NSUserActivityTypes</key><array><string>\(bundle).editing</string></array>
        </dict></plist>
        """.write(to: folder.appendingPathComponent("Info.plist"), atomically: true, encoding: .utf8)
    if let team {
        try """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>com.apple.developer.team-identifier</key><string>\(team)</string></dict></plist>
            """.write(to: folder.appendingPathComponent("\(name).entitlements"), atomically: true, encoding: .utf8)
    }
    let executable = folder.appendingPathComponent(name)
    try "#!/bin/sh\nexit 0\n".write(to: executable, atomically: true, encoding: .utf8)
    try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: executable.path)
    return folder
}

@Suite("Signed apps")
struct SigningTests {
    let root: URL
    let key = TeamKey.generate()

    init() throws {
        root = URL(fileURLWithPath: "/tmp/hs-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    func registry(unsigned: Bool = false) -> AppRegistry {
        AppRegistry(stateDirectory: root.appendingPathComponent("state-\(UUID().uuidString.prefix(6))"), allowsUnsignedApps: unsigned)
    }

    func refusal(_ registry: AppRegistry, _ app: URL) -> String {
        do {
            _ = try registry.install(from: app)
            return ""
        } catch {
            return error.message
        }
    }

    @Test("A team identifier is derived from the team's public key: 16 base32 characters, the same for the same key, another for another key")
    func derivedIdentifier() throws {
        let team = key.teamIdentifier
        #expect(TeamKey.isDerivedIdentifier(team))
        #expect(try TeamKey(pemRepresentation: key.pemRepresentation, file: "k").teamIdentifier == team)
        #expect(TeamKey.generate().teamIdentifier != team)
        #expect(throws: AppSignatureError.self) { try TeamKey(pemRepresentation: "not a key", file: "k") }
    }

    @Test("A signed app installs, and the registry says which team signed it, at install and when the agent loads its apps again")
    func signedInstalls() throws {
        let app = try makeApp(in: root, team: key.teamIdentifier)
        try AppSignature.sign(app, with: key)
        let registry = registry()
        let (installed, warning) = try registry.install(from: app)
        #expect(installed.signedBy == key.teamIdentifier)
        #expect(warning == nil)
        let loaded = registry.load()
        #expect(loaded.problems.isEmpty)
        #expect(loaded.apps.map(\.signedBy) == [key.teamIdentifier])
    }

    @Test("An unsigned app is refused, saying how to sign it or allow it; in development mode it installs with a warning")
    func unsignedRefused() throws {
        let app = try makeApp(in: root, team: "EXAMPLETEAM")
        let message = refusal(registry(), app)
        #expect(message.contains("is not signed"))
        #expect(message.contains("handoff apps sign"))
        #expect(message.contains("--development-mode"))
        let development = registry(unsigned: true)
        let (installed, warning) = try development.install(from: app)
        #expect(installed.signedBy == nil)
        #expect(warning?.contains("development mode") == true)
        // The same install, loaded by an agent no longer in development mode, is not used.
        let strict = AppRegistry(stateDirectory: development.directory.deletingLastPathComponent(), allowsUnsignedApps: false)
        #expect(strict.load().apps.isEmpty)
        #expect(strict.load().problems.first?.contains("is not signed") == true)
    }

    @Test(
        "S8: A signed app changed after signing is refused, naming what changed, in development mode too",
        arguments: ["executable", "Info.plist", "entitlements", "added file", "removed file", "signature file", "other key"])
    func tamperedRefused(change: String) throws {
        let app = try makeApp(in: root, team: key.teamIdentifier)
        try AppSignature.sign(app, with: key)
        let signatureFile = app.appendingPathComponent(AppSignature.path)
        var expected: String
        switch change {
        case "executable":
            try "#!/bin/sh\necho owned\n".write(to: app.appendingPathComponent("Notes"), atomically: false, encoding: .utf8)
            expected = "changed after signing: Notes"
        case "Info.plist":
            let info = app.appendingPathComponent("Info.plist")
            try String(contentsOf: info, encoding: .utf8).replacingOccurrences(of: ".editing", with: ".spying").write(to: info, atomically: true, encoding: .utf8)
            expected = "changed after signing: Info.plist"
        case "entitlements":
            let file = app.appendingPathComponent("Notes.entitlements")
            try String(contentsOf: file, encoding: .utf8).replacingOccurrences(of: "</dict>", with: "<key>x</key><true/></dict>")
                .write(to: file, atomically: true, encoding: .utf8)
            expected = "changed after signing: Notes.entitlements"
        case "added file":
            try FileManager.default.createDirectory(at: app.appendingPathComponent("lib"), withIntermediateDirectories: true)
            try Data([1]).write(to: app.appendingPathComponent("lib/evil.so"))
            expected = "added after signing: lib/evil.so"
        case "removed file":
            try FileManager.default.removeItem(at: app.appendingPathComponent("Notes.entitlements"))
            expected = "signed but missing: Notes.entitlements"
        case "signature file":
            var signed = try JSONDecoder().decode(AppSignature.self, from: Data(contentsOf: signatureFile))
            signed.files["Notes"] = String(repeating: "0", count: 64)
            try JSONEncoder().encode(signed).write(to: signatureFile)
            expected = "does not verify"
        default:
            // Signed by another key that claims this team: the key gives itself away.
            let other = TeamKey.generate()
            try AppSignature.sign(app, with: other)
            var signed = try JSONDecoder().decode(AppSignature.self, from: Data(contentsOf: signatureFile))
            signed.teamIdentifier = key.teamIdentifier
            try JSONEncoder().encode(signed).write(to: signatureFile)
            expected = "but its key is team '\(other.teamIdentifier)''s"
        }
        for unsigned in [false, true] {
            let message = refusal(registry(unsigned: unsigned), app)
            #expect(message.contains(expected), "\(change): \(message)")
        }
    }

    @Test("An app whose entitlements name another team than the key that signed it is refused, saying which team to name")
    func wrongTeam() throws {
        let app = try makeApp(in: root, team: "EXAMPLETEAM")
        try AppSignature.sign(app, with: key)
        let message = refusal(registry(unsigned: true), app)
        #expect(message.contains("names team 'EXAMPLETEAM'"))
        #expect(message.contains("set com.apple.developer.team-identifier to '\(key.teamIdentifier)'"))
    }

    @Test("A link in a signed app's directory is refused: what it points at could change without the signature noticing")
    func linkRefused() throws {
        let app = try makeApp(in: root, team: key.teamIdentifier)
        try FileManager.default.createSymbolicLink(atPath: app.appendingPathComponent("data").path, withDestinationPath: "/etc")
        #expect(throws: AppSignatureError.self) { try AppSignature.sign(app, with: key) }
        try FileManager.default.removeItem(at: app.appendingPathComponent("data"))
        try AppSignature.sign(app, with: key)
        try FileManager.default.createSymbolicLink(atPath: app.appendingPathComponent("data").path, withDestinationPath: "/etc")
        #expect(refusal(registry(), app).contains("is a link or special file"))
    }

    @Test("Development mode is off unless the flag or the configuration file turns it on; a bad value is named")
    func developmentModeSetting() throws {
        let state = ["XDG_STATE_HOME": root.path, "XDG_RUNTIME_DIR": root.path]
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: nil, environment: state).allowsUnsignedApps == false)
        var flags = AgentSettings()
        flags.developmentMode = "on"
        #expect(try AgentConfiguration.resolve(flags: flags, file: nil, environment: state).allowsUnsignedApps)
        let file = try ConfigurationFile(text: "development-mode = on\n", name: "h.conf")
        #expect(try AgentConfiguration.resolve(flags: AgentSettings(), file: file, environment: state).allowsUnsignedApps)
        flags.developmentMode = "maybe"
        #expect(throws: ConfigurationError.self) { try AgentConfiguration.resolve(flags: flags, file: nil, environment: state) }
    }

    @Test("With the CLI: team create, an unsigned install refused with the reason, sign (checking the team), verify, install; tampering found by verify")
    func commandLine() async throws {
        let handoff = try #require(builtExecutable("handoff"))
        try await withHarness { harness in
            let device = try await harness.start("signer") { $0.allowsUnsignedApps = false }
            let keyFile = root.appendingPathComponent("team.key").path
            let (created, createdText) = try await runCommand(handoff, ["team", "create", "--key", keyFile])
            #expect(created == 0, "\(createdText)")
            let permissions = try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? NSNumber
            #expect(permissions?.intValue == 0o600)
            let (again, againText) = try await runCommand(handoff, ["team", "create", "--key", keyFile])
            #expect(again != 0 && againText.contains("never replaced"))
            let (_, shown) = try await runCommand(handoff, ["team", "show", "--key", keyFile])
            let team = shown.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(TeamKey.isDerivedIdentifier(team))
            #expect(createdText.contains(team))

            let app = try makeApp(in: root, team: "EXAMPLETEAM")
            let (refused, refusedText) = try await runCommand(handoff, ["apps", "install", app.path, "--socket", device.socket])
            #expect(refused == 1)
            #expect(refusedText.contains("is not signed"), "\(refusedText)")

            let (wrong, wrongText) = try await runCommand(handoff, ["apps", "sign", app.path, "--key", keyFile])
            #expect(wrong != 0 && wrongText.contains("set com.apple.developer.team-identifier to '\(team)'"), "\(wrongText)")
            let entitlements = app.appendingPathComponent("Notes.entitlements")
            try String(contentsOf: entitlements, encoding: .utf8).replacingOccurrences(of: "EXAMPLETEAM", with: team)
                .write(to: entitlements, atomically: true, encoding: .utf8)
            let (signed, signedText) = try await runCommand(handoff, ["apps", "sign", app.path, "--key", keyFile])
            #expect(signed == 0 && signedText.contains("3 files"), "\(signedText)")
            let (verified, verifiedText) = try await runCommand(handoff, ["apps", "verify", app.path])
            #expect(verified == 0 && verifiedText.contains("signed by team \(team)"), "\(verifiedText)")
            let (installed, installedText) = try await runCommand(handoff, ["apps", "install", app.path, "--socket", device.socket])
            #expect(installed == 0 && installedText.contains("signed by team \(team)"), "\(installedText)")
            let apps = try await device.call(.apps).apps ?? []
            #expect(apps.map(\.signedBy) == [team])

            try Data("#!/bin/sh\necho changed\n".utf8).write(to: app.appendingPathComponent("Notes"))
            let (tampered, tamperedText) = try await runCommand(handoff, ["apps", "verify", app.path])
            #expect(tampered != 0 && tamperedText.contains("changed after signing: Notes"), "\(tamperedText)")
            let (reinstalled, reinstalledText) = try await runCommand(handoff, ["apps", "install", app.path, "--socket", device.socket])
            #expect(reinstalled == 1 && reinstalledText.contains("changed after signing: Notes"), "\(reinstalledText)")
            // The install that was there stays.
            #expect((try await device.call(.apps).apps ?? []).map(\.signedBy) == [team])
        }
    }
}

extension SigningTests {
    @Test("A signature file or Info.plist that is a pipe or a link is refused without reading it (a pipe would make the agent wait forever)")
    func specialFilesRefused() throws {
        let app = try makeApp(in: root, team: key.teamIdentifier)
        try AppSignature.sign(app, with: key)
        let signature = app.appendingPathComponent(AppSignature.path)
        try FileManager.default.removeItem(at: signature)
        #expect(mkfifo(signature.path, 0o600) == 0)
        #expect(refusal(registry(), app).contains("link or special file"))
        try FileManager.default.removeItem(at: signature)
        try FileManager.default.createSymbolicLink(atPath: signature.path, withDestinationPath: "/dev/zero")
        #expect(refusal(registry(unsigned: true), app).contains("link or special file"))

        let unsigned = try makeApp(in: root, team: "EXAMPLETEAM")
        let info = unsigned.appendingPathComponent("Info.plist")
        try FileManager.default.removeItem(at: info)
        #expect(mkfifo(info.path, 0o600) == 0)
        #expect(refusal(registry(unsigned: true), unsigned).contains("link or special file"))
    }

    @Test("An unsigned app may not name a team identifier of the derived form, even in development mode: only that team's key can claim it")
    func unsignedDerivedTeamRefused() throws {
        let app = try makeApp(in: root, team: key.teamIdentifier)
        let message = refusal(registry(unsigned: true), app)
        #expect(message.contains("only that team's key can claim"), "\(message)")
    }

    @Test("Two file names that read as the same text (Unicode equivalents) cannot share one entry of a signature")
    func equivalentNames() throws {
        let app = try makeApp(in: root, team: key.teamIdentifier)
        try Data([1]).write(to: app.appendingPathComponent("caf\u{E9}"))
        try Data([2]).write(to: app.appendingPathComponent("cafe\u{301}"))
        #expect(throws: AppSignatureError.self) { try AppSignature.sign(app, with: key) }
    }
}
