import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

struct Connection: ParsableArguments {
    @Option(help: ArgumentHelp("The agent's socket (default $HANDOFF_SOCKET, else $XDG_RUNTIME_DIR/handoff/agent.sock).", valueName: "PATH"))
    var socket: String?

    var path: String { socket ?? LocalSocket.defaultPath() }

    /// Connects as the person's tool, or exits with a message and code 3 when no agent runs.
    func connect(onMessage: @escaping @Sendable (LocalMessage) -> Void = { _ in }) throws -> LocalClient {
        do {
            return try LocalClient(path: path, role: .control, onMessage: onMessage)
        } catch {
            fail(error)
        }
    }
}
