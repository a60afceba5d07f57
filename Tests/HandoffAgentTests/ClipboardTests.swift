import Foundation
import HandoffProcess
import HandoffLocalAPI
import HandoffWire
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

/// What a paste on the local socket got: the reply, or the refusal; the bytes; and how it ended.
struct PasteResult: Sendable {
    var reply: LocalReply?
    var refusal: LocalError?
    var bytes: [UInt8] = []
    /// The last frame: an end (`E`), or a failure (`X`) with its reason.
    var last: Frame?

    var ended: Bool { last?.kind == LocalStreamFrame.end }
    var failure: String? { last?.kind == LocalStreamFrame.failed ? String(decoding: last!.payload, as: UTF8.self) : nil }
}

extension TestDevice {
    /// Copies `bytes` as `type` here, as `handoff copy` does; returns how the agent answered
    /// the end (an end, or a failure frame), or throws its refusal.
    func copy(_ bytes: [UInt8], as type: String = "text/plain;charset=utf-8") async throws -> Frame? {
        let socket = socket
        return try await onThread { () throws -> Frame? in
            let connection = try LocalStreamSocket.open(path: socket, call: .copy(version: LocalMessage.version, clipboardType: type))
            defer { connection.close() }
            var offset = 0
            repeat {
                let end = min(bytes.count, offset + LocalStreamFrame.maximumData)
                if end > offset { try? connection.write(kind: LocalStreamFrame.data, Array(bytes[offset..<end])) }
                offset = end
            } while offset < bytes.count
            try? connection.write(kind: LocalStreamFrame.end)
            return try connection.readFrame()
        }
    }

    /// Pastes here, as `handoff paste` does.
    func paste(_ type: String? = nil) async throws -> PasteResult {
        let socket = socket
        return try await onThread { () -> PasteResult in
            var result = PasteResult()
            let connection: LocalStreamSocket
            do throws(LocalError) {
                (connection, result.reply) = try LocalStreamSocket.opened(path: socket, call: .paste(version: LocalMessage.version, clipboardType: type))
            } catch {
                result.refusal = error
                return result
            }
            defer { connection.close() }
            while let frame = try connection.readFrame() {
                if frame.kind == LocalStreamFrame.data {
                    result.bytes += frame.payload
                } else {
                    result.last = frame
                    break
                }
            }
            return result
        }
    }

    func clipboard() async throws -> LocalClipboard? {
        try await call(.status).status?.clipboard
    }

    /// The files this device's agent keeps copies in.
    var clipboardFiles: [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: state.appendingPathComponent("clipboard").path)) ?? []
    }
}

@Suite("The account's clipboard")
struct ClipboardTests {
    static let text = "text/plain;charset=utf-8"

    @Test("Copied on one device, pasted on another: the other shows the type, the size and who copied it at once, and the bytes come from the copying device at the paste")
    func copyThenPaste() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            let words = Array("hello from alpha, ünïcode too".utf8)
            #expect(try await a.copy(words)?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let shown = try #require(try await b.clipboard())
            #expect(!shown.local)
            #expect(shown.types == [LocalClipboardType(name: Self.text, size: UInt64(words.count))])
            #expect(shown.expires.timeIntervalSinceNow > 100 && shown.expires.timeIntervalSinceNow <= 120)
            // Nothing has travelled yet: no link was opened for the offer.
            #expect(await b.agent?.links.isEmpty == true)
            let pasted = try await b.paste()
            #expect(pasted.refusal == nil, "\(String(describing: pasted.refusal))")
            #expect(pasted.reply?.pasting == LocalClipboardType(name: Self.text, size: UInt64(words.count)))
            #expect(pasted.bytes == words)
            #expect(pasted.ended)
            // A's own paste reads its copy; a picture of 3 MiB travels whole, in order.
            #expect(try await a.paste().bytes == words)
            var picture = [UInt8](repeating: 0, count: 3 << 20)
            for index in picture.indices { picture[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13) }
            #expect(try await a.copy(picture, as: "image/png")?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard())?.types.first?.name == "image/png" })
            let image = try await b.paste()
            #expect(image.reply?.pasting?.name == "image/png")
            #expect(image.bytes.count == picture.count)
            #expect(image.bytes == picture)
            #expect(image.ended)
            // The first copy's file went when the second replaced it.
            #expect(a.clipboardFiles.count == 1)
        }
    }

    @Test("The newest copy of the account wins on every device: a copy on beta replaces alpha's offer there, and gamma's later copy replaces both")
    func newestWins() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            let c = try await harness.start("gamma")
            try await harness.pair([a, b, c])
            #expect(try await a.copy(Array("from alpha".utf8))?.kind == LocalStreamFrame.end)
            #expect(await eventually {
                let one = (try? await b.clipboard())?.deviceName
                let other = (try? await c.clipboard())?.deviceName
                return one == "alpha" && other == "alpha"
            })
            #expect(try await b.copy(Array("from beta".utf8))?.kind == LocalStreamFrame.end)
            #expect(try await b.clipboard()?.local == true)
            #expect(await eventually {
                let one = (try? await a.clipboard())?.deviceName
                let other = (try? await c.clipboard())?.deviceName
                return one == "beta" && other == "beta"
            })
            #expect(try await c.paste().bytes == Array("from beta".utf8))
            #expect(try await c.copy(Array("from gamma".utf8))?.kind == LocalStreamFrame.end)
            #expect(await eventually {
                let one = (try? await a.clipboard())?.deviceName
                let other = (try? await b.clipboard())?.deviceName
                return one == "gamma" && other == "gamma"
            })
            #expect(try await a.paste().bytes == Array("from gamma".utf8))
            #expect(try await b.paste().bytes == Array("from gamma".utf8))
            // A device removed from the account offers nothing any more.
            try await a.call(.removeDevice(name: "gamma"))
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "beta" }, "beta still shows gamma's copy")
            #expect(try await b.paste().bytes == Array("from beta".utf8))
        }
    }

    @Test("A copy is offered for its lifetime, then nowhere: the other device shows nothing and a paste says why, and the copying device keeps no file")
    func expiry() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha") { $0.clipboardLifetime = .seconds(2) }
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            #expect(try await a.copy(Array("short-lived".utf8))?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard()) != nil })
            #expect(await eventually(within: .seconds(5)) {
                let onB = try? await b.clipboard()
                let onA = try? await a.clipboard()
                return onB == nil && onA == nil
            })
            let late = try await b.paste()
            #expect(late.refusal?.kind == .notFound)
            #expect(late.refusal?.message.contains("nothing to paste") == true, "\(String(describing: late.refusal))")
            #expect(await eventually { a.clipboardFiles.isEmpty })
        }
    }

    @Test("Refusals say why and leave nothing behind: a type that was not offered, a copy over the size limit, a clipboard turned off, a copy cut off before its end")
    func refusals() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha") { $0.clipboardSizeLimit = 1000 }
            let b = try await harness.start("beta") { $0.clipboard = false }
            try await harness.pair([a, b])
            // Over the limit: a failure frame, no offer, no file.
            let over = try await a.copy([UInt8](repeating: 7, count: 1500))
            #expect(over?.kind == LocalStreamFrame.failed)
            let reason = String(decoding: over?.payload ?? [], as: UTF8.self)
            #expect(reason.contains("size limit"), "\(reason)")
            #expect(try await a.clipboard() == nil)
            #expect(a.clipboardFiles.isEmpty)
            // A type that is not valid is refused before any byte.
            await #expect(throws: LocalError.self) { try await a.copy([1], as: "bad\ntype") }
            // A client that goes before its end offers nothing.
            let socket = a.socket
            try await onThread {
                let connection = try LocalStreamSocket.open(path: socket, call: .copy(version: LocalMessage.version, clipboardType: Self.text))
                try connection.write(kind: LocalStreamFrame.data, [1, 2, 3])
                connection.close()
            }
            // Long enough for the agent to have read the cut-off connection: no offer must follow it.
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await a.clipboard() == nil)
            #expect(await eventually { a.clipboardFiles.isEmpty })
            // A type not offered.
            #expect(try await a.copy(Array("words".utf8))?.kind == LocalStreamFrame.end)
            let wrong = try await a.paste("image/png")
            #expect(wrong.refusal?.kind == .notFound)
            #expect(wrong.refusal?.message.contains("'text/plain;charset=utf-8'") == true, "\(String(describing: wrong.refusal))")
            // Beta's clipboard is off: it shows and pastes nothing of alpha's, and copies nothing.
            // Beta has heard alpha's beacon with the offer (and ignores it).
            let discovery = try #require(await b.agent?.discovery)
            #expect(await eventually { await discovery.nearby.contains { $0.clipboard != nil } })
            let status = try #require(try await b.call(.status).status)
            #expect(status.clipboardOn == false)
            #expect(status.clipboard == nil)
            #expect(try await b.paste().refusal?.kind == .notAllowed)
            await #expect(throws: LocalError.self) { try await b.copy([1]) }
        }
    }

    @Test("The copying device's agent stopping in the middle of a paste fails the paste with a reason, never an end: nothing half-written is taken for the copy")
    func linkDropsMidPaste() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            let big = [UInt8](repeating: 0x42, count: 12 << 20)
            #expect(try await a.copy(big, as: "image/png")?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            // The paste begins, and its reader takes one chunk: the rest waits on the link's window.
            let socket = b.socket
            let connection = try await onThread { () throws -> LocalStreamSocket in
                let (connection, _) = try LocalStreamSocket.opened(path: socket, call: .paste(version: LocalMessage.version, clipboardType: nil))
                _ = try connection.readFrame()
                return connection
            }
            defer { connection.close() }
            await a.agent?.stop()
            let last = try await onThread { () throws -> Frame? in
                while let frame = try connection.readFrame() {
                    if frame.kind != LocalStreamFrame.data { return frame }
                }
                return nil
            }
            #expect(last?.kind == LocalStreamFrame.failed, "the paste ended with \(String(describing: last))")
        }
    }

    @Test("A copy larger than this device's clipboard size limit is not pasted here, nor offered here by a provider: the limit holds both ways")
    func sizeLimitOnPaste() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") { $0.clipboardSizeLimit = 100 }
            try await harness.pair([a, b])
            #expect(try await a.copy([UInt8](repeating: 1, count: 200))?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let refused = try await b.paste()
            #expect(refused.refusal?.kind == .notAllowed)
            #expect(refused.refusal?.message.contains("size limit") == true, "\(String(describing: refused.refusal))")
            let provider = try await ClipboardProvider(on: b, .ignore)
            #expect(try await provider.offer([Self.text: 101]).error?.kind == .notAllowed)
        }
    }

    @Test("An agent that stops while a paste waits for its provider ends that paste, without an end, rather than never")
    func stopEndsAWaitingPaste() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let silent = try await ClipboardProvider(on: a, .ignore)
            #expect(try await silent.offer([Self.text: 4]).error == nil)
            let socket = a.socket
            let connection = try await onThread { () throws -> LocalStreamSocket in
                try LocalStreamSocket.opened(path: socket, call: .paste(version: LocalMessage.version, clipboardType: nil)).socket
            }
            defer { connection.close() }
            #expect(await eventually { silent.asked.count == 1 })
            await a.agent?.stop()
            // Ended with the agent, without an end: the read returns (a failure, or the close).
            let last = try await onThread { () -> Frame? in try? connection.readFrame() }
            #expect(last?.kind != LocalStreamFrame.end)
        }
    }

    @Test("S14: A paste holds the other device to the size it offered: more bytes, or fewer before the end, fail the paste instead of ending it")
    func heldToTheOfferedSize() async throws {
        for (sent, offered) in [(10, 5), (3, 5)] {
            let pair = MuxPair { _, stream in
                stream.accept()
                // Begun here, ended when the bytes are written: what a misbehaving device sends.
                Task {
                    try? await stream.write([UInt8](repeating: 1, count: sent))
                    stream.finish()
                }
                return nil
            }
            let stream = try await pair.opener.open(.clipboard(generation: 1, type: Self.text), deadline: .seconds(5)).get()
            stream.finish()
            let frames = Mutex<[Frame]>([])
            await Agent.paste(from: stream, size: UInt64(offered), device: "alpha") { frame in frames.withLock { $0.append(frame) } }
            let last = try #require(frames.withLock { $0.last })
            #expect(last.kind == LocalStreamFrame.failed, "\(sent) bytes sent of \(offered) offered")
            #expect(!frames.withLock { $0 }.contains { $0.kind == LocalStreamFrame.end })
        }
    }

    @Test("A paste's link goes quiet after it: once its stream ended, the link stops watching with keepalive, so a link kept open an hour sends nothing from this side")
    func pasteLinkGoesQuiet() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            #expect(try await a.copy(Array("quiet after".utf8))?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let pasted = try await b.paste()
            #expect(pasted.ended, "\(String(describing: pasted.refusal))")
            let agent = try #require(b.agent)
            let link = try #require(await agent.links.values.first as? TLSLink, "beta kept no link after the paste")
            func keepalive() async -> Int? { try? await link.socket.getOption(.socketOption(.so_keepalive)).get() }
            // Off after the link's linger (2 s) of quiet, well before TCP's first probe (5 s).
            let quiet = await eventually(within: .seconds(4)) { await keepalive() == 0 }
            let now = await keepalive()
            #expect(quiet, "keepalive still \(String(describing: now))")
            #expect(link.isOpen)
        }
    }

    @Test("S14: Another device refuses a paste of a generation it replaced, or of a type it did not offer, and says why")
    func originRefuses() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            #expect(try await a.copy(Array("first".utf8))?.kind == LocalStreamFrame.end)
            let first = try #require(try await a.clipboard())
            #expect(try await a.copy(Array("second".utf8))?.kind == LocalStreamFrame.end)
            // Straight on a link, as a device that had not heard of the second copy yet would.
            let agent = try #require(b.agent)
            let discovery = try #require(await agent.discovery)
            let device = try #require(await discovery.nearby.first)
            let link = try await agent.openLink(to: device).get()
            let replaced = await link.openStream(.clipboard(generation: first.generation, type: Self.text), deadline: .seconds(5))
            guard case .failure(let why) = replaced else { Issue.record("a replaced copy was pasted"); return }
            #expect(why.message.contains("replaced"), "\(why.message)")
            let second = try #require(await a.clipboard())
            let notOffered = await link.openStream(.clipboard(generation: second.generation, type: "image/png"), deadline: .seconds(5))
            guard case .failure(let refusal) = notOffered else { Issue.record("a type not offered was pasted"); return }
            #expect(refusal.message.contains("did not offer type 'image/png'"), "\(refusal.message)")
        }
    }

    @Test("handoff copy and handoff paste, without any display: standard input on one device, standard output on the other (two hosts in namespaces as root)")
    func commandLine() async throws {
        let cli = try #require(builtExecutable("handoff-cli"), "handoff-cli was not built next to the tests")
        try await withHosts { devices, _ in
            let (a, b) = (devices[0], devices[1])
            let words = "a line from alpha's terminal\nand a second\n"
            let copied = try await runProcess(cli, ["copy", "--socket", a.socket], input: Array(words.utf8))
            #expect(copied.status == 0, "\(copied.error)")
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let pasted = try await runProcess(cli, ["paste", "--socket", b.socket], input: [])
            #expect(pasted.status == 0, "\(pasted.error)")
            #expect(String(decoding: pasted.output, as: UTF8.self) == words)
            let status = try await runProcess(cli, ["status", "--socket", b.socket], input: [])
            #expect(String(decoding: status.output, as: UTF8.self).contains("clipboard:  copied on 'alpha'"), "\(String(decoding: status.output, as: UTF8.self))")
            let missing = try await runProcess(cli, ["paste", "--type", "image/png", "--socket", b.socket], input: [])
            #expect(missing.status == 4)
            #expect(missing.output.isEmpty)
            #expect(missing.error.contains("no type 'image/png'"), "\(missing.error)")
        }
    }
}

/// Runs `executable` with `arguments`, `input` on its standard input; what it wrote and its status.
func runProcess(_ executable: URL, _ arguments: [String], input: [UInt8], environment: [String: String]? = nil) async throws -> (status: Int32, output: [UInt8], error: String) {
    try await onThread {
        let process = ChildProcess()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(Data(input))
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        let error = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, Array(output), String(decoding: error, as: UTF8.self))
    }
}

/// A session service as the agent sees one: it offers what was copied in the session, and sends
/// a type's bytes when asked, as `behaviour` says.
final class ClipboardProvider: Sendable {
    enum Behaviour: Sendable {
        /// Sends each type's bytes.
        case serve([String: [UInt8]])
        /// Answers `clipboardRefused`, as a service whose copying app did not answer does.
        case refuse(String)
        /// Never answers.
        case ignore
        /// Sends these bytes, whatever was offered.
        case send([UInt8])
    }

    let client: LocalClient
    let behaviour: Behaviour
    private let requests = Mutex<[String]>([])
    private let changes = Mutex<[LocalClipboard?]>([])

    /// The types asked for, in order.
    var asked: [String] { requests.withLock { $0 } }
    /// What `clipboardChanged` said, in order.
    var told: [LocalClipboard?] { changes.withLock { $0 } }

    init(on device: TestDevice, _ behaviour: Behaviour) async throws {
        self.behaviour = behaviour
        let socket = device.socket
        let holder = Mutex<ClipboardProvider?>(nil)
        client = try await LocalClient.connect(path: socket, role: .control) { message in
            holder.withLock { $0 }?.received(message, socket: socket)
        }
        holder.withLock { $0 = self }
    }

    func received(_ message: LocalMessage, socket: String) {
        switch message {
        case .clipboardChanged(let clipboard):
            changes.withLock { $0.append(clipboard) }
        case .clipboardRequest(let read, let type, _):
            requests.withLock { $0.append(type) }
            let bytes: [UInt8]
            switch behaviour {
            case .ignore: return
            case .refuse(let why):
                try? client.send(.clipboardRefused(read: read, error: LocalError(.failed, why)))
                return
            case .serve(let content): bytes = content[type] ?? []
            case .send(let sent): bytes = sent
            }
            // Sent from a thread of its own, as a service's transfer would be.
            Thread.detachNewThread {
                guard let connection = try? LocalStreamSocket.open(path: socket, call: .provideClipboard(version: LocalMessage.version, read: read)) else { return }
                if !bytes.isEmpty { try? connection.write(kind: LocalStreamFrame.data, bytes) }
                try? connection.write(kind: LocalStreamFrame.end)
                _ = try? connection.readFrame()
                connection.close()
            }
        default:
            break
        }
    }

    func offer(_ types: [String: Int]) async throws -> LocalReply {
        try await client.call(.offerClipboard(types: types.sorted { $0.key < $1.key }.map { LocalClipboardType(name: $0.key, size: UInt64($0.value)) }))
    }
}

@Suite("The clipboard of the person's session, through its provider")
struct ClipboardProviderTests {
    static let text = "text/plain;charset=utf-8"

    @Test("doctor says whether a session service gives the agent the desktop's clipboard, that it is off where it is, and what a Wayland or GNOME session lacks")
    func doctorSays() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") { $0.clipboard = false }
            try await harness.pair([a, b])
            func clipboardChecks(_ device: TestDevice) async throws -> [LocalCheck] {
                (try await device.call(.doctor).checks ?? []).filter { $0.area == "clipboard" && $0.subject == nil }
            }
            #expect(try await clipboardChecks(a).first?.status == .warning)
            #expect(try await clipboardChecks(a).first?.advice?.contains("handoff-session") == true)
            let watcher = try await ClipboardProvider(on: a, .ignore)
            _ = try await watcher.client.call(.watchClipboard(session: nil))
            #expect(try await clipboardChecks(a).first?.status == .ok)
            #expect(try await clipboardChecks(b).first?.finding.contains("off") == true)
            let agent = try #require(a.agent)
            let gnome = await agent.clipboardChecks(environment: ["WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "ubuntu:GNOME"])
            #expect(gnome.contains { $0.subject == "wayland" && $0.finding.contains("GNOME offers no data-control protocol") })
            let x11 = await agent.clipboardChecks(environment: ["DISPLAY": ":0"])
            #expect(!x11.contains { $0.subject == "wayland" })
            // A service names the clipboard it serves; one serving Wayland's answers the GNOME
            // question (a GNOME that gains the protocol).
            let wayland = try await ClipboardProvider(on: a, .ignore)
            _ = try await wayland.client.call(.watchClipboard(session: "Wayland wayland-1, ext_data_control_manager_v1"))
            let served = await agent.clipboardChecks(environment: ["WAYLAND_DISPLAY": "wayland-1", "XDG_CURRENT_DESKTOP": "GNOME"])
            #expect(served.contains { $0.subject == "Wayland wayland-1, ext_data_control_manager_v1" && $0.status == .ok })
            #expect(!served.contains { $0.subject == "wayland" })
            // A name that is not one line is refused, and the service is not taken for a watcher.
            let bad = try await ClipboardProvider(on: a, .ignore)
            for name in ["", "two\nlines", String(repeating: "x", count: 201)] {
                #expect(try await bad.client.call(.watchClipboard(session: name)).error?.kind == .badRequest)
            }
        }
    }

    @Test("What the session service offers is shown on the other device with its types, and a paste there asks the service for that one type, then")
    func providedThenPasted() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            let html = Array("<p>hello <b>beta</b></p>".utf8)
            let words = Array("hello beta".utf8)
            let provider = try await ClipboardProvider(on: a, .serve([Self.text: words, "text/html": html]))
            let watcher = try await ClipboardProvider(on: b, .ignore)
            #expect(try await watcher.client.call(.watchClipboard(session: nil)).clipboard == nil)
            let offered = try await provider.offer([Self.text: words.count, "text/html": html.count])
            #expect(offered.error == nil, "\(String(describing: offered.error))")
            #expect(await eventually { watcher.told.last??.deviceName == "alpha" }, "beta's watcher was told \(watcher.told)")
            #expect(provider.asked.isEmpty, "nothing is read before a paste")
            let pasted = try await b.paste("text/html")
            #expect(pasted.bytes == html)
            #expect(pasted.ended)
            #expect(provider.asked == ["text/html"])
            // On the copying device itself, the same provider answers.
            #expect(try await a.paste().bytes == words)
            #expect(provider.asked == ["text/html", Self.text])
            // The service goes (the session ended): the copy is offered no more.
            provider.client.close()
            #expect(await eventually { watcher.told.last == .some(nil) }, "beta's watcher was told \(watcher.told)")
            #expect(try await b.paste().refusal?.kind == .notFound)
        }
    }

    @Test("A provider that does not answer fails the paste within its deadline, one that refuses at once, and one that sends more than it offered fails it too: nothing is written, nothing hangs")
    func providerFaults() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta")
            try await harness.pair([a, b])
            let silent = try await ClipboardProvider(on: a, .ignore)
            #expect(try await silent.offer([Self.text: 4]).error == nil)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let started = ContinuousClock.now
            let unanswered = try await b.paste()
            // Its deadline (Agent.providerDeadline), with room for a machine busy with the whole suite (4.8 s seen).
            #expect(ContinuousClock.now - started < .seconds(10))
            #expect(!unanswered.ended)
            #expect(unanswered.bytes.isEmpty)
            #expect(unanswered.failure?.contains("did not answer within") == true, "\(String(describing: unanswered.failure))")

            let refusing = try await ClipboardProvider(on: a, .refuse("the copying app did not answer within 1 s"))
            #expect(try await refusing.offer([Self.text: 4]).error == nil)
            #expect(await eventually { (try? await b.clipboard())?.generation != nil && refusing.asked.isEmpty })
            try #require(await eventually { (try? await b.clipboard())?.generation == (try? await a.clipboard())?.generation })
            let refused = try await b.paste()
            #expect(refused.failure?.contains("the copying app did not answer within 1 s") == true, "\(String(describing: refused.failure))")

            let lying = try await ClipboardProvider(on: a, .send(Array("far more than four".utf8)))
            #expect(try await lying.offer([Self.text: 4]).error == nil)
            try #require(await eventually { (try? await b.clipboard())?.generation == (try? await a.clipboard())?.generation })
            let tooMuch = try await b.paste()
            #expect(!tooMuch.ended)
            #expect(tooMuch.failure != nil)
            // A type name that is not valid, or offered twice, is refused.
            #expect(try await lying.client.call(.offerClipboard(types: [LocalClipboardType(name: "a\tb", size: 1)])).error?.kind == .badRequest)
            #expect(try await lying.client.call(.offerClipboard(types: [LocalClipboardType(name: "x/y", size: 1), LocalClipboardType(name: "x/y", size: 2)])).error?.kind == .badRequest)
        }
    }
}
