import ArgumentParser
import Foundation
import HandoffCommandLine

struct BrowserInstall: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Write the native-messaging manifests that let your browsers start handoff-browser-host.",
        discussion: withExamples(
            """
            Then load the extension: in a Chromium-based browser, open chrome://extensions, turn on developer mode and \
            'Load unpacked' the folder Extensions/Browser (/usr/share/handoff/browser-extension where the Debian \
            package is installed); in Firefox, open about:debugging and load its manifest.json as a temporary add-on.
            """,
            [
                ("handoff browser install", "Set up every supported browser for you."),
                ("handoff browser install --browser firefox", "Set up Firefox only."),
            ]))

    @Option(name: .customLong("browser"), help: ArgumentHelp("A browser to set up: \(Browser.allCases.map(\.rawValue).joined(separator: ", ")); repeatable (default: all).", valueName: "NAME"))
    var browsers: [String] = []

    @Option(help: ArgumentHelp("The native-messaging host (default: handoff-browser-host beside this program).", valueName: "PATH"))
    var host: String?

    @Flag(help: "Write the manifests where the browsers read them for every user of this machine (/etc/chromium, /usr/lib/mozilla…), as root.")
    var system = false

    @Option(help: ArgumentHelp("With --system: write under this folder instead of /, as a package build does; the host is checked there too.", valueName: "DIR"))
    var root: String?

    @OptionGroup var output: Output

    func validate() throws {
        for name in browsers where Browser(rawValue: name) == nil {
            throw ValidationError("--browser: '\(name)' is not one of \(Browser.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if root != nil && !system { throw ValidationError("--root needs --system") }
        if system, let named = browsers.compactMap(Browser.init(rawValue:)).first(where: { $0.systemFolder == nil }) {
            throw ValidationError("--system: \(named.rawValue) has no folder for every user that Handoff knows; leave out --system to set it up for you")
        }
        if system, host == nil { throw ValidationError("--system needs --host: the host's path as every user's browser will find it (such as /usr/libexec/handoff/handoff-browser-host)") }
    }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let home = environment["HOME"] ?? NSHomeDirectory()
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "\(home)/.config"
        // This very program, wherever PATH found it.
        let program = (Bundle.main.executableURL ?? URL(fileURLWithPath: "/proc/self/exe")).resolvingSymlinksInPath()
        let hostPath = host.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
            ?? program.deletingLastPathComponent().appendingPathComponent("handoff-browser-host").path
        let prefix = root.map { URL(fileURLWithPath: $0).standardizedFileURL.path } ?? ""
        guard hostPath.hasPrefix("/"), FileManager.default.isExecutableFile(atPath: prefix + hostPath) else {
            FileHandle.standardError.write(Data("handoff: the native-messaging host \(prefix + hostPath) is not there or not executable; build it (swift build --product handoff-browser-host) or give --host\n".utf8))
            throw ExitCode(Exit.failed)
        }
        let named = browsers.isEmpty ? Browser.allCases : browsers.compactMap(Browser.init(rawValue:))
        let chosen = system ? named.filter { $0.systemFolder != nil } : named
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
            let folder = system ? prefix + browser.systemFolder! : browser.folder(home: home, configHome: configHome)
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
            // The package's copy of the extension, else the one in a checkout.
            let packaged = "/usr/share/handoff/browser-extension"
            let folder = FileManager.default.fileExists(atPath: packaged + "/manifest.json") ? packaged : "Extensions/Browser"
            print("Now load the extension in \(folder) (see 'handoff browser install --help').")
        }
    }
}
