import Foundation
import HandoffProcess
import HandoffTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The Debian package starts handoff-session from a systemd user unit and, for desktops without
/// graphical-session.target, from an XDG autostart entry: where both fire, one must win.
@Suite("One session service per agent")
struct SessionInstanceTests {
    @Test("A second handoff-session for the same agent ends at once, saying so, and the first goes on; both started through the package's shared binary")
    func secondServiceEnds() async throws {
        let harness = try AgentHarness()
        let device = try await harness.start("alpha")
        let link = harness.root.appendingPathComponent("shared/handoff-session")
        try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: try #require(builtExecutable("handoff-programs")).path)
        let first = ChildProcess()
        first.executableURL = link
        first.arguments = ["--backend", "none", "--socket", device.socket]
        first.environment = ["PATH": "/usr/bin:/bin", "HANDOFF_HELLO_TIMEOUT": "90"]
        first.standardOutput = FileHandle.nullDevice
        first.standardError = FileHandle.nullDevice
        try first.run()
        // The first holds the lock beside the agent's socket once it has started.
        let lockPath = device.socket + ".session-lock"
        let held = await eventually {
            let probe = open(lockPath, O_RDWR | O_CLOEXEC)
            guard probe >= 0 else { return false }
            defer { close(probe) }
            return flock(probe, LOCK_EX | LOCK_NB) != 0
        }
        #expect(held, "the first handoff-session never took its lock")
        let second = try runToEnd(link, ["--backend", "none", "--socket", device.socket], environment: ["PATH": "/usr/bin:/bin"])
        #expect(second.status == 0 && second.errors.contains("another handoff-session serves the agent at \(device.socket) already"), "\(second)")
        #expect(first.isRunning)
        first.terminate()
        _ = await first.exited()
        await harness.stop()
    }
}
