import Foundation

/// Why talking to D-Bus failed.
public struct DBusError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The D-Bus error's name, when the other side answered with one
    /// (`org.freedesktop.DBus.Error.ServiceUnknown`, ...).
    public var name: String?
    public init(_ message: String, name: String? = nil) {
        self.message = message
        self.name = name
    }
    public var description: String { message }
}

/// A value of a D-Bus message body: every type of the specification but Unix file descriptors'
/// contents (their index is kept).
public indirect enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    case unixFD(UInt32)
    /// Values of one type; `element` is its signature (an empty array has one too).
    case array(element: String, [DBusValue])
    /// One entry of a dictionary: an array whose element is `{KV}`.
    case dictEntry(DBusValue, DBusValue)
    case structure([DBusValue])
    case variant(DBusValue)

    /// The value's type signature.
    public var signature: String {
        switch self {
        case .byte: return "y"
        case .boolean: return "b"
        case .int16: return "n"
        case .uint16: return "q"
        case .int32: return "i"
        case .uint32: return "u"
        case .int64: return "x"
        case .uint64: return "t"
        case .double: return "d"
        case .string: return "s"
        case .objectPath: return "o"
        case .signature: return "g"
        case .unixFD: return "h"
        case .array(let element, _): return "a" + element
        case .dictEntry(let key, let value): return "{" + key.signature + value.signature + "}"
        case .structure(let fields): return "(" + fields.map(\.signature).joined() + ")"
        case .variant: return "v"
        }
    }

    // MARK: Making values

    /// `as`.
    public static func strings(_ values: [String]) -> DBusValue { .array(element: "s", values.map(DBusValue.string)) }

    /// `a{sv}` with nothing in it.
    public static let emptyDictionary = DBusValue.array(element: "{sv}", [])

    /// `a{sv}`: each value in a variant, the keys in order.
    public static func dictionary(_ entries: [String: DBusValue]) -> DBusValue {
        .array(element: "{sv}", entries.sorted { $0.key < $1.key }.map { .dictEntry(.string($0.key), .variant($0.value)) })
    }

    /// Whether `path` is a valid object path: `/`, or `/`-separated elements of `[A-Za-z0-9_]`.
    public static func isObjectPath(_ path: String) -> Bool {
        guard path.hasPrefix("/") else { return false }
        if path == "/" { return true }
        return path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).allSatisfy { element in
            !element.isEmpty && element.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
        }
    }

    // MARK: Reading values

    /// The value inside variants (itself, when it is not one).
    public var unwrapped: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }

    public var string: String? {
        switch unwrapped {
        case .string(let value), .objectPath(let value): return value
        default: return nil
        }
    }

    public var uint32: UInt32? {
        if case .uint32(let value) = unwrapped { return value }
        return nil
    }

    public var boolean: Bool? {
        if case .boolean(let value) = unwrapped { return value }
        return nil
    }

    /// Any integer type, as `Int64` when it fits.
    public var integer: Int64? {
        switch unwrapped {
        case .byte(let v): return Int64(v)
        case .int16(let v): return Int64(v)
        case .uint16(let v): return Int64(v)
        case .int32(let v): return Int64(v)
        case .uint32(let v): return Int64(v)
        case .int64(let v): return v
        case .uint64(let v): return Int64(exactly: v)
        default: return nil
        }
    }

    public var double: Double? {
        if case .double(let value) = unwrapped { return value }
        return integer.map(Double.init)
    }

    /// The elements of an array.
    public var elements: [DBusValue]? {
        if case .array(_, let values) = unwrapped { return values }
        return nil
    }

    /// The strings of an `as` (a single string is one).
    public var strings: [String]? {
        if let single = string { return [single] }
        return elements?.compactMap(\.string)
    }

    /// An `a{s…}` as a dictionary: values unwrapped from their variants; a key given twice keeps
    /// its first value.
    public var dictionary: [String: DBusValue]? {
        guard let elements else { return nil }
        var result: [String: DBusValue] = [:]
        result.reserveCapacity(elements.count)
        for element in elements {
            guard case .dictEntry(let key, let value) = element, let name = key.string else { return nil }
            if result[name] == nil { result[name] = value.unwrapped }
        }
        return result
    }
}

/// Splitting and checking type signatures, as the specification limits them.
enum DBusSignature {
    /// The complete types of `signature` in order; throws for one the specification forbids.
    static func split(_ signature: String) throws(DBusError) -> [String] {
        let bytes = Array(signature.utf8)
        guard bytes.count <= 255 else { throw DBusError("a type signature longer than 255 bytes") }
        var types: [String] = []
        var index = 0
        while index < bytes.count {
            let start = index
            try skip(bytes, &index, arrays: 0, structs: 0)
            types.append(String(decoding: bytes[start..<index], as: UTF8.self))
        }
        return types
    }

    /// Moves `index` past one complete type.
    private static func skip(_ bytes: [UInt8], _ index: inout Int, arrays: Int, structs: Int) throws(DBusError) {
        guard index < bytes.count else { throw DBusError("a type signature ends inside a type") }
        let code = bytes[index]
        index += 1
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "x"),
            UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "s"), UInt8(ascii: "o"), UInt8(ascii: "g"), UInt8(ascii: "h"), UInt8(ascii: "v"):
            return
        case UInt8(ascii: "a"):
            guard arrays < 32 else { throw DBusError("a type signature nests arrays deeper than 32") }
            if index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                index += 1
                guard index < bytes.count, isBasic(bytes[index]) else { throw DBusError("a dictionary's key is not a basic type") }
                index += 1
                try skip(bytes, &index, arrays: arrays + 1, structs: structs + 1)
                guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else { throw DBusError("a dictionary entry of more than a key and a value") }
                index += 1
                guard structs + 1 <= 32 else { throw DBusError("a type signature nests structures deeper than 32") }
                return
            }
            try skip(bytes, &index, arrays: arrays + 1, structs: structs)
        case UInt8(ascii: "("):
            guard structs < 32 else { throw DBusError("a type signature nests structures deeper than 32") }
            guard index < bytes.count, bytes[index] != UInt8(ascii: ")") else { throw DBusError("an empty structure in a type signature") }
            while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                try skip(bytes, &index, arrays: arrays, structs: structs + 1)
            }
            guard index < bytes.count else { throw DBusError("a structure that does not close in a type signature") }
            index += 1
        default:
            throw DBusError("the type code '\(String(decoding: [code], as: UTF8.self))' in a type signature")
        }
    }

    static func isBasic(_ code: UInt8) -> Bool { Array("ybnqiuxtdsogh".utf8).contains(code) }

    /// How a type's values are aligned, by its first code.
    static func alignment(_ code: UInt8) -> Int {
        switch code {
        case UInt8(ascii: "y"), UInt8(ascii: "g"), UInt8(ascii: "v"): return 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): return 2
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "("), UInt8(ascii: "{"): return 8
        default: return 4
        }
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
    /// The caller does not wait for a reply (a method call's flag).
    public var noReplyExpected = false

    /// The most a message's body may hold here: larger ones are skipped whole (and a call waiting
    /// for one fails), so that no peer on the bus can make this process hold more.
    public static let maximumBodyBytes = 16 << 20
    /// The most values a message may hold here, so that a body of tiny values is bounded too.
    static let maximumValues = 1_000_000
    /// Variants inside variants, at most (the specification's total nesting of 64).
    static let maximumDepth = 64

    public init(kind: Kind, path: String? = nil, interface: String? = nil, member: String? = nil, destination: String? = nil, body: [DBusValue] = []) {
        self.kind = kind
        self.path = path
        self.interface = interface
        self.member = member
        self.destination = destination
        self.body = body
    }

    /// The return of the method call `call`, carrying `body`.
    public static func reply(to call: DBusMessage, _ body: [DBusValue] = []) -> DBusMessage {
        var reply = DBusMessage(kind: .methodReturn, destination: call.sender, body: body)
        reply.replySerial = call.serial
        return reply
    }

    /// The error answer `name` to the method call `call`.
    public static func error(to call: DBusMessage, _ name: String, _ text: String) -> DBusMessage {
        var reply = DBusMessage(kind: .error, destination: call.sender, body: [.string(text)])
        reply.errorName = name
        reply.replySerial = call.serial
        return reply
    }

    /// The message's bytes.
    public func encoded() -> [UInt8] {
        var bodyWriter = Writer()
        for value in body { bodyWriter.write(value) }
        var fields: [DBusValue] = []
        func field(_ code: UInt8, _ value: DBusValue) { fields.append(.structure([.byte(code), .variant(value)])) }
        if let path { field(1, .objectPath(path)) }
        if let interface { field(2, .string(interface)) }
        if let member { field(3, .string(member)) }
        if let errorName { field(4, .string(errorName)) }
        if let replySerial { field(5, .uint32(replySerial)) }
        if let destination { field(6, .string(destination)) }
        if let sender { field(7, .string(sender)) }
        if !body.isEmpty { field(8, .signature(body.map(\.signature).joined())) }
        var writer = Writer()
        writer.bytes += [UInt8(ascii: "l"), kind.rawValue, noReplyExpected ? 1 : 0, 1]
        writer.write(.uint32(UInt32(bodyWriter.bytes.count)))
        writer.write(.uint32(serial))
        writer.write(.array(element: "(yv)", fields))
        writer.align(8)
        return writer.bytes + bodyWriter.bytes
    }

    /// Reads a whole message: its header, and its body by the header's signature.
    public static func decode(_ bytes: [UInt8]) throws(DBusError) -> DBusMessage {
        guard bytes.count >= 16 else { throw DBusError("a message shorter than its header") }
        // Written in either byte order, as its sender's; the bus passes it on as it came.
        guard bytes[0] == UInt8(ascii: "l") || bytes[0] == UInt8(ascii: "B") else { throw DBusError("a message that is not D-Bus (its first byte is neither l nor B)") }
        guard let kind = Kind(rawValue: bytes[1]) else { throw DBusError("a message of unknown type \(bytes[1])") }
        guard bytes[3] == 1 else { throw DBusError("a message of D-Bus protocol version \(bytes[3])") }
        var reader = Reader(bytes: bytes, bigEndian: bytes[0] == UInt8(ascii: "B"))
        reader.offset = 4
        let bodyLength = Int(try reader.uint32())
        var message = DBusMessage(kind: kind)
        message.noReplyExpected = bytes[2] & 1 != 0
        message.serial = try reader.uint32()
        var signature = ""
        guard case .array(_, let fields) = try reader.read("a(yv)") else { throw DBusError("a message without its header fields") }
        for case .structure(let pair) in fields where pair.count == 2 {
            guard case .byte(let code) = pair[0], case .variant(let value) = pair[1] else { continue }
            switch (code, value) {
            case (1, .objectPath(let v)): message.path = v
            case (2, .string(let v)): message.interface = v
            case (3, .string(let v)): message.member = v
            case (4, .string(let v)): message.errorName = v
            case (5, .uint32(let v)): message.replySerial = v
            case (6, .string(let v)): message.destination = v
            case (7, .string(let v)): message.sender = v
            case (8, .signature(let v)): signature = v
            case (1...8, _): throw DBusError("the header field \(code) has the wrong type")
            default: break
            }
        }
        reader.align(8)
        guard reader.offset + bodyLength == bytes.count else { throw DBusError("a message whose body is not the length its header says") }
        for type in try DBusSignature.split(signature) {
            message.body.append(try reader.read(type))
        }
        guard reader.offset == bytes.count else { throw DBusError("a message whose body holds more than its signature says") }
        return message
    }

    /// Writes values, each aligned as the specification says (from the start of the buffer).
    struct Writer {
        var bytes: [UInt8] = []

        mutating func align(_ n: Int) {
            let padding = (n - bytes.count % n) % n
            if padding > 0 { bytes += repeatElement(0, count: padding) }
        }

        mutating func raw<T: FixedWidthInteger>(_ v: T) {
            align(MemoryLayout<T>.size)
            withUnsafeBytes(of: v.littleEndian) { bytes += $0 }
        }

        mutating func write(_ value: DBusValue) {
            switch value {
            case .byte(let v): bytes.append(v)
            case .boolean(let v): raw(UInt32(v ? 1 : 0))
            case .int16(let v): raw(v)
            case .uint16(let v): raw(v)
            case .int32(let v): raw(v)
            case .uint32(let v), .unixFD(let v): raw(v)
            case .int64(let v): raw(v)
            case .uint64(let v): raw(v)
            case .double(let v): raw(v.bitPattern)
            case .string(let v):
                // A NUL would end the string early and make the message invalid, which a bus
                // answers by closing the connection: text from elsewhere (a title) loses it.
                let text = v.utf8.contains(0) ? v.replacingOccurrences(of: "\u{0}", with: "") : v
                raw(UInt32(text.utf8.count))
                bytes += text.utf8
                bytes.append(0)
            case .objectPath(let v):
                let path = DBusValue.isObjectPath(v) ? v : "/"
                raw(UInt32(path.utf8.count))
                bytes += path.utf8
                bytes.append(0)
            case .signature(let v):
                bytes.append(UInt8(truncatingIfNeeded: v.utf8.count))
                bytes += v.utf8
                bytes.append(0)
            case .array(let element, let values):
                raw(UInt32(0))
                let lengthAt = bytes.count - 4
                align(DBusSignature.alignment(element.utf8.first ?? 0))
                let start = bytes.count
                for v in values { write(v) }
                let length = UInt32(bytes.count - start)
                withUnsafeBytes(of: length.littleEndian) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
            case .dictEntry(let key, let value):
                align(8)
                write(key)
                write(value)
            case .structure(let fields):
                align(8)
                for field in fields { write(field) }
            case .variant(let inner):
                write(.signature(inner.signature))
                write(inner)
            }
        }
    }

    /// Reads values by their signature, checking every length against the bytes there are.
    struct Reader {
        let bytes: [UInt8]
        /// The message's byte order (`B`); little-endian (`l`) otherwise.
        var bigEndian = false
        var offset = 0
        /// Values read so far (`maximumValues`).
        var values = 0

        mutating func align(_ n: Int) { offset = (offset + n - 1) / n * n }

        mutating func byte() throws(DBusError) -> UInt8 {
            guard offset < bytes.count else { throw DBusError("a message ends early") }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func raw<T: FixedWidthInteger>(_: T.Type) throws(DBusError) -> T {
            let size = MemoryLayout<T>.size
            align(size)
            guard offset + size <= bytes.count else { throw DBusError("a message ends early") }
            var v: T = 0
            if bigEndian {
                for i in 0..<size { v = v << 8 | T(truncatingIfNeeded: bytes[offset + i]) }
            } else {
                for i in (0..<size).reversed() { v = v << 8 | T(truncatingIfNeeded: bytes[offset + i]) }
            }
            offset += size
            return v
        }

        mutating func uint32() throws(DBusError) -> UInt32 { try raw(UInt32.self) }

        /// A string: valid UTF-8, with no NUL but the one that ends it, as the specification says.
        mutating func text(_ count: Int) throws(DBusError) -> String {
            guard count >= 0, offset + count < bytes.count, bytes[offset + count] == 0 else { throw DBusError("a string runs past the message") }
            let slice = bytes[offset..<offset + count]
            guard !slice.contains(0), let text = String(validating: slice, as: UTF8.self) else { throw DBusError("a string that is not UTF-8 without NUL") }
            offset += count + 1
            return text
        }

        mutating func read(_ type: String) throws(DBusError) -> DBusValue {
            let signature = Array(type.utf8)
            var index = 0
            let value = try read(signature, &index, depth: 0)
            guard index == signature.count else { throw DBusError("'\(type)' is not one complete type") }
            return value
        }

        /// Reads one value of the complete type starting at `signature[index]`.
        mutating func read(_ signature: [UInt8], _ index: inout Int, depth: Int) throws(DBusError) -> DBusValue {
            guard depth <= DBusMessage.maximumDepth else { throw DBusError("a value nested deeper than \(DBusMessage.maximumDepth)") }
            values += 1
            guard values <= DBusMessage.maximumValues else { throw DBusError("a message of more than \(DBusMessage.maximumValues) values") }
            guard index < signature.count else { throw DBusError("a type signature ends inside a type") }
            let code = signature[index]
            index += 1
            switch code {
            case UInt8(ascii: "y"): return .byte(try byte())
            case UInt8(ascii: "b"):
                let v = try uint32()
                guard v <= 1 else { throw DBusError("a boolean that is \(v)") }
                return .boolean(v == 1)
            case UInt8(ascii: "n"): return .int16(try raw(Int16.self))
            case UInt8(ascii: "q"): return .uint16(try raw(UInt16.self))
            case UInt8(ascii: "i"): return .int32(try raw(Int32.self))
            case UInt8(ascii: "u"): return .uint32(try uint32())
            case UInt8(ascii: "h"): return .unixFD(try uint32())
            case UInt8(ascii: "x"): return .int64(try raw(Int64.self))
            case UInt8(ascii: "t"): return .uint64(try raw(UInt64.self))
            case UInt8(ascii: "d"): return .double(Double(bitPattern: try raw(UInt64.self)))
            case UInt8(ascii: "s"): return .string(try text(Int(try uint32())))
            case UInt8(ascii: "o"):
                let path = try text(Int(try uint32()))
                guard DBusValue.isObjectPath(path) else { throw DBusError("an object path that is not one") }
                return .objectPath(path)
            case UInt8(ascii: "g"): return .signature(try text(Int(try byte())))
            case UInt8(ascii: "v"):
                let inner = try text(Int(try byte()))
                let types = try DBusSignature.split(inner)
                guard types.count == 1 else { throw DBusError("a variant of \(types.count) types") }
                return .variant(try read(Array(inner.utf8), depth: depth + 1))
            case UInt8(ascii: "a"):
                let length = Int(try uint32())
                guard length <= 64 << 20 else { throw DBusError("an array longer than 64 MiB") }
                guard index < signature.count else { throw DBusError("a type signature ends inside an array") }
                align(DBusSignature.alignment(signature[index]))
                let end = offset + length
                guard end <= bytes.count else { throw DBusError("an array runs past the message") }
                let elementStart = index
                var elements: [DBusValue] = []
                while offset < end {
                    index = elementStart
                    elements.append(try read(signature, &index, depth: depth + 1))
                }
                guard offset == end else { throw DBusError("an array's last element runs past its length") }
                if elements.isEmpty {
                    // No element was read: step over the element's type.
                    index = elementStart
                    try Self.skipType(signature, &index)
                }
                return .array(element: String(decoding: signature[elementStart..<index], as: UTF8.self), elements)
            case UInt8(ascii: "("):
                align(8)
                var fields: [DBusValue] = []
                while index < signature.count, signature[index] != UInt8(ascii: ")") {
                    fields.append(try read(signature, &index, depth: depth + 1))
                }
                guard index < signature.count, !fields.isEmpty else { throw DBusError("a structure that does not close, or is empty") }
                index += 1
                return .structure(fields)
            case UInt8(ascii: "{"):
                align(8)
                guard index < signature.count, DBusSignature.isBasic(signature[index]) else { throw DBusError("a dictionary's key is not a basic type") }
                let key = try read(signature, &index, depth: depth + 1)
                let value = try read(signature, &index, depth: depth + 1)
                guard index < signature.count, signature[index] == UInt8(ascii: "}") else { throw DBusError("a dictionary entry of more than a key and a value") }
                index += 1
                return .dictEntry(key, value)
            default:
                throw DBusError("the type code '\(String(decoding: [code], as: UTF8.self))' in a message")
            }
        }

        /// Reads one value of the single complete type `signature`.
        mutating func read(_ signature: [UInt8], depth: Int) throws(DBusError) -> DBusValue {
            var index = 0
            let value = try read(signature, &index, depth: depth)
            guard index == signature.count else { throw DBusError("a variant's signature holds more than one type") }
            return value
        }

        /// Moves `index` past one complete type without reading a value (an empty array's).
        static func skipType(_ signature: [UInt8], _ index: inout Int) throws(DBusError) {
            var open = 0
            repeat {
                guard index < signature.count else { throw DBusError("a type signature ends inside a type") }
                let code = signature[index]
                index += 1
                switch code {
                case UInt8(ascii: "a"): continue
                case UInt8(ascii: "("), UInt8(ascii: "{"): open += 1
                case UInt8(ascii: ")"), UInt8(ascii: "}"):
                    open -= 1
                    guard open >= 0 else { throw DBusError("a type signature closes what it did not open") }
                default:
                    break
                }
                if open == 0, code != UInt8(ascii: "a") { return }
            } while true
        }
    }
}
