import ArgumentParser
import Foundation
import HandoffCommandLine

struct BrowserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browser", abstract: "Connect your web browsers to Handoff (the extension in Extensions/Browser).",
        subcommands: [BrowserInstall.self])
}

/// The browsers whose native-messaging manifests `handoff browser install` writes, each with
/// its per-user folder on Linux.
enum Browser: String, CaseIterable {
    case chromium, chrome, brave, edge, firefox

    func folder(home: String, configHome: String) -> String {
        switch self {
        case .chromium: return "\(configHome)/chromium/NativeMessagingHosts"
        case .chrome: return "\(configHome)/google-chrome/NativeMessagingHosts"
        case .brave: return "\(configHome)/BraveSoftware/Brave-Browser/NativeMessagingHosts"
        case .edge: return "\(configHome)/microsoft-edge/NativeMessagingHosts"
        case .firefox: return "\(home)/.mozilla/native-messaging-hosts"
        }
    }
}

/// The native host's name, as the extension connects to it.
let nativeHostName = "org.handoff.browser"
/// The extension's identifier in Chromium-based browsers, which follows from the public key in
/// Extensions/Browser/manifest.json (a test checks that they agree).
let chromiumExtensionID = "bcgblgbejekhpkmkaoapfinefihbjeha"
/// The extension's identifier in Firefox (its manifest's `browser_specific_settings`).
let firefoxExtensionID = "browser@handoff.invalid"

struct BrowserInstall: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Write the native-messaging manifests that let your browsers start handoff-browser-host.",
        discussion: """
            Then load the extension: in a Chromium-based browser, open chrome://extensions, turn on developer mode and \
            'Load unpacked' the folder Extensions/Browser; in Firefox, open about:debugging and load \
            Extensions/Browser/manifest.json as a temporary add-on.
            """)

    @Option(name: .customLong("browser"), help: ArgumentHelp("A browser to set up: \(Browser.allCases.map(\.rawValue).joined(separator: ", ")); repeatable (default: all).", valueName: "NAME"))
    var browsers: [String] = []

    @Option(help: ArgumentHelp("The native-messaging host (default: handoff-browser-host beside this program).", valueName: "PATH"))
    var host: String?

    @OptionGroup var output: Output

    func validate() throws {
        for name in browsers where Browser(rawValue: name) == nil {
            throw ValidationError("--browser: '\(name)' is not one of \(Browser.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let home = environment["HOME"] ?? NSHomeDirectory()
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "\(home)/.config"
        // This very program, wherever PATH found it.
        let program = (Bundle.main.executableURL ?? URL(fileURLWithPath: "/proc/self/exe")).resolvingSymlinksInPath()
        let hostPath = host.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            ?? program.deletingLastPathComponent().appendingPathComponent("handoff-browser-host").path
        guard FileManager.default.isExecutableFile(atPath: hostPath) else {
            FileHandle.standardError.write(Data("handoff: the native-messaging host \(hostPath) is not there or not executable; build it (swift build --product handoff-browser-host) or give --host\n".utf8))
            throw ExitCode(Exit.failed)
        }
        let chosen = browsers.isEmpty ? Browser.allCases : browsers.compactMap(Browser.init(rawValue:))
        var written: [[String: String]] = []
        for browser in chosen {
            var manifest: [String: Any] = [
                "name": nativeHostName, "description": "Handoff: the page you are reading, on your other devices", "path": hostPath, "type": "stdio",
            ]
            if browser == .firefox {
                manifest["allowed_extensions"] = [firefoxExtensionID]
            } else {
                manifest["allowed_origins"] = ["chrome-extension://\(chromiumExtensionID)/"]
            }
            let folder = browser.folder(home: home, configHome: configHome)
            let file = "\(folder)/\(nativeHostName).json"
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                let data = try JSONSerialization.data(withJSONObject: manifest, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                try data.write(to: URL(fileURLWithPath: file), options: .atomic)
            } catch {
                FileHandle.standardError.write(Data("handoff: cannot write \(file): \(error.localizedDescription)\n".utf8))
                throw ExitCode(Exit.failed)
            }
            written.append(["browser": browser.rawValue, "manifest": file])
        }
        if output.json {
            let data = try JSONSerialization.data(withJSONObject: ["host": hostPath, "manifests": written], options: [.sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } else {
            for entry in written { print("\(entry["browser"]!): wrote \(entry["manifest"]!)") }
            print("Now load the extension in Extensions/Browser (see 'handoff browser install --help').")
        }
    }
}
