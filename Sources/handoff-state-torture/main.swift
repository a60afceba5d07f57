// Writes state over and over until it is killed; the crash-safety tests kill it with SIGKILL
// mid-write and check that what it wrote always loads.
//
//   handoff-state-torture STATE_DIR               the account state, each time the next revision
//   handoff-state-torture account STATE_DIR [N]   the same, N times (forever without N)
//   handoff-state-torture keys STATE_DIR          the device's identity (its key and certificate)
//   handoff-state-torture install STATE_DIR APP   installs the app directory APP again and again
import Foundation
import HandoffAgent

#if canImport(Glibc)
import Glibc
#endif

/// The process that started this one. The writing goes on only while it is there: a test run
/// that crashed would otherwise leave this writing, and taking a processor, for good.
let parent = getppid()
func goOnlyWhileStarted() {
    if getppid() != parent { exit(3) }
}

let arguments = Array(CommandLine.arguments.dropFirst())
let usage = "usage: handoff-state-torture [account|keys] STATE_DIR | account STATE_DIR N | install STATE_DIR APP_DIR\n"
let (mode, rest): (String, [String]) = arguments.count == 1 ? ("account", arguments) : (arguments.first ?? "", Array(arguments.dropFirst()))
guard let folder = rest.first else {
    FileHandle.standardError.write(Data(usage.utf8))
    exit(2)
}
let stateDirectory = URL(fileURLWithPath: folder)
do {
    switch mode {
    case "account":
        let store = try StateStore(directory: stateDirectory)
        var state = try store.load(AccountState.self, from: AccountState.fileName)
            ?? AccountState(name: "torture", members: [], beaconKeys: [Data(repeating: 7, count: 32)], revision: 0)
        let limit = rest.count > 1 ? UInt64(rest[1]) ?? .max : .max
        for _ in 0..<limit {
            goOnlyWhileStarted()
            state.revision += 1
            // Grow and shrink, so that a torn write would show as a short or mixed file.
            let count = Int(state.revision % 50)
            state.members = (0..<count).map { AccountState.Member(id: UUID(), name: "device \($0) of revision \(state.revision)") }
            try store.save(state, to: AccountState.fileName)
        }
    case "keys":
        let store = try StateStore(directory: stateDirectory)
        var round = 0
        while true {
            goOnlyWhileStarted()
            round += 1
            // Names of changing length, so that a torn write would show.
            try DeviceIdentity.generate(name: "device \(String(repeating: "x", count: round % 40))").save(to: store)
        }
    case "install":
        guard rest.count == 2 else {
            FileHandle.standardError.write(Data(usage.utf8))
            exit(2)
        }
        let registry = AppRegistry(stateDirectory: stateDirectory, allowsUnsignedApps: true)
        while true {
            goOnlyWhileStarted()
            do {
                try registry.install(from: URL(fileURLWithPath: rest[1]))
            } catch {
                FileHandle.standardError.write(Data("handoff-state-torture: \(error)\n".utf8))
                exit(1)
            }
        }
    default:
        FileHandle.standardError.write(Data(usage.utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("handoff-state-torture: \(error)\n".utf8))
    exit(1)
}
