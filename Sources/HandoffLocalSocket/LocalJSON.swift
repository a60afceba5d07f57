// The local API's JSON, read and written by hand without Foundation: the values and the
// checks every message shares. `LocalMessageJSON` (in `HandoffLocalAPI`) builds the messages
// of a continuation on these, and the `handoff` front reads its few answers with them.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Anything the hand-written reader does not take: `JSONDecoder` reads those bytes instead.
package struct LocalJSONUnusual: Error {
    package init() {}
}

/// Writes JSON as `JSONEncoder` does with the local API's settings (sorted keys are the
/// caller's to keep, slashes unescaped, non-finite numbers as strings).
package struct LocalJSONWriter {
    package var bytes: [UInt8] = []
    /// Whether the next key of the current object is its first.
    private var first = true

    package init() { bytes.reserveCapacity(256) }

    package mutating func ascii(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    package mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        first = true
    }

    package mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        first = false
    }

    /// A key the caller writes in `JSONEncoder`'s order (UTF-8 bytes, ascending); the
    /// keys are plain ASCII and need no escaping.
    package mutating func key(_ name: StaticString) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    package mutating func bool(_ value: Bool) {
        if value { ascii("true") } else { ascii("false") }
    }

    package mutating func unsigned(_ value: UInt64) {
        bytes.append(contentsOf: String(value).utf8)
    }

    package mutating func signed(_ value: Int) {
        bytes.append(contentsOf: String(value).utf8)
    }

    /// As `JSONEncoder` writes a `Double`: Swift's shortest form without a trailing
    /// `.0`, and the non-finite values as the strings the local API's encoder names.
    package mutating func double(_ value: Double) {
        if value.isNaN { ascii("\"NaN\""); return }
        if value == .infinity { ascii("\"Infinity\""); return }
        if value == -.infinity { ascii("\"-Infinity\""); return }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    /// A string with the escapes `JSONEncoder` writes: quote, backslash, and the control
    /// characters (`\n`, `\r`, `\t`, `\b`, `\f` by name, the rest as `\u00xx`).
    package mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                start = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    package mutating func strings(_ values: [String]) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    package mutating func error(_ e: LocalError) {
        open()
        if let value = e.code { key("code"); signed(value) }
        key("kind"); string(e.kind.rawValue)
        key("message"); string(e.message)
        close()
    }
}

/// Reads JSON from bytes, strictly: it takes only what `JSONDecoder` takes, and reads it the
/// same way; whatever it is unsure of is `LocalJSONUnusual`.
package struct LocalJSONReader {
    package typealias Unusual = LocalJSONUnusual

    /// The deepest nesting the reader follows; deeper messages go to `JSONDecoder`.
    package static let maximumDepth = 32

    package let bytes: UnsafeBufferPointer<UInt8>
    package var offset = 0

    package init(bytes: UnsafeBufferPointer<UInt8>, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package mutating func error() throws(Unusual) -> LocalError {
        var kind: LocalError.Kind?, code: Int?, message: String?
        try object { (key, r) throws(Unusual) in
            switch key {
            case "kind": kind = LocalError.Kind(rawValue: try r.string()) ?? .unknown
            case "code": code = try r.null() ? nil : r.signed()
            case "message": message = try r.string()
            default: try r.skip(depth: 2)
            }
        }
        guard let kind, let message else { throw Unusual() }
        return LocalError(kind, code: code, message)
    }

    // MARK: Values

    package mutating func whitespace() {
        while offset < bytes.count {
            switch bytes[offset] {
            case 0x20, 0x09, 0x0A, 0x0D: offset += 1
            default: return
            }
        }
    }

    /// The next byte after whitespace, not consumed.
    package mutating func peek() throws(Unusual) -> UInt8 {
        whitespace()
        guard offset < bytes.count else { throw Unusual() }
        return bytes[offset]
    }

    package mutating func expect(_ byte: UInt8) throws(Unusual) {
        guard try peek() == byte else { throw Unusual() }
        offset += 1
    }

    /// Consumes `null` if it comes next.
    package mutating func null() -> Bool {
        guard (try? peek()) == UInt8(ascii: "n") else { return false }
        guard literal("null") else { return false }
        return true
    }

    package mutating func literal(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - offset >= count else { return false }
        let matches = word.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[offset + $0] == expected[$0] }
        }
        if matches { offset += count }
        return matches
    }

    package mutating func bool() throws(Unusual) -> Bool {
        let next = try peek()
        if next == UInt8(ascii: "t"), literal("true") { return true }
        if next == UInt8(ascii: "f"), literal("false") { return false }
        throw Unusual()
    }

    /// The most members an object read here may have; more go to `JSONDecoder` (the
    /// duplicate check below is quadratic, so it must stay small).
    package static let maximumMembers = 64

    /// An object's members, each key unique (a repeated key is unusual). `checkKeys`
    /// false: an object passed over, whose keys `JSONDecoder` does not check either.
    package mutating func object(checkKeys: Bool = true, _ member: (String, inout LocalJSONReader) throws(Unusual) -> Void) throws(Unusual) {
        try expect(UInt8(ascii: "{"))
        var keys: [String] = []
        if try peek() == UInt8(ascii: "}") {
            offset += 1
            return
        }
        while true {
            guard try peek() == UInt8(ascii: "\"") else { throw Unusual() }
            let key = try string()
            if checkKeys {
                guard keys.count < Self.maximumMembers, !keys.contains(key) else { throw Unusual() }
                keys.append(key)
            }
            try expect(UInt8(ascii: ":"))
            whitespace()
            try member(key, &self)
            switch try peek() {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "}"):
                offset += 1
                return
            default: throw Unusual()
            }
        }
    }

    package mutating func optionalString() throws(Unusual) -> String? {
        null() ? nil : try string()
    }

    package mutating func strings() throws(Unusual) -> [String] {
        try expect(UInt8(ascii: "["))
        var values: [String] = []
        if try peek() == UInt8(ascii: "]") {
            offset += 1
            return values
        }
        while true {
            values.append(try string())
            switch try peek() {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "]"):
                offset += 1
                return values
            default: throw Unusual()
            }
        }
    }

    /// A string: valid UTF-8, no raw control characters, and JSON's escapes (a character
    /// outside the BMP as its two halves; half of one is unusual, as `JSONDecoder` finds it).
    package mutating func string() throws(Unusual) -> String {
        try expect(UInt8(ascii: "\""))
        let start = offset
        var ascii = true
        while offset < bytes.count {
            let byte = bytes[offset]
            if byte == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<offset])
                offset += 1
                if ascii { return String(decoding: raw, as: UTF8.self) }
                guard let text = String._tryFromUTF8(raw) else { throw Unusual() }
                return text
            }
            if byte == UInt8(ascii: "\\") {
                offset = start
                return try escapedString()
            }
            guard byte >= 0x20 else { throw Unusual() }
            if byte >= 0x80 { ascii = false }
            offset += 1
        }
        throw Unusual()
    }

    /// Checks a string without making it: plain ASCII is passed over, anything else is
    /// read as `string()` reads it.
    package mutating func skipString() throws(Unusual) {
        try expect(UInt8(ascii: "\""))
        let start = offset
        // Eight bytes at a time while none is a quote, a backslash, a control character or
        // outside ASCII (the usual bit tricks: a byte's high bit marks each case).
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
            while bytes.count - offset >= 8 {
                let word = UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
                let quote = word ^ (ones &* 0x22), backslash = word ^ (ones &* 0x5C)
                let special = (word | (word &- ones &* 0x20) | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)) & highs
                if special != 0 { break }
                offset += 8
            }
        }
        while offset < bytes.count {
            let byte = bytes[offset]
            if byte == UInt8(ascii: "\"") {
                offset += 1
                return
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { break }
            offset += 1
        }
        offset = start - 1
        _ = try string()
    }

    private mutating func escapedString() throws(Unusual) -> String {
        var utf8: [UInt8] = []
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = utf8.withUnsafeBufferPointer({ String._tryFromUTF8($0) }) else { throw Unusual() }
                return text
            case UInt8(ascii: "\\"):
                guard offset < bytes.count else { throw Unusual() }
                let escape = bytes[offset]
                offset += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "u"):
                    var value = try hexQuad()
                    // A character outside the BMP is a pair of escapes, a high half then a low
                    // one, as JSONDecoder reads it; half a pair is unusual.
                    if value >= 0xD800 && value < 0xDC00 {
                        guard literal("\\u") else { throw Unusual() }
                        let low = try hexQuad()
                        guard low >= 0xDC00 && low < 0xE000 else { throw Unusual() }
                        value = 0x10000 + (value - 0xD800) << 10 + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(value) else { throw Unusual() }
                    utf8.append(contentsOf: String(Character(scalar)).utf8)
                default: throw Unusual()
                }
            default:
                guard byte >= 0x20 else { throw Unusual() }
                utf8.append(byte)
            }
        }
        throw Unusual()
    }

    /// The four hexadecimal digits of a `\u` escape.
    private mutating func hexQuad() throws(Unusual) -> UInt32 {
        guard bytes.count - offset >= 4 else { throw Unusual() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Self.hexValue(bytes[offset]) else { throw Unusual() }
            value = value << 4 | UInt32(digit)
            offset += 1
        }
        return value
    }

    package static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Digits only, no sign, no leading zero, fitting 64 bits (`7.0`, `7e0` are unusual).
    package mutating func unsigned() throws(Unusual) -> UInt64 {
        whitespace()
        let start = offset
        var value: UInt64 = 0
        while offset < bytes.count, bytes[offset] >= UInt8(ascii: "0"), bytes[offset] <= UInt8(ascii: "9") {
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(bytes[offset] - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { throw Unusual() }
            value = sum
            offset += 1
        }
        let count = offset - start
        guard count > 0, count == 1 || bytes[start] != UInt8(ascii: "0") else { throw Unusual() }
        try endOfNumber()
        return value
    }

    package mutating func signed() throws(Unusual) -> Int {
        let negative = try peek() == UInt8(ascii: "-")
        if negative { offset += 1 }
        guard offset < bytes.count, bytes[offset] >= UInt8(ascii: "0"), bytes[offset] <= UInt8(ascii: "9") else { throw Unusual() }
        let magnitude = try unsigned()
        if negative {
            guard magnitude <= UInt64(Int.max) + 1 else { throw Unusual() }
            return magnitude == UInt64(Int.max) + 1 ? .min : -Int(magnitude)
        }
        guard let value = Int(exactly: magnitude) else { throw Unusual() }
        return value
    }

    /// A number as JSON writes it, finite once read.
    package mutating func double() throws(Unusual) -> Double {
        whitespace()
        let start = offset
        try number()
        guard let value = Double(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<offset]), as: UTF8.self)), value.isFinite else {
            throw Unusual()
        }
        return value
    }

    /// A number must end where a value ends.
    private func endOfNumber() throws(Unusual) {
        guard offset < bytes.count else { return }
        switch bytes[offset] {
        case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D: return
        default: throw Unusual()
        }
    }

    /// JSON's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    package mutating func number() throws(Unusual) {
        func digits() -> Int {
            let start = offset
            while offset < bytes.count, bytes[offset] >= UInt8(ascii: "0"), bytes[offset] <= UInt8(ascii: "9") { offset += 1 }
            return offset - start
        }
        if offset < bytes.count, bytes[offset] == UInt8(ascii: "-") { offset += 1 }
        let integerStart = offset
        let integerDigits = digits()
        guard integerDigits > 0, integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else { throw Unusual() }
        if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
            offset += 1
            guard digits() > 0 else { throw Unusual() }
        }
        if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
            offset += 1
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") { offset += 1 }
            guard digits() > 0 else { throw Unusual() }
        }
        try endOfNumber()
    }

    /// Checks and passes over one value of any kind.
    package mutating func skip(depth: Int) throws(Unusual) {
        guard depth <= Self.maximumDepth else { throw Unusual() }
        switch try peek() {
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "{"):
            try object(checkKeys: false) { (_, r) throws(Unusual) in try r.skip(depth: depth + 1) }
        case UInt8(ascii: "["):
            offset += 1
            if try peek() == UInt8(ascii: "]") {
                offset += 1
                return
            }
            while true {
                try skip(depth: depth + 1)
                switch try peek() {
                case UInt8(ascii: ","): offset += 1
                case UInt8(ascii: "]"):
                    offset += 1
                    return
                default: throw Unusual()
                }
            }
        case UInt8(ascii: "t"): guard literal("true") else { throw Unusual() }
        case UInt8(ascii: "f"): guard literal("false") else { throw Unusual() }
        case UInt8(ascii: "n"): guard literal("null") else { throw Unusual() }
        default: try number()
        }
    }
}

extension LocalJSONWriter {
    /// A `hello` call, as `JSONEncoder` writes it.
    package static func hello(request: UInt64, version: Int = LocalProtocol.version, role: LocalRole, bundleIdentifier: String?) -> [UInt8] {
        var w = LocalJSONWriter()
        w.open()
        if let bundleIdentifier { w.key("bundleIdentifier"); w.string(bundleIdentifier) }
        w.key("request"); w.unsigned(request)
        w.key("role"); w.string(role.rawValue)
        w.key("type"); w.ascii("\"hello\"")
        w.key("version"); w.signed(version)
        w.close()
        return w.bytes
    }

    /// A `continue` call: `activity` is the activity's id in its 36-character form (upper
    /// case, as Foundation writes a UUID), nil for the most recent activity.
    package static func continueCall(request: UInt64, activity: String?) -> [UInt8] {
        var w = LocalJSONWriter()
        w.open()
        if let activity { w.key("activity"); w.string(activity) }
        w.key("request"); w.unsigned(request)
        w.key("type"); w.ascii("\"continue\"")
        w.close()
        return w.bytes
    }

    /// The `proof` that answers a `prove`, its nonce as the agent wrote it (base64).
    package static func proof(nonce: String) -> [UInt8] {
        var w = LocalJSONWriter()
        w.open()
        w.key("nonce"); w.string(nonce)
        w.key("type"); w.ascii("\"proof\"")
        w.close()
        return w.bytes
    }
}

extension LocalJSONReader {
    /// For a client that needs only whether a reply succeeded (the `handoff continue` command
    /// and the answer to its `hello`): the reply's request and its error, read by hand, with its
    /// other fields checked as JSON but not read. Nil when `payload` is not plainly a reply
    /// (`JSONDecoder` then reads it).
    package static func replyOutcome(_ payload: [UInt8]) -> (request: UInt64, error: LocalError?)? {
        payload.withUnsafeBufferPointer { buffer in
            var reader = LocalJSONReader(bytes: buffer)
            var type: LocalJSONReader?, request: LocalJSONReader?, error: LocalJSONReader?
            do throws(Unusual) {
                try reader.object { (key, field) throws(Unusual) in
                    switch key {
                    case "type": type = field
                    case "request": request = field
                    case "error": error = field
                    default: break
                    }
                    try field.skip(depth: 1)
                }
                reader.whitespace()
                guard reader.offset == buffer.count, var type, try type.string() == "reply", var request else { return nil }
                let number = try request.unsigned()
                guard var error, !error.null() else { return (number, nil) }
                return (number, try error.error())
            } catch {
                return nil
            }
        }
    }

    /// Whether `payload` is plainly a message other than a reply (its `type` is not `reply`):
    /// false for a reply, and for anything this reader cannot read.
    package static func isOtherThanReply(_ payload: [UInt8]) -> Bool {
        payload.withUnsafeBufferPointer { buffer in
            var reader = LocalJSONReader(bytes: buffer)
            var type: String?
            do throws(Unusual) {
                try reader.object { (key, field) throws(Unusual) in
                    if key == "type" { type = try field.string() } else { try field.skip(depth: 1) }
                }
                reader.whitespace()
                return reader.offset == buffer.count && type != nil && type != "reply"
            } catch {
                return false
            }
        }
    }

    /// The nonce of a `prove` message, as written (base64); nil for any other message.
    package static func proveNonce(_ payload: [UInt8]) -> String? {
        payload.withUnsafeBufferPointer { buffer in
            var reader = LocalJSONReader(bytes: buffer)
            var type: String?, nonce: String?
            do throws(Unusual) {
                try reader.object { (key, field) throws(Unusual) in
                    switch key {
                    case "type": type = try field.string()
                    case "nonce": nonce = try field.string()
                    default: try field.skip(depth: 1)
                    }
                }
                reader.whitespace()
                guard reader.offset == buffer.count, type == "prove" else { return nil }
                return nonce
            } catch {
                return nil
            }
        }
    }
}
