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
        discussion: withExamples(
            """
            Looks, in order, at: the agent; the account and its members; each interface (up, \
            addresses) and whether a beacon sent now comes back on it; whether each member is \
            heard and answers on its link port (a firewall that drops the port is told apart \
            from a device that is down); beacons of another account; the clocks; the static \
            peers. Exits with 0 when it found nothing that keeps devices apart (warnings \
            aside), 8 when it found a problem, 3 when no agent runs.

            With --site HOST it fetches that web site's apple-app-site-association file now, \
            as the agent reads it, and prints what each app may do there: continue the \
            site's pages, open which of its addresses (universal links), use its passwords, \
            be its app clip; with --url, whether that address opens in each. Exits with 8 \
            when the site has no file that can be used.
            """,
            [
                ("handoff doctor", "Check this device, its network and the account's other devices."),
                ("handoff doctor --site example.com --url https://example.com/maps/1", "What example.com's association file lets each app do, and whether that address opens in one."),
            ]))

    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Option(help: ArgumentHelp("A web site whose association file to read and explain, such as example.com.", valueName: "HOST")) var site: String?
    @Option(help: ArgumentHelp("With --site: an address on the site, to say which apps it opens in.", valueName: "URL")) var url: String?

    func validate() throws {
        if url != nil, site == nil { throw ValidationError("--url goes with --site") }
    }

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
        if let site {
            let reply = await call(client, .siteAssociation(host: site, url: url))
            guard let report = reply.siteAssociation else { return }
            if output.json {
                printJSON(report)
            } else {
                describe(report)
            }
            if report.error != nil { throw ExitCode(Exit.problemsFound) }
            return
        }
        let status = await call(client, .status).status
        var checks = [LocalCheck(
            area: "agent", status: .ok,
            finding: "handoffd \(status?.version ?? "?") runs at \(connection.path), links on port \(status.map { String($0.linkPort) } ?? "?")")]
        checks += await call(client, .doctor).checks ?? []
        report(checks)
        if checks.contains(where: { $0.status == .problem }) { throw ExitCode(Exit.problemsFound) }
    }

    private func describe(_ report: LocalSiteAssociation) {
        if let error = report.error {
            print("PROBLEM  site \(report.site): \(error)")
            print("         → its pages open in the browser; serve the file over HTTPS at /.well-known/apple-app-site-association with a certificate this device trusts")
        } else {
            print("ok       site \(report.site): read \(report.source ?? "?") (\(report.signed == true ? "signed, signature verified" : "JSON"))")
        }
        for problem in report.problems { print("warning  left out: \(problem)") }
        if report.apps.isEmpty { print("         no app is named in the file, and none installed here claims the site") }
        for app in report.apps {
            print("\n\(app.applicationIdentifier) (\(app.installed ? "installed here" : "not installed here"))")
            if !app.claims.isEmpty { print("  claims: \(app.claims.joined(separator: ", "))") }
            let pages: String
            if app.continuesPages {
                pages = "yes"
            } else if app.activityContinuation {
                pages = app.installed ? "no: listed, but the app does not claim activitycontinuation:\(report.site)" : "listed (not installed here)"
            } else {
                pages = app.claims.contains { $0.hasPrefix("activitycontinuation:") } ? "no: the app claims the site, but the file does not list it" : "no"
            }
            print("  continue the site's pages: \(pages)")
            print("  universal links: \(app.appLinks.isEmpty ? "none" : app.appLinks.joined(separator: ", "))")
            if let opens = app.opensURL { print("  opens \(url ?? "the address"): \(opens ? "yes" : "no")") }
            print("  passwords (webcredentials): \(app.webCredentials ? "yes" : "no")")
            print("  app clip: \(app.appClip ? "yes" : "no")")
        }
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
