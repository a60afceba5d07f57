import CHandoffWayland
import Foundation
import HandoffLocalAPI
import Synchronization

/// The Wayland side of the session's clipboard, through a data-control protocol
/// (ext-data-control-v1, else wlr-data-control-unstable-v1): it hears each app's copy and reads
/// it, and becomes the clipboard's source with another device's types, fetching a type from the
/// agent only when an app here pastes it. One thread runs it (`run`); the agent's messages reach
/// it through `post`.
final class WaylandClipboard: SessionClipboard {
    // The display belongs to the thread in `run`; the pointer crosses only to it.
    nonisolated(unsafe) let display: OpaquePointer
    let service: ClipboardService
    let session: String
    private let mailbox: CommandMailbox
    /// The other device's clipboard this client is the source of, if any (the Wayland thread's).
    nonisolated(unsafe) private var owned: LocalClipboard?
    /// When an app here last copied (see ClipboardService.shouldHold).
    nonisolated(unsafe) private var lastLocalCopy = Date.distantPast

    init(display name: String?, service: ClipboardService) throws {
        var error = [CChar](repeating: 0, count: 512)
        guard let opened = hw_open(name, &error, error.count) else {
            throw ClipboardServiceError(X11Clipboard.string(error))
        }
        display = opened
        self.service = service
        let shown = name ?? ProcessInfo.processInfo.environment["WAYLAND_DISPLAY"] ?? "wayland-0"
        session = "Wayland \(shown), \(String(cString: hw_protocol(opened)))"
        mailbox = try CommandMailbox()
    }

    func post(_ command: ClipboardCommand) { mailbox.post(command) }

    func run() -> Never {
        var event = hw_event(kind: 0, fd: -1, type: nil)
        while true {
            while true {
                let got = hw_next_event(display, &event, 0)
                if got < 0 { service.exit("the Wayland display's connection failed") }
                if got == 0 { break }
                handle(&event)
                hw_event_clear(&event)
            }
            for command in mailbox.take() { handle(command) }
            mailbox.wait(display: hw_fd(display))
        }
    }

    // MARK: Events

    private func handle(_ event: inout hw_event) {
        switch UInt32(bitPattern: event.kind) {
        case HW_EVENT_SELECTION.rawValue:
            owned = nil
            lastLocalCopy = Date()
            copied()
        case HW_EVENT_SEND.rawValue:
            let type = event.type.map { String(cString: $0) } ?? ""
            // The descriptor is the answer's now: it closes it.
            let fd = event.fd
            event.fd = -1
            answer(type, into: fd)
        case HW_EVENT_CANCELLED.rawValue:
            // An app here copied: its selection event follows.
            owned = nil
        case HW_EVENT_CLEARED.rawValue:
            service.log("the clipboard is empty (the app that copied went away, or emptied it): what it copied stays offered until it expires")
        case HW_EVENT_FINISHED.rawValue:
            service.exit("the Wayland compositor ended this client's clipboard (its seat went away)")
        default:
            break
        }
    }

    private func handle(_ command: ClipboardCommand) {
        switch command {
        case .changed(let clipboard):
            guard let clipboard, !clipboard.local else {
                if owned != nil {
                    owned = nil
                    hw_disown(display)
                }
                return
            }
            guard service.shouldHold(clipboard, holding: owned, lastLocalCopy: lastLocalCopy) else { return }
            let names = ClipboardTypes.targets(for: clipboard.types.map(\.name))
            let owning = withCStrings(names) { pointers in hw_own(display, pointers, Int32(names.count), 1) }
            if owning == 0 {
                owned = clipboard
                service.log("holding the clipboard copied on '\(clipboard.deviceName)': \(clipboard.types.map(\.name).joined(separator: ", "))")
            } else {
                service.log("could not become the Wayland clipboard's source")
            }
        }
    }

    // MARK: An app here copied

    private func copied() {
        var targets: [String] = []
        while let type = hw_offer_type(display, Int32(targets.count)) { targets.append(String(cString: type)) }
        service.copied(targets: targets) { name, limit in
            var bytes: UnsafeMutablePointer<UInt8>?
            var length = 0
            let result = hw_read(display, name, &bytes, &length, ClipboardService.readTimeout, limit)
            defer { free(bytes) }
            return ClipboardService.Read(result: result, bytes: bytes, length: length)
        }
    }

    // MARK: An app here pastes

    /// Writes `type` of the other device's copy into an app's pipe, fetched from the agent now,
    /// on a thread of its own: the compositor's other events keep coming meanwhile.
    private func answer(_ type: String, into fd: Int32) {
        guard let owned, let offered = ClipboardTypes.offeredType(for: type, in: owned.types.map(\.name)) else {
            close(fd)
            return
        }
        let service = service
        Thread.detachNewThread {
            defer { close(fd) }
            switch service.paste(offered) {
            case .success(let pasted):
                let bytes = type == "STRING" ? ClipboardTypes.latin1(fromUTF8: pasted) : pasted
                if !writeAll(bytes, to: fd) { service.log("the app pasting '\(type)' did not take all of it") }
            case .failure(let error):
                // The app reads an empty paste: it ends now, not when the copy would have arrived.
                service.log("a paste of '\(offered)' failed: \(error.message)")
            }
        }
    }
}

/// Writes all of `bytes` to `fd`; false when the reader went away first.
func writeAll(_ bytes: [UInt8], to fd: Int32) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if written < 0, errno == EINTR { continue }
        if written <= 0 { return false }
        offset += written
    }
    return true
}

/// Calls `body` with `strings` as C strings, valid inside it.
func withCStrings<Result>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> Result) -> Result {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
