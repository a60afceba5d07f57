import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Probe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Try a link to another device: is its port open, and does it accept this device?",
        discussion: withExamples([
                ("handoff probe 192.168.1.20:47170", "Connect to that device's link port and say what answered."),
            ]))
    @OptionGroup var connection: Connection
    @OptionGroup var output: Output
    @Argument(help: ArgumentHelp("The other device's link address.", valueName: "HOST:PORT")) var address: String

    func run() async throws {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]), (1...65_535).contains(port) else {
            throw ValidationError("'\(address)' is not HOST:PORT")
        }
        let host = String(address[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let client = try connection.connect()
        guard let probe = await call(client, .probe(host: host, port: port)).probe else { return }
        if output.json { return printJSON(probe) }
        print(probe.message)
        if !probe.member { throw ExitCode(probe.reachable ? Exit.notAllowed : Exit.notFound) }
    }
}
