// Writes the account state over and over, each time with the next revision, until it is
// killed. The crash-safety test kills it with SIGKILL mid-write and checks the state loads.
import Foundation
import HandoffAgent

guard CommandLine.arguments.count == 2 else {
    FileHandle.standardError.write(Data("usage: handoff-state-torture STATE_DIR\n".utf8))
    exit(2)
}
do {
    let store = try StateStore(directory: URL(fileURLWithPath: CommandLine.arguments[1]))
    var state = try store.load(AccountState.self, from: AccountState.fileName)
        ?? AccountState(name: "torture", members: [], beaconKeys: [Data(repeating: 7, count: 32)], revision: 0)
    while true {
        state.revision += 1
        // Grow and shrink, so that a torn write would show as a short or mixed file.
        let count = Int(state.revision % 50)
        state.members = (0..<count).map { AccountState.Member(id: UUID(), name: "device \($0) of revision \(state.revision)") }
        try store.save(state, to: AccountState.fileName)
    }
} catch {
    FileHandle.standardError.write(Data("handoff-state-torture: \(error)\n".utf8))
    exit(1)
}
