import Foundation
import HandoffModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Why talking to D-Bus failed.
public struct DBusError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A value of a D-Bus message body, of the few types Handoff's notifications use.
public enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case uint32(UInt32)
    case int32(Int32)
    case string(String)
    case objectPath(String)
    case signature(String)
    case strings([String])
    /// `a{sv}`, always sent empty and skipped when read.
    case emptyDictionary

    var code: String {
        switch self {
        case .byte: return "y"
        case .uint32: return "u"
        case .int32: return "i"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .strings: return "as"
        case .emptyDictionary: return "a{sv}"
        }
    }

    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var uint32: UInt32? {
        if case .uint32(let value) = self { return value }
        return nil
    }
}

/// One D-Bus message (little-endian).
public struct DBusMessage: Sendable {
    public enum Kind: UInt8, Sendable { case methodCall = 1, methodReturn = 2, error = 3, signal = 4 }

    public var kind: Kind
    public var serial: UInt32 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var replySerial: UInt32?
    public var destination: String?
    public var sender: String?
    public var body: [DBusValue] = []

    public init(kind: Kind, path: String? = nil, interface: String? = nil, member: String? = nil, destination: String? = nil, body: [DBusValue] = []) {
        self.kind = kind
        self.path = path
        self.interface = interface
        self.member = member
        self.destination = destination
        self.body = body
    }

    /// The message's bytes.
    func encoded() -> [UInt8] {
        var bodyWriter = Writer()
        for value in body { bodyWriter.write(value) }
        var fields: [(UInt8, DBusValue)] = []
        if let path { fields.append((1, .objectPath(path))) }
        if let interface { fields.append((2, .string(interface))) }
        if let member { fields.append((3, .string(member))) }
        if let errorName { fields.append((4, .string(errorName))) }
        if let replySerial { fields.append((5, .uint32(replySerial))) }
        if let destination { fields.append((6, .string(destination))) }
        if !body.isEmpty { fields.append((8, .signature(body.map(\.code).joined()))) }
        var writer = Writer()
        writer.bytes += [UInt8(ascii: "l"), kind.rawValue, 0, 1]
        writer.uint32(UInt32(bodyWriter.bytes.count))
        writer.uint32(serial)
        let lengthAt = writer.bytes.count
        writer.uint32(0)
        let start = writer.bytes.count
        for (code, value) in fields {
            writer.align(8)
            writer.bytes.append(code)
            writer.write(.signature(value.code))
            writer.write(value)
        }
        let length = UInt32(writer.bytes.count - start)
        withUnsafeBytes(of: length.littleEndian) { writer.bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
        writer.align(8)
        return writer.bytes + bodyWriter.bytes
    }

    /// Reads a message; the body is read for the signatures given by `signature`.
    static func decode(_ bytes: [UInt8]) throws(DBusError) -> DBusMessage {
        var reader = Reader(bytes: bytes)
        guard bytes.count >= 16, bytes[0] == UInt8(ascii: "l") else { throw DBusError("a message that is not little-endian D-Bus") }
        guard let kind = Kind(rawValue: bytes[1]) else { throw DBusError("a message of unknown type \(bytes[1])") }
        reader.offset = 4
        let bodyLength = Int(try reader.uint32())
        var message = DBusMessage(kind: kind)
        message.serial = try reader.uint32()
        let fieldsLength = Int(try reader.uint32())
        let fieldsEnd = reader.offset + fieldsLength
        var signature = ""
        while reader.offset < fieldsEnd {
            reader.align(8)
            let code = try reader.byte()
            let type = try reader.signature()
            let value = try reader.read(type)
            switch (code, value) {
            case (1, .objectPath(let v)): message.path = v
            case (2, .string(let v)): message.interface = v
            case (3, .string(let v)): message.member = v
            case (4, .string(let v)): message.errorName = v
            case (5, .uint32(let v)): message.replySerial = v
            case (6, .string(let v)): message.destination = v
            case (7, .string(let v)): message.sender = v
            case (8, .signature(let v)): signature = v
            default: break
            }
        }
        reader.align(8)
        guard reader.offset + bodyLength <= bytes.count else { throw DBusError("a message shorter than it says") }
        var types = Substring(signature)
        while !types.isEmpty {
            let type: String
            if types.hasPrefix("a{sv}") { type = "a{sv}" } else if types.hasPrefix("as") { type = "as" } else { type = String(types.prefix(1)) }
            types = types.dropFirst(type.count)
            message.body.append(try reader.read(type))
        }
        return message
    }

    struct Writer {
        var bytes: [UInt8] = []
        mutating func align(_ n: Int) { while bytes.count % n != 0 { bytes.append(0) } }
        mutating func uint32(_ v: UInt32) {
            align(4)
            withUnsafeBytes(of: v.littleEndian) { bytes += $0 }
        }
        mutating func write(_ value: DBusValue) {
            switch value {
            case .byte(let v): bytes.append(v)
            case .uint32(let v): uint32(v)
            case .int32(let v): uint32(UInt32(bitPattern: v))
            case .string(let v), .objectPath(let v):
                uint32(UInt32(v.utf8.count))
                bytes += Array(v.utf8) + [0]
            case .signature(let v):
                bytes.append(UInt8(v.utf8.count))
                bytes += Array(v.utf8) + [0]
            case .strings(let values):
                uint32(0)
                let lengthAt = bytes.count - 4
                let start = bytes.count
                for v in values { write(.string(v)) }
                let length = UInt32(bytes.count - start)
                withUnsafeBytes(of: length.littleEndian) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
            case .emptyDictionary:
                uint32(0)
                align(8)
            }
        }
    }

    struct Reader {
        let bytes: [UInt8]
        var offset = 0
        mutating func align(_ n: Int) { offset = (offset + n - 1) / n * n }
        mutating func byte() throws(DBusError) -> UInt8 {
            guard offset < bytes.count else { throw DBusError("a message ends early") }
            defer { offset += 1 }
            return bytes[offset]
        }
        mutating func uint32() throws(DBusError) -> UInt32 {
            align(4)
            guard offset + 4 <= bytes.count else { throw DBusError("a message ends early") }
            defer { offset += 4 }
            return bytes[offset..<offset + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) }
        }
        mutating func text(_ count: Int) throws(DBusError) -> String {
            guard count >= 0, offset + count + 1 <= bytes.count else { throw DBusError("a string runs past the message") }
            defer { offset += count + 1 }
            return String(decoding: bytes[offset..<offset + count], as: UTF8.self)
        }
        mutating func signature() throws(DBusError) -> String { try text(Int(try byte())) }
        mutating func read(_ type: String) throws(DBusError) -> DBusValue {
            switch type {
            case "y": return .byte(try byte())
            case "u": return .uint32(try uint32())
            case "i": return .int32(Int32(bitPattern: try uint32()))
            case "s": return .string(try text(Int(try uint32())))
            case "o": return .objectPath(try text(Int(try uint32())))
            case "g": return .signature(try signature())
            case "as":
                let length = Int(try uint32())
                let end = offset + length
                var values: [String] = []
                while offset < end { values.append(try text(Int(try uint32()))) }
                return .strings(values)
            case "a{sv}":
                let length = Int(try uint32())
                align(8)
                offset += length
                return .emptyDictionary
            default:
                throw DBusError("a value of D-Bus type '\(type)', which this reader does not know")
            }
        }
    }
}

/// A connection to a D-Bus bus (the session bus, for notifications): authenticated as this
/// user (SASL EXTERNAL), with `Hello` done. Blocking; one reader thread.
public final class DBusConnection: Sendable {
    private let fd: Int32
    /// Method calls waiting for their reply, by serial (every message sent takes one).
    private let pending = Mutex(PendingRequests<CheckedContinuation<DBusMessage, any Error>>())
    private let writing = Mutex(())
    private let signals: @Sendable (DBusMessage) -> Void
    private let calls: @Sendable (DBusMessage) -> Void
    public private(set) nonisolated(unsafe) var uniqueName = ""

    /// Connects to the bus at `address` (`unix:path=…` or `unix:abstract=…`). `signals` gets
    /// every signal, `calls` every method call addressed to this connection.
    public init(
        address: String, signals: @escaping @Sendable (DBusMessage) -> Void = { _ in }, calls: @escaping @Sendable (DBusMessage) -> Void = { _ in }
    ) throws(DBusError) {
        self.signals = signals
        self.calls = calls
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
        let reader = Thread { [self] in readLoop() }
        reader.name = "handoff-dbus"
        reader.start()
    }

    /// Says hello to the bus; its answer is this connection's unique name.
    public func hello() async throws -> String {
        let reply = try await call(DBusMessage(kind: .methodCall, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "Hello", destination: "org.freedesktop.DBus"))
        uniqueName = reply.body.first?.string ?? ""
        return uniqueName
    }

    /// Calls a method and returns its reply; a D-Bus error is thrown.
    public func call(_ message: DBusMessage) async throws -> DBusMessage {
        try await withCheckedThrowingContinuation { continuation in
            guard let serial = pending.withLock({ $0.issue(continuation) }) else {
                continuation.resume(throwing: DBusError("the bus connection is closed"))
                return
            }
            var message = message
            message.serial = UInt32(truncatingIfNeeded: serial)
            do {
                try write(message)
            } catch {
                if let waiting = pending.withLock({ $0.settle(serial) }) { waiting.resume(throwing: error) }
            }
        }
    }

    /// Sends a message that expects no reply (a signal, a method return).
    public func send(_ message: DBusMessage) throws(DBusError) {
        var message = message
        message.serial = UInt32(truncatingIfNeeded: pending.withLock { $0.takeNumber() })
        try write(message)
    }

    public func close() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func write(_ message: DBusMessage) throws(DBusError) {
        let bytes = message.encoded()
        try writing.withLock { _ throws(DBusError) in try Self.send(fd, bytes) }
    }

    private func readLoop() {
        defer {
            for waiting in pending.withLock({ $0.close() }) { waiting.resume(throwing: DBusError("the bus connection ended")) }
            Glibc.close(fd)
        }
        while true {
            guard let header = Self.read(fd, 16) else { return }
            let bodyLength = Int(header[4..<8].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            let fieldsLength = Int(header[12..<16].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            guard bodyLength < 1 << 20, fieldsLength < 1 << 16 else { return }
            let rest = (fieldsLength + 7) / 8 * 8 + bodyLength
            guard let tail = Self.read(fd, rest) else { return }
            guard let message = try? DBusMessage.decode(header + tail) else { continue }
            switch message.kind {
            case .methodReturn, .error:
                guard let serial = message.replySerial, let waiting = pending.withLock({ $0.settle(UInt64(serial)) }) else { continue }
                if message.kind == .error {
                    waiting.resume(throwing: DBusError("\(message.errorName ?? "error"): \(message.body.first?.string ?? "")"))
                } else {
                    waiting.resume(returning: message)
                }
            case .signal: signals(message)
            case .methodCall: calls(message)
            }
        }
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
