import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Output: ParsableArguments {
    @Flag(help: "Print JSON instead of text.")
    var json = false
}

/// Calls the agent; a refusal ends the program with its exit code.
func call(_ client: LocalClient, _ call: LocalCall) async -> LocalReply {
    let reply: LocalReply
    do {
        reply = try await client.call(call)
    } catch {
        fail(error)
    }
    if let error = reply.error { fail(error) }
    return reply
}

func age(_ seconds: Double) -> String {
    switch seconds {
    case ..<1: return "now"
    case ..<60: return "\(Int(seconds))s ago"
    case ..<3600: return "\(Int(seconds / 60))m ago"
    default: return "\(Int(seconds / 3600))h ago"
    }
}

/// Lays out rows in columns.
func table(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
    for row in all {
        print(row.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
    }
}

/// Prints `value` as the commands' `--json` output: indented, keys sorted, dates as seconds
/// since 1970 (`handoff continue`'s report is indented the same way, by `JSONIndent`).
func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .secondsSince1970
    let data = (try? encoder.encode(value)) ?? Data("null".utf8)
    print(String(decoding: data, as: UTF8.self))
}
