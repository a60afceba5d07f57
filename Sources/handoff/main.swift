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
FullCommandLine.run(arguments)

enum FullCommandLine {
    /// Where the full command line may be, in order: next to this program (a build folder, or
    /// `~/.local/bin` after the install in docs/agent.md), then `../libexec/handoff/` from it (a
    /// system package).
    static func candidates(besides executable: String) -> [String] {
        let folder = (executable as NSString).deletingLastPathComponent
        return [folder + "/handoff-cli", (folder as NSString).deletingLastPathComponent + "/libexec/handoff/handoff-cli"]
    }

    /// Runs the first candidate in this process's place; if none can be run, says so and exits
    /// with 127, as a shell does for a command it cannot find.
    static func run(_ arguments: [String]) -> Never {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let places = candidates(besides: executable)
        var reasons: [String] = []
        for place in places {
            let argv = ([place] + arguments).map { strdup($0) } + [nil]
            execv(place, argv)
            reasons.append("\(place): \(String(cString: strerror(errno)))")
            for pointer in argv { free(pointer) }
        }
        FileHandle.standardError.write(Data("""
            handoff: cannot run the full command line, handoff-cli, which every command but a plain 'continue' needs (\(reasons.joined(separator: "; "))); \
            install it next to \(executable), as docs/agent.md (Installing) shows\n
            """.utf8))
        exit(127)
    }
}
