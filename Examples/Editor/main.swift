// Editor, a document-based app without a window: text documents in a synced folder. A
// document it opens gets its activity automatically (its type's
// NSUbiquitousDocumentUserActivityType), and when another device continues it, the framework
// opens the same document there: the URL arrives as that device's own path in its copy of the
// folder (the agents' `--container ID=PATH`, e.g. a folder Syncthing keeps in step).
//
// Install it with `handoff apps install DIR` (DIR holding App/Info.plist, App/Editor.entitlements
// and the built executable); run the installed executable to type into it, and the agent
// starts it when a continuation arrives. Commands on standard input:
//   open NAME | append TEXT | show | close | quit
import Foundation
import Handoff
import HandoffApp

/// Where the app keeps its event log: the folder the agent gives it, else $XDG_DATA_HOME/Editor.
let dataDirectory: URL = {
    let environment = ProcessInfo.processInfo.environment
    if let given = environment["HANDOFF_APP_DATA"], !given.isEmpty { return URL(fileURLWithPath: given, isDirectory: true) }
    let base = environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent(".local/share")
    return base.appendingPathComponent("Editor", isDirectory: true)
}()
try? FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
let eventLog = dataDirectory.appendingPathComponent("events.log")

/// Prints a line and appends it to the event log, so a person and a test both see it.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data("Editor: \(line)\n".utf8))
    let data = Data((line + "\n").utf8)
    if let handle = try? FileHandle(forWritingTo: eventLog) {
        handle.seekToEndOfFile()
        handle.write(data)
        try? handle.close()
    } else {
        try? data.write(to: eventLog)
    }
}

/// A text document: its file's contents.
@MainActor
final class TextDocument: Document {
    var text = ""

    override func open() {
        text = (try? String(contentsOf: fileURL, encoding: .utf8)) ?? ""
        super.open()
        say("opened \(fileURL.path) (\(text.split(separator: "\n").count) lines)\(userActivity == nil ? "; not in a synced folder, so no activity" : "")")
    }

    func append(_ line: String) {
        text += line + "\n"
        do {
            try text.write(to: fileURL, atomically: true, encoding: .utf8)
        } catch {
            say("cannot save \(fileURL.path): \(error.localizedDescription)")
        }
        userActivity?.needsSave = true
    }

    /// Continued from another device: the document was opened here by the framework.
    override func restoreUserActivityState(_ activity: UserActivity) {
        say("continued \(fileURL.path): \(text.split(separator: "\n").last.map(String.init) ?? "(empty)")")
        if !activity.untranslatedFileURLs.isEmpty {
            say("not on this device: \(activity.untranslatedFileURLs.map(\.path).joined(separator: ", "))")
        }
    }
}

@MainActor
final class EditorDelegate: ApplicationDelegate {
    func application(_ application: Application, willContinueUserActivityWithType userActivityType: String) -> Bool {
        say("continuing \(userActivityType)")
        return true
    }

    /// Not handled here: the framework opens the document the activity names.
    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        false
    }

    func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        say("failed \(userActivityType): \((error as? CocoaError)?.code.rawValue ?? 0) \(error.localizedDescription)")
    }
}

@MainActor
final class Editor {
    let delegate = EditorDelegate()
    let application: Application
    var document: TextDocument? { application.openDocuments.last as? TextDocument }

    init() {
        application = Application(delegate: delegate)
        application.documentClass = TextDocument.self
    }

    /// Commands not run yet, in order: `open` may have to wait for the agent's folders.
    var waiting: [String] = []
    var attempts = 0

    func submit(_ line: String) {
        waiting.append(line)
        if waiting.count == 1 { drain() }
    }

    private func drain() {
        while let line = waiting.first {
            guard run(line) else {
                // The agent's folders come once the app is connected to it: give that 3 seconds.
                attempts += 1
                DispatchQueue.main.asyncAfter(deadline: .now() + 0.1) { MainActor.assumeIsolated { self.drain() } }
                return
            }
            attempts = 0
            waiting.removeFirst()
        }
    }

    /// Runs a command; false when it must be tried again a little later.
    func run(_ line: String) -> Bool {
        let words = line.split(separator: " ", maxSplits: 1).map(String.init)
        switch words.first {
        case "open":
            guard words.count == 2 else {
                say("usage: open NAME")
                return true
            }
            guard let container = application.allSyncedContainers.first else {
                if attempts < 30 { return false }
                say("no synced folder: start handoffd with --container ID=PATH")
                return true
            }
            document?.close()
            let url = container.folder.appendingPathComponent(words[1])
            if !FileManager.default.fileExists(atPath: url.path) { _ = FileManager.default.createFile(atPath: url.path, contents: nil) }
            TextDocument(fileURL: url).open()
        case "append":
            guard words.count == 2, let document else {
                say("usage: append TEXT, with a document open")
                return true
            }
            document.append(words[1])
            say("appended to \(document.fileURL.lastPathComponent)")
        case "show":
            guard let document else {
                say("no document is open")
                return true
            }
            say("\(document.fileURL.path):\n\(document.text)")
        case "close":
            document?.close()
            say("closed")
        case "quit":
            say("bye")
            exit(0)
        case nil:
            break
        default:
            say("unknown command '\(words[0])'; commands: open, append, show, close, quit")
        }
        return true
    }
}

let editor = MainActor.assumeIsolated { Editor() }
say("ready")

// Standard input is read on a thread of its own; an app started by the agent may have none.
Thread.detachNewThread {
    while let line = readLine() {
        DispatchQueue.main.async { MainActor.assumeIsolated { editor.submit(line) } }
    }
}
dispatchMain()
