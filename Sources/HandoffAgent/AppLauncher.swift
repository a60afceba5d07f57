import Foundation
import HandoffProcess
import Synchronization

/// What the agent tells an app it starts.
package struct AppLaunch: Sendable {
    package var app: InstalledApp
    /// The continuation the app is started for; it arrives as `willContinue` once the app connects.
    package var continuation: UUID
    /// The agent's socket.
    package var socketPath: String
    /// The app's own folder for its data, as an app container is on Apple platforms.
    package var dataDirectory: URL
    /// Where what it prints goes.
    package var logFile: URL
}

/// A started app, as far as the agent follows it: until it connects, or ends first.
package protocol LaunchedApp: Sendable {
    /// Nil while it runs; why it ended otherwise.
    var ended: String? { get }

    /// Calls `handler` once, when the app ends (at once if it has). An app that cannot tell
    /// (one in the launcher's own process) never calls it.
    func whenEnded(_ handler: @escaping @Sendable () -> Void)
}

extension LaunchedApp {
    package func whenEnded(_ handler: @escaping @Sendable () -> Void) {}
}

/// Starts an installed app when a continuation arrives for it and it is not running, and
/// opens web pages no app takes. The agent starts processes; a test process running apps in
/// process starts them its own way.
package protocol AppLauncher: Sendable {
    func launch(_ launch: AppLaunch) async throws(AgentError) -> any LaunchedApp

    /// Opens an http or https page in the person's browser.
    func openWebPage(_ url: URL, browserCommand: [String]) async throws(AgentError)
}

extension AppLauncher {
    /// Runs the browser command (through `env`, so a name on `PATH` works) with the page as
    /// its last argument.
    package func openWebPage(_ url: URL, browserCommand: [String]) async throws(AgentError) {
        guard let command = browserCommand.first else { throw AgentError("no browser command is configured") }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [command] + browserCommand.dropFirst() + [url.absoluteString]
        do {
            try process.run()
        } catch {
            throw AgentError("could not run the browser command '\(command)': \(error.localizedDescription)")
        }
    }
}

/// Starts the app's executable as a process, with `HANDOFF_SOCKET`, `HANDOFF_BUNDLE_IDENTIFIER`,
/// `HANDOFF_CONTINUATION` and `HANDOFF_APP_DATA` set and its output in its log file.
package struct ProcessLauncher: AppLauncher {
    package init() {}

    final class Launched: LaunchedApp {
        let process: ChildProcess
        let end: EndSignal
        init(_ process: ChildProcess, end: EndSignal) {
            self.process = process
            self.end = end
        }
        var ended: String? { process.isRunning ? nil : "it exited with status \(process.terminationStatus)" }
        func whenEnded(_ handler: @escaping @Sendable () -> Void) { end.whenEnded(handler) }
    }

    /// The end of a process, from its termination handler, to those who asked to hear it.
    final class EndSignal: Sendable {
        private let state = Mutex<(ended: Bool, handlers: [@Sendable () -> Void])>((false, []))

        func ended() {
            let handlers = state.withLock { state in
                state.ended = true
                defer { state.handlers = [] }
                return state.handlers
            }
            for handler in handlers { handler() }
        }

        func whenEnded(_ handler: @escaping @Sendable () -> Void) {
            let now = state.withLock { state in
                if !state.ended { state.handlers.append(handler) }
                return state.ended
            }
            if now { handler() }
        }
    }

    /// How long a start is tried again while the executable is busy (ETXTBSY).
    static let busyPatience: Duration = .seconds(2)

    package func launch(_ launch: AppLaunch) async throws(AgentError) -> any LaunchedApp {
        // Another thread's fork can inherit a descriptor a copy in progress holds open for
        // writing (an install, here or in a process that shares files with this one), and
        // keeps it until that child execs: meanwhile the kernel refuses to run the file. It
        // is let go within moments, so a busy executable is tried again for a while.
        let deadline = ContinuousClock.now + Self.busyPatience
        var wait = Duration.milliseconds(5)
        while true {
            let process = ChildProcess()
            prepare(process, for: launch)
            let end = EndSignal()
            process.terminationHandler = { _ in end.ended() }
            do {
                try process.run()
                return Launched(process, end: end)
            } catch {
                let code = Self.posixCode(error)
                if code == ETXTBSY, ContinuousClock.now + wait < deadline {
                    // Backoff: the executable is still open for writing (ETXTBSY); try again a little later.
                    try? await Task.sleep(for: wait)
                    wait = min(wait * 2, .milliseconds(100))
                    continue
                }
                let reason = code.map { String(cString: strerror($0)) } ?? error.localizedDescription
                throw AgentError("could not start '\(launch.app.manifest.bundleIdentifier)' (\(launch.app.executable.path)): \(reason)")
            }
        }
    }

    /// The errno of a failed start, if it has one.
    static func posixCode(_ error: any Error) -> Int32? {
        (error as? ChildProcess.LaunchError)?.code
    }

    private func prepare(_ process: ChildProcess, for launch: AppLaunch) {
        process.executableURL = launch.app.executable
        process.currentDirectoryURL = launch.app.directory
        var environment = ProcessInfo.processInfo.environment
        // An app started with any of these is not taken for itself (LocalAcceptor).
        for variable in LocalAcceptor.injectingVariables { environment[variable] = nil }
        environment["HANDOFF_SOCKET"] = launch.socketPath
        environment["HANDOFF_BUNDLE_IDENTIFIER"] = launch.app.manifest.bundleIdentifier
        environment["HANDOFF_CONTINUATION"] = launch.continuation.uuidString
        environment["HANDOFF_APP_DATA"] = launch.dataDirectory.path
        process.environment = environment
        if !FileManager.default.fileExists(atPath: launch.logFile.path) {
            _ = FileManager.default.createFile(atPath: launch.logFile.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        if let handle = try? FileHandle(forWritingTo: launch.logFile) {
            handle.seekToEndOfFile()
            process.standardOutput = handle
            process.standardError = handle
        }
        process.standardInput = FileHandle.nullDevice
    }
}
