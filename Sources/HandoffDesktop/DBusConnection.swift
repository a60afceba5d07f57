import Foundation
import HandoffModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A connection to a D-Bus bus (the session bus): authenticated as this user (SASL EXTERNAL).
/// Blocking writes; one reader thread, which hands signals and method calls to the handlers.
public final class DBusConnection: Sendable {
    private let fd: Int32
    /// Method calls waiting for their reply, by serial (every message sent takes one).
    private let pending = Mutex(PendingRequests<CheckedContinuation<DBusMessage, any Error>>())
    private let writing = Mutex(())
    /// Each waiting call's deadline and what its failure says, by serial.
    private let deadlines = Mutex<[UInt64: (at: DispatchTime, message: String)]>([:])
    /// One timer for every call's deadline, set to the earliest (`rearm`). A dispatch source is
    /// safe to schedule from any thread; it is only ever scheduled, never replaced.
    private nonisolated(unsafe) let timer: any DispatchSourceTimer
    private let handlers: Mutex<(signals: @Sendable (DBusMessage) -> Void, calls: (@Sendable (DBusMessage) -> Void)?, closed: @Sendable () -> Void)>
    /// Whether the socket is closed: nothing is written to its number after (it may be reused).
    private let closedState = Mutex(false)
    private let name = Mutex("")

    /// This connection's unique name on the bus (after `hello`).
    public var uniqueName: String { name.withLock { $0 } }

    /// Connects to the bus at `address` (`unix:path=…` or `unix:abstract=…`). `signals` gets
    /// every signal, `calls` every method call addressed to this connection (both on the
    /// reader's thread, in order); without `calls`, each call is answered that there is no such
    /// method, at once.
    public init(
        address: String, signals: @escaping @Sendable (DBusMessage) -> Void = { _ in }, calls: (@Sendable (DBusMessage) -> Void)? = nil
    ) throws(DBusError) {
        handlers = Mutex((signals, calls, {}))
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "handoff-dbus-deadlines"))
        fd = try Self.connect(address)
        do throws(DBusError) {
            let uid = String(getuid()).utf8.map { String(format: "%02x", $0) }.joined()
            try Self.send(fd, [0] + Array("AUTH EXTERNAL \(uid)\r\n".utf8))
            let line = try Self.readLine(fd)
            guard line.hasPrefix("OK ") else { throw DBusError("the bus refused us: \(line)") }
            try Self.send(fd, Array("BEGIN\r\n".utf8))
        } catch {
            Glibc.close(fd)
            throw error
        }
        timer.setEventHandler { [weak self] in self?.expire() }
        timer.schedule(deadline: .distantFuture)
        timer.resume()
        let reader = Thread { [self] in readLoop() }
        reader.name = "handoff-dbus"
        reader.start()
    }

    /// Adds a handler of signals: every handler gets every signal this connection hears.
    public func onSignal(_ handler: @escaping @Sendable (DBusMessage) -> Void) {
        handlers.withLock { handlers in
            let earlier = handlers.signals
            handlers.signals = { signal in
                earlier(signal)
                handler(signal)
            }
        }
    }

    /// Replaces the handler of method calls to this connection.
    public func onCall(_ handler: @escaping @Sendable (DBusMessage) -> Void) { handlers.withLock { $0.calls = handler } }

    /// Runs `handler` once the connection ends (the bus went away, or `close`).
    public func onClose(_ handler: @escaping @Sendable () -> Void) { handlers.withLock { $0.closed = handler } }

    /// Says hello to the bus; its answer is this connection's unique name.
    @discardableResult
    public func hello() async throws -> String {
        let reply = try await call(Self.bus("Hello"))
        let unique = reply.body.first?.string ?? ""
        name.withLock { $0 = unique }
        return unique
    }

    /// Calls a method and returns its reply; a D-Bus error is thrown, and so is no reply within
    /// `timeout` (the bus itself gives up after 25 s).
    public func call(_ message: DBusMessage, timeout: Duration = .seconds(25)) async throws -> DBusMessage {
        try await withCheckedThrowingContinuation { continuation in
            guard let serial = pending.withLock({ $0.issue(continuation) }) else {
                continuation.resume(throwing: DBusError("the bus connection is closed"))
                return
            }
            var message = message
            message.serial = UInt32(truncatingIfNeeded: serial)
            let (whole, attoseconds) = timeout.components
            let deadline = DispatchTime.now() + Double(whole) + Double(attoseconds) / 1e18
            let late = "\(message.destination ?? "the bus") did not answer \(message.member ?? "a method") within \(timeout)"
            deadlines.withLock { $0[serial] = (deadline, late) }
            rearm()
            do {
                try write(message)
            } catch {
                settle(serial, .failure(error))
            }
        }
    }

    /// Ends the call `serial` waits for (its reply, an error, its deadline), once.
    private func settle(_ serial: UInt64, _ result: Result<DBusMessage, any Error>) {
        let expected = deadlines.withLock { $0.removeValue(forKey: serial) } != nil
        guard let waiting = pending.withLock({ $0.settle(serial) }) else { return }
        waiting.resume(with: result)
        if expected { rearm() }
    }

    /// Sets the one timer to the earliest deadline of the calls waiting, or to never: with no
    /// call waiting, nothing wakes this process.
    private func rearm() {
        // Scheduled under the lock (it does not block), so that two threads re-arming at once
        // cannot leave the timer set for a deadline set that has changed since.
        deadlines.withLock { deadlines in
            timer.schedule(deadline: deadlines.values.map(\.at).min() ?? .distantFuture, leeway: .milliseconds(10))
        }
    }

    /// The timer fired: the calls past their deadline fail.
    private func expire() {
        let now = DispatchTime.now()
        let expired = deadlines.withLock { deadlines in
            let late = deadlines.filter { $0.value.at <= now }
            for serial in late.keys { deadlines[serial] = nil }
            return late
        }
        for (serial, entry) in expired {
            pending.withLock { $0.settle(serial) }?.resume(throwing: DBusError(entry.message, name: "org.freedesktop.DBus.Error.NoReply"))
        }
        rearm()
    }

    /// Sends a message that expects no reply (a signal, a method return, an error).
    public func send(_ message: DBusMessage) throws(DBusError) {
        var message = message
        message.serial = UInt32(truncatingIfNeeded: pending.withLock { $0.takeNumber() })
        try write(message)
    }

    public func close() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    // MARK: The bus's own methods

    /// A call to the bus itself (`org.freedesktop.DBus`).
    static func bus(_ member: String, _ body: [DBusValue] = []) -> DBusMessage {
        DBusMessage(kind: .methodCall, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: member, destination: "org.freedesktop.DBus", body: body)
    }

    /// Asks the bus for the signals `rule` matches (a match rule of the specification).
    public func addMatch(_ rule: String) async throws {
        _ = try await call(Self.bus("AddMatch", [.string(rule)]))
    }

    /// The names on the bus now.
    public func listNames() async throws -> [String] {
        try await call(Self.bus("ListNames")).body.first?.strings ?? []
    }

    /// The unique name that owns `name`; throws when nobody does.
    public func owner(of name: String) async throws -> String {
        guard let owner = try await call(Self.bus("GetNameOwner", [.string(name)])).body.first?.string else { throw DBusError("no owner of \(name)") }
        return owner
    }

    /// The process id of the connection that owns `name`.
    public func processID(of name: String) async throws -> Int32 {
        guard let pid = try await call(Self.bus("GetConnectionUnixProcessID", [.string(name)])).body.first?.uint32 else { throw DBusError("no process of \(name)") }
        return Int32(bitPattern: pid)
    }

    /// Takes the well-known `name`; true when this connection is its owner now.
    public func requestName(_ name: String) async throws -> Bool {
        // Flags: do not queue. Replies 1 (primary owner) and 4 (already the owner) mean it is ours.
        let reply = try await call(Self.bus("RequestName", [.string(name), .uint32(4)]))
        return [1, 4].contains(reply.body.first?.uint32)
    }

    /// Gives the well-known `name` up.
    public func releaseName(_ name: String) async throws {
        _ = try await call(Self.bus("ReleaseName", [.string(name)]))
    }

    /// A property of the object `path` of `destination`.
    public func property(_ property: String, of interface: String, at path: String, on destination: String, timeout: Duration = .seconds(25)) async throws -> DBusValue {
        let reply = try await call(
            DBusMessage(kind: .methodCall, path: path, interface: Self.properties, member: "Get", destination: destination, body: [.string(interface), .string(property)]),
            timeout: timeout)
        guard let value = reply.body.first else { throw DBusError("\(destination) answered Get of \(property) with nothing") }
        return value.unwrapped
    }

    /// Every property of `interface` of the object `path` of `destination`.
    public func properties(of interface: String, at path: String, on destination: String, timeout: Duration = .seconds(25)) async throws -> [String: DBusValue] {
        let reply = try await call(
            DBusMessage(kind: .methodCall, path: path, interface: Self.properties, member: "GetAll", destination: destination, body: [.string(interface)]),
            timeout: timeout)
        guard let values = reply.body.first?.dictionary else { throw DBusError("\(destination) answered GetAll of \(interface) with something else than a{sv}") }
        return values
    }

    public static let properties = "org.freedesktop.DBus.Properties"

    private func write(_ message: DBusMessage) throws(DBusError) {
        let bytes = message.encoded()
        try writing.withLock { _ throws(DBusError) in
            guard !closedState.withLock({ $0 }) else { throw DBusError("the bus connection is closed") }
            try Self.send(fd, bytes)
        }
    }

    private func readLoop() {
        defer {
            for waiting in pending.withLock({ $0.close() }) { waiting.resume(throwing: DBusError("the bus connection ended")) }
            deadlines.withLock { $0 = [:] }
            timer.cancel()
            // Closed under the writers' lock: no write can reach the number once it is reused.
            writing.withLock { _ in
                closedState.withLock { $0 = true }
                Glibc.close(fd)
            }
            handlers.withLock { $0.closed }()
        }
        while true {
            guard let header = Self.read(fd, 16) else { return }
            // Either byte order: the bus passes each message on in its sender's.
            let bigEndian = header[0] == UInt8(ascii: "B")
            func length(_ bytes: ArraySlice<UInt8>) -> Int {
                Int((bigEndian ? Array(bytes) : Array(bytes.reversed())).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            }
            let bodyLength = length(header[4..<8])
            let fieldsLength = length(header[12..<16])
            // The specification's limits: a bus never sends more. Past them the stream cannot be trusted.
            guard header[0] == UInt8(ascii: "l") || bigEndian, fieldsLength < 1 << 26, bodyLength < 1 << 27 else { return }
            guard let fields = Self.read(fd, (fieldsLength + 7) / 8 * 8) else { return }
            guard bodyLength <= DBusMessage.maximumBodyBytes else {
                // Too large to hold here: skipped, and a call waiting for it fails.
                guard Self.discard(fd, bodyLength) else { return }
                if let reply = Self.answered(header + fields) {
                    settle(UInt64(reply.serial), .failure(DBusError("the answer of \(bodyLength) bytes is larger than \(DBusMessage.maximumBodyBytes) bytes, the most taken here")))
                }
                continue
            }
            guard let body = Self.read(fd, bodyLength) else { return }
            guard let message = try? DBusMessage.decode(header + fields + body) else {
                // One malformed message: a call waiting for it fails, nothing else changes.
                if let reply = Self.answered(header + fields) {
                    settle(UInt64(reply.serial), .failure(DBusError("\(reply.sender ?? "the bus") answered with a malformed message")))
                }
                continue
            }
            switch message.kind {
            case .methodReturn, .error:
                guard let serial = message.replySerial else { continue }
                if message.kind == .error {
                    settle(UInt64(serial), .failure(DBusError("\(message.errorName ?? "error"): \(message.body.first?.string ?? "")", name: message.errorName)))
                } else {
                    settle(UInt64(serial), .success(message))
                }
            case .signal: handlers.withLock { $0.signals }(message)
            case .methodCall:
                if let calls = handlers.withLock({ $0.calls }) {
                    calls(message)
                } else if !message.noReplyExpected {
                    // Nothing is served here: said at once, so the caller does not wait 25 s.
                    let answer: DBusMessage = message.interface == "org.freedesktop.DBus.Peer" && message.member == "Ping"
                        ? .reply(to: message) : .error(to: message, "org.freedesktop.DBus.Error.UnknownMethod", "nothing is served on this connection")
                    try? send(answer)
                }
            }
        }
    }

    /// The call a reply answers, read from its header alone (its body is not read): the reply's
    /// serial and sender, or nil for a message that is no reply.
    static func answered(_ header: [UInt8]) -> (serial: UInt32, sender: String?)? {
        guard header.count >= 16, header[1] == DBusMessage.Kind.methodReturn.rawValue || header[1] == DBusMessage.Kind.error.rawValue else { return nil }
        var reader = DBusMessage.Reader(bytes: header, bigEndian: header[0] == UInt8(ascii: "B"))
        reader.offset = 12
        guard case .array(_, let fields)? = try? reader.read("a(yv)") else { return nil }
        var serial: UInt32?
        var sender: String?
        for case .structure(let pair) in fields where pair.count == 2 {
            switch (pair[0], pair[1]) {
            case (.byte(5), .variant(.uint32(let v))): serial = v
            case (.byte(7), .variant(.string(let v))): sender = v
            default: break
            }
        }
        return serial.map { ($0, sender) }
    }

    // MARK: The socket

    private static func connect(_ address: String) throws(DBusError) -> Int32 {
        let first = address.split(separator: ";").first.map(String.init) ?? address
        guard first.hasPrefix("unix:") else { throw DBusError("the bus address \(address) is not a unix socket") }
        var path: [UInt8] = []
        for part in first.dropFirst(5).split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            if pair[0] == "path" { path = Array(pair[1].utf8) }
            if pair[0] == "abstract" { path = [0] + Array(pair[1].utf8) }
        }
        guard !path.isEmpty else { throw DBusError("the bus address \(address) names no socket") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw DBusError("cannot make a socket") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let length = min(path.count, MemoryLayout.size(ofValue: address.sun_path) - 1)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path.prefix(length)) }
        let size = socklen_t(MemoryLayout<sa_family_t>.size + length + (path.first == 0 ? 0 : 1))
        let result = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, size) } }
        guard result == 0 else {
            Glibc.close(fd)
            throw DBusError("cannot connect to the bus: \(String(cString: strerror(errno)))")
        }
        return fd
    }

    private static func send(_ fd: Int32, _ bytes: [UInt8]) throws(DBusError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw DBusError("writing to the bus failed: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    private static func read(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, count - filled) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            filled += n
        }
        return bytes
    }

    /// Reads and drops `count` bytes.
    private static func discard(_ fd: Int32, _ count: Int) -> Bool {
        var left = count
        while left > 0 {
            guard let chunk = read(fd, min(left, 1 << 16)) else { return false }
            left -= chunk.count
        }
        return true
    }

    private static func readLine(_ fd: Int32) throws(DBusError) -> String {
        var line: [UInt8] = []
        while !line.hasSuffix([13, 10]) {
            guard line.count < 512, let byte = read(fd, 1) else { throw DBusError("the bus closed during authentication") }
            line += byte
        }
        return String(decoding: line.dropLast(2), as: UTF8.self)
    }
}

extension Array where Element == UInt8 {
    fileprivate func hasSuffix(_ suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
