import ArgumentParser
import Foundation
import HandoffCommandLine
import HandoffLocalAPI
import HandoffWire

struct Join: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join", abstract: "Join the account of another device with the code 'handoff device invite' printed there.",
        discussion: withExamples(
            """
            Without CODE, asks for it on the terminal. A token (from 'handoff device invite --token') joins \
            with nobody's confirmation, so it is never taken on the command line, which every user of this \
            machine can read ('ps'): give it on standard input ('handoff join -') or in a file that only \
            you can read (--file).
            """,
            [
                ("handoff join", "Type the code the other device printed; compare the number both show, and confirm there."),
                ("handoff join 6Q0A-G08M-0K8G-R6RD-AH6K-8XGN", "The same, with the typed code on the command line."),
                ("printf '%s\\n' \"$token\" | handoff join -", "Join with a token from a script, on standard input."),
                ("handoff join --file ~/handoff-token", "Join with a token kept in a file of mode 600."),
            ]))
    @OptionGroup var connection: Connection
    @Argument(help: "A typed invitation code, or - to read a code or token from standard input. Without it, it is asked for.")
    var code: String?
    @Option(help: ArgumentHelp("Read the code or token from FILE, which only you may read.", valueName: "FILE")) var file: String?

    func run() async throws {
        let code = try invitationCode()
        let client = try connection.connect()
        let started = await call(client, .join(code: code))
        if let verification = started.verification {
            print("Verification number: \(verification)")
            print("Check that the inviting device shows the same number, and confirm there. Waiting...")
            fflush(nil)
        }
        guard let account = await call(client, .awaitJoinResult).account else { return }
        print("Joined the account '\(account)'. 'handoff devices' lists its members.")
    }

    /// The code, from wherever it was given; a token is refused on the command line before it
    /// goes anywhere, and a file other users can read is refused as ssh refuses such a key.
    func invitationCode() throws -> String {
        if let file {
            guard code == nil else { throw ValidationError("give the code once: as CODE, as - on standard input, or with --file") }
            return try Self.read(file: file)
        }
        switch code {
        case "-":
            guard let line = readLine(strippingNewline: true), !line.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ValidationError("standard input held no code: pass the code or token on its first line")
            }
            return line
        case nil:
            guard isatty(0) == 1 else {
                throw ValidationError("no code given: run 'handoff join' at a terminal to type it, or pass it on standard input ('handoff join -') or with --file FILE")
            }
            print("Invitation code (from 'handoff device invite' on the other device): ", terminator: "")
            fflush(nil)
            guard let line = readLine(strippingNewline: true), !line.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw ValidationError("no code typed")
            }
            return line
        case let code?:
            if InvitationCodeKind(code: code) == .token {
                throw ValidationError(
                    """
                    a token is not taken on the command line: every user of this machine can read a command line \
                    ('ps'), and a token joins without anyone's confirmation, so treat this one as seen by others. Make \
                    a new one ('handoff device invite --token') and pass it on standard input ('handoff join -') or \
                    with --file FILE
                    """)
            }
            return code
        }
    }

    /// The first line of `file`, which must not be readable by other users.
    static func read(file: String) throws -> String {
        var info = stat()
        guard stat(file, &info) == 0 else {
            throw ValidationError("--file: cannot read '\(file)': \(String(cString: strerror(errno)))")
        }
        // A regular file keeps the secret after this; a pipe (`<(…)`, /dev/stdin) does not.
        if info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 {
            throw ValidationError(
                "--file: '\(file)' can be read by other users of this machine (mode \(String(info.st_mode & 0o777, radix: 8))): 'chmod 600 \(file)', and make a new code, as others may have read this one")
        }
        guard let handle = FileHandle(forReadingAtPath: file) else {
            throw ValidationError("--file: cannot read '\(file)': \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: 4096)) ?? Data()
        guard let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first,
            !line.trimmingCharacters(in: .whitespaces).isEmpty
        else {
            throw ValidationError("--file: '\(file)' holds no code: put the code or token on its first line")
        }
        return String(line)
    }
}
