import Foundation
import HandoffLocalAPI

// What every form of the `handoff` command shares: its exit codes, how it reports an error and
// prints JSON, and what it prints for a continuation (used by the full command line,
// `handoff-cli`, and by the quick front, `handoff`).

/// Exit codes scripts can rely on (docs/agent.md's table).
public enum Exit {
    public static let failed: Int32 = 1
    public static let noAgent: Int32 = 3
    public static let notFound: Int32 = 4
    public static let continuationFailed: Int32 = 5
    public static let notAllowed: Int32 = 6
    public static let account: Int32 = 7
    /// `doctor` found something that keeps devices apart.
    public static let problemsFound: Int32 = 8
}

/// Prints the error and exits with the code its kind maps to.
public func fail(_ error: LocalError) -> Never {
    FileHandle.standardError.write(Data("handoff: \(error)\n".utf8))
    exit(Exit.code(for: error))
}

extension Exit {
    /// The exit code for an error the agent (or the connection to it) gave: docs/agent.md's table.
    public static func code(for error: LocalError) -> Int32 {
        switch error.kind {
        case .notFound where error.message.contains("no Handoff agent"): noAgent
        case .notFound: notFound
        case .continuation: continuationFailed
        case .notAllowed: notAllowed
        case .account: account
        default: failed
        }
    }
}

public func printJSON(_ value: some Encodable) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .secondsSince1970
    let data = (try? encoder.encode(value)) ?? Data("null".utf8)
    print(String(decoding: data, as: UTF8.self))
}

/// What `handoff continue` prints.
public enum ContinueReport {
    /// Prints what the agent continued, or ends the program with the refusal's exit code.
    public static func print(_ reply: LocalReply, json: Bool) {
        if let error = reply.error { fail(error) }
        guard let continued = reply.continued else {
            fail(LocalError(.failed, "the agent did not say what it continued"))
        }
        if json { return printJSON(continued) }
        let what = continued.activity.title ?? continued.activity.activityType
        if let app = continued.app {
            Swift.print("Continued \"\(what)\" from \(continued.device) in \(app) (\(Int(continued.seconds * 1000)) ms).")
        } else if let page = continued.webpageURL {
            Swift.print("Opened \(page) (\"\(what)\" from \(continued.device)) in the web browser.")
        }
    }
}
