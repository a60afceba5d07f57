import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI

/// `handoff doctor`: says, in order, what keeps this device from seeing the others or
/// reaching them, and what to do.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Find out why a device is not seen or cannot be reached.",
        discussion: """
            Looks, in order, at: the agent; the account and its members; each interface (up, \
            addresses) and whether a beacon sent now comes back on it; whether each member is \
            heard and answers on its link port (a firewall that drops the port is told apart \
            from a device that is down); beacons of another account; the clocks; the static \
            peers. Exits with 0 when it found nothing that keeps devices apart (warnings \
            aside), 8 when it found a problem, 3 when no agent runs.
            """)

    @OptionGroup var connection: Connection
    @OptionGroup var output: Output

    func run() async throws {
        let client: LocalClient
        do {
            client = try LocalClient(path: connection.path, role: .control)
        } catch {
            let check = LocalCheck(
                area: "agent", status: .problem, finding: error.message,
                advice: "start it: 'systemctl --user start handoffd', or 'handoffd &'")
            report([check])
            throw ExitCode(Exit.noAgent)
        }
        defer { client.close() }
        let status = await call(client, .status).status
        var checks = [LocalCheck(
            area: "agent", status: .ok,
            finding: "handoffd \(status?.version ?? "?") runs at \(connection.path), links on port \(status.map { String($0.linkPort) } ?? "?")")]
        checks += await call(client, .doctor).checks ?? []
        report(checks)
        if checks.contains(where: { $0.status == .problem }) { throw ExitCode(Exit.problemsFound) }
    }

    private func report(_ checks: [LocalCheck]) {
        if output.json { return printJSON(checks) }
        for check in checks {
            let mark = switch check.status {
            case .ok: "ok     "
            case .warning: "warning"
            case .problem: "PROBLEM"
            }
            print("\(mark)  \(check.area)\(check.subject.map { " \($0)" } ?? ""): \(check.finding)")
            if let advice = check.advice { print("         → \(advice)") }
        }
    }
}
