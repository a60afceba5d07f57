import ArgumentParser
import Foundation
import HandoffCommandLine

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
