import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI

struct Copy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Offer standard input as the clipboard to the account's nearby devices.",
        discussion: withExamples(
            """
            The devices learn the type and the size; the bytes stay here until a device pastes them, for as long as \
            the agent offers a copy (2 minutes by default, --clipboard-expiry).
            """,
            [
                ("echo hello | handoff copy", "Offer the text 'hello' to the account's devices."),
                ("handoff copy --type image/png < shot.png", "Offer a picture."),
            ]))
    @OptionGroup var connection: Connection
    @Option(name: .customLong("type"), help: ArgumentHelp("The type to offer the bytes as.", valueName: "MIME-TYPE"))
    var type = "text/plain;charset=utf-8"

    func run() async throws {
        let socket: LocalStreamSocket
        do {
            socket = try LocalStreamSocket.open(path: connection.path, call: .copy(version: LocalMessage.version, clipboardType: type))
        } catch {
            fail(error)
        }
        defer { socket.close() }
        // The bytes as they come; the agent refuses more than its size limit.
        var buffer = [UInt8](repeating: 0, count: LocalStreamFrame.maximumData)
        do throws(LocalError) {
            while true {
                let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                if count < 0 {
                    if errno == EINTR { continue }
                    fail(LocalError(.failed, "cannot read standard input: \(String(cString: strerror(errno)))"))
                }
                if count == 0 { break }
                try socket.write(kind: LocalStreamFrame.data, Array(buffer[0..<count]))
            }
            try socket.write(kind: LocalStreamFrame.end)
            guard let answer = try socket.readFrame() else { fail(LocalError(.failed, "the agent closed the connection before the copy was offered")) }
            switch answer.kind {
            case LocalStreamFrame.end: return
            case LocalStreamFrame.failed: fail(LocalError(.failed, String(decoding: answer.payload, as: UTF8.self)))
            default: fail(LocalError(.failed, "the agent answered the copy with a frame of kind \(answer.kind)"))
            }
        } catch {
            // A refusal mid-copy (over the size limit) comes as a failure frame: say it, not the broken pipe.
            if let frame = try? socket.readFrame(), frame.kind == LocalStreamFrame.failed {
                fail(LocalError(.failed, String(decoding: frame.payload, as: UTF8.self)))
            }
            fail(error)
        }
    }
}

struct Paste: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "paste",
        abstract: "Write the newest clipboard offered in the account to standard output.",
        discussion: withExamples(
            "The bytes come from the device that copied them, now. Nothing is written unless all of them arrived.",
            [
                ("handoff paste > note.txt", "Write the newest clipboard to a file."),
                ("handoff paste --type image/png > shot.png", "Write it as a picture, if it was offered as one."),
            ]))
    @OptionGroup var connection: Connection
    @Option(name: .customLong("type"), help: ArgumentHelp("The type to paste (default: the first text type offered, else the first type).", valueName: "MIME-TYPE"))
    var type: String?

    func run() async throws {
        let socket: LocalStreamSocket
        let reply: LocalReply
        do {
            (socket, reply) = try LocalStreamSocket.opened(path: connection.path, call: .paste(version: LocalMessage.version, clipboardType: type))
        } catch {
            fail(error)
        }
        defer { socket.close() }
        let expected = reply.pasting?.size ?? 0
        // Held until the end frame: a paste that fails half-way writes nothing.
        var received: [UInt8] = []
        received.reserveCapacity(Int(min(expected, 64 << 20)))
        do throws(LocalError) {
            while let frame = try socket.readFrame() {
                switch frame.kind {
                case LocalStreamFrame.data:
                    received.append(contentsOf: frame.payload)
                case LocalStreamFrame.end:
                    var written = 0
                    while written < received.count {
                        let count = received.withUnsafeBytes { write(1, $0.baseAddress! + written, $0.count - written) }
                        if count < 0 {
                            if errno == EINTR { continue }
                            fail(LocalError(.failed, "cannot write standard output: \(String(cString: strerror(errno)))"))
                        }
                        written += count
                    }
                    return
                case LocalStreamFrame.failed:
                    fail(LocalError(.continuation, String(decoding: frame.payload, as: UTF8.self)))
                default:
                    continue
                }
            }
            fail(LocalError(.failed, "the agent closed the connection before the paste ended"))
        } catch {
            fail(error)
        }
    }
}
