import CHandoffSystem
import Foundation
import Synchronization

/// A program this process starts, with the part of Foundation's `Process` interface that the
/// agent, its tests and its tools use.
///
/// Foundation's `Process.run()` on Linux reads `/proc/self/fd` to find the descriptors to
/// close in the child, and copies 256 bytes of each directory entry where the entry may be
/// shorter: at the end of a heap page this reads unmapped memory and the whole process
/// crashes (swift-corelibs-foundation #5472; Swift 6.3.1 has it, and a full test run hit it).
/// This type starts the child with `posix_spawn` and closes every descriptor above 2 in the
/// child with one file action (`closefrom`), which also keeps this process's sockets and
/// pipes out of it whether or not they are close-on-exec.
///
/// A thread per child waits for it to end (`waitid` without reaping); whoever sees it end
/// first reaps it under the lock and records how it ended, then runs `terminationHandler` and
/// resumes those awaiting `exited()`.
public final class ChildProcess: Sendable {
    public enum TerminationReason: Sendable, Equatable {
        case exit
        case uncaughtSignal
    }

    /// How a child ended: its exit status, or the signal that ended it.
    public struct Termination: Sendable, Equatable {
        public var reason: TerminationReason
        public var status: Int32

        public init(reason: TerminationReason, status: Int32) {
            self.reason = reason
            self.status = status
        }
    }

    /// A start that failed: the system's error number and what it means.
    public struct LaunchError: Error, LocalizedError, CustomStringConvertible {
        /// The errno: ENOENT, EACCES, ETXTBSY ...
        public var code: Int32
        public var path: String
        public var description: String { "could not start \(path): \(String(cString: strerror(code)))" }
        public var errorDescription: String? { description }
    }

    /// Where one of the child's standard streams goes.
    enum Stream: Sendable {
        /// This process's own.
        case inherit
        /// `/dev/null`.
        case null
        /// A pipe: the child gets `child`; this process closes `child` once the child started.
        case pipe(Pipe, child: FileHandle)
        /// An open file of this process's, which stays open here.
        case handle(FileHandle)

        init(_ value: Any?, childReads: Bool) {
            switch value {
            case let pipe as Pipe: self = .pipe(pipe, child: childReads ? pipe.fileHandleForReading : pipe.fileHandleForWriting)
            case let handle as FileHandle where handle === FileHandle.nullDevice: self = .null
            case let handle as FileHandle: self = .handle(handle)
            default: self = .null
            }
        }

        var object: Any? {
            switch self {
            case .inherit, .null: nil
            case .pipe(let pipe, _): pipe
            case .handle(let handle): handle
            }
        }
    }

    struct Configuration: Sendable {
        var executable: URL?
        var arguments: [String]?
        var environment: [String: String]?
        var directory: URL?
        var streams: [Stream] = [.inherit, .inherit, .inherit]
        var newProcessGroup = true
        var terminationHandler: (@Sendable (ChildProcess) -> Void)?
    }

    struct State: Sendable {
        var pid: Int32 = 0
        var termination: Termination?
        var waiters: [CheckedContinuation<Termination, Never>] = []
    }

    private let configuration = Mutex(Configuration())
    private let state = Mutex(State())

    public init() {}

    // MARK: What to start (set before `run`)

    public var executableURL: URL? {
        get { configuration.withLock { $0.executable } }
        set { configuration.withLock { $0.executable = newValue } }
    }

    public var arguments: [String]? {
        get { configuration.withLock { $0.arguments } }
        set { configuration.withLock { $0.arguments = newValue } }
    }

    /// The child's environment; nil gives it this process's.
    public var environment: [String: String]? {
        get { configuration.withLock { $0.environment } }
        set { configuration.withLock { $0.environment = newValue } }
    }

    public var currentDirectoryURL: URL? {
        get { configuration.withLock { $0.directory } }
        set { configuration.withLock { $0.directory = newValue } }
    }

    /// A `Pipe`, a `FileHandle` (`FileHandle.nullDevice` for nothing), or nil for `/dev/null`.
    /// Left unset, the child shares this process's.
    public var standardInput: Any? {
        get { configuration.withLock { $0.streams[0].object } }
        set { configuration.withLock { $0.streams[0] = Stream(newValue, childReads: true) } }
    }

    public var standardOutput: Any? {
        get { configuration.withLock { $0.streams[1].object } }
        set { configuration.withLock { $0.streams[1] = Stream(newValue, childReads: false) } }
    }

    public var standardError: Any? {
        get { configuration.withLock { $0.streams[2].object } }
        set { configuration.withLock { $0.streams[2] = Stream(newValue, childReads: false) } }
    }

    /// Whether the child starts in a process group of its own (as Foundation's do), so that
    /// a terminal's Ctrl-C reaches only this process. On by default.
    public var startsNewProcessGroup: Bool {
        get { configuration.withLock { $0.newProcessGroup } }
        set { configuration.withLock { $0.newProcessGroup = newValue } }
    }

    /// Called once, on the thread that saw the child end.
    public var terminationHandler: (@Sendable (ChildProcess) -> Void)? {
        get { configuration.withLock { $0.terminationHandler } }
        set { configuration.withLock { $0.terminationHandler = newValue } }
    }

    // MARK: Running

    /// Starts the child. Throws `LaunchError` when it cannot start (the executable missing or
    /// not executable, busy being written, the directory missing).
    public func run() throws {
        let configuration = configuration.withLock { $0 }
        guard let executable = configuration.executable else { throw LaunchError(code: ENOENT, path: "(no executable)") }
        guard state.withLock({ $0.pid == 0 }) else { throw LaunchError(code: EBUSY, path: executable.path) }
        let path = executable.path
        let argv = CStrings([path] + (configuration.arguments ?? []))
        let envp = configuration.environment.map { CStrings($0.map { "\($0.key)=\($0.value)" }) }
        defer {
            argv.free()
            envp?.free()
        }
        var null: FileHandle?
        defer { try? null?.close() }
        var descriptors: [Int32] = []
        for stream in configuration.streams {
            switch stream {
            case .inherit:
                descriptors.append(-1)
            case .null:
                if null == nil { null = FileHandle(forUpdatingAtPath: "/dev/null") }
                descriptors.append(null?.fileDescriptor ?? -1)
            case .pipe(_, let child):
                descriptors.append(child.fileDescriptor)
            case .handle(let handle):
                descriptors.append(handle.fileDescriptor)
            }
        }
        var pid: Int32 = 0
        let result = descriptors.withUnsafeBufferPointer { streams in
            withDirectory(configuration.directory) { directory in
                handoff_spawn(&pid, path, argv.pointers, envp?.pointers ?? environ, directory, streams.baseAddress, configuration.newProcessGroup ? 1 : 0)
            }
        }
        guard result == 0 else { throw LaunchError(code: result, path: path) }
        state.withLock { $0.pid = pid }
        for case .pipe(_, let child) in configuration.streams { try? child.close() }
        let watcher = Thread { [self, pid] in
            _ = handoff_await_child(pid)
            finish()
        }
        watcher.name = "child \(pid)"
        watcher.start()
    }

    public var processIdentifier: Int32 { state.withLock { $0.pid } }

    /// True from `run` until the child has ended.
    public var isRunning: Bool {
        let (started, ended) = state.withLock { ($0.pid != 0, $0.termination != nil) }
        guard started, !ended else { return false }
        return finish(waiting: false) == nil
    }

    /// The exit status, or the number of the signal that ended the child. Only once it ended.
    public var terminationStatus: Int32 {
        guard let termination = state.withLock({ $0.termination }) else { preconditionFailure("the child has not ended") }
        return termination.status
    }

    public var terminationReason: TerminationReason {
        guard let termination = state.withLock({ $0.termination }) else { preconditionFailure("the child has not ended") }
        return termination.reason
    }

    /// How the child ended, or nil while it runs (or before it started).
    public var termination: Termination? { state.withLock { $0.termination } }

    /// Blocks this thread until the child has ended. Returns at once if it never started.
    public func waitUntilExit() {
        let pid = state.withLock { $0.pid }
        guard pid != 0 else { return }
        while finish(waiting: false) == nil {
            _ = handoff_await_child(pid)
        }
    }

    /// Waits, without holding a thread, until the child has ended.
    public func exited() async -> Termination {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state -> Termination? in
                if let termination = state.termination { return termination }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    /// Sends `signal` while the child runs; nothing once it has been reaped (its pid may
    /// then be another process's).
    public func signal(_ signal: Int32) {
        state.withLock { state in
            if state.pid != 0, state.termination == nil { _ = kill(state.pid, signal) }
        }
    }

    /// SIGTERM.
    public func terminate() { signal(SIGTERM) }

    /// SIGINT.
    public func interrupt() { signal(SIGINT) }

    // MARK: Ending

    /// Reaps the child if it has ended and nobody has yet, recording how. Returns how it ended,
    /// or nil while it runs. The first to record it tells the handler and the waiters.
    @discardableResult
    private func finish(waiting: Bool = true) -> Termination? {
        let recorded = state.withLock { state -> (Termination, [CheckedContinuation<Termination, Never>])? in
            guard state.termination == nil, state.pid != 0 else { return nil }
            var status: Int32 = 0
            var signaled: Int32 = 0
            switch handoff_reap(state.pid, &status, &signaled) {
            case 1:
                state.termination = Termination(reason: signaled != 0 ? .uncaughtSignal : .exit, status: status)
            case 0:
                return nil
            default:
                // Reaped by someone else (a wait for any child): how it ended is lost.
                state.termination = Termination(reason: .exit, status: -1)
            }
            defer { state.waiters = [] }
            return (state.termination!, state.waiters)
        }
        guard let (termination, waiters) = recorded else { return state.withLock { $0.termination } }
        configuration.withLock { $0.terminationHandler }?(self)
        for waiter in waiters { waiter.resume(returning: termination) }
        return termination
    }
}

/// A NULL-terminated array of C strings, freed by hand.
private struct CStrings {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    let count: Int

    init(_ strings: [String]) {
        count = strings.count
        pointers = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { pointers[index] = strdup(string) }
        pointers[strings.count] = nil
    }

    func free() {
        for index in 0..<count { Foundation.free(pointers[index]) }
        pointers.deallocate()
    }
}

private func withDirectory<Result>(_ directory: URL?, _ body: (UnsafePointer<CChar>?) -> Result) -> Result {
    guard let directory else { return body(nil) }
    return directory.path.withCString { body($0) }
}
