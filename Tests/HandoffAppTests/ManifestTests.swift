import Foundation
import Testing

@testable import HandoffApp
@testable import HandoffCore

/// Encodes a property list the way Xcode or `plutil` would write it.
private func plist(_ object: Any, format: PropertyListSerialization.PropertyListFormat = .xml) throws -> Data {
    try PropertyListSerialization.data(fromPropertyList: object, format: format, options: 0)
}

/// The Info.plist of a small document-based editor, as an Xcode project would hold it.
private let editorInfoPlist = """
    <?xml version="1.0" encoding="UTF-8"?>
    <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
    <plist version="1.0">
    <dict>
        <key>CFBundleIdentifier</key>
        <string>com.example.editor</string>
        <key>CFBundleExecutable</key>
        <string>Editor</string>
        <key>CFBundleShortVersionString</key>
        <string>2.1</string>
        <key>NSUserActivityTypes</key>
        <array>
            <string>com.example.editor.browsing</string>
            <string>com.example.editor.searching</string>
        </array>
        <key>CFBundleDocumentTypes</key>
        <array>
            <dict>
                <key>CFBundleTypeName</key>
                <string>Markdown Document</string>
                <key>CFBundleTypeRole</key>
                <string>Editor</string>
                <key>LSItemContentTypes</key>
                <array>
                    <string>net.daringfireball.markdown</string>
                </array>
                <key>CFBundleTypeExtensions</key>
                <array>
                    <string>md</string>
                    <string>markdown</string>
                </array>
                <key>NSUbiquitousDocumentUserActivityType</key>
                <string>com.example.editor.editing</string>
            </dict>
            <dict>
                <key>CFBundleTypeName</key>
                <string>Plain Text</string>
                <key>CFBundleTypeRole</key>
                <string>Viewer</string>
                <key>LSItemContentTypes</key>
                <array>
                    <string>public.plain-text</string>
                </array>
                <key>CFBundleTypeExtensions</key>
                <array>
                    <string>txt</string>
                </array>
            </dict>
        </array>
    </dict>
    </plist>
    """

private func editor() throws -> AppManifest {
    try AppManifest(infoPlist: Data(editorInfoPlist.utf8))
}

/// An Info.plist with a valid bundle identifier plus the given keys.
private func info(_ extra: [String: Any] = [:]) throws -> Data {
    try plist(extra.merging(["CFBundleIdentifier": "com.example.editor"]) { current, _ in current })
}

/// The error reading a manifest from an Info.plist with the given keys.
private func infoError(_ keys: [String: Any]) throws -> ManifestError {
    let data = try plist(keys)
    return try #require(throws: ManifestError.self) { try AppManifest(infoPlist: data) }
}

private func domainError(_ entry: String) throws -> ManifestError {
    try #require(throws: ManifestError.self) { try AssociatedDomain(parsing: entry) }
}

/// A fresh directory that is removed after `body` runs.
private func withAppDirectory(_ body: (URL) throws -> Void) throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("handoff-manifest-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    try body(directory)
}

@Suite("Reading an app's Info.plist")
struct InfoPlistTests {
    @Test("An XML Info.plist gives the bundle identifier, executable and activity types in order")
    func readsXML() throws {
        let manifest = try editor()
        #expect(manifest.bundleIdentifier == "com.example.editor")
        #expect(manifest.executable == "Editor")
        #expect(manifest.activityTypes == ["com.example.editor.browsing", "com.example.editor.searching"])
    }

    @Test("A binary Info.plist is read like an XML one")
    func readsBinary() throws {
        let keys: [String: Any] = [
            "CFBundleIdentifier": "com.example.editor",
            "NSUserActivityTypes": ["com.example.editor.browsing"],
            "CFBundleDocumentTypes": [["CFBundleTypeName": "Markdown Document", "LSItemContentTypes": ["net.daringfireball.markdown"]]],
        ]
        let binary = try plist(keys, format: .binary)
        #expect(binary.starts(with: Data("bplist".utf8)))
        #expect(try AppManifest(infoPlist: binary) == AppManifest(infoPlist: try plist(keys, format: .xml)))
    }

    @Test("Document types keep their name, role, content types, extensions and activity type")
    func readsDocumentTypes() throws {
        let manifest = try editor()
        #expect(manifest.documentTypes == [
            DocumentType(
                name: "Markdown Document",
                contentTypes: ["net.daringfireball.markdown"],
                extensions: ["md", "markdown"],
                role: "Editor",
                ubiquitousActivityType: "com.example.editor.editing"
            ),
            DocumentType(name: "Plain Text", contentTypes: ["public.plain-text"], extensions: ["txt"], role: "Viewer"),
        ])
    }

    @Test("Keys the manifest does not use are ignored")
    func ignoresUnknownKeys() throws {
        let manifest = try AppManifest(infoPlist: try info(["LSMinimumSystemVersion": 14, "UIFileSharingEnabled": true]))
        #expect(manifest == AppManifest(bundleIdentifier: "com.example.editor"))
    }

    @Test("An Info.plist without optional keys gives an app with no executable, activity types or documents")
    func optionalKeysDefaultToEmpty() throws {
        let manifest = try AppManifest(infoPlist: try info())
        #expect(manifest.executable == nil)
        #expect(manifest.activityTypes.isEmpty)
        #expect(manifest.documentTypes.isEmpty)
    }

    @Test("Without entitlements an app has no team and no associated domains")
    func noEntitlements() throws {
        let manifest = try editor()
        #expect(manifest.teamIdentifier == nil)
        #expect(manifest.associatedDomains.isEmpty)
        #expect(manifest.applicationIdentifier == nil)
    }

    @Test("Continuable activity types add each document type's NSUbiquitousDocumentUserActivityType")
    func continuableTypesIncludeDocuments() throws {
        #expect(try editor().continuableActivityTypes == [
            "com.example.editor.browsing", "com.example.editor.searching", "com.example.editor.editing",
        ])
    }

    @Test("A document activity type is found by content type, ignoring case")
    func documentActivityByContentType() throws {
        #expect(try editor().documentActivityType(forContentType: "net.daringfireball.Markdown") == "com.example.editor.editing")
    }

    @Test("A document activity type is found by file extension, ignoring case and a leading dot")
    func documentActivityByExtension() throws {
        let manifest = try editor()
        #expect(manifest.documentActivityType(forContentType: "MD") == "com.example.editor.editing")
        #expect(manifest.documentActivityType(forContentType: ".markdown") == "com.example.editor.editing")
    }

    @Test("A document activity type is found by document type name")
    func documentActivityByName() throws {
        #expect(try editor().documentActivityType(forContentType: "Markdown Document") == "com.example.editor.editing")
    }

    @Test("A document type without NSUbiquitousDocumentUserActivityType has no document activity type")
    func documentWithoutActivity() throws {
        let manifest = try editor()
        #expect(manifest.documentActivityType(forContentType: "public.plain-text") == nil)
        #expect(manifest.documentActivityType(forContentType: "txt") == nil)
        #expect(manifest.documentActivityType(forContentType: "public.png") == nil)
    }
}

@Suite("Reading an app's entitlements")
struct EntitlementsTests {
    @Test("The team comes from com.apple.developer.team-identifier")
    func teamFromTeamIdentifier() throws {
        let manifest = try AppManifest(
            infoPlist: try info(),
            entitlements: try plist(["com.apple.developer.team-identifier": "ABCDE12345"])
        )
        #expect(manifest.teamIdentifier == "ABCDE12345")
    }

    @Test("Without a team identifier the team is the prefix of application-identifier")
    func teamFromApplicationIdentifier() throws {
        let manifest = try AppManifest(
            infoPlist: try info(),
            entitlements: try plist(["application-identifier": "ABCDE12345.com.example.editor"])
        )
        #expect(manifest.teamIdentifier == "ABCDE12345")
    }

    @Test("The macOS spelling com.apple.application-identifier also gives the team")
    func teamFromMacApplicationIdentifier() throws {
        let manifest = try AppManifest(
            infoPlist: try info(),
            entitlements: try plist(["com.apple.application-identifier": "ABCDE12345.com.example.editor"])
        )
        #expect(manifest.teamIdentifier == "ABCDE12345")
    }

    @Test("com.apple.developer.team-identifier wins over application-identifier")
    func teamIdentifierWins() throws {
        let manifest = try AppManifest(
            infoPlist: try info(),
            entitlements: try plist([
                "com.apple.developer.team-identifier": "ABCDE12345",
                "application-identifier": "ZZZZZ99999.com.example.editor",
            ])
        )
        #expect(manifest.teamIdentifier == "ABCDE12345")
    }

    @Test("The application identifier joins the team and the bundle identifier with a dot")
    func applicationIdentifier() throws {
        let manifest = AppManifest(bundleIdentifier: "com.example.editor", teamIdentifier: "ABCDE12345")
        #expect(manifest.applicationIdentifier == "ABCDE12345.com.example.editor")
    }

    @Test("An app with an empty team has no application identifier")
    func emptyTeamHasNoApplicationIdentifier() {
        #expect(AppManifest(bundleIdentifier: "com.example.editor", teamIdentifier: "").applicationIdentifier == nil)
    }

    @Test("Associated domains of every service are kept in order")
    func keepsAllAssociatedDomains() throws {
        let manifest = try AppManifest(
            infoPlist: try info(),
            entitlements: try plist([
                "com.apple.developer.associated-domains": [
                    "activitycontinuation:example.com",
                    "applinks:*.example.com",
                    "webcredentials:login.example.com",
                ],
            ], format: .binary)
        )
        #expect(manifest.associatedDomains.map(\.service) == ["activitycontinuation", "applinks", "webcredentials"])
        #expect(manifest.associatedDomains.map(\.host) == ["example.com", "example.com", "login.example.com"])
        #expect(manifest.associatedDomains.map(\.includesSubdomains) == [false, true, false])
    }
}

@Suite("Associated domain entries")
struct AssociatedDomainTests {
    @Test("An entry splits into a service and a lowercased host")
    func parsesServiceAndHost() throws {
        let domain = try AssociatedDomain(parsing: "activitycontinuation:WWW.Example.com")
        #expect(domain.service == "activitycontinuation")
        #expect(domain.host == "www.example.com")
        #expect(!domain.includesSubdomains)
    }

    @Test("A plain entry matches its host ignoring case and a trailing dot")
    func plainEntryMatchesHost() throws {
        let domain = try AssociatedDomain(parsing: "activitycontinuation:example.com")
        #expect(domain.matches(host: "example.com"))
        #expect(domain.matches(host: "EXAMPLE.com"))
        #expect(domain.matches(host: "example.com."))
    }

    @Test("A plain entry does not match its subdomains or look-alike hosts")
    func plainEntryIsExact() throws {
        let domain = try AssociatedDomain(parsing: "activitycontinuation:example.com")
        #expect(!domain.matches(host: "www.example.com"))
        #expect(!domain.matches(host: "badexample.com"))
        #expect(!domain.matches(host: ""))
    }

    @Test("A wildcard entry matches subdomains at any depth")
    func wildcardMatchesSubdomains() throws {
        let domain = try AssociatedDomain(parsing: "activitycontinuation:*.example.com")
        #expect(domain.includesSubdomains)
        #expect(domain.host == "example.com")
        #expect(domain.matches(host: "shop.example.com"))
        #expect(domain.matches(host: "a.b.Example.com."))
    }

    @Test("A wildcard entry does not match the bare host")
    func wildcardSkipsBareHost() throws {
        let domain = try AssociatedDomain(parsing: "activitycontinuation:*.example.com")
        #expect(!domain.matches(host: "example.com"))
        #expect(!domain.matches(host: "badexample.com"))
    }

    @Test("A port after the host is dropped")
    func dropsPort() throws {
        let domain = try AssociatedDomain(parsing: "activitycontinuation:example.com:8443")
        #expect(domain.host == "example.com")
        #expect(domain.matches(host: "example.com"))
    }

    @Test("A ?mode= suffix is dropped")
    func dropsMode() throws {
        let domain = try AssociatedDomain(parsing: "applinks:*.Example.com:8443?mode=developer+managed")
        #expect(domain.service == "applinks")
        #expect(domain.host == "example.com")
        #expect(domain.includesSubdomains)
    }

    @Test("A trailing dot in the entry is dropped")
    func dropsTrailingDot() throws {
        let domain = try AssociatedDomain(parsing: "activitycontinuation:example.com.?mode=developer")
        #expect(domain.host == "example.com")
        #expect(domain.matches(host: "example.com"))
    }

    @Test("An entry without a colon is rejected and told how to write it")
    func rejectsMissingService() throws {
        let error = try domainError("example.com")
        #expect(error.key == "com.apple.developer.associated-domains")
        #expect(error.problem.contains("'example.com' has no service"))
        #expect(error.problem.contains("'activitycontinuation:example.com'"))
    }

    @Test("An entry with an empty service is rejected")
    func rejectsEmptyService() throws {
        #expect(try domainError(":example.com").problem.contains("empty service"))
    }

    @Test("An entry with an empty host is rejected", arguments: ["activitycontinuation:", "activitycontinuation:*.", "activitycontinuation:?mode=developer", "activitycontinuation::443"])
    func rejectsEmptyHost(entry: String) throws {
        #expect(try domainError(entry).problem.contains("empty host"))
    }

    @Test("An entry whose port is not a number is rejected")
    func rejectsBadPort() throws {
        #expect(try domainError("activitycontinuation:example.com:https").problem.contains("port 'https'"))
    }

    @Test("An entry with a suffix other than ?mode= is rejected")
    func rejectsUnknownSuffix() throws {
        #expect(try domainError("activitycontinuation:example.com?lang=en").problem.contains("'?lang=en'"))
    }

    @Test("An entry with a path or a misplaced wildcard is rejected", arguments: ["activitycontinuation:example.com/path", "activitycontinuation:shop.*.example.com"])
    func rejectsNonHost(entry: String) throws {
        #expect(try domainError(entry).problem.contains("in its host"))
    }
}

@Suite("Malformed Info.plist files")
struct InfoPlistErrorTests {
    @Test("Bytes that are not a property list are rejected, naming the file")
    func rejectsNonPlist() throws {
        let error = try #require(throws: ManifestError.self) {
            try AppManifest(infoPlist: Data("<html><body>Not found</body></html>".utf8), infoPlistName: "Editor/Info.plist")
        }
        #expect(error.file == "Editor/Info.plist")
        #expect(error.key == nil)
        #expect(error.problem.hasPrefix("not a property list"))
    }

    @Test("An empty file is rejected")
    func rejectsEmptyFile() throws {
        let error = try #require(throws: ManifestError.self) { try AppManifest(infoPlist: Data()) }
        #expect(error == ManifestError(file: "Info.plist", key: nil, problem: "the file is empty; expected an XML or binary property list"))
    }

    @Test("A top level that is not a dictionary is rejected")
    func rejectsTopLevelArray() throws {
        let error = try #require(throws: ManifestError.self) { try AppManifest(infoPlist: try plist(["com.example.editor"])) }
        #expect(error.description == "Info.plist: expected a dictionary at the top level, found an array")
    }

    @Test("A missing CFBundleIdentifier is rejected")
    func rejectsMissingBundleIdentifier() throws {
        let error = try infoError(["CFBundleExecutable": "Editor"])
        #expect(error.key == "CFBundleIdentifier")
        #expect(error.problem.hasPrefix("missing"))
    }

    @Test("An empty CFBundleIdentifier is rejected")
    func rejectsEmptyBundleIdentifier() throws {
        let error = try infoError(["CFBundleIdentifier": " "])
        #expect(error.key == "CFBundleIdentifier")
        #expect(error.problem.hasPrefix("is empty"))
    }

    @Test("A CFBundleIdentifier that is not a string is rejected")
    func rejectsNumericBundleIdentifier() throws {
        let error = try infoError(["CFBundleIdentifier": 42])
        #expect(error.description == "Info.plist: key 'CFBundleIdentifier': expected a string, found a number")
    }

    @Test("A CFBundleExecutable that is not a string is rejected")
    func rejectsBooleanExecutable() throws {
        let error = try infoError(["CFBundleIdentifier": "com.example.editor", "CFBundleExecutable": true])
        #expect(error.description == "Info.plist: key 'CFBundleExecutable': expected a string, found a boolean")
    }

    @Test("NSUserActivityTypes given as a single string is ignored with a warning naming the key and file; the rest is read")
    func ignoresActivityTypesString() throws {
        let manifest = try AppManifest(
            infoPlist: try info(["CFBundleExecutable": "Editor", "NSUserActivityTypes": "com.example.editor.editing"]), infoPlistName: "Focus/Info.plist")
        #expect(manifest.activityTypes.isEmpty)
        #expect(manifest.executable == "Editor")
        #expect(manifest.warnings.map(\.description) == ["Focus/Info.plist: key 'NSUserActivityTypes': expected an array of strings, found a string; ignored"])
    }

    @Test("NSUserActivityTypes given as a dictionary (as a real Firefox Focus Info.plist has it) is ignored with a warning; document types still hand off")
    func ignoresActivityTypesDictionary() throws {
        let manifest = try AppManifest(
            infoPlist: try info([
                "CFBundleExecutable": "Focus",
                "NSUserActivityTypes": ["org.mozilla.ios.Focus.openUrl": "Open URL"],
                "CFBundleDocumentTypes": [["LSItemContentTypes": ["public.html"], "NSUbiquitousDocumentUserActivityType": "org.mozilla.ios.Focus.page"]],
            ]))
        #expect(manifest.activityTypes.isEmpty)
        #expect(manifest.continuableActivityTypes == ["org.mozilla.ios.Focus.page"])
        #expect(manifest.warnings.map(\.key) == ["NSUserActivityTypes"])
        #expect(manifest.warnings.first?.problem == "expected an array of strings, found a dictionary")
    }

    @Test("An empty activity type is skipped with a warning naming its index; the others are kept")
    func skipsEmptyActivityType() throws {
        let manifest = try AppManifest(infoPlist: try info(["NSUserActivityTypes": ["com.example.editor.editing", ""]]))
        #expect(manifest.activityTypes == ["com.example.editor.editing"])
        #expect(manifest.warnings == [ManifestWarning(file: "Info.plist", key: "NSUserActivityTypes[1]", problem: "expected a non-empty string, found an empty string")])
    }

    @Test("An activity type that is not a string is skipped with a warning naming its index")
    func skipsNumericActivityType() throws {
        let manifest = try AppManifest(infoPlist: try info(["NSUserActivityTypes": [7, "com.example.editor.editing"]]))
        #expect(manifest.activityTypes == ["com.example.editor.editing"])
        #expect(manifest.warnings.map(\.key) == ["NSUserActivityTypes[0]"])
        #expect(manifest.warnings.first?.problem == "expected a non-empty string, found a number")
    }

    @Test("CFBundleDocumentTypes that is not an array is ignored with a warning")
    func ignoresDocumentTypesDictionary() throws {
        let manifest = try AppManifest(infoPlist: try info(["CFBundleDocumentTypes": ["CFBundleTypeName": "Markdown"], "NSUserActivityTypes": ["a.b"]]))
        #expect(manifest.documentTypes.isEmpty)
        #expect(manifest.activityTypes == ["a.b"])
        #expect(manifest.warnings.map(\.description) == ["Info.plist: key 'CFBundleDocumentTypes': expected an array of dictionaries, found a dictionary; ignored"])
    }

    @Test("A document type that is not a dictionary is skipped with a warning naming its index")
    func skipsDocumentTypeString() throws {
        let manifest = try AppManifest(infoPlist: try info(["CFBundleDocumentTypes": [["CFBundleTypeName": "Markdown"], "public.text"]]))
        #expect(manifest.documentTypes.map(\.name) == ["Markdown"])
        #expect(manifest.warnings.map(\.key) == ["CFBundleDocumentTypes[1]"])
        #expect(manifest.warnings.first?.problem == "expected a dictionary, found a string")
    }

    @Test(
        "A document type's string key holding another type is ignored with a warning naming its full key path",
        arguments: ["CFBundleTypeName", "CFBundleTypeRole", "NSUbiquitousDocumentUserActivityType"]
    )
    func ignoresDocumentStringKey(key: String) throws {
        let manifest = try AppManifest(infoPlist: try info(["CFBundleDocumentTypes": [[key: 42, "CFBundleTypeExtensions": ["md"]]]]))
        #expect(manifest.documentTypes.map(\.extensions) == [["md"]])
        #expect(manifest.warnings == [ManifestWarning(file: "Info.plist", key: "CFBundleDocumentTypes[0].\(key)", problem: "expected a string, found a number")])
    }

    @Test(
        "A document type's list key holding a single string is ignored with a warning naming its full key path",
        arguments: ["LSItemContentTypes", "CFBundleTypeExtensions"]
    )
    func ignoresDocumentListKey(key: String) throws {
        let manifest = try AppManifest(infoPlist: try info(["CFBundleDocumentTypes": [[key: "md", "CFBundleTypeName": "Markdown"]]]))
        #expect(manifest.documentTypes.map(\.name) == ["Markdown"])
        #expect(
            manifest.warnings.map(\.description) == ["Info.plist: key 'CFBundleDocumentTypes[0].\(key)': expected an array of strings, found a string; ignored"])
    }

    @Test("A content type that is not a string is skipped with a warning naming its index")
    func skipsNumericContentType() throws {
        let manifest = try AppManifest(infoPlist: try info(["CFBundleDocumentTypes": [["LSItemContentTypes": ["public.text", Data([1])]]]]))
        #expect(manifest.documentTypes.map(\.contentTypes) == [["public.text"]])
        #expect(manifest.warnings.map(\.key) == ["CFBundleDocumentTypes[0].LSItemContentTypes[1]"])
        #expect(manifest.warnings.first?.problem == "expected a non-empty string, found data")
    }

    @Test("An empty NSUbiquitousDocumentUserActivityType is ignored with a warning")
    func ignoresEmptyDocumentActivityType() throws {
        let manifest = try AppManifest(infoPlist: try info(["CFBundleDocumentTypes": [["NSUbiquitousDocumentUserActivityType": ""]]]))
        #expect(manifest.documentTypes.map(\.ubiquitousActivityType) == [nil])
        #expect(manifest.warnings.map(\.key) == ["CFBundleDocumentTypes[0].NSUbiquitousDocumentUserActivityType"])
        #expect(manifest.warnings.first?.problem.hasPrefix("is empty") == true)
    }
}

/// The manifest read with entitlements holding the given keys.
private func withEntitlements(_ keys: [String: Any]) throws -> AppManifest {
    try AppManifest(infoPlist: try info(), entitlements: try plist(keys), entitlementsName: "Editor.entitlements")
}

@Suite("Malformed entitlements")
struct EntitlementsErrorTests {
    @Test("Entitlements that are not a property list are rejected, naming the entitlements file")
    func rejectsNonPlist() throws {
        let infoData = try info()
        let error = try #require(throws: ManifestError.self) {
            try AppManifest(infoPlist: infoData, entitlements: Data("<entitlements/>".utf8), entitlementsName: "Editor.entitlements")
        }
        #expect(error.file == "Editor.entitlements")
        #expect(error.problem.hasPrefix("not a property list"))
    }

    @Test("Entitlements whose top level is not a dictionary are rejected")
    func rejectsTopLevelString() throws {
        let infoData = try info()
        let entitlements = try plist("ABCDE12345")
        let error = try #require(throws: ManifestError.self) {
            try AppManifest(infoPlist: infoData, entitlements: entitlements)
        }
        #expect(error.description == "entitlements: expected a dictionary at the top level, found a string")
    }

    @Test("A team identifier that is not a string is ignored with a warning; the team then comes from application-identifier")
    func ignoresNumericTeam() throws {
        let manifest = try withEntitlements(["com.apple.developer.team-identifier": 12345, "application-identifier": "ABCDE12345.com.example.editor"])
        #expect(manifest.teamIdentifier == "ABCDE12345")
        #expect(manifest.teamSource == .applicationIdentifier(key: "application-identifier"))
        #expect(
            manifest.warnings.map(\.description) == ["Editor.entitlements: key 'com.apple.developer.team-identifier': expected a string, found a number; ignored"])
    }

    @Test("An empty team identifier is ignored with a warning")
    func ignoresEmptyTeam() throws {
        let manifest = try withEntitlements(["com.apple.developer.team-identifier": ""])
        #expect(manifest.teamIdentifier == nil)
        #expect(manifest.warnings.map(\.key) == ["com.apple.developer.team-identifier"])
        #expect(manifest.warnings.first?.problem.hasPrefix("is empty") == true)
    }

    @Test("An application-identifier that is not a string is ignored with a warning")
    func ignoresArrayApplicationIdentifier() throws {
        let manifest = try withEntitlements(["application-identifier": ["ABCDE12345.com.example.editor"]])
        #expect(manifest.teamIdentifier == nil)
        #expect(manifest.warnings == [ManifestWarning(file: "Editor.entitlements", key: "application-identifier", problem: "expected a string, found an array")])
    }

    @Test("An application-identifier without a team prefix is ignored with a warning")
    func ignoresApplicationIdentifierWithoutTeam() throws {
        let manifest = try withEntitlements(["application-identifier": "editor"])
        #expect(manifest.teamIdentifier == nil)
        #expect(manifest.warnings.map(\.key) == ["application-identifier"])
        #expect(manifest.warnings.first?.problem.contains("no team prefix") == true)
    }

    @Test("Associated domains that are not an array are ignored with a warning")
    func ignoresDomainsString() throws {
        let manifest = try withEntitlements([
            "com.apple.developer.associated-domains": "activitycontinuation:example.com", "com.apple.developer.team-identifier": "ABCDE12345",
        ])
        #expect(manifest.associatedDomains.isEmpty)
        #expect(manifest.teamIdentifier == "ABCDE12345")
        #expect(
            manifest.warnings.map(\.description) == [
                "Editor.entitlements: key 'com.apple.developer.associated-domains': expected an array of strings, found a string; ignored"
            ])
    }

    @Test("An associated domain entry that is not a string is skipped with a warning naming its index")
    func skipsDomainNumber() throws {
        let manifest = try withEntitlements(["com.apple.developer.associated-domains": ["activitycontinuation:example.com", 3]])
        #expect(manifest.associatedDomains.map(\.host) == ["example.com"])
        #expect(manifest.warnings == [ManifestWarning(file: "Editor.entitlements", key: "com.apple.developer.associated-domains[1]", problem: "expected a string, found a number")])
    }

    @Test("An associated domain entry without a colon is skipped with a warning naming the file and index; the others are kept")
    func skipsDomainWithoutColon() throws {
        let manifest = try withEntitlements(["com.apple.developer.associated-domains": ["activitycontinuation:example.com", "example.org"]])
        #expect(manifest.associatedDomains.map(\.host) == ["example.com"])
        let warning = try #require(manifest.warnings.first)
        #expect(warning.file == "Editor.entitlements")
        #expect(warning.key == "com.apple.developer.associated-domains[1]")
        #expect(warning.problem.contains("'example.org' has no service"))
    }

    @Test("An associated domain entry with an empty host is skipped with a warning naming the file and index")
    func skipsDomainWithEmptyHost() throws {
        let manifest = try withEntitlements(["com.apple.developer.associated-domains": ["activitycontinuation:"]])
        #expect(manifest.associatedDomains.isEmpty)
        #expect(manifest.warnings.map(\.key) == ["com.apple.developer.associated-domains[0]"])
        #expect(manifest.warnings.first?.problem.contains("empty host") == true)
    }
}

@Suite("Reading an app directory")
struct AppDirectoryTests {
    @Test("An app directory is read with its Entitlements.plist")
    func readsEntitlementsPlist() throws {
        try withAppDirectory { directory in
            try Data(editorInfoPlist.utf8).write(to: directory.appendingPathComponent("Info.plist"))
            try plist([
                "com.apple.developer.team-identifier": "ABCDE12345",
                "com.apple.developer.associated-domains": ["activitycontinuation:example.com"],
            ]).write(to: directory.appendingPathComponent("Entitlements.plist"))

            let manifest = try AppManifest(directory: directory)
            #expect(manifest.bundleIdentifier == "com.example.editor")
            #expect(manifest.applicationIdentifier == "ABCDE12345.com.example.editor")
            #expect(manifest.associatedDomains.map(\.host) == ["example.com"])
        }
    }

    @Test("A single .entitlements file is read as the entitlements")
    func readsDotEntitlements() throws {
        try withAppDirectory { directory in
            try info().write(to: directory.appendingPathComponent("Info.plist"))
            try plist(["application-identifier": "ABCDE12345.com.example.editor"], format: .binary)
                .write(to: directory.appendingPathComponent("Editor.entitlements"))

            #expect(try AppManifest(directory: directory).teamIdentifier == "ABCDE12345")
        }
    }

    @Test("A directory without entitlements gives an app without team or domains")
    func readsWithoutEntitlements() throws {
        try withAppDirectory { directory in
            try info().write(to: directory.appendingPathComponent("Info.plist"))
            #expect(try AppManifest(directory: directory) == AppManifest(bundleIdentifier: "com.example.editor"))
        }
    }

    @Test("Two .entitlements files are an error naming both")
    func rejectsTwoEntitlements() throws {
        try withAppDirectory { directory in
            try info().write(to: directory.appendingPathComponent("Info.plist"))
            let entitlements = try plist(["com.apple.developer.team-identifier": "ABCDE12345"])
            try entitlements.write(to: directory.appendingPathComponent("Editor.entitlements"))
            try entitlements.write(to: directory.appendingPathComponent("EditorDebug.entitlements"))

            let error = try #require(throws: ManifestError.self) { try AppManifest(directory: directory) }
            #expect(error.file == directory.path)
            #expect(error.problem.contains("'Editor.entitlements' and 'EditorDebug.entitlements'"))
        }
    }

    @Test("Entitlements.plist next to a .entitlements file is an error naming both")
    func rejectsEntitlementsPlistAndDotEntitlements() throws {
        try withAppDirectory { directory in
            try info().write(to: directory.appendingPathComponent("Info.plist"))
            let entitlements = try plist(["com.apple.developer.team-identifier": "ABCDE12345"])
            try entitlements.write(to: directory.appendingPathComponent("Entitlements.plist"))
            try entitlements.write(to: directory.appendingPathComponent("Editor.entitlements"))

            let error = try #require(throws: ManifestError.self) { try AppManifest(directory: directory) }
            #expect(error.problem.contains("'Editor.entitlements' and 'Entitlements.plist'"))
        }
    }

    @Test("A directory without Info.plist is an error naming the missing file")
    func rejectsMissingInfoPlist() throws {
        try withAppDirectory { directory in
            let error = try #require(throws: ManifestError.self) { try AppManifest(directory: directory) }
            #expect(error.file == directory.appendingPathComponent("Info.plist").path)
            #expect(error.problem.hasPrefix("no such file"))
        }
    }

    @Test("A directory that does not exist is an error naming it")
    func rejectsMissingDirectory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-missing-\(UUID().uuidString)")
        let error = try #require(throws: ManifestError.self) { try AppManifest(directory: directory) }
        #expect(error.file == directory.path)
        #expect(error.problem.hasPrefix("no such directory"))
    }

    @Test("A warning about a file of the directory names the file's path")
    func warningsNameThePath() throws {
        try withAppDirectory { directory in
            try info().write(to: directory.appendingPathComponent("Info.plist"))
            let entitlementsURL = directory.appendingPathComponent("Editor.entitlements")
            try plist(["com.apple.developer.associated-domains": ["example.com"]]).write(to: entitlementsURL)

            let manifest = try AppManifest(directory: directory)
            #expect(manifest.warnings.map(\.file) == [entitlementsURL.path])
            #expect(manifest.warnings.map(\.key) == ["com.apple.developer.associated-domains[0]"])
        }
    }
}

@Suite("Manifest errors")
struct ManifestErrorTests {
    @Test("An error names the file, the key and the problem")
    func describesKey() {
        let error = ManifestError(file: "Info.plist", key: "NSUserActivityTypes", problem: "expected an array of strings, found a string")
        #expect(error.description == "Info.plist: key 'NSUserActivityTypes': expected an array of strings, found a string")
    }

    @Test("An error about the whole file names only the file")
    func describesFile() {
        let error = ManifestError(file: "Info.plist", key: nil, problem: "the file is empty; expected an XML or binary property list")
        #expect(error.description == "Info.plist: the file is empty; expected an XML or binary property list")
    }
}
