// The main job: two devices on this machine, each a real handoffd with its own state folder
// and ports on loopback, paired into one account; the MapViewer sample app makes an activity
// current on the first, and it is continued in MapViewer on the second. Every step runs the
// same commands a person would, and shows them.
//
// Multicast goes only over `lo`, on a port of the demo's own; nothing leaves this machine.
import Foundation

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

/// The programs the demo runs, built beside it.
let binaries = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
let root = URL(fileURLWithPath: "/tmp/handoff-demo-\(getpid())", isDirectory: true)
let discoveryPort = String(Int.random(in: 20_000..<40_000))
var started: [ChildProcess] = []

@MainActor
func binary(_ name: String) -> URL {
    let url = binaries.appendingPathComponent(name)
    guard FileManager.default.isExecutableFile(atPath: url.path) else {
        FileHandle.standardError.write(Data("handoff-demo: \(url.path) is missing; run the demo with 'swift run handoff-demo', which builds it\n".utf8))
        exit(1)
    }
    return url
}

@MainActor
func step(_ number: Int, _ text: String) {
    print("\n[\(number)] \(text)")
}

@MainActor
func indent(_ text: String) {
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
        print("      \(line)")
    }
}

/// Runs `handoff ARGUMENTS --socket` for a device, shows the command and what it printed.
@MainActor
@discardableResult
/// `input`, with what the command line shows of it, goes to the command's standard input: a
/// token travels there, never in the arguments every user of the machine can read.
func handoff(_ device: String, _ arguments: [String], input: (text: String, shown: String)? = nil, show: Bool = true, agent: Bool = true) -> String {
    let process = ChildProcess()
    process.executableURL = binary("handoff")
    process.arguments = arguments + (agent ? ["--socket", socket(device)] : [])
    let output = Pipe()
    let standardInput = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = input == nil ? FileHandle.nullDevice : standardInput
    if show { print("    \(device)$ \(input.map { "printf '%s\\n' \($0.shown) | " } ?? "")handoff \(arguments.joined(separator: " "))") }
    do {
        try process.run()
    } catch {
        fail("could not run handoff: \(error)")
    }
    if let input {
        standardInput.fileHandleForWriting.write(Data((input.text + "\n").utf8))
        try? standardInput.fileHandleForWriting.close()
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    if show { indent(text) }
    if process.terminationStatus != 0 { fail("'handoff \(arguments.joined(separator: " "))' on \(device) failed with status \(process.terminationStatus)") }
    return text
}

@MainActor
func socket(_ device: String) -> String { root.appendingPathComponent("\(device).sock").path }

@MainActor
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("\nhandoff-demo: \(message)\n".utf8))
    cleanUp()
    exit(1)
}

@MainActor
func cleanUp() {
    for process in started where process.isRunning {
        process.terminate()
        process.waitUntilExit()
    }
    // The MapViewer the agent started on the second device, if it is still there.
    let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    for pid in pids.compactMap(Int32.init) {
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root.path) {
            kill(pid, SIGTERM)
        }
    }
    try? FileManager.default.removeItem(at: root)
}

/// Waits up to 10 seconds for `condition`.
@MainActor
func waitFor(_ what: String, _ condition: () -> Bool) {
    for _ in 0..<500 {
        if condition() { return }
        usleep(20_000)
    }
    fail("timed out waiting for \(what)")
}

@MainActor
func lines(_ file: URL) -> [String] {
    ((try? String(contentsOf: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
}

// MARK: The demo

// Ctrl-C reaches the whole process group: the agents stop gracefully and the apps end.
try? FileManager.default.removeItem(at: root)
try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
print("Handoff demo: two devices on this machine, 'laptop' and 'desktop', each its own handoffd.")
print("Everything lives in \(root.path) and goes over loopback only.")

step(1, "Start an agent for each device: its own state folder, socket and ports.")
for device in ["laptop", "desktop"] {
    let process = ChildProcess()
    process.executableURL = binary("handoffd")
    process.arguments = [
        "--name", device, "--state-dir", root.appendingPathComponent(device).path, "--socket", socket(device),
        "--listen", "127.0.0.1:0", "--interface", "lo", "--discovery-port", discoveryPort,
        "--dns-sd", String(Int(discoveryPort)! + 1), "--log-level", "warning",
    ]
    print("    $ handoffd \(process.arguments!.joined(separator: " "))")
    try process.run()
    started.append(process)
}
waitFor("the agents to start") { FileManager.default.fileExists(atPath: socket("laptop")) && FileManager.default.fileExists(atPath: socket("desktop")) }

step(2, "Pair them: an account on 'laptop', then 'desktop' joins with a one-time token.")
handoff("laptop", ["account", "create", "--name", "demo"])
// The token is the last line; a note (on standard error, which this shows too) may come before it.
let token = handoff("laptop", ["device", "invite", "--token", "--expires", "2m"]).split(separator: "\n").last.map(String.init)?.trimmingCharacters(in: .whitespaces) ?? ""
handoff("desktop", ["join", "-"], input: (token, "\"$token\""))
waitFor("the devices to hear each other") { handoff("desktop", ["devices"], show: false).contains("nearby") }
handoff("desktop", ["devices"])

step(3, "Sign the MapViewer sample app (its Info.plist, entitlements and executable) with a new team key, and install it on both.")
let app = root.appendingPathComponent("MapViewer.app", isDirectory: true)
try FileManager.default.createDirectory(at: app, withIntermediateDirectories: true)
let manifests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Examples/MapViewer/App").standardizedFileURL
for file in ["Info.plist", "MapViewer.entitlements"] {
    try FileManager.default.copyItem(at: manifests.appendingPathComponent(file), to: app.appendingPathComponent(file))
}
try FileManager.default.copyItem(at: binary("MapViewer"), to: app.appendingPathComponent("MapViewer"))
// A team is its key: the app's entitlements name the identifier derived from it.
let teamKey = root.appendingPathComponent("team.key").path
handoff("laptop", ["team", "create", "--key", teamKey], agent: false)
let team = handoff("laptop", ["team", "show", "--key", teamKey], show: false, agent: false).trimmingCharacters(in: .whitespacesAndNewlines)
let entitlements = app.appendingPathComponent("MapViewer.entitlements")
try String(contentsOf: entitlements, encoding: .utf8).replacingOccurrences(of: "EXAMPLETEAM", with: team).write(to: entitlements, atomically: true, encoding: .utf8)
print("    (MapViewer.entitlements now names team \(team))")
handoff("laptop", ["apps", "sign", app.path, "--key", teamKey], agent: false)
handoff("laptop", ["apps", "install", app.path])
handoff("desktop", ["apps", "install", app.path])

step(4, "On 'laptop', the person opens MapViewer and looks at the map around Union Square.")
let laptopApp = ChildProcess()
laptopApp.executableURL = root.appendingPathComponent("laptop/apps/com.example.handoff.MapViewer/MapViewer")
let laptopData = root.appendingPathComponent("laptop-MapViewer-data", isDirectory: true)
laptopApp.environment = ProcessInfo.processInfo.environment.merging(["HANDOFF_SOCKET": socket("laptop"), "HANDOFF_APP_DATA": laptopData.path]) { $1 }
let input = Pipe()
laptopApp.standardInput = input
laptopApp.standardOutput = FileHandle.nullDevice
laptopApp.standardError = FileHandle.nullDevice
try laptopApp.run()
started.append(laptopApp)
let laptopLog = laptopData.appendingPathComponent("events.log")
@MainActor
func tell(_ command: String) {
    print("    laptop MapViewer> \(command)")
    input.fileHandleForWriting.write(Data((command + "\n").utf8))
}
tell("show 37.7887 -122.4075 0.02")
waitFor("MapViewer to show the map") { lines(laptopLog).contains { $0.hasPrefix("showing") } }
indent(lines(laptopLog).filter { $0.hasPrefix("showing") }.joined(separator: "\n"))

step(5, "'desktop' sees the activity offered nearby (announced in a sealed beacon, without its state).")
waitFor("desktop to list the activity") { handoff("desktop", ["list"], show: false).contains("Viewing the store map") }
handoff("desktop", ["list"])

step(6, "The person continues it on 'desktop': its agent starts MapViewer there, fetches the state from 'laptop' over TLS, and delivers it.")
handoff("desktop", ["continue", "--latest"])
let desktopLog = root.appendingPathComponent("desktop/data/com.example.handoff.MapViewer/events.log")
waitFor("MapViewer on desktop to restore the map") { lines(desktopLog).contains { $0.hasPrefix("map shows") } }
indent(lines(desktopLog).map { "desktop MapViewer: \($0)" }.joined(separator: "\n"))

step(7, "Back on 'laptop', the person opens the Stonestown store's editor and marks it a favorite.")
tell("edit stonestown")
tell("favorite on")
waitFor("desktop to list the editing activity") { handoff("desktop", ["list"], show: false).contains("Editing Stonestown") }
handoff("desktop", ["list"])

step(8, "They continue the editing on 'desktop': its editor opens there, and laptop's editor closes.")
let seen = lines(desktopLog).count
handoff("desktop", ["continue", "--latest"])
waitFor("the editor to open on desktop") { lines(desktopLog).contains { $0.hasPrefix("editor open") } }
waitFor("the editor to close on laptop") { lines(laptopLog).contains { $0.contains("closed: continued on another device") } }
indent(lines(desktopLog).dropFirst(seen).map { "desktop MapViewer: \($0)" }.joined(separator: "\n"))
indent(lines(laptopLog).filter { $0.contains("closed") }.map { "laptop MapViewer: \($0)" }.joined(separator: "\n"))

print("\nDone: the map region and the store's favorite flag moved from 'laptop' to 'desktop', between two real agents.")
cleanUp()
