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
        encode(.dictionary(try UserInfoValue.dictionary(from: userInfo)))
    }

    /// Encodes one value of the model.
    public static func encode(_ value: UserInfoValue) -> Data {
        var writer = Writer()
        writer.bytes.append(magic)
        writer.bytes.append(version)
        writer.write(value)
        return Data(writer.bytes)
    }

    /// Decodes bytes made by `encode`. Never traps on malformed input.
    public static func decode(_ data: Data) throws(UserInfoDecodingError) -> UserInfoValue {
        let result = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<UserInfoValue, UserInfoDecodingError> in
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

    /// Decodes bytes made by `encode(_ userInfo:)` back into a dictionary of Swift values.
    public static func decodeUserInfo(_ data: Data) throws(UserInfoDecodingError) -> [AnyHashable: Any] {
        guard case .dictionary(let dictionary) = try decode(data) else { throw .notADictionary }
        return UserInfoValue.userInfo(from: dictionary)
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

        mutating func write(_ value: UserInfoValue) {
            switch value {
            case .null: bytes.append(Tag.null.rawValue)
            case .bool(let v): bytes.append(v ? Tag.true.rawValue : Tag.false.rawValue)
            case .string(let v): string(.string, v)
            case .data(let v):
                bytes.append(Tag.data.rawValue)
                varint(UInt64(v.count))
                bytes.append(contentsOf: v)
            case .double(let v):
                bytes.append(Tag.double.rawValue)
                fixed64(v.bitPattern)
            case .float(let v):
                bytes.append(Tag.float.rawValue)
                withUnsafeBytes(of: v.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
            case .date(let v):
                bytes.append(Tag.date.rawValue)
                fixed64(v.timeIntervalSinceReferenceDate.bitPattern)
            case .url(let v): string(.url, v.absoluteString)
            case .uuid(let v):
                bytes.append(Tag.uuid.rawValue)
                withUnsafeBytes(of: v.uuid) { bytes.append(contentsOf: $0) }
            case .integer(let v):
                bytes.append(Tag.integerBase.rawValue + v.width.rawValue)
                if v.isSigned {
                    let signed = Int64(bitPattern: v.bits)
                    varint(UInt64(bitPattern: (signed << 1) ^ (signed >> 63)))
                } else {
                    varint(v.bits)
                }
            case .array(let items):
                bytes.append(Tag.array.rawValue)
                varint(UInt64(items.count))
                for item in items { write(item) }
            case .set(let items):
                bytes.append(Tag.set.rawValue)
                varint(UInt64(items.count))
                for item in items { write(item) }
            case .dictionary(let items):
                bytes.append(Tag.dictionary.rawValue)
                varint(UInt64(items.count))
                for (key, item) in items {
                    write(key)
                    write(item)
                }
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

        mutating func value(depth: Int) throws(UserInfoDecodingError) -> UserInfoValue {
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
                    return .integer(.init(width: width, bits: UInt64(bitPattern: signed)))
                }
                return .integer(.init(width: width, bits: encoded))
            }
            guard let tag = Tag(rawValue: raw) else { throw .malformed(offset: tagOffset, "unknown tag \(raw)") }
            switch tag {
            case .null: return .null
            case .false: return .bool(false)
            case .true: return .bool(true)
            case .string: return .string(try string())
            case .data:
                let count = try length(minimumElementSize: 1)
                return .data(Data(try take(count)))
            case .double: return .double(Double(bitPattern: try fixed64()))
            case .float:
                let raw = try take(4)
                var bits: UInt32 = 0
                withUnsafeMutableBytes(of: &bits) { $0.copyMemory(from: raw) }
                return .float(Float(bitPattern: UInt32(littleEndian: bits)))
            case .date: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try fixed64())))
            case .url:
                let text = try string()
                guard let url = URL(string: text) else { throw .malformed(offset: tagOffset, "not a URL: \(text)") }
                return .url(url)
            case .uuid:
                let raw = try take(16)
                var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: raw) }
                return .uuid(UUID(uuid: uuid))
            case .array:
                let count = try length(minimumElementSize: 1)
                var items: [UserInfoValue] = []
                items.reserveCapacity(count)
                for _ in 0..<count { items.append(try value(depth: depth + 1)) }
                return .array(items)
            case .set:
                let count = try length(minimumElementSize: 1)
                var items = Set<UserInfoValue>(minimumCapacity: count)
                for _ in 0..<count {
                    let memberOffset = offset
                    guard items.insert(try value(depth: depth + 1)).inserted else {
                        throw .malformed(offset: memberOffset, "set member appears twice")
                    }
                }
                return .set(items)
            case .dictionary:
                let count = try length(minimumElementSize: 2)
                var items = [UserInfoValue: UserInfoValue](minimumCapacity: count)
                for _ in 0..<count {
                    let keyOffset = offset
                    let key = try value(depth: depth + 1)
                    let item = try value(depth: depth + 1)
                    guard items.updateValue(item, forKey: key) == nil else {
                        throw .malformed(offset: keyOffset, "dictionary key appears twice")
                    }
                }
                return .dictionary(items)
            case .integerBase:
                preconditionFailure("integer tags are handled above")
            }
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
