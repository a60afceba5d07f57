import HandoffLocalSocket

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// What every form of the `handoff` command shares: its exit codes and how it reports an error
// (used by the full command line, `handoff-cli`, and by the quick front, `handoff`, which
// links no Foundation).

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
    printToStandardError("handoff: \(error)\n")
    exit(Exit.code(for: error))
}

/// Writes `text` to standard error as it is (no newline added).
public func printToStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return }
            offset += written
        }
    }
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
