import Dispatch
import HandoffBrowserHost
import HandoffCLI
import HandoffDaemon
import HandoffSessionService

#if canImport(Glibc)
import Glibc
#endif

// Every Handoff program but the `handoff` front in one executable, told apart by the name it is
// started by (a link named handoffd, handoff-cli, handoff-session or handoff-browser-host), as
// busybox does. The Debian package ships this one binary: each program alone carries its own
// copy of the Swift runtime, Foundation and ICU's data (about 55 MB), four times over.
//
// No `await` at the top: that would make all of this one task, and the session service and the
// browser host call dispatchMain() themselves, which must run on the main thread outside any
// job of the main queue (their answers are jobs of it). The async programs run as a task.
let name = CommandLine.arguments.first.map { $0.split(separator: "/").last.map(String.init) ?? $0 } ?? ""
switch name {
case "handoffd":
    // Ended by the program itself (exit) or when main() returns.
    Task { @MainActor in
        await HandoffDaemonMain.main()
        exit(0)
    }
    dispatchMain()
// `handoff` execs handoff-cli with the name `handoff` first.
case "handoff", "handoff-cli":
    // As for handoffd.
    Task { @MainActor in
        await HandoffMain.main()
        exit(0)
    }
    dispatchMain()
case "handoff-session":
    SessionServiceMain.main()
case "handoff-browser-host":
    BrowserHostMain.main()
default:
    print("handoff-programs: started as '\(name)'; start it by one of its names: handoffd, handoff-cli, handoff-session, handoff-browser-host")
    exit(64)
}
