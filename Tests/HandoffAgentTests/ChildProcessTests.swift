import Foundation
import HandoffProcess
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ChildProcess`, which starts every program the agent, its tests and tools run, against real
/// programs.
@Suite struct ChildProcessTests {
    private func shell(_ script: String, environment: [String: String]? = nil) -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.environment = environment
        return process
    }

    @Test func exitStatusReachesEveryWayOfWaiting() async throws {
        let process = shell("exit 3")
        let handled = Mutex<ChildProcess.Termination?>(nil)
        process.terminationHandler = { ended in handled.withLock { $0 = ended.termination } }
        try process.run()
        #expect(process.processIdentifier > 0)
        let termination = await process.exited()
        process.waitUntilExit()
        #expect(termination == .init(reason: .exit, status: 3))
        #expect(process.terminationStatus == 3)
        #expect(process.terminationReason == .exit)
        #expect(!process.isRunning)
        #expect(handled.withLock { $0 } == termination)
    }

    @Test func aSignalEndsIt() async throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["30"]
        try process.run()
        #expect(process.isRunning)
        process.terminate()
        let termination = await process.exited()
        #expect(termination == .init(reason: .uncaughtSignal, status: SIGTERM))
        // Signalling an ended child does nothing (its pid may be another process's by now).
        process.terminate()
    }

    @Test func outputThroughAPipeEndsWhenTheChildDoes() throws {
        let process = shell(#"printf 'out %s in %s' "$GREETING" "$(pwd)"; echo oops >&2"#, environment: ["GREETING": "hello"])
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.currentDirectoryURL = URL(fileURLWithPath: "/usr")
        try process.run()
        // Reaching the end proves this process closed its copy of the pipe's write end.
        let read = output.fileHandleForReading.readDataToEndOfFile()
        #expect(String(decoding: read, as: UTF8.self) == "out hello in /usr")
        #expect(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) == "oops\n")
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func inputFromAPipe() throws {
        let process = shell("read line; test \"$line\" = ping")
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data("ping\n".utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    /// A descriptor of this process, even one not marked close-on-exec, never reaches the child.
    @Test func noDescriptorLeaksIntoTheChild() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let process = shell("test -e /proc/$$/fd/\(ends[0]) || test -e /proc/$$/fd/\(ends[1]); echo $?")
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(answer == "1\n", "the child could see descriptor \(ends[0]) or \(ends[1])")
    }

    /// A thread of Dispatch blocks every signal; a child started from one must not inherit that,
    /// or SIGTERM would never end it.
    @Test func theChildStartsWithNoSignalBlocked() async throws {
        let process = ChildProcess()
        // grep itself, not a shell: a shell may clear its mask as it starts.
        process.executableURL = URL(fileURLWithPath: "/bin/grep")
        process.arguments = ["SigBlk", "/proc/self/status"]
        let output = Pipe()
        process.standardOutput = output
        let started = Mutex<(any Error)?>(nil)
        let thread = Thread {
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_SETMASK, &all, nil)
            do { try process.run() } catch { started.withLock { $0 = error } }
        }
        thread.start()
        let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        _ = await process.exited()
        #expect(started.withLock { $0 } == nil)
        #expect(answer.trimmingCharacters(in: .whitespacesAndNewlines) == "SigBlk:\t0000000000000000")
    }

    @Test func failedStartsSayWhy() throws {
        let missing = ChildProcess()
        missing.executableURL = URL(fileURLWithPath: "/nonexistent/program")
        #expect { try missing.run() } throws: { ($0 as? ChildProcess.LaunchError)?.code == ENOENT }
        #expect(!missing.isRunning)
        missing.waitUntilExit()

        let plain = FileManager.default.temporaryDirectory.appendingPathComponent("not-executable-\(UUID().uuidString)")
        try #require(FileManager.default.createFile(atPath: plain.path, contents: Data("#!/bin/sh\n".utf8), attributes: [.posixPermissions: 0o644]))
        defer { try? FileManager.default.removeItem(at: plain) }
        let notExecutable = ChildProcess()
        notExecutable.executableURL = plain
        #expect { try notExecutable.run() } throws: { ($0 as? ChildProcess.LaunchError)?.code == EACCES }

        let nowhere = shell("true")
        nowhere.currentDirectoryURL = URL(fileURLWithPath: "/nonexistent/folder")
        #expect { try nowhere.run() } throws: { error in
            (error as? ChildProcess.LaunchError)?.code == ENOENT && error.localizedDescription.contains("No such file")
        }
    }

    /// Many children started and awaited at once from many threads, each waited for by its
    /// watcher, by `waitUntilExit` and by `exited()`: every one is reaped once, with its status.
    @Test func manyAtOnce() async throws {
        let statuses = try await withThrowingTaskGroup(of: (Int32, Int32).self) { group in
            for index in 0..<64 {
                group.addTask {
                    let process = shell("exit \(index)")
                    try process.run()
                    if index.isMultiple(of: 2) { process.waitUntilExit() }
                    return (Int32(index), await process.exited().status)
                }
            }
            var statuses: [(Int32, Int32)] = []
            for try await status in group { statuses.append(status) }
            return statuses
        }
        #expect(statuses.count == 64)
        for (expected, status) in statuses { #expect(status == expected) }
    }
}
