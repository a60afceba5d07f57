import Foundation
import Testing

@testable import HandoffCore

private func settings(_ values: [String: String]) throws -> BuildSettings {
    try BuildSettings(values)
}

/// A fresh folder removed after `body`.
private func withFolder(_ body: (URL) throws -> Void) throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-xcconfig-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    try body(folder)
}

@Suite("Expanding Xcode build settings")
struct BuildSettingExpansionTests {
    @Test("$(NAME) and ${NAME} are replaced by the setting's value; text around them stays")
    func bothForms() throws {
        let values = try settings(["PRODUCT_BUNDLE_IDENTIFIER": "com.example.editor"])
        #expect(try values.expand("$(PRODUCT_BUNDLE_IDENTIFIER).editing") == "com.example.editor.editing")
        #expect(try values.expand("${PRODUCT_BUNDLE_IDENTIFIER}.editing") == "com.example.editor.editing")
        #expect(try values.expand("no references $ here") == "no references $ here")
    }

    @Test("A setting's value is expanded in turn, and a reference may be built from another: $(A_$(B))")
    func nested() throws {
        let values = try settings(["BASE": "com.example", "PRODUCT_BUNDLE_IDENTIFIER": "$(BASE).editor", "ID_Release": "release", "CONFIG": "Release"])
        #expect(try values.expand("$(PRODUCT_BUNDLE_IDENTIFIER)") == "com.example.editor")
        #expect(try values.expand("$(ID_$(CONFIG))") == "release")
    }

    @Test("Xcode's modifiers transform the value, and chain left to right")
    func modifiers() throws {
        let values = try settings(["PRODUCT_NAME": "Whatever App 2", "PATH_SETTING": "/a/b/File.tar.gz"])
        #expect(try values.expand("com.company.$(PRODUCT_NAME:rfc1034identifier)") == "com.company.Whatever-App-2")
        #expect(try values.expand("$(PRODUCT_NAME:lower:rfc1034identifier)") == "whatever-app-2")
        #expect(try values.expand("$(PRODUCT_NAME:identifier)") == "Whatever_App_2")
        #expect(try values.expand("$(PRODUCT_NAME:c99extidentifier)") == "Whatever_App_2")
        #expect(try values.expand("$(PRODUCT_NAME:upper)") == "WHATEVER APP 2")
        #expect(try values.expand("$(PRODUCT_NAME:quote)") == "Whatever\\ App\\ 2")
        #expect(try values.expand("$(PATH_SETTING:file)") == "File.tar.gz")
        #expect(try values.expand("$(PATH_SETTING:dir)") == "/a/b/")
        #expect(try values.expand("$(PATH_SETTING:suffix)") == ".gz")
        #expect(try values.expand("$(PATH_SETTING:base)") == "File.tar")
        #expect(try settings(["N": "9lives"]).expand("$(N:identifier)") == "_9lives")
    }

    @Test("default= gives the value of an unset or empty setting; $() is empty")
    func defaults() throws {
        let values = try settings(["EMPTY": ""])
        #expect(try values.expand("$(MISSING:default=com.example:x)") == "com.example:x")
        #expect(try values.expand("$(EMPTY:default=fallback)") == "fallback")
        #expect(try values.expand("a/$()/b") == "a//b")
    }

    @Test("A setting without a value and without a default is an error naming it")
    func unset() throws {
        #expect(throws: BuildSettingExpansionError.unset("PRODUCT_BUNDLE_IDENTIFIER")) {
            try BuildSettings().expand("$(PRODUCT_BUNDLE_IDENTIFIER).editing")
        }
        // Inside another setting's value, the missing one is named, not the outer one.
        #expect(throws: BuildSettingExpansionError.unset("COMPANY")) {
            try settings(["PRODUCT_BUNDLE_IDENTIFIER": "$(COMPANY).editor"]).expand("$(PRODUCT_BUNDLE_IDENTIFIER)")
        }
    }

    @Test("The settings Xcode always defines are made as Xcode makes them")
    func xcodeDefaults() throws {
        let values = try settings(["TARGET_NAME": "My Editor", "DEVELOPMENT_TEAM": "ABCDE12345"])
        #expect(try values.expand("$(EXECUTABLE_NAME)") == "My Editor")
        #expect(try values.expand("$(PRODUCT_MODULE_NAME)") == "My_Editor")
        #expect(try values.expand("$(AppIdentifierPrefix)com.example") == "ABCDE12345.com.example")
        #expect(try values.expand("$(TeamIdentifierPrefix)shared") == "ABCDE12345.shared")
        #expect(try values.expand("$(DEVELOPMENT_LANGUAGE) $(PRODUCT_BUNDLE_PACKAGE_TYPE) $(CONFIGURATION)") == "en APPL Release")
        #expect(throws: BuildSettingExpansionError.unset("EXECUTABLE_NAME")) { try BuildSettings().expand("$(EXECUTABLE_NAME)") }
        #expect(throws: BuildSettingExpansionError.unset("AppIdentifierPrefix")) { try BuildSettings().expand("$(AppIdentifierPrefix)x") }
    }

    @Test("A setting that refers to itself, directly or around a loop, is an error, not a hang")
    func cycles() throws {
        let direct = try settings(["A": "x$(A)"])
        let loop = try settings(["A": "$(B)", "B": "$(C)", "C": "$(A)"])
        for values in [direct, loop] {
            let error = try #require(throws: BuildSettingExpansionError.self) { try values.expand("$(A)") }
            guard case .invalid(let text) = error else { Issue.record("\(error)"); continue }
            #expect(text.contains("refers to itself"))
        }
    }

    @Test("An unknown modifier, an unclosed reference and a reference that is not a name are errors saying so")
    func malformed() throws {
        let values = try settings(["A": "a"])
        #expect(throws: BuildSettingExpansionError.invalid(
            "'$(A:reversed)' uses modifier 'reversed', which Xcode does not have (lower, upper, identifier, c99extidentifier, rfc1034identifier, quote, standardizepath, base, dir, file, suffix, default=)"
        )) { try values.expand("$(A:reversed)") }
        #expect(throws: BuildSettingExpansionError.self) { try values.expand("$(A") }
        #expect(throws: BuildSettingExpansionError.self) { try values.expand("$(not a name)") }
    }
}

@Suite("Reading .xcconfig files")
struct XcconfigTests {
    @Test("Assignments, comments, a trailing semicolon, #include relative to the file, and $(inherited) over what came before")
    func readsFiles() throws {
        try withFolder { folder in
            try FileManager.default.createDirectory(at: folder.appendingPathComponent("Shared"), withIntermediateDirectories: true)
            try """
                // Settings every target shares
                COMPANY = com.example
                OTHER_FLAGS = -a
                """.write(to: folder.appendingPathComponent("Shared/Base.xcconfig"), atomically: true, encoding: .utf8)
            try """
                #include "Shared/Base.xcconfig"
                #include? "Local.xcconfig"   // a developer's own overrides, if they have any

                PRODUCT_BUNDLE_IDENTIFIER = $(COMPANY).editor ; // Xcode tolerates the semicolon
                OTHER_FLAGS = $(inherited) -b
                WEBSITE = https:/$()/example.com
                """.write(to: folder.appendingPathComponent("Release.xcconfig"), atomically: true, encoding: .utf8)
            var values = BuildSettings()
            try values.read(xcconfig: folder.appendingPathComponent("Release.xcconfig"))
            try values.assign("OTHER_FLAGS=$(inherited) -c")
            #expect(try values.expand("$(PRODUCT_BUNDLE_IDENTIFIER)") == "com.example.editor")
            #expect(values["OTHER_FLAGS"] == "-a -b -c")
            #expect(try values.expand("$(WEBSITE)") == "https://example.com")
        }
    }

    @Test("Conditional assignments apply when their conditions hold: config against CONFIGURATION (Release unless set), sdk never without SDK_NAME")
    func conditions() throws {
        try withFolder { folder in
            let file = folder.appendingPathComponent("App.xcconfig")
            try """
                PRODUCT_BUNDLE_IDENTIFIER[config=Debug] = com.example.editor.debug
                PRODUCT_BUNDLE_IDENTIFIER[config=Rel*] = com.example.editor
                PRODUCT_BUNDLE_IDENTIFIER = com.example.fallback
                SUFFIX[sdk=iphoneos*] = ios
                SUFFIX = linux
                """.write(to: file, atomically: true, encoding: .utf8)
            var release = BuildSettings()
            try release.read(xcconfig: file)
            #expect(release["PRODUCT_BUNDLE_IDENTIFIER"] == "com.example.editor")
            #expect(release["SUFFIX"] == "linux")

            var debug = try settings(["CONFIGURATION": "Debug", "SDK_NAME": "iphoneos18.0"])
            try debug.read(xcconfig: file)
            #expect(debug["PRODUCT_BUNDLE_IDENTIFIER"] == "com.example.editor.debug")
            #expect(debug["SUFFIX"] == "ios")
        }
    }

    @Test("Errors give the file and line: a line that is not an assignment, a missing include, an include loop")
    func errors() throws {
        try withFolder { folder in
            let file = folder.appendingPathComponent("App.xcconfig")
            try "A = 1\nthis is not a setting\n".write(to: file, atomically: true, encoding: .utf8)
            var values = BuildSettings()
            let notSetting = try #require(throws: BuildSettingsError.self) { try values.read(xcconfig: file) }
            #expect(notSetting.source == "\(file.path):2")
            #expect(notSetting.problem.contains("expected NAME = VALUE"))

            try "#include \"Missing.xcconfig\"\n".write(to: file, atomically: true, encoding: .utf8)
            let missing = try #require(throws: BuildSettingsError.self) { try values.read(xcconfig: file) }
            #expect(missing.source == "\(file.path):1")
            #expect(missing.problem.contains("#include?"))

            try "#include \"App.xcconfig\"\n".write(to: file, atomically: true, encoding: .utf8)
            let loop = try #require(throws: BuildSettingsError.self) { try values.read(xcconfig: file) }
            #expect(loop.problem.contains("includes itself"))
        }
    }

    @Test("Written out and read back, settings are the same: // in a value, white space at its ends, a ; at its end")
    func roundTrip() throws {
        try withFolder { folder in
            let values = try settings([
                "WEBSITE": "https://example.com/a//b", "PRODUCT_BUNDLE_IDENTIFIER": "com.example.editor", "EMPTY": "", "FLAGS": " -x ", "ENDS": "a;",
                "FILE": "file:///a", "SLASHES": "a////b/",
            ])
            let file = folder.appendingPathComponent("Handoff.xcconfig")
            try values.xcconfigText(header: "made by a test").write(to: file, atomically: true, encoding: .utf8)
            var read = BuildSettings()
            try read.read(xcconfig: file)
            for name in values.values.keys {
                #expect(try read.expand("$(\(name))") == values.expand("$(\(name))"))
            }
        }
    }

    @Test("A setting from the command line must be NAME=VALUE with a setting's name, on one line")
    func commandLine() throws {
        var values = BuildSettings()
        #expect(throws: BuildSettingsError.self) { try values.assign("PRODUCT_BUNDLE_IDENTIFIER") }
        #expect(throws: BuildSettingsError.self) { try values.assign("2FAST=x") }
        #expect(throws: BuildSettingsError.self) { try values.set("A", "one\ntwo") }
        try values.assign(" DEVELOPMENT_TEAM = ABCDE12345 ")
        #expect(values["DEVELOPMENT_TEAM"] == "ABCDE12345")
    }
}

@Suite("Build settings a hostile file cannot blow up")
struct BuildSettingLimitTests {
    @Test("A value that $(inherited) doubles line after line stops at the length limit with an error naming the setting")
    func inheritedDoubling() throws {
        let text = "A = xxxxxxxxxxxxxxxx\n" + String(repeating: "A = $(inherited)$(inherited)\n", count: 40)
        var values = BuildSettings()
        let error = try #require(throws: BuildSettingsError.self) {
            try values.read(xcconfig: text, file: "bomb.xcconfig", directory: URL(fileURLWithPath: "/nonexistent"))
        }
        #expect(error.problem.contains("the value of A is over 65536 characters"))
    }

    @Test("Settings that double each other's expansion stop at the length limit, quickly")
    func referenceDoubling() throws {
        var values = try BuildSettings(["A0": "xxxxxxxx"])
        for level in 1...24 { try values.set("A\(level)", "$(A\(level - 1))$(A\(level - 1))") }
        let error = try #require(throws: BuildSettingExpansionError.self) { try values.expand("$(A24)") }
        guard case .invalid(let text) = error else { Issue.record("\(error)"); return }
        #expect(text.contains("expands to more than 65536 characters"))
    }

    @Test("References nested thousands deep are refused, not a stack overflow")
    func deepNesting() throws {
        let text = String(repeating: "$(", count: 20_000) + "A" + String(repeating: ")", count: 20_000)
        let error = try #require(throws: BuildSettingExpansionError.self) { try BuildSettings().expand(text) }
        guard case .invalid(let problem) = error else { Issue.record("\(error)"); return }
        #expect(problem.contains("nest more than 32"))
    }

    @Test("Includes are bounded in all, not only in depth")
    func includeFanOut() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-fanout-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try String(repeating: "#include \"leaf.xcconfig\"\n", count: 100).write(to: folder.appendingPathComponent("b.xcconfig"), atomically: true, encoding: .utf8)
        try "A = 1\n".write(to: folder.appendingPathComponent("leaf.xcconfig"), atomically: true, encoding: .utf8)
        try String(repeating: "#include \"b.xcconfig\"\n", count: 100).write(to: folder.appendingPathComponent("top.xcconfig"), atomically: true, encoding: .utf8)
        var values = BuildSettings()
        let error = try #require(throws: BuildSettingsError.self) { try values.read(xcconfig: folder.appendingPathComponent("top.xcconfig")) }
        #expect(error.problem.contains("more than 64 files in all"))
    }

    @Test("A file written on Windows (CRLF) reads as the same one with LF")
    func crlf() throws {
        var values = BuildSettings()
        try values.read(xcconfig: "// header\r\nPRODUCT_NAME = Notes\r\nDEVELOPMENT_TEAM = ABCDE12345\r\n", file: "win.xcconfig", directory: URL(fileURLWithPath: "/nonexistent"))
        #expect(values["PRODUCT_NAME"] == "Notes")
        #expect(values["DEVELOPMENT_TEAM"] == "ABCDE12345")
    }
}
