import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI
import Testing

@testable import HandoffCLI
@testable import HandoffDaemon

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

    @Test("Every command's help and manual page end with examples: each of handoff's commands and handoffd")
    func everyCommandHasExamples() {
        let commands = Self.commands(HandoffCommand.self) + [("handoffd", Handoffd.self as any ParsableCommand.Type)]
        let without = commands.filter { !$0.1.configuration.discussion.contains("Examples:\n  $ ") }.map(\.0)
        #expect(without.isEmpty, "commands without examples: \(without)")
        #expect(commands.count >= 29)
    }
}

/// `handoff continue` in its plain forms skips the argument parser (`QuickContinue`); every
/// other form must reach the parser, which says what is wrong.
@Suite("handoff continue's quick path")
struct QuickContinueTests {
    static let id = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"

    @Test("Takes an id or --latest, with --json and --socket in any order")
    func plainForms() throws {
        let id = Self.id
        let cases: [([String], String?, Bool, String?)] = [
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

/// The front finds `handoff-cli` without Foundation; its paths must be Foundation's.
@Suite("handoff's front, without Foundation")
struct FrontTests {
    @Test("A path's folder is what Foundation's deletingLastPathComponent gives")
    func parentFolders() {
        let paths = [
            "/usr/bin/handoff", "handoff", "/handoff", "bin/handoff", "/a/b/", "/", "", "//a//b", "./handoff", "../x/y", "a//b/c//", "/a/b/c",
        ]
        for path in paths {
            #expect(FullCommandLine.parent(of: path) == (path as NSString).deletingLastPathComponent, "\(path)")
        }
        // Foundation traps on this one (Swift 6.3.1, Linux); no program is called so.
        #expect(FullCommandLine.parent(of: "a/") == "")
        #expect(
            FullCommandLine.candidates(called: "/home/ada/.local/bin/handoff", executable: "/opt/handoff/bin/handoff", path: "/usr/bin::/bin")
                == [
                    "/home/ada/.local/bin/handoff-cli", "/opt/handoff/bin/handoff-cli", "/home/ada/.local/libexec/handoff/handoff-cli",
                    "/opt/handoff/libexec/handoff/handoff-cli", "/usr/bin/handoff-cli", "/bin/handoff-cli",
                ])
    }

    @Test("The built handoff links neither Foundation nor the argument parser: their start-up is most of a command's time (docs/agent.md, Performance)")
    func linksNoFoundation() throws {
        let front = try #require(builtExecutable("handoff"))
        let bytes = try Data(contentsOf: front)
        for library in ["libFoundation", "ArgumentParser"] {
            #expect(bytes.range(of: Data(library.utf8)) == nil, "handoff holds \(library)")
        }
        // The check can fail: the full command line holds both.
        let full = try Data(contentsOf: try #require(builtExecutable("handoff-cli")))
        #expect(full.range(of: Data("libFoundation".utf8)) != nil && full.range(of: Data("ArgumentParser".utf8)) != nil)
    }
}
