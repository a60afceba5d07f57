import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI
import Testing

@testable import handoff_cli

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

/// `handoff continue` in its plain forms skips the argument parser (`QuickContinue`); every
/// other form must reach the parser, which says what is wrong.
@Suite("handoff continue's quick path")
struct QuickContinueTests {
    static let id = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"

    @Test("Takes an id or --latest, with --json and --socket in any order")
    func plainForms() throws {
        let id = try #require(UUID(uuidString: Self.id))
        let cases: [([String], UUID?, Bool, String?)] = [
            (["continue", Self.id], id, false, nil),
            (["continue", Self.id.lowercased()], id, false, nil),
            (["continue", "--latest"], nil, false, nil),
            (["continue", "--json", "--latest", "--socket", "/s"], nil, true, "/s"),
            (["continue", "--socket=/s", Self.id, "--json"], id, true, "/s"),
            (["continue", "--socket", "/s", Self.id], id, false, "/s"),
        ]
        for (arguments, activity, json, socket) in cases {
            let quick = try #require(QuickContinue(arguments: arguments), "\(arguments)")
            #expect(quick.activity == activity && quick.json == json && quick.socket == socket, "\(arguments)")
        }
    }

    @Test("Leaves everything else to the argument parser")
    func restToTheParser() {
        let others: [[String]] = [
            [], ["status"], ["continue"], ["continue", "not-an-id"], ["continue", Self.id, "--latest"], ["continue", "--latest", "--latest"],
            ["continue", Self.id, Self.id], ["continue", "--help"], ["continue", "-h", Self.id], ["continue", "--latest", "--socket"],
            ["continue", "--latest", "--socket", "--json"], ["continue", "--latest", "--socket", "/a", "--socket", "/b"],
            ["continue", "--latest", "--json", "--json"], ["continue", "--", Self.id], ["continue", "--latest", "extra"],
            ["list", "continue", "--latest"], ["--socket", "/s", "continue", "--latest"],
        ]
        for arguments in others {
            #expect(QuickContinue(arguments: arguments) == nil, "\(arguments)")
        }
    }
}
