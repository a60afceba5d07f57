#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How the `handoff` front finds and runs the full command line, `handoff-cli`, for every
/// command but a plain `continue`.
public enum FullCommandLine {
    /// Where the full command line may be, in order: beside this program as it was called (a
    /// symbolic link's folder: `~/.local/bin/handoff` linked to a build), beside the file it
    /// resolves to (a build folder, or `~/.local/bin` after the install in docs/agent.md), then
    /// `../libexec/handoff/` from either (a system package), then on `PATH`.
    public static func candidates(called: String, executable: String, path: String?) -> [String] {
        var folders: [String] = []
        if called.contains("/") { folders.append(parent(of: called)) }
        folders.append(parent(of: executable))
        var places = folders.map { $0 + "/handoff-cli" }
        places += folders.map { parent(of: $0) + "/libexec/handoff/handoff-cli" }
        places += (path ?? "").split(separator: ":", omittingEmptySubsequences: true).map { $0 + "/handoff-cli" }
        var seen = Set<String>()
        return places.filter { seen.insert($0).inserted }
    }

    /// The folder that holds `path`, as Foundation's `deletingLastPathComponent` gives it:
    /// repeated and trailing slashes dropped, `/` for a file at the root, "" for a bare name.
    public static func parent(of path: String) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        let absolute = path.hasPrefix("/")
        guard parts.count > 1 else { return absolute ? "/" : "" }
        return (absolute ? "/" : "") + parts.dropLast().joined(separator: "/")
    }

    /// Runs the first candidate that can run in this process's place, with this process's
    /// arguments and environment, named `handoff` whatever name this front was called by (an
    /// alias's link): the Debian package's handoff-cli is a shared binary that is each program
    /// by its name; if none can, says why and exits with 127, as a shell does for a command it
    /// cannot run.
    public static func run() -> Never {
        let executable = resolvedExecutable() ?? CommandLine.arguments[0]
        let places = candidates(called: CommandLine.arguments[0], executable: executable, path: getenv("PATH").map { String(cString: $0) })
        let argv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: Int(CommandLine.argc) + 1)
        argv[0] = strdup("handoff")
        for index in 1..<Int(CommandLine.argc) { argv[index] = CommandLine.unsafeArgv[index] }
        argv[Int(CommandLine.argc)] = nil
        var reasons: [String] = []
        for place in places {
            execv(place, argv)
            let failure = errno
            if failure != ENOENT && failure != ENOTDIR { reasons.append("\(place): \(String(cString: strerror(failure)))") }
        }
        let tried = reasons.isEmpty ? "not found beside \(executable), in ../libexec/handoff, or on PATH" : reasons.joined(separator: "; ")
        printToStandardError("""
            handoff: cannot run the full command line, handoff-cli, which every command but a plain 'continue' needs (\(tried)); \
            install it next to handoff, as docs/agent.md (Installing) shows\n
            """)
        exit(127)
    }

    /// The file this process runs, symbolic links resolved (`/proc/self/exe`).
    static func resolvedExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: 4097)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
