import CHandoffX11
import Foundation
import HandoffLocalAPI
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

/// A headless X server of a test's own (Xvfb), with the clipboard service of one device on it,
/// and xclip as the apps that copy and paste.
final class XSession: Sendable {
    let display: String
    let server: Process
    let service: Process
    let log: URL
    private let apps = Mutex<[Process]>([])

    static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/Xvfb") && FileManager.default.isExecutableFile(atPath: "/usr/bin/xclip")
    }

    init(for device: TestDevice, service executable: URL) async throws {
        // A display number no other X server here uses.
        var number = Int.random(in: 200..<900)
        while FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") { number = Int.random(in: 200..<900) }
        display = ":\(number)"
        server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        server.arguments = [display, "-nolisten", "tcp", "-screen", "0", "320x240x24"]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        let socket = "/tmp/.X11-unix/X\(number)"
        try #require(await eventually { FileManager.default.fileExists(atPath: socket) }, "Xvfb did not start on \(display)")
        log = device.state.appendingPathComponent("clipboard-service.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        service = Process()
        service.executableURL = executable
        service.arguments = ["--socket", device.socket, "--display", display, "--verbose"]
        service.standardError = try FileHandle(forWritingTo: log)
        try service.run()
        try #require(await eventually { self.logText.contains("watching the clipboard") }, "the clipboard service did not start: \(logText)")
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// An app copies `bytes` as `type`, and stays the clipboard's owner (as xclip does).
    @discardableResult
    func copy(_ bytes: [UInt8], type: String? = nil) throws -> Process {
        let app = Process()
        app.executableURL = URL(fileURLWithPath: "/usr/bin/xclip")
        app.arguments = ["-selection", "clipboard", "-i", "-quiet", "-display", display] + (type.map { ["-t", $0] } ?? [])
        let input = Pipe()
        app.standardInput = input
        app.standardOutput = FileHandle.nullDevice
        app.standardError = FileHandle.nullDevice
        try app.run()
        apps.withLock { $0.append(app) }
        input.fileHandleForWriting.write(Data(bytes))
        try input.fileHandleForWriting.close()
        return app
    }

    /// An app pastes the clipboard as `type`: what it got, and xclip's status.
    func paste(type: String) async throws -> (status: Int32, bytes: [UInt8]) {
        let result = try await runProcess(URL(fileURLWithPath: "/usr/bin/xclip"), ["-selection", "clipboard", "-o", "-t", type, "-display", display], input: [])
        return (result.status, result.output)
    }

    /// Ends the apps, the service and the server: killed (a process Foundation starts from a
    /// test inherits the test's blocked SIGTERM), not waited for here (Foundation reaps them),
    /// so that a test that failed half-way still cleans up from a `defer`.
    func stop() {
        for app in apps.withLock({ $0 }) where app.isRunning { kill(app.processIdentifier, SIGKILL) }
        for process in [service, server] where process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Two paired agents, alpha and beta, each with an X server and its clipboard service; skipped,
/// saying so, where Xvfb and xclip are not installed.
func withXSessions(_ body: (TestDevice, TestDevice, XSession, XSession) async throws -> Void) async throws {
    guard XSession.available else {
        print("skipped: Xvfb and xclip are not installed (.ci/run installs them)")
        return
    }
    let executable = try #require(builtExecutable("handoff-clipboard"), "handoff-clipboard was not built next to the tests")
    try await withHarness { harness in
        let a = try await harness.start("alpha")
        let b = try await harness.start("beta")
        try await harness.pair([a, b])
        let onA = try await XSession(for: a, service: executable)
        let onB = try await XSession(for: b, service: executable)
        defer {
            onA.stop()
            onB.stop()
        }
        try await body(a, b, onA, onB)
    }
}

@Suite("The clipboard of an X session, with real X servers and apps")
struct ClipboardX11Tests {
    @Test("Text and a picture copied in an app on alpha's X server are pasted by an app on beta's: fetched when pasted, whole, also after the copying app quit; a copy on beta then wins on alpha")
    func copyInOneSessionPasteInAnother() async throws {
        try await withXSessions { a, b, onA, onB in
            let words = Array("hello from alpha's X session".utf8)
            try onA.copy(words)
            let text = "text/plain;charset=utf-8"
            #expect(await eventually { (try? await b.clipboard())?.types.first == LocalClipboardType(name: text, size: UInt64(words.count)) }, "alpha's service: \(onA.logText)")
            #expect(await eventually { onB.logText.contains("holding the clipboard copied on 'alpha'") }, "beta's service: \(onB.logText)")
            let pasted = try await onB.paste(type: "UTF8_STRING")
            #expect(pasted.status == 0)
            #expect(pasted.bytes == words, "beta's service: \(onB.logText)")
            // Text as the older targets: STRING in Latin-1 (ICCCM), TEXT as UTF-8.
            try onA.copy(Array("café ✓".utf8))
            #expect(await eventually { (try? await b.clipboard())?.types.first?.size == UInt64("café ✓".utf8.count) })
            #expect(try await onB.paste(type: "STRING").bytes == [0x63, 0x61, 0x66, 0xE9, 0x20, 0x3F])
            #expect(try await onB.paste(type: "TEXT").bytes == Array("café ✓".utf8))

            // A picture larger than one X request: INCR both ways.
            var picture = [UInt8](repeating: 0, count: 700_000)
            for index in picture.indices { picture[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 11) }
            let app = try onA.copy(picture, type: "image/png")
            #expect(await eventually { (try? await b.clipboard())?.types.contains(LocalClipboardType(name: "image/png", size: UInt64(picture.count))) == true }, "alpha's service: \(onA.logText)")
            // The copying app is gone (killed): the snapshot taken at the copy still answers.
            kill(app.processIdentifier, SIGKILL)
            #expect(await eventually { onA.logText.contains("the app that copied went away") }, "alpha's service: \(onA.logText)")
            let image = try await onB.paste(type: "image/png")
            #expect(image.status == 0)
            #expect(image.bytes.count == picture.count)
            #expect(image.bytes == picture)

            // A copy on beta is the newest: alpha's session pastes it.
            try onB.copy(Array("from beta".utf8))
            #expect(await eventually { (try? await a.clipboard())?.deviceName == "beta" })
            #expect(await eventually { onA.logText.contains("holding the clipboard copied on 'beta'") }, "alpha's service: \(onA.logText)")
            #expect(try await onA.paste(type: "UTF8_STRING").bytes == Array("from beta".utf8))
        }
    }

    @Test("A copying app that never answers offers nothing: the other device's paste ends empty within a second or so, and nothing hangs")
    func appThatNeverAnswers() async throws {
        try await withXSessions { a, b, onA, onB in
            try onA.copy(Array("first".utf8))
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            // An app that takes the clipboard and never answers: an X client of its own (libxcb).
            var error = [CChar](repeating: 0, count: 256)
            let hung = try #require(hx_open(onA.display, &error, error.count))
            defer { hx_close(hung) }
            #expect(hx_own(hung) == 0)
            #expect(await eventually(within: .seconds(5)) { (try? await b.clipboard()) == nil }, "alpha's service: \(onA.logText)")
            #expect(onA.logText.contains("did not say what it offers"))
            let started = ContinuousClock.now
            let pasted = try await onB.paste(type: "UTF8_STRING")
            #expect(pasted.bytes.isEmpty)
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    @Test("A copy a password manager marks secret (x-kde-passwordManagerHint: secret, as KeePassXC and KDE's do) is never offered: the other device shows nothing and its paste gets nothing")
    func secretNeverLeaves() async throws {
        try await withXSessions { a, b, onA, onB in
            try onA.copy(Array("an ordinary copy".utf8))
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            // A password manager's copy: an X client that offers the password and the hint.
            let manager = try PasswordManager(display: onA.display, password: "hunter2-correct-horse")
            defer { manager.stop() }
            #expect(await eventually { onA.logText.contains("marked secret") }, "alpha's service: \(onA.logText)")
            #expect(await eventually { (try? await b.clipboard()) == nil })
            #expect(try await b.paste().bytes.isEmpty)
            #expect(try await onB.paste(type: "UTF8_STRING").bytes.isEmpty)
            #expect(!manager.asked.contains("UTF8_STRING"), "the password was read: \(manager.asked)")
        }
    }
}

/// An X client that copies a password as password managers do: it offers the text and
/// `x-kde-passwordManagerHint` = `secret`, and answers requests on a thread of its own.
final class PasswordManager: Sendable {
    nonisolated(unsafe) private let display: OpaquePointer
    private let stopped = Mutex(false)
    private let requests = Mutex<[String]>([])
    private let done = DispatchSemaphore(value: 0)

    /// The targets asked for, in order.
    var asked: [String] { requests.withLock { $0 } }

    init(display name: String, password: String) throws {
        var error = [CChar](repeating: 0, count: 256)
        guard let opened = hx_open(name, &error, error.count) else { throw AgentError("cannot open \(name)") }
        display = opened
        guard hx_own(opened) == 0 else { throw AgentError("cannot own the clipboard of \(name)") }
        let names = ["TARGETS", "UTF8_STRING", "x-kde-passwordManagerHint"]
        let atoms = names.map { hx_atom(opened, $0) }
        let bytes = Array(password.utf8)
        let hint = Array("secret".utf8)
        nonisolated(unsafe) let owner = opened
        Thread.detachNewThread { [self] in
            var event = hx_event()
            while !stopped.withLock({ $0 }) {
                guard hx_next_event(owner, &event, 100) == 1, UInt32(bitPattern: event.kind) == HX_EVENT_REQUEST.rawValue else { continue }
                let index = atoms.firstIndex(of: event.target)
                requests.withLock { $0.append(index.map { names[$0] } ?? "other") }
                switch index {
                case 0?: hx_answer_atoms(owner, [event], atoms, Int32(atoms.count))
                case 1?: _ = bytes.withUnsafeBufferPointer { hx_answer(owner, [event], event.target, $0.baseAddress, $0.count, 1000) }
                case 2?: _ = hint.withUnsafeBufferPointer { hx_answer(owner, [event], event.target, $0.baseAddress, $0.count, 1000) }
                default: hx_refuse(owner, [event])
                }
            }
            done.signal()
        }
    }

    func stop() {
        stopped.withLock { $0 = true }
        done.wait()
        hx_close(display)
    }
}
