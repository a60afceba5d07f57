import Foundation
import HandoffLocalAPI
import Synchronization

/// Which of the types an app offers are read and offered to the account, and under which names;
/// and which targets an app here may ask for another device's types by.
enum ClipboardTypes {
    /// The canonical text type, and the names X11 apps ask for text by.
    static let text = "text/plain;charset=utf-8"
    static let textAliases = ["UTF8_STRING", "text/plain", "STRING", "TEXT"]

    /// The markers password managers put beside a secret copy: KDE's and KeePassXC's
    /// `x-kde-passwordManagerHint` (its value `secret`), and the macOS marker that some
    /// cross-platform apps set everywhere (present: secret).
    static let kdeHint = "x-kde-passwordManagerHint"
    static let concealedType = "application/x-nspasteboard-concealed-type"
    /// The nspasteboard.org name of that marker, which cross-platform apps carry as it is.
    static let concealedTypeUTI = "org.nspasteboard.ConcealedType"

    static func secretHint(in targets: [String]) -> String? {
        if let marker = [concealedType, concealedTypeUTI].first(where: targets.contains) { return marker }
        return targets.contains(kdeHint) ? kdeHint : nil
    }

    /// The targets text is read from, best first: UTF-8 ones only (STRING is Latin-1, and TEXT
    /// may come back as COMPOUND_TEXT).
    static let textSources = [text, "UTF8_STRING", "text/plain"]

    /// The targets to read, each with the type it is offered as: text once (the best of the
    /// text targets), HTML, rich text, images, URIs; at most 16.
    static func chosen(from targets: [String]) -> [(target: String, offeredAs: String)] {
        var chosen: [(String, String)] = []
        if let textTarget = textSources.first(where: targets.contains) { chosen.append((textTarget, text)) }
        for target in targets where target == "text/html" || target == "text/rtf" || target.hasPrefix("image/") || target == "text/uri-list" || target == "x-special/gnome-copied-files" {
            if !chosen.contains(where: { $0.1 == target }) { chosen.append((target, target)) }
        }
        return Array(chosen.prefix(16))
    }

    /// What an app here may ask for: each offered type, and for text its X11 names too.
    static func targets(for offered: [String]) -> [String] {
        var names: [String] = []
        for type in offered {
            names.append(type)
            if type == text { names += textAliases }
        }
        return names
    }

    /// UTF-8 text as Latin-1, for an app asking for STRING: what Latin-1 cannot hold is `?`.
    static func latin1(fromUTF8 bytes: [UInt8]) -> [UInt8] {
        String(decoding: bytes, as: UTF8.self).unicodeScalars.map { $0.value < 256 ? UInt8($0.value) : 0x3F }
    }

    /// The offered type an app's target asks for.
    static func offeredType(for target: String, in offered: [String]) -> String? {
        if offered.contains(target) { return target }
        if textAliases.contains(target), offered.contains(text) { return text }
        return nil
    }
}

/// What the agent tells a session's clipboard.
enum ClipboardCommand: Sendable {
    /// The account's clipboard here is now this (nil: nothing is offered).
    case changed(LocalClipboard?)
}

/// A display's clipboard: X11's CLIPBOARD selection, or Wayland's through data control.
protocol SessionClipboard: Sendable {
    /// Names the clipboard served ("X11 :0"), for the agent's doctor.
    var session: String { get }
    /// Hands a command to the clipboard's thread.
    func post(_ command: ClipboardCommand)
    /// Runs the clipboard until its display's connection fails.
    func run() -> Never
}

/// The agent's commands for a display's thread, and the pipe that wakes it from its wait on the
/// display's connection.
final class CommandMailbox: Sendable {
    private let commands = Mutex<[ClipboardCommand]>([])
    private let wake: (read: Int32, write: Int32)

    init() throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ClipboardServiceError("cannot make a pipe: \(String(cString: strerror(errno)))") }
        wake = (fds[0], fds[1])
    }

    /// Hands a command to the display's thread, and wakes it.
    func post(_ command: ClipboardCommand) {
        commands.withLock { $0.append(command) }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// The commands posted since the last call.
    func take() -> [ClipboardCommand] {
        commands.withLock { pending in
            defer { pending = [] }
            return pending
        }
    }

    /// Waits up to a second for the display's connection `fd` to have something, or a command.
    func wait(display fd: Int32) {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        _ = poll(&fds, 2, 1000)
        if fds[1].revents & Int16(POLLIN) != 0 {
            var drained = [UInt8](repeating: 0, count: 64)
            _ = read(wake.read, &drained, drained.count)
        }
    }
}
