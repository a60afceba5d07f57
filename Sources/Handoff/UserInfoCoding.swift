import Foundation

/// Handoff's own binary encoding of `userInfo`: compact, versioned, typed.
///
/// Layout (documented in `docs/userinfo-encoding.md`): the byte `H`, a version byte, then one
/// value. A value is a tag byte followed by its body; lengths and counts are LEB128 varints,
/// signed integers are zigzag varints, floating-point numbers are little-endian IEEE 754, a
/// date is the `Double` of its `timeIntervalSinceReferenceDate`.
public enum UserInfoCoding {
    /// The version this build writes; it reads this version only.
    public static let version: UInt8 = 1
    /// Deepest nesting the decoder accepts, so that hostile bytes cannot exhaust the stack.
    public static let maximumDepth = 512

    static let magic: UInt8 = 0x48  // "H"

    enum Tag: UInt8 {
        case null = 0x00, `false` = 0x01, `true` = 0x02, string = 0x03, data = 0x04
        case double = 0x05, float = 0x06, date = 0x07, url = 0x08, uuid = 0x09
        case array = 0x0A, set = 0x0B, dictionary = 0x0C
        /// Integers take tags `integerBase + width.rawValue`.
        case integerBase = 0x10
    }

    /// Encodes a `userInfo` dictionary, or throws naming the first value it cannot carry.
    public static func encode(_ userInfo: [AnyHashable: Any]) throws(UserInfoError) -> Data {
        var writer = Writer()
        writer.bytes.append(magic)
        writer.bytes.append(version)
        try writer.writeDictionary(userInfo)
        return Data(writer.bytes)
    }

    /// Encodes one value of the model.
    public static func encode(_ value: UserInfoValue) -> Data {
        var writer = Writer()
        writer.bytes.append(magic)
        writer.bytes.append(version)
        do {
            try writer.write(value.anyValue)
        } catch {
            preconditionFailure("a UserInfoValue always holds encodable values: \(error)")
        }
        return Data(writer.bytes)
    }

    /// Decodes bytes made by `encode` into the model. Never traps on malformed input.
    public static func decode(_ data: Data) throws(UserInfoDecodingError) -> UserInfoValue {
        let value = try decodeAny(data)
        do {
            return try UserInfoValue(value)
        } catch {
            throw .malformed(offset: 0, "decoded a value the model cannot hold: \(error)")
        }
    }

    /// Decodes bytes made by `encode(_ userInfo:)` back into a dictionary of Swift values.
    public static func decodeUserInfo(_ data: Data) throws(UserInfoDecodingError) -> [AnyHashable: Any] {
        guard let dictionary = try decodeAny(data) as? [AnyHashable: Any] else { throw .notADictionary }
        return dictionary
    }

    /// Decodes bytes into Swift values, each of the type it was encoded from.
    static func decodeAny(_ data: Data) throws(UserInfoDecodingError) -> Any {
        let result = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Any, UserInfoDecodingError> in
            do throws(UserInfoDecodingError) {
                var reader = Reader(bytes: raw)
                let first = try reader.byte()
                guard first == magic else { throw .notUserInfo }
                let found = try reader.byte()
                guard found == version else { throw .unsupportedVersion(found) }
                let value = try reader.value(depth: 0)
                guard reader.offset == raw.count else { throw .trailingBytes(offset: reader.offset) }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    struct Writer {
        var bytes: [UInt8] = []

        init() { bytes.reserveCapacity(256) }

        mutating func varint(_ value: UInt64) {
            var v = value
            while v >= 0x80 {
                bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
                v >>= 7
            }
            bytes.append(UInt8(v))
        }

        mutating func fixed64(_ value: UInt64) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }

        mutating func string(_ tag: Tag, _ value: String) {
            bytes.append(tag.rawValue)
            var copy = value
            copy.withUTF8 { utf8 in
                varint(UInt64(utf8.count))
                bytes.append(contentsOf: utf8)
            }
        }

        /// Where the writer is, kept as cheap components and spelled out only for an error.
        private var path: [PathComponent] = []

        private enum PathComponent {
            case key(AnyHashable)
            case dictionaryKey(AnyHashable)
            case index(Int)
            case member(AnyHashable)

            var text: String {
                switch self {
                case .key(let key): return "\(key.base)"
                case .dictionaryKey(let key): return "\(key.base) (key)"
                case .index(let index): return "[\(index)]"
                case .member(let member): return "{\(member.base)}"
                }
            }
        }

        private func failure(_ value: Any) -> UserInfoError {
            UserInfoError(keyPath: path.map(\.text), typeName: String(describing: type(of: value)))
        }

        private mutating func integer(_ width: UserInfoInteger.Width, signed: Int64) {
            bytes.append(Tag.integerBase.rawValue + width.rawValue)
            varint(UInt64(bitPattern: (signed << 1) ^ (signed >> 63)))
        }

        private mutating func integer(_ width: UserInfoInteger.Width, unsigned: UInt64) {
            bytes.append(Tag.integerBase.rawValue + width.rawValue)
            varint(unsigned)
        }

        mutating func writeDictionary<Key: Hashable>(_ items: [Key: Any]) throws(UserInfoError) {
            bytes.append(Tag.dictionary.rawValue)
            varint(UInt64(items.count))
            for (key, item) in items {
                let hashable = AnyHashable(key)
                path.append(.dictionaryKey(hashable))
                try write(key)
                path[path.count - 1] = .key(hashable)
                try write(item)
                path.removeLast()
            }
        }

        private mutating func writeArray(_ items: [Any]) throws(UserInfoError) {
            bytes.append(Tag.array.rawValue)
            varint(UInt64(items.count))
            for (index, item) in items.enumerated() {
                path.append(.index(index))
                try write(item)
                path.removeLast()
            }
        }

        /// Writes one value. The most common types are tried first; the order matters only for
        /// speed, since on Linux no Swift value casts to another Swift value type.
        mutating func write(_ value: Any) throws(UserInfoError) {
            switch value {
            case let v as String: string(.string, v)
            case let v as Int: integer(.int, signed: Int64(v))
            case let v as Double:
                bytes.append(Tag.double.rawValue)
                fixed64(v.bitPattern)
            case let v as Bool: bytes.append(v ? Tag.true.rawValue : Tag.false.rawValue)
            case let v as [String: Any]: try writeDictionary(v)
            case let v as [Any]: try writeArray(v)
            case let v as Date:
                bytes.append(Tag.date.rawValue)
                fixed64(v.timeIntervalSinceReferenceDate.bitPattern)
            case let v as Data:
                bytes.append(Tag.data.rawValue)
                varint(UInt64(v.count))
                bytes.append(contentsOf: v)
            case let v as URL: string(.url, v.absoluteString)
            case let v as UUID:
                bytes.append(Tag.uuid.rawValue)
                withUnsafeBytes(of: v.uuid) { bytes.append(contentsOf: $0) }
            case let v as Float:
                bytes.append(Tag.float.rawValue)
                withUnsafeBytes(of: v.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            case let v as [AnyHashable: Any]: try writeDictionary(v)
            case let v as Set<AnyHashable>:
                bytes.append(Tag.set.rawValue)
                varint(UInt64(v.count))
                for member in v {
                    path.append(.member(member))
                    try write(member.base)
                    path.removeLast()
                }
            case let v as Int64: integer(.int64, signed: v)
            case let v as Int32: integer(.int32, signed: Int64(v))
            case let v as Int16: integer(.int16, signed: Int64(v))
            case let v as Int8: integer(.int8, signed: Int64(v))
            case let v as UInt: integer(.uint, unsigned: UInt64(v))
            case let v as UInt64: integer(.uint64, unsigned: v)
            case let v as UInt32: integer(.uint32, unsigned: UInt64(v))
            case let v as UInt16: integer(.uint16, unsigned: UInt64(v))
            case let v as UInt8: integer(.uint8, unsigned: UInt64(v))
            case let v as CGFloat:
                bytes.append(Tag.double.rawValue)
                fixed64(Double(v).bitPattern)
            case is NSNull: bytes.append(Tag.null.rawValue)
            case let v as UserInfoValue: try write(v.anyValue)
            case let v as AnyHashable where type(of: value) == AnyHashable.self: try write(v.base)
            case let v as NSNumber:
                switch String(cString: v.objCType) {
                case "d":
                    bytes.append(Tag.double.rawValue)
                    fixed64(v.doubleValue.bitPattern)
                case "f":
                    bytes.append(Tag.float.rawValue)
                    withUnsafeBytes(of: v.floatValue.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
                case "Q", "L", "I", "S", "C": integer(.uint64, unsigned: v.uint64Value)
                default: integer(.int64, signed: v.int64Value)
                }
            case let v as NSString: string(.string, v as String)
            case let v as NSData:
                bytes.append(Tag.data.rawValue)
                varint(UInt64(v.length))
                bytes.append(contentsOf: v as Data)
            case let v as NSDate:
                bytes.append(Tag.date.rawValue)
                fixed64(v.timeIntervalSinceReferenceDate.bitPattern)
            case let v as NSURL: string(.url, (v as URL).absoluteString)
            default:
                throw failure(value)
            }
        }
    }

    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        mutating func byte() throws(UserInfoDecodingError) -> UInt8 {
            guard offset < bytes.count else { throw .truncated(offset: offset) }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func varint() throws(UserInfoDecodingError) -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            let start = offset
            while true {
                let b = try byte()
                if shift == 63 && b > 1 { throw .malformed(offset: start, "varint overflows 64 bits") }
                result |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return result }
                shift += 7
                if shift > 63 { throw .malformed(offset: start, "varint longer than 10 bytes") }
            }
        }

        /// A length or count, checked against what is left before anything is allocated.
        mutating func length(minimumElementSize: Int) throws(UserInfoDecodingError) -> Int {
            let start = offset
            let value = try varint()
            let remaining = UInt64(bytes.count - offset)
            guard value <= remaining / UInt64(minimumElementSize) else {
                throw .malformed(offset: start, "declares \(value) elements but only \(remaining) bytes follow")
            }
            return Int(value)
        }

        mutating func take(_ count: Int) throws(UserInfoDecodingError) -> UnsafeRawBufferPointer {
            guard count <= bytes.count - offset else { throw .truncated(offset: offset) }
            defer { offset += count }
            return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
        }

        mutating func fixed64() throws(UserInfoDecodingError) -> UInt64 {
            let raw = try take(8)
            var value: UInt64 = 0
            withUnsafeMutableBytes(of: &value) { $0.copyMemory(from: raw) }
            return UInt64(littleEndian: value)
        }

        mutating func string() throws(UserInfoDecodingError) -> String {
            let start = offset
            let count = try length(minimumElementSize: 1)
            let raw = try take(count)
            guard let s = String(validating: raw.bindMemory(to: UInt8.self), as: UTF8.self) else {
                throw .malformed(offset: start, "string is not valid UTF-8")
            }
            return s
        }

        mutating func value(depth: Int) throws(UserInfoDecodingError) -> Any {
            guard depth <= UserInfoCoding.maximumDepth else { throw .tooDeep(offset: offset) }
            let tagOffset = offset
            let raw = try byte()
            if raw >= Tag.integerBase.rawValue {
                guard let width = UserInfoInteger.Width(rawValue: raw - Tag.integerBase.rawValue) else {
                    throw .malformed(offset: tagOffset, "unknown tag \(raw)")
                }
                let encoded = try varint()
                let integer = UserInfoInteger(width: width, bits: 0)
                if integer.isSigned {
                    let signed = Int64(bitPattern: encoded >> 1) ^ -Int64(bitPattern: encoded & 1)
                    return UserInfoInteger(width: width, bits: UInt64(bitPattern: signed)).anyValue
                }
                return UserInfoInteger(width: width, bits: encoded).anyValue
            }
            guard let tag = Tag(rawValue: raw) else { throw .malformed(offset: tagOffset, "unknown tag \(raw)") }
            switch tag {
            case .null: return NSNull()
            case .false: return false
            case .true: return true
            case .string: return try string()
            case .data:
                let count = try length(minimumElementSize: 1)
                return Data(try take(count))
            case .double: return Double(bitPattern: try fixed64())
            case .float:
                let raw = try take(4)
                var bits: UInt32 = 0
                withUnsafeMutableBytes(of: &bits) { $0.copyMemory(from: raw) }
                return Float(bitPattern: UInt32(littleEndian: bits))
            case .date: return Date(timeIntervalSinceReferenceDate: Double(bitPattern: try fixed64()))
            case .url:
                let text = try string()
                guard let url = URL(string: text) else { throw .malformed(offset: tagOffset, "not a URL: \(text)") }
                return url
            case .uuid:
                let raw = try take(16)
                var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: raw) }
                return UUID(uuid: uuid)
            case .array:
                let count = try length(minimumElementSize: 1)
                var items: [Any] = []
                items.reserveCapacity(count)
                for _ in 0..<count { items.append(try value(depth: depth + 1)) }
                return items
            case .set:
                let count = try length(minimumElementSize: 1)
                var items = Set<AnyHashable>(minimumCapacity: count)
                for _ in 0..<count {
                    let memberOffset = offset
                    guard items.insert(try hashable(depth: depth + 1)).inserted else {
                        throw .malformed(offset: memberOffset, "set member appears twice")
                    }
                }
                return items
            case .dictionary:
                let count = try length(minimumElementSize: 2)
                var items = [AnyHashable: Any](minimumCapacity: count)
                for _ in 0..<count {
                    let keyOffset = offset
                    let key = try hashable(depth: depth + 1)
                    let item = try value(depth: depth + 1)
                    guard items.updateValue(item, forKey: key) == nil else {
                        throw .malformed(offset: keyOffset, "dictionary key appears twice")
                    }
                }
                return items
            case .integerBase:
                preconditionFailure("integer tags are handled above")
            }
        }

        /// A value used as a dictionary key or set member.
        mutating func hashable(depth: Int) throws(UserInfoDecodingError) -> AnyHashable {
            let start = offset
            // Most keys are strings: read them without boxing them into `Any` first.
            if offset < bytes.count, bytes[offset] == Tag.string.rawValue {
                offset += 1
                return AnyHashable(try string())
            }
            let decoded = try value(depth: depth)
            if let key = decoded as? String { return AnyHashable(key) }
            guard let key = decoded as? AnyHashable else {
                throw .malformed(offset: start, "a key or set member that is not hashable")
            }
            return key
        }
    }
}

/// Why bytes could not be decoded as a `userInfo`.
public enum UserInfoDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    case notUserInfo
    case unsupportedVersion(UInt8)
    case truncated(offset: Int)
    case trailingBytes(offset: Int)
    case tooDeep(offset: Int)
    case notADictionary
    case malformed(offset: Int, String)

    public var description: String {
        switch self {
        case .notUserInfo: return "not an encoded userInfo (the first byte is not 'H')"
        case .unsupportedVersion(let v):
            return "userInfo encoding version \(v) is not supported (this build reads version \(UserInfoCoding.version)); update Handoff on this device"
        case .truncated(let offset): return "encoded userInfo ends early, at byte \(offset)"
        case .trailingBytes(let offset): return "encoded userInfo has unexpected bytes after the value, from byte \(offset)"
        case .tooDeep(let offset): return "encoded userInfo nests deeper than \(UserInfoCoding.maximumDepth) levels at byte \(offset)"
        case .notADictionary: return "encoded userInfo is not a dictionary"
        case .malformed(let offset, let why): return "encoded userInfo is malformed at byte \(offset): \(why)"
        }
    }
}
