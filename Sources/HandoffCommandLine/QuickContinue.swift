import Foundation
import HandoffLocalAPI

/// `handoff continue` in its plain forms (an id or `--latest`, with `--json` and `--socket`
/// in any order), run without the argument parser, Foundation's JSON or a thread: a command
/// typed or scripted to continue an activity should cost little more than the continuation
/// (docs/agent.md, Performance). Anything else, help and every mistake included, goes to the
/// argument parser, which says what is wrong as it always has.
public struct QuickContinue: Sendable {
    public let activity: UUID?
    public let json: Bool
    public let socket: String?

    /// Nil unless `arguments` (without the program's name) are exactly a plain `continue`.
    public init?(arguments: [String]) {
        guard arguments.first == "continue" else { return nil }
        var id: UUID?, latest = false, json = false, socket: String?
        var rest = arguments.dropFirst()
        while let argument = rest.popFirst() {
            switch argument {
            case "--latest" where !latest: latest = true
            case "--json" where !json: json = true
            case "--socket" where socket == nil:
                // A value that looks like an option is the parser's to judge.
                guard let value = rest.popFirst(), !value.hasPrefix("-") else { return nil }
                socket = value
            default:
                if argument.hasPrefix("--socket="), socket == nil {
                    socket = String(argument.dropFirst("--socket=".count))
                } else if id == nil, !argument.hasPrefix("-"), let parsed = UUID(uuidString: argument) {
                    id = parsed
                } else {
                    return nil
                }
            }
        }
        // Exactly one of an id and --latest, as `Continue.validate` asks.
        guard (id == nil) == latest else { return nil }
        activity = id
        self.json = json
        self.socket = socket
    }

    /// Continues the activity, prints what `handoff continue` prints, and exits.
    public func run() -> Never {
        do {
            let reply = try LocalClient.callOnce(path: socket ?? LocalSocket.defaultPath(), .continue(activity: activity))
            ContinueReport.print(reply, json: json)
        } catch {
            fail(error)
        }
        exit(0)
    }
}
