import ArgumentParser
import HandoffLocalAPI
import Testing

@testable import handoff

/// The exit code each kind of error gives, including the one the process tests cannot reach
/// with a single agent (5, a continuation that failed).
@Suite("handoff's exit codes")
struct ExitCodeTests {
    @Test("Each kind of error maps to docs/agent.md's code: 3, 4, 5, 6, 7, else 1")
    func mapping() {
        #expect(Exit.code(for: LocalError(.notFound, "no Handoff agent is running at /tmp/x.sock")) == 3)
        #expect(Exit.code(for: LocalError(.notFound, "activity 1 is not offered by any device nearby")) == 4)
        #expect(Exit.code(for: LocalError(.continuation, code: 4609, "the device cannot be reached")) == 5)
        #expect(Exit.code(for: LocalError(.notAllowed, "this device cannot remove itself")) == 6)
        #expect(Exit.code(for: LocalError(.account, "no account yet")) == 7)
        #expect(Exit.code(for: LocalError(.failed, "anything else")) == 1)
    }
}

/// `handoff` starts on every call from a terminal or script, so what it does before its work
/// counts (docs/agent.md, Performance: `handoff continue` spawn to exit).
@Suite("handoff's start")
struct CommandStartTests {
    /// Every command in the tree, with the name it is typed as.
    static func commands(_ command: any ParsableCommand.Type, path: String = "") -> [(String, any ParsableCommand.Type)] {
        let name = command.configuration.commandName ?? "(\(command))"
        let here = path.isEmpty ? name : "\(path) \(name)"
        return [(here, command)] + command.configuration.subcommands.flatMap { commands($0, path: here) }
    }

    @Test("Every command names itself: with no name, parsing derives one from the type by reflection, which searches every protocol conformance in the binary, about 2.5 ms of each start")
    func namedCommands() {
        let unnamed = Self.commands(HandoffCommand.self).filter { $0.1.configuration.commandName == nil }.map(\.0)
        #expect(unnamed.isEmpty, "commands without commandName: \(unnamed)")
        #expect(Self.commands(HandoffCommand.self).count >= 20)
    }
}
