import Foundation

/// A JSON value read by `StrictJSON`.
public enum JSONValue: Sendable, Hashable {
    case object([JSONMember])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case bool(Bool)
    case null

    /// The value of `key` in an object (the last, when a key is repeated); `nil` for another kind.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.key == key }?.value
    }

    /// What kind of value this is, for messages: "an object", "a string"…
    public var kind: String {
        switch self {
        case .object: return "an object"
        case .array: return "an array"
        case .string: return "a string"
        case .number: return "a number"
        case .bool: return "a boolean"
        case .null: return "null"
        }
    }
}

/// One member of a JSON object, in the order the text has it.
public struct JSONMember: Sendable, Hashable {
    public var key: String
    public var value: JSONValue
}

/// Where and why a text is not JSON: `line 3, column 14: a trailing comma before '}'`.
public struct StrictJSONError: Error, Sendable, Hashable, CustomStringConvertible {
    /// 1-based, counted in lines and characters of the text.
    public var line: Int
    public var column: Int
    public var problem: String
    public var description: String { "line \(line), column \(column): \(problem)" }
}

/// JSON exactly as RFC 8259 writes it, which is how Apple reads association files: no byte-order
/// mark, no trailing comma, no comments, no single quotes, no bare control characters in
/// strings, no lone surrogates, nothing after the value. (Foundation's reader on Linux lets a
/// trailing comma and a byte-order mark through, so a file Apple refuses would pass here.)
/// Errors give the line and column.
public enum StrictJSON {
    /// How deep arrays and objects may nest.
    public static let maximumDepth = 512

    public static func parse(_ bytes: some Collection<UInt8>) throws(StrictJSONError) -> JSONValue {
        var reader = Reader(bytes: Array(bytes))
        if reader.bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            throw reader.error("the file starts with a byte-order mark, which Apple's reader refuses; save it as UTF-8 without one")
        }
        reader.skipWhitespace()
        let value = try reader.value(depth: 0)
        reader.skipWhitespace()
        guard reader.offset == reader.bytes.count else {
            throw reader.error("text after the JSON value ('\(reader.peekDescription)'); a file holds one value")
        }
        return value
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        /// The error at the current offset, with its line and column.
        func error(_ problem: String, at position: Int? = nil) -> StrictJSONError {
            let end = min(position ?? offset, bytes.count)
            var line = 1
            var column = 1
            var index = 0
            while index < end {
                if bytes[index] == UInt8(ascii: "\n") {
                    line += 1
                    column = 1
                } else if bytes[index] & 0xC0 != 0x80 {
                    column += 1
                }
                index += 1
            }
            return StrictJSONError(line: line, column: column, problem: problem)
        }

        var peekDescription: String {
            guard offset < bytes.count else { return "the end of the file" }
            let byte = bytes[offset]
            if byte >= 0x20 && byte < 0x7F { return String(UnicodeScalar(byte)) }
            return String(format: "byte 0x%02X", byte)
        }

        mutating func skipWhitespace() {
            while offset < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[offset]) { offset += 1 }
        }

        mutating func value(depth: Int) throws(StrictJSONError) -> JSONValue {
            guard offset < bytes.count else { throw error("the file ends where a value should be") }
            switch bytes[offset] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            case UInt8(ascii: "'"): throw error("a string in single quotes; JSON strings use double quotes")
            case UInt8(ascii: "/"): throw error("a comment; JSON has none")
            default: throw error("'\(peekDescription)' where a value should be")
            }
        }

        mutating func literal(_ word: String, _ value: JSONValue) throws(StrictJSONError) -> JSONValue {
            guard bytes[offset...].starts(with: word.utf8) else { throw error("'\(peekDescription)' where a value should be") }
            offset += word.utf8.count
            return value
        }

        mutating func object(depth: Int) throws(StrictJSONError) -> JSONValue {
            guard depth <= StrictJSON.maximumDepth else { throw error("objects and arrays nest more than \(StrictJSON.maximumDepth) deep") }
            offset += 1
            var members: [JSONMember] = []
            skipWhitespace()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") {
                offset += 1
                return .object(members)
            }
            var lastComma = offset
            while true {
                skipWhitespace()
                guard offset < bytes.count else { throw error("the file ends inside an object") }
                guard bytes[offset] == UInt8(ascii: "\"") else {
                    if bytes[offset] == UInt8(ascii: "}"), !members.isEmpty {
                        throw error("a trailing comma before '}', which Apple's reader refuses", at: lastComma)
                    }
                    if bytes[offset] == UInt8(ascii: "'") { throw error("a name in single quotes; JSON names use double quotes") }
                    throw error("'\(peekDescription)' where a member's name in double quotes should be")
                }
                let key = try string()
                skipWhitespace()
                guard offset < bytes.count, bytes[offset] == UInt8(ascii: ":") else { throw error("'\(peekDescription)' where ':' should follow \"\(key)\"") }
                offset += 1
                skipWhitespace()
                members.append(JSONMember(key: key, value: try value(depth: depth)))
                skipWhitespace()
                guard offset < bytes.count else { throw error("the file ends inside an object") }
                if bytes[offset] == UInt8(ascii: ",") {
                    lastComma = offset
                    offset += 1
                    continue
                }
                guard bytes[offset] == UInt8(ascii: "}") else { throw error("'\(peekDescription)' where ',' or '}' should be") }
                offset += 1
                return .object(members)
            }
        }

        mutating func array(depth: Int) throws(StrictJSONError) -> JSONValue {
            guard depth <= StrictJSON.maximumDepth else { throw error("objects and arrays nest more than \(StrictJSON.maximumDepth) deep") }
            offset += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") {
                offset += 1
                return .array(items)
            }
            var lastComma = offset
            while true {
                skipWhitespace()
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "]"), !items.isEmpty {
                    throw error("a trailing comma before ']', which Apple's reader refuses", at: lastComma)
                }
                items.append(try value(depth: depth))
                skipWhitespace()
                guard offset < bytes.count else { throw error("the file ends inside an array") }
                if bytes[offset] == UInt8(ascii: ",") {
                    lastComma = offset
                    offset += 1
                    continue
                }
                guard bytes[offset] == UInt8(ascii: "]") else { throw error("'\(peekDescription)' where ',' or ']' should be") }
                offset += 1
                return .array(items)
            }
        }

        mutating func number() throws(StrictJSONError) -> JSONValue {
            let start = offset
            if bytes[offset] == UInt8(ascii: "-") { offset += 1 }
            func digits() -> Int {
                let from = offset
                while offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) { offset += 1 }
                return offset - from
            }
            guard offset < bytes.count else { throw error("a number without digits") }
            if bytes[offset] == UInt8(ascii: "0") {
                offset += 1
                if offset < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[offset]) {
                    throw error("a number with a leading zero")
                }
            } else if digits() == 0 {
                throw error("a number without digits")
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: ".") {
                offset += 1
                guard digits() > 0 else { throw error("a number with no digit after its '.'") }
            }
            if offset < bytes.count, bytes[offset] == UInt8(ascii: "e") || bytes[offset] == UInt8(ascii: "E") {
                offset += 1
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "+") || bytes[offset] == UInt8(ascii: "-") { offset += 1 }
                guard digits() > 0 else { throw error("a number with no digit in its exponent") }
            }
            let text = String(decoding: bytes[start..<offset], as: UTF8.self)
            guard let value = Double(text), value.isFinite else { throw error("the number \(text) is too large", at: start) }
            return .number(value)
        }

        mutating func string() throws(StrictJSONError) -> String {
            let start = offset
            offset += 1
            var scalars = String.UnicodeScalarView()
            var runStart = offset
            func flush(_ end: Int) throws(StrictJSONError) {
                guard runStart < end else { return }
                guard let text = String(validating: bytes[runStart..<end], as: UTF8.self) else {
                    throw error("a string that is not UTF-8", at: runStart)
                }
                scalars.append(contentsOf: text.unicodeScalars)
            }
            while true {
                guard offset < bytes.count else { throw error("the file ends inside a string that starts here", at: start) }
                let byte = bytes[offset]
                if byte == UInt8(ascii: "\"") {
                    try flush(offset)
                    offset += 1
                    return String(scalars)
                }
                if byte < 0x20 {
                    throw error("a control character (0x\(String(byte, radix: 16))) inside a string; write it as an escape such as \\n")
                }
                guard byte == UInt8(ascii: "\\") else {
                    offset += 1
                    continue
                }
                try flush(offset)
                offset += 1
                guard offset < bytes.count else { throw error("the file ends inside a string that starts here", at: start) }
                let escape = bytes[offset]
                offset += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    let high = try hex4()
                    if (0xD800..<0xDC00).contains(high) {
                        guard bytes[offset...].starts(with: [UInt8(ascii: "\\"), UInt8(ascii: "u")]) else {
                            throw error("a lone surrogate \\u\(String(high, radix: 16, uppercase: true)) in a string")
                        }
                        offset += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else {
                            throw error("a lone surrogate \\u\(String(high, radix: 16, uppercase: true)) in a string")
                        }
                        scalars.append(Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!)
                    } else if let scalar = Unicode.Scalar(high) {
                        scalars.append(scalar)
                    } else {
                        throw error("a lone surrogate \\u\(String(high, radix: 16, uppercase: true)) in a string")
                    }
                default:
                    throw error("'\\\(Character(UnicodeScalar(escape)))' is not an escape JSON has", at: offset - 2)
                }
                runStart = offset
            }
        }

        mutating func hex4() throws(StrictJSONError) -> UInt32 {
            guard offset + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[offset..<offset + 4], as: UTF8.self), radix: 16),
                bytes[offset..<offset + 4].allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "-") })
            else {
                throw error("\\u must be followed by four hexadecimal digits")
            }
            offset += 4
            return value
        }
    }
}
