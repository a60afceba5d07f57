import Foundation
import HandoffCommandLine

#if canImport(Glibc)
import Glibc
#endif

// `handoff`, the command people and scripts type. Its plain `continue` forms run here, in a
// program small enough to start in about a millisecond (linked as a static executable for an
// install: docs/agent.md, Installing); every other command, help and every mistake included,
// runs the full command line, `handoff-cli`, in this process's place, with the same arguments.

let arguments = Array(CommandLine.arguments.dropFirst())
if let quick = QuickContinue(arguments: arguments) { quick.run() }
FullCommandLine.run()

enum FullCommandLine {
    /// Where the full command line may be, in order: beside this program as it was called (a
    /// symbolic link's folder: `~/.local/bin/handoff` linked to a build), beside the file it
    /// resolves to (a build folder, or `~/.local/bin` after the install in docs/agent.md), then
    /// `../libexec/handoff/` from either (a system package), then on `PATH`.
    static func candidates(called: String, executable: String, path: String?) -> [String] {
        var folders: [String] = []
        if called.contains("/") { folders.append((called as NSString).deletingLastPathComponent) }
        folders.append((executable as NSString).deletingLastPathComponent)
        var places = folders.map { $0 + "/handoff-cli" }
        places += folders.map { ($0 as NSString).deletingLastPathComponent + "/libexec/handoff/handoff-cli" }
        places += (path ?? "").split(separator: ":").map { $0 + "/handoff-cli" }
        var seen = Set<String>()
        return places.filter { seen.insert($0).inserted }
    }

    /// Runs the first candidate that can run in this process's place, with this process's
    /// arguments (the name it was called by included) and environment; if none can, says why
    /// and exits with 127, as a shell does for a command it cannot run.
    static func run() -> Never {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let places = candidates(called: CommandLine.arguments[0], executable: executable, path: getenv("PATH").map { String(cString: $0) })
        var reasons: [String] = []
        for place in places {
            execv(place, CommandLine.unsafeArgv)
            let failure = errno
            if failure != ENOENT && failure != ENOTDIR { reasons.append("\(place): \(String(cString: strerror(failure)))") }
        }
        let tried = reasons.isEmpty ? "not found beside \(executable), in ../libexec/handoff, or on PATH" : reasons.joined(separator: "; ")
        FileHandle.standardError.write(Data("""
            handoff: cannot run the full command line, handoff-cli, which every command but a plain 'continue' needs (\(tried)); \
            install it next to handoff, as docs/agent.md (Installing) shows\n
            """.utf8))
        exit(127)
    }
}
