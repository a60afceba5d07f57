import CHandoffX11
import Foundation
import HandoffLocalAPI
import Synchronization

/// The X11 side of the session's clipboard: it watches the CLIPBOARD selection (XFixes) and
/// reads what an app copied, and owns the selection with another device's types, fetching a
/// type from the agent only when an app here pastes it. One thread runs it (`run`); the agent's
/// messages reach it through `post`.
final class X11Clipboard: SessionClipboard {
    // The display belongs to the thread in `run`; the pointer crosses only to it.
    nonisolated(unsafe) let display: OpaquePointer
    let service: ClipboardService
    let session: String
    private let mailbox: CommandMailbox
    /// The other device's clipboard this client owns the selection for, if any (the X thread's).
    nonisolated(unsafe) private var owned: LocalClipboard?
    /// When an app here last copied: another device's copy older than that is never taken for
    /// the selection again (it would replace what the person copied since, a password say).
    nonisolated(unsafe) private var lastLocalCopy = Date.distantPast

    init(display name: String?, service: ClipboardService) throws {
        var error = [CChar](repeating: 0, count: 512)
        guard let opened = hx_open(name, &error, error.count) else {
            throw ClipboardServiceError(Self.string(error))
        }
        display = opened
        self.service = service
        session = "X11 \(name ?? ProcessInfo.processInfo.environment["DISPLAY"] ?? ":0")"
        mailbox = try CommandMailbox()
    }

    /// A NUL-terminated C string filled in by the backend.
    static func string(_ characters: [CChar]) -> String {
        let bytes = characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Hands a command to the X thread, and wakes it.
    func post(_ command: ClipboardCommand) { mailbox.post(command) }

    /// Runs until the display's connection fails.
    func run() -> Never {
        var event = hx_event()
        while true {
            while true {
                let got = hx_next_event(display, &event, 0)
                if got < 0 { service.exit("the X display's connection failed") }
                if got == 0 { break }
                handle(event)
            }
            for command in mailbox.take() { handle(command) }
            mailbox.wait(display: hx_fd(display))
        }
    }

    // MARK: Events

    private func handle(_ event: hx_event) {
        switch UInt32(bitPattern: event.kind) {
        case HX_EVENT_OWNER_CHANGED.rawValue:
            owned = nil
            lastLocalCopy = Date()
            copied(at: event.time)
        case HX_EVENT_REQUEST.rawValue:
            answer(event)
        case HX_EVENT_OWNER_GONE.rawValue:
            service.log("the app that copied went away: what it copied stays offered until it expires")
        default:
            // This client lost the selection to an app that copied: that app's own event follows.
            break
        }
    }

    private func handle(_ command: ClipboardCommand) {
        switch command {
        case .changed(let clipboard):
            guard let clipboard, !clipboard.local else {
                // Nothing offered any more, or a copy of this device's own: the selection is left
                // to whoever owns it.
                if owned != nil, clipboard == nil || clipboard?.local == true {
                    owned = nil
                    hx_disown(display)
                }
                return
            }
            guard service.shouldHold(clipboard, holding: owned, lastLocalCopy: lastLocalCopy) else { return }
            if hx_own(display) == 0 {
                owned = clipboard
                service.log("holding the clipboard copied on '\(clipboard.deviceName)': \(clipboard.types.map(\.name).joined(separator: ", "))")
            } else {
                service.log("could not own the X clipboard")
            }
        }
    }

    // MARK: An app here copied

    /// Reads what the app offers and offers it to the account (ClipboardService.copied).
    private func copied(at time: UInt32) {
        service.copied(targets: readTargets(at: time)) { name, limit in
            var bytes: UnsafeMutablePointer<UInt8>?
            var length = 0
            var type: UInt32 = 0
            let result = hx_read(display, hx_atom(display, name), time, &bytes, &length, &type, ClipboardService.readTimeout, limit)
            defer { free(bytes) }
            return ClipboardService.Read(result: result, bytes: bytes, length: length)
        }
    }

    private func readTargets(at time: UInt32) -> [String]? {
        var bytes: UnsafeMutablePointer<UInt8>?
        var length = 0
        var type: UInt32 = 0
        guard hx_read(display, hx_atom(display, "TARGETS"), time, &bytes, &length, &type, ClipboardService.readTimeout, 1 << 20) == 0, let bytes else { return nil }
        defer { free(bytes) }
        var names: [String] = []
        let count = length / 4
        bytes.withMemoryRebound(to: UInt32.self, capacity: count) { atoms in
            for index in 0..<min(count, 512) {
                var name = [CChar](repeating: 0, count: 256)
                if hx_atom_name(display, atoms[index], &name, name.count) == 0 { names.append(Self.string(name)) }
            }
        }
        return names
    }

    // MARK: An app here pastes

    /// Answers an app that pastes the other device's clipboard this client holds: its types,
    /// or one type's bytes, fetched from the agent now.
    private func answer(_ request: hx_event) {
        guard let owned else { return hx_refuse(display, [request]) }
        var name = [CChar](repeating: 0, count: 256)
        guard hx_atom_name(display, request.target, &name, name.count) == 0 else { return hx_refuse(display, [request]) }
        let target = Self.string(name)
        let offered = owned.types.map(\.name)
        if target == "TARGETS" {
            let names = ["TARGETS", "TIMESTAMP"] + ClipboardTypes.targets(for: offered)
            let atoms = names.map { hx_atom(display, $0) }
            hx_answer_atoms(display, [request], atoms, Int32(atoms.count))
            return
        }
        if target == "TIMESTAMP" {
            hx_answer(display, [request], 0, nil, 0, 0)
            return
        }
        guard let type = ClipboardTypes.offeredType(for: target, in: offered) else { return hx_refuse(display, [request]) }
        switch service.paste(type) {
        case .success(let pasted):
            // STRING is Latin-1 (ICCCM); TEXT may be answered in any text type: UTF8_STRING.
            var bytes = pasted
            var answeredAs = request.target
            if target == "STRING" { bytes = ClipboardTypes.latin1(fromUTF8: pasted) }
            if target == "TEXT" { answeredAs = hx_atom(display, "UTF8_STRING") }
            let result = bytes.withUnsafeBufferPointer { buffer in
                hx_answer(display, [request], answeredAs, buffer.baseAddress, buffer.count, 10_000)
            }
            if result != 0 { service.log("the app pasting '\(target)' did not take all of it") }
        case .failure(let error):
            service.log("a paste of '\(type)' failed: \(error.message)")
            hx_refuse(display, [request])
        }
    }
}
