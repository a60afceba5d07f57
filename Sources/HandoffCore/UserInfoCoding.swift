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
        try writer.writeDictionary(userInfo)
        return Data(writer.bytes)
    }

    /// Encodes any supported value, or throws naming the first part it cannot carry.
    public static func encode(any value: Any) throws(UserInfoError) -> Data {
        var writer = Writer()
        try writer.write(value)
        return Data(writer.bytes)
    }

    /// Encodes one value of the model, keeping every key distinct (the model's `1` and `1.0`
    /// are different keys, as they are different values). Throws only for nesting deeper
    /// than `maximumDepth`.
    public static func encode(_ value: UserInfoValue) throws(UserInfoError) -> Data {
        var writer = Writer()
        try writer.write(value)
        return Data(writer.bytes)
    }

    /// Decodes bytes made by `encode` into the model. Never traps on malformed input.
    public static func decode(_ data: Data) throws(UserInfoDecodingError) -> UserInfoValue {
        try decode(data, as: ModelBuilder.self)
    }

    /// Decodes bytes made by `encode(_ userInfo:)` back into a dictionary of Swift values,
    /// each of the type it was encoded from.
    public static func decodeUserInfo(_ data: Data) throws(UserInfoDecodingError) -> [AnyHashable: Any] {
        try read(data, as: AnyBuilder.self) { (reader: inout Reader<AnyBuilder>) throws(UserInfoDecodingError) in
            try reader.userInfo()
        }
    }

    /// Decodes bytes into the model and checks that an app can read them as its `userInfo`:
    /// throws exactly what `decodeUserInfo` throws, else what `decode` throws. Reading them as
    /// Swift values is needed only where keys can collide as `AnyHashable` (`1` and
    /// `Int8(1)`), so when every key and set member is a string the model is read alone.
    public static func decodeForApp(_ data: Data) throws(UserInfoDecodingError) -> UserInfoValue {
        let value: UserInfoValue
        do {
            value = try decode(data)
        } catch {
            _ = try decodeUserInfo(data)
            throw error
        }
        if case .dictionary = value, value.keysAreStrings { return value }
        _ = try decodeUserInfo(data)
        return value
    }

    /// Checks, as `decodeForApp` does, that an app can read `data` as its `userInfo`, building
    /// the model only where it is needed: nil when the bytes are readable and hold no file URL
    /// (the common case, and all the agent needs to know then), else `decodeForApp`'s value.
    /// Throws exactly what `decodeForApp` throws. A quick pass reads the bytes and builds
    /// nothing (`Reader.scanForApp`); where it cannot decide (a set, a key that is not an ASCII
    /// string, any mistake in the bytes, a file URL), `decodeForApp` decides, as before.
    public static func checkForApp(_ data: Data) throws(UserInfoDecodingError) -> UserInfoValue? {
        let scanned = try? read(data, as: ModelBuilder.self) { (reader: inout Reader<ModelBuilder>) throws(UserInfoDecodingError) in
            try reader.scanForApp()
        }
        if scanned == false { return nil }
        return try decodeForApp(data)
    }

    /// Decodes bytes into Swift values, each of the type it was encoded from.
    static func decodeAny(_ data: Data) throws(UserInfoDecodingError) -> Any {
        try decode(data, as: AnyBuilder.self)
    }

    private static func decode<Builder: ValueBuilder>(_ data: Data, as builder: Builder.Type) throws(UserInfoDecodingError) -> Builder.Value {
        try read(data, as: builder) { (reader: inout Reader<Builder>) throws(UserInfoDecodingError) in
            try reader.value(depth: 0)
        }
    }

    /// Checks the header, reads one value with `body`, and refuses anything after it.
    private static func read<Builder: ValueBuilder, Value>(
        _ data: Data, as builder: Builder.Type,
        _ body: (inout Reader<Builder>) throws(UserInfoDecodingError) -> Value
    ) throws(UserInfoDecodingError) -> Value {
        let result = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Value, UserInfoDecodingError> in
            do throws(UserInfoDecodingError) {
                var reader = Reader<Builder>(bytes: raw)
                let first = try reader.byte()
                guard first == magic else { throw .notUserInfo }
                let found = try reader.byte()
                guard found == version else { throw .unsupportedVersion(found) }
                let value = try body(&reader)
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

        init() {
            bytes.reserveCapacity(256)
            bytes.append(magic)
            bytes.append(version)
        }

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
            /// Keys and members of the typed model, kept as they are: making an `AnyHashable`
            /// of a collection key compares it with the others, which traps in Foundation on
            /// Linux when kinds are mixed (found by fuzzing).
            case valueKey(UserInfoValue)
            case valueDictionaryKey(UserInfoValue)
            case valueMember(UserInfoValue)

            var text: String {
                switch self {
                case .key(let key): return "\(key.base)"
                case .dictionaryKey(let key): return "\(key.base) (key)"
                case .index(let index): return "[\(index)]"
                case .member(let member): return "{\(member.base)}"
                case .valueKey(let key): return Self.describe(key)
                case .valueDictionaryKey(let key): return "\(Self.describe(key)) (key)"
                case .valueMember(let member): return "{\(Self.describe(member))}"
                }
            }

            static func describe(_ value: UserInfoValue) -> String {
                switch value {
                case .string(let text): return text
                case .integer(let integer): return "\(integer.anyValue)"
                case .bool(let flag): return "\(flag)"
                case .double(let number): return "\(number)"
                case .float(let number): return "\(number)"
                case .uuid(let id): return id.uuidString
                case .url(let url): return url.absoluteString
                case .date(let date): return "\(date)"
                case .data(let data): return "\(data.count) bytes"
                case .null: return "null"
                case .array: return "(an array)"
                case .set: return "(a set)"
                case .dictionary: return "(a dictionary)"
                }
            }
        }

        private func failure(_ value: Any) -> UserInfoError {
            UserInfoError(keyPath: path.map(\.text), typeName: String(describing: type(of: value)))
        }

        /// The decoder refuses values nested deeper than `maximumDepth`, so the writer refuses
        /// to write them: the failure then names the key on the device that made the value.
        private func checkDepth(_ value: Any) throws(UserInfoError) {
            guard path.count <= UserInfoCoding.maximumDepth else {
                throw UserInfoError(keyPath: path.map(\.text), typeName: String(describing: type(of: value)), reason: .nestedTooDeeply)
            }
        }

        private mutating func double(_ tag: Tag, _ value: Double) {
            bytes.append(tag.rawValue)
            fixed64(value.bitPattern)
        }

        private mutating func float(_ value: Float) {
            bytes.append(Tag.float.rawValue)
            withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
        }

        private mutating func data(_ value: Data) {
            bytes.append(Tag.data.rawValue)
            varint(UInt64(value.count))
            bytes.append(contentsOf: value)
        }

        private mutating func uuid(_ value: UUID) {
            bytes.append(Tag.uuid.rawValue)
            withUnsafeBytes(of: value.uuid) { bytes.append(contentsOf: $0) }
        }

        private mutating func integer(_ value: UserInfoInteger) {
            if value.isSigned {
                integer(value.width, signed: Int64(bitPattern: value.bits))
            } else {
                integer(value.width, unsigned: value.bits)
            }
        }

        /// A Foundation number, read back as the Swift type an app expects: `Bool` for a
        /// boolean, `Double` or `Float` for floating point, `Int` for an integer that fits
        /// (`UInt64` above that).
        private mutating func number(_ value: NSNumber) {
            if ObjectIdentifier(type(of: value)) == ObjectIdentifier(type(of: NSNumber(value: true))) {
                bytes.append(value.boolValue ? Tag.true.rawValue : Tag.false.rawValue)
                return
            }
            switch String(cString: value.objCType) {
            case "d": double(.double, value.doubleValue)
            case "f": float(value.floatValue)
            case "Q", "L":
                if value.uint64Value > UInt64(Int.max) {
                    integer(.uint64, unsigned: value.uint64Value)
                } else {
                    integer(.int, signed: value.int64Value)
                }
            default: integer(.int, signed: value.int64Value)
            }
        }

        /// Writes a value of the model. Dictionary keys and set members keep their model
        /// identity, which `AnyHashable` would merge (`1` and `1.0`).
        mutating func write(_ value: UserInfoValue) throws(UserInfoError) {
            guard path.count <= UserInfoCoding.maximumDepth else {
                throw UserInfoError(keyPath: path.map(\.text), typeName: "UserInfoValue", reason: .nestedTooDeeply)
            }
            switch value {
            case .null: bytes.append(Tag.null.rawValue)
            case .bool(let v): bytes.append(v ? Tag.true.rawValue : Tag.false.rawValue)
            case .string(let v): string(.string, v)
            case .data(let v): data(v)
            case .double(let v): double(.double, v)
            case .float(let v): float(v)
            case .date(let v): double(.date, v.timeIntervalSinceReferenceDate)
            case .url(let v): string(.url, v.absoluteString)
            case .uuid(let v): uuid(v)
            case .integer(let v): integer(v)
            case .array(let items):
                bytes.append(Tag.array.rawValue)
                varint(UInt64(items.count))
                for (index, item) in items.enumerated() {
                    path.append(.index(index))
                    try write(item)
                    path.removeLast()
                }
            case .set(let items):
                bytes.append(Tag.set.rawValue)
                varint(UInt64(items.count))
                for item in items {
                    path.append(.valueMember(item))
                    try write(item)
                    path.removeLast()
                }
            case .dictionary(let items):
                bytes.append(Tag.dictionary.rawValue)
                varint(UInt64(items.count))
                for (key, item) in items {
                    path.append(.valueDictionaryKey(key))
                    try write(key)
                    path[path.count - 1] = .valueKey(key)
                    try write(item)
                    path.removeLast()
                }
            }
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
            try checkDepth(value)
            switch value {
            case let v as String: string(.string, v)
            case _ where type(of: value) is NSNumber.Type:
                // Checked before the Swift numbers: a Foundation number (from JSONSerialization,
                // say) also casts to Int, and a boolean one would lose that it is a Bool.
                guard let number = value as? NSNumber else { throw failure(value) }
                self.number(number)
            case let v as Int: integer(.int, signed: Int64(v))
            case let v as Double: double(.double, v)
            case let v as Bool: bytes.append(v ? Tag.true.rawValue : Tag.false.rawValue)
            case let v as [String: Any]: try writeDictionary(v)
            case let v as [Any]: try writeArray(v)
            case let v as Date: double(.date, v.timeIntervalSinceReferenceDate)
            case let v as Data: data(v)
            case let v as URL: string(.url, v.absoluteString)
            case let v as UUID: uuid(v)
            case let v as Float: float(v)
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
            case let v as CGFloat: double(.double, Double(v))
            case let v as UserInfoValue: try write(v)
            case let v as AnyHashable where type(of: value) == AnyHashable.self: try write(v.base)
            case is NSNull: bytes.append(Tag.null.rawValue)
            case let v as NSString: string(.string, v as String)
            case let v as NSData: data(v as Data)
            case let v as NSDate: double(.date, v.timeIntervalSinceReferenceDate)
            case let v as NSURL: string(.url, (v as URL).absoluteString)
            default:
                throw failure(value)
            }
        }
    }

    /// What a decoded value is built as: Swift values for apps, or the model.
    protocol ValueBuilder {
        associatedtype Value
        associatedtype Key: Hashable
        static func null() -> Value
        static func bool(_ value: Bool) -> Value
        static func string(_ value: String) -> Value
        static func data(_ value: Data) -> Value
        static func double(_ value: Double) -> Value
        static func float(_ value: Float) -> Value
        static func date(_ value: Date) -> Value
        static func url(_ value: URL) -> Value
        static func uuid(_ value: UUID) -> Value
        static func integer(_ value: UserInfoInteger) -> Value
        static func array(_ items: [Value]) -> Value
        static func set(_ items: Set<Key>) -> Value
        static func dictionary(_ items: [Key: Value]) -> Value
        /// A dictionary whose keys are all strings, the common case, built without `Key`s.
        static func stringDictionary(_ items: [String: Value]) -> Value
        /// An empty dictionary with room for `capacity` string keys (made in the concrete
        /// builder, where the standard library's code is specialized).
        static func stringDictionary(capacity: Int) -> [String: Value]
        /// An empty array with room for `capacity` values.
        static func array(capacity: Int) -> [Value]
        /// A decoded value as a dictionary key or set member.
        static func key(_ value: Value) -> Key
        /// A string key, without building a `Value` first.
        static func stringKey(_ value: String) -> Key
    }

    /// Builds the Swift values an app reads with `as?`. The containers are made out of line:
    /// inlined into the generic reader, boxing them looked their type up at run time each time.
    enum AnyBuilder: ValueBuilder {
        static func null() -> Any { NSNull() }
        static func bool(_ value: Bool) -> Any { value }
        static func string(_ value: String) -> Any { value }
        static func data(_ value: Data) -> Any { value }
        static func double(_ value: Double) -> Any { value }
        static func float(_ value: Float) -> Any { value }
        static func date(_ value: Date) -> Any { value }
        static func url(_ value: URL) -> Any { value }
        static func uuid(_ value: UUID) -> Any { value }
        static func integer(_ value: UserInfoInteger) -> Any { value.anyValue }
        @inline(never)
        static func array(_ items: [Any]) -> Any { items }
        @inline(never)
        static func array(capacity: Int) -> [Any] {
            var items: [Any] = []
            items.reserveCapacity(capacity)
            return items
        }
        @inline(never)
        static func set(_ items: Set<AnyHashable>) -> Any { items }
        @inline(never)
        static func dictionary(_ items: [AnyHashable: Any]) -> Any { items }
        /// Kept as `[String: Any]`: making an `AnyHashable` of every key is most of the cost of
        /// decoding, and `as? [String: Any]` or `as? [AnyHashable: Any]` both read it.
        @inline(never)
        static func stringDictionary(_ items: [String: Any]) -> Any { items }
        @inline(never)
        static func stringDictionary(capacity: Int) -> [String: Any] { [String: Any](minimumCapacity: capacity) }
        static func stringKey(_ value: String) -> AnyHashable { AnyHashable(value) }

        /// Containers become their hashable forms so that they can be keys and members too:
        /// `[AnyHashable]` and `[AnyHashable: AnyHashable]`, one type for each kind. Two keys of
        /// different dictionary types would be compared by casting one to the other, which on
        /// Linux goes through NSDictionary and traps on nested dictionaries (found by fuzzing).
        static func key(_ value: Any) -> AnyHashable {
            switch value {
            case let items as [Any]: return AnyHashable(items.map(key))
            case let items as [String: Any]:
                var hashable: [AnyHashable: AnyHashable] = [:]
                for (k, v) in items { hashable[AnyHashable(k)] = key(v) }
                return AnyHashable(hashable)
            case let items as [AnyHashable: Any]:
                var hashable: [AnyHashable: AnyHashable] = [:]
                for (k, v) in items { hashable[k] = key(v) }
                return AnyHashable(hashable)
            case let v as AnyHashable: return v
            default: preconditionFailure("every decoded value is hashable or a container")
            }
        }
    }

    /// Builds the model, in which `1`, `Int8(1)` and `1.0` stay distinct keys.
    enum ModelBuilder: ValueBuilder {
        static func null() -> UserInfoValue { .null }
        static func bool(_ value: Bool) -> UserInfoValue { .bool(value) }
        static func string(_ value: String) -> UserInfoValue { .string(value) }
        static func data(_ value: Data) -> UserInfoValue { .data(value) }
        static func double(_ value: Double) -> UserInfoValue { .double(value) }
        static func float(_ value: Float) -> UserInfoValue { .float(value) }
        static func date(_ value: Date) -> UserInfoValue { .date(value) }
        static func url(_ value: URL) -> UserInfoValue { .url(value) }
        static func uuid(_ value: UUID) -> UserInfoValue { .uuid(value) }
        static func integer(_ value: UserInfoInteger) -> UserInfoValue { .integer(value) }
        static func array(_ items: [UserInfoValue]) -> UserInfoValue { .array(items) }
        static func set(_ items: Set<UserInfoValue>) -> UserInfoValue { .set(items) }
        static func dictionary(_ items: [UserInfoValue: UserInfoValue]) -> UserInfoValue { .dictionary(items) }
        static func array(capacity: Int) -> [UserInfoValue] {
            var items: [UserInfoValue] = []
            items.reserveCapacity(capacity)
            return items
        }
        static func stringDictionary(capacity: Int) -> [String: UserInfoValue] { [String: UserInfoValue](minimumCapacity: capacity) }
        static func stringDictionary(_ items: [String: UserInfoValue]) -> UserInfoValue {
            var converted = [UserInfoValue: UserInfoValue](minimumCapacity: items.count)
            for (key, value) in items { converted[.string(key)] = value }
            return .dictionary(converted)
        }
        static func key(_ value: UserInfoValue) -> UserInfoValue { value }
        static func stringKey(_ value: String) -> UserInfoValue { .string(value) }
    }

    struct Reader<Builder: ValueBuilder> {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        @inline(__always)
        mutating func byte() throws(UserInfoDecodingError) -> UInt8 {
            guard offset < bytes.count else { throw .truncated(offset: offset) }
            defer { offset += 1 }
            return bytes[offset]
        }

        @inline(__always)
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
        @inline(__always)
        mutating func length(minimumElementSize: Int) throws(UserInfoDecodingError) -> Int {
            let start = offset
            let value = try varint()
            let remaining = UInt64(bytes.count - offset)
            guard value <= remaining / UInt64(minimumElementSize) else {
                throw .malformed(offset: start, "declares \(value) elements but only \(remaining) bytes follow")
            }
            return Int(value)
        }

        @inline(__always)
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

        @inline(__always)
        mutating func string() throws(UserInfoDecodingError) -> String {
            let start = offset
            let count = try length(minimumElementSize: 1)
            let raw = try take(count)
            // The standard library's validating constructor for a buffer (the one Foundation
            // uses): `String(validating:as:)` is generic and unspecialized, and costs a third
            // of decoding in run-time metadata look-ups.
            guard let s = String._tryFromUTF8(raw.bindMemory(to: UInt8.self)) else {
                throw .malformed(offset: start, "string is not valid UTF-8")
            }
            return s
        }

        /// Reads an integer's body and checks that it fits the width its tag declares.
        mutating func integer(_ width: UserInfoInteger.Width, at tagOffset: Int) throws(UserInfoDecodingError) -> UserInfoInteger {
            let encoded = try varint()
            let value: UserInfoInteger
            let fits: Bool
            switch width {
            case .int, .int64, .int32, .int16, .int8:
                let signed = Int64(bitPattern: encoded >> 1) ^ -Int64(bitPattern: encoded & 1)
                value = UserInfoInteger(width: width, bits: UInt64(bitPattern: signed))
                switch width {
                case .int8: fits = Int8(exactly: signed) != nil
                case .int16: fits = Int16(exactly: signed) != nil
                case .int32: fits = Int32(exactly: signed) != nil
                default: fits = Int(exactly: signed) != nil
                }
            case .uint, .uint64, .uint32, .uint16, .uint8:
                value = UserInfoInteger(width: width, bits: encoded)
                switch width {
                case .uint8: fits = UInt8(exactly: encoded) != nil
                case .uint16: fits = UInt16(exactly: encoded) != nil
                case .uint32: fits = UInt32(exactly: encoded) != nil
                default: fits = UInt(exactly: encoded) != nil
                }
            }
            guard fits else { throw .malformed(offset: tagOffset, "integer does not fit its declared type \(width)") }
            return value
        }

        mutating func value(depth: Int) throws(UserInfoDecodingError) -> Builder.Value {
            guard depth <= UserInfoCoding.maximumDepth else { throw .tooDeep(offset: offset) }
            let tagOffset = offset
            let raw = try byte()
            if raw >= Tag.integerBase.rawValue {
                guard let width = UserInfoInteger.Width(rawValue: raw - Tag.integerBase.rawValue) else {
                    throw .malformed(offset: tagOffset, "unknown tag \(raw)")
                }
                return Builder.integer(try integer(width, at: tagOffset))
            }
            guard let tag = Tag(rawValue: raw) else { throw .malformed(offset: tagOffset, "unknown tag \(raw)") }
            switch tag {
            case .null: return Builder.null()
            case .false: return Builder.bool(false)
            case .true: return Builder.bool(true)
            case .string: return Builder.string(try string())
            case .data:
                let count = try length(minimumElementSize: 1)
                return Builder.data(Data(try take(count)))
            case .double: return Builder.double(Double(bitPattern: try fixed64()))
            case .float:
                let raw = try take(4)
                var bits: UInt32 = 0
                withUnsafeMutableBytes(of: &bits) { $0.copyMemory(from: raw) }
                return Builder.float(Float(bitPattern: UInt32(littleEndian: bits)))
            case .date: return Builder.date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try fixed64())))
            case .url:
                let text = try string()
                guard let url = URL(string: text) else { throw .malformed(offset: tagOffset, "not a URL: \(text)") }
                return Builder.url(url)
            case .uuid:
                let raw = try take(16)
                var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: raw) }
                return Builder.uuid(UUID(uuid: uuid))
            case .array:
                let count = try length(minimumElementSize: 1)
                var items = Builder.array(capacity: count)
                for _ in 0..<count { items.append(try value(depth: depth + 1)) }
                return Builder.array(items)
            case .set:
                let count = try length(minimumElementSize: 1)
                var items = Set<Builder.Key>()
                items.reserveCapacity(count)
                var kinds = KeyKinds()
                for _ in 0..<count {
                    let memberOffset = offset
                    try admitKey(&kinds)
                    guard items.insert(try key(depth: depth + 1)).inserted else {
                        throw .malformed(offset: memberOffset, "set member appears twice")
                    }
                }
                return Builder.set(items)
            case .dictionary:
                let count = try length(minimumElementSize: 2)
                // Read string keys into a [String: Value] until a key of another type appears.
                var strings = Builder.stringDictionary(capacity: count)
                var read = 0
                while read < count, offset < bytes.count, bytes[offset] == Tag.string.rawValue, depth < UserInfoCoding.maximumDepth {
                    let keyOffset = offset
                    offset += 1
                    let key = try string()
                    strings[key] = try value(depth: depth + 1)
                    read += 1
                    guard strings.count == read else {
                        throw .malformed(offset: keyOffset, "dictionary key appears twice")
                    }
                }
                if read == count { return Builder.stringDictionary(strings) }
                var items: [Builder.Key: Builder.Value] = [:]
                items.reserveCapacity(count)
                for (key, item) in strings { items[Builder.stringKey(key)] = item }
                var kinds = KeyKinds(seen: read > 0 ? 0xFF : nil)
                for _ in read..<count {
                    let keyOffset = offset
                    try admitKey(&kinds)
                    let key = try key(depth: depth + 1)
                    let item = try value(depth: depth + 1)
                    guard items.updateValue(item, forKey: key) == nil else {
                        throw .malformed(offset: keyOffset, "dictionary key appears twice")
                    }
                }
                return Builder.dictionary(items)
            case .integerBase:
                preconditionFailure("integer tags are handled above")
            }
        }

        /// A value used as a dictionary key or set member.
        mutating func key(depth: Int) throws(UserInfoDecodingError) -> Builder.Key {
            // Most keys are strings: read them without building a value first.
            if offset < bytes.count, bytes[offset] == Tag.string.rawValue, depth <= UserInfoCoding.maximumDepth {
                offset += 1
                return Builder.stringKey(try string())
            }
            return Builder.key(try value(depth: depth))
        }

        /// The kinds of key one dictionary or set holds. As `[AnyHashable: Any]`, collections
        /// used as keys are safe on Linux only among keys of the same kind: comparing one with
        /// a key of another type casts it through NSDictionary or NSArray, and Foundation traps
        /// there when it holds dictionaries (found by fuzzing). Such a mix is refused with a
        /// reason; the typed model (`UserInfoValue`) reads it.
        struct KeyKinds {
            var seen: UInt8?

            mutating func admit(_ tag: UInt8?) -> Bool {
                let collections: [UInt8] = [Tag.array.rawValue, Tag.set.rawValue, Tag.dictionary.rawValue]
                let kind = tag.flatMap { collections.contains($0) ? $0 : nil } ?? 0xFF
                guard let seen else {
                    self.seen = kind
                    return true
                }
                return seen == kind || (seen == 0xFF && kind == 0xFF)
            }
        }

        /// Checks the next key's kind against the others of its dictionary or set.
        func admitKey(_ kinds: inout KeyKinds) throws(UserInfoDecodingError) {
            guard Builder.self == UserInfoCoding.AnyBuilder.self else { return }
            guard kinds.admit(offset < bytes.count ? bytes[offset] : nil) else {
                throw .malformed(
                    offset: offset, "a dictionary's keys (or a set's members) mix collections with other kinds, which a userInfo cannot hold here")
            }
        }
    }
}

extension UserInfoCoding.Reader {
    /// `checkForApp`'s quick pass: reads a whole `userInfo` as the decoders do, and builds
    /// nothing (no string, no container, no hash of a key). Returns whether it holds a file
    /// URL; throws (any error: the full decode then says which) wherever it cannot be sure that
    /// `decodeForApp` reads the bytes: a mistake, a set, a key that is not a string, a key that
    /// is not ASCII (two different byte sequences can be the same `String`), a repeated key.
    /// Strings are checked as UTF-8 without being made, ASCII eight bytes at a time.
    mutating func scanForApp() throws(UserInfoDecodingError) -> Bool {
        guard offset < bytes.count, bytes[offset] == UserInfoCoding.Tag.dictionary.rawValue else { throw .notADictionary }
        return try scan(depth: 0)
    }

    private mutating func scan(depth: Int) throws(UserInfoDecodingError) -> Bool {
        guard depth <= UserInfoCoding.maximumDepth else { throw .tooDeep(offset: offset) }
        let tagOffset = offset
        let raw = try byte()
        if raw >= UserInfoCoding.Tag.integerBase.rawValue {
            guard let width = UserInfoInteger.Width(rawValue: raw - UserInfoCoding.Tag.integerBase.rawValue) else {
                throw .malformed(offset: tagOffset, "unknown tag \(raw)")
            }
            _ = try integer(width, at: tagOffset)
            return false
        }
        guard let tag = UserInfoCoding.Tag(rawValue: raw) else { throw .malformed(offset: tagOffset, "unknown tag \(raw)") }
        switch tag {
        case .null, .false, .true: return false
        case .string:
            try skipString()
            return false
        case .data:
            _ = try take(try length(minimumElementSize: 1))
            return false
        case .double, .date:
            _ = try take(8)
            return false
        case .float:
            _ = try take(4)
            return false
        case .uuid:
            _ = try take(16)
            return false
        case .url:
            let text = try string()
            guard let url = URL(string: text) else { throw .malformed(offset: tagOffset, "not a URL: \(text)") }
            return url.isFileURL
        case .array:
            let count = try length(minimumElementSize: 1)
            var holdsFileURL = false
            for _ in 0..<count {
                if try scan(depth: depth + 1) { holdsFileURL = true }
            }
            return holdsFileURL
        case .set, .integerBase:
            throw .malformed(offset: tagOffset, "left to the full decode")
        case .dictionary:
            let count = try length(minimumElementSize: 2)
            guard count > 0 else { return false }
            guard depth < UserInfoCoding.maximumDepth else { throw .tooDeep(offset: offset) }
            var keys = ScannedKeys(capacity: count)
            var holdsFileURL = false
            for _ in 0..<count {
                guard offset < bytes.count, bytes[offset] == UserInfoCoding.Tag.string.rawValue else {
                    throw .malformed(offset: offset, "left to the full decode")
                }
                offset += 1
                let keyCount = try length(minimumElementSize: 1)
                guard keys.add(try take(keyCount)) else { throw .malformed(offset: offset, "left to the full decode") }
                if try scan(depth: depth + 1) { holdsFileURL = true }
            }
            guard !keys.repeats() else { throw .malformed(offset: tagOffset, "dictionary key appears twice") }
            return holdsFileURL
        }
    }

    /// A string's body, checked as UTF-8 but not made.
    @inline(__always)
    private mutating func skipString() throws(UserInfoDecodingError) {
        let start = offset
        let body = try take(try length(minimumElementSize: 1))
        if Self.isASCII(body) { return }
        guard String._tryFromUTF8(body.bindMemory(to: UInt8.self)) != nil else {
            throw .malformed(offset: start, "string is not valid UTF-8")
        }
    }

    static func isASCII(_ body: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= body.count {
            high |= body.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < body.count {
            high |= UInt64(body[index])
            index += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }
}

/// One dictionary's keys as the quick pass sees them: ASCII bytes, where two keys are the same
/// `String` exactly when their bytes are the same. Repeats are found by sorting the keys'
/// hashes (of their bytes, eight at a time), never by comparing each key with every other.
struct ScannedKeys {
    private var keys: [(hash: UInt64, key: UnsafeRawBufferPointer)] = []

    init(capacity: Int) { keys.reserveCapacity(capacity) }

    /// Adds `key` unless it is not ASCII (false then): both found eight bytes at a time.
    mutating func add(_ key: UnsafeRawBufferPointer) -> Bool {
        var hash = UInt64(key.count) &* 0x9E37_79B9_7F4A_7C15
        var high: UInt64 = 0
        var index = 0
        while index + 8 <= key.count {
            let word = key.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            high |= word
            hash = (hash ^ word) &* 0x0000_0100_0000_01B3
            hash ^= hash >> 29
            index += 8
        }
        var last: UInt64 = 0
        while index < key.count {
            last = last << 8 | UInt64(key[index])
            index += 1
        }
        high |= last
        hash = (hash ^ last) &* 0x0000_0100_0000_01B3
        guard high & 0x8080_8080_8080_8080 == 0 else { return false }
        keys.append((hash ^ hash >> 31, key))
        return true
    }

    /// Whether two keys have the same bytes.
    mutating func repeats() -> Bool {
        guard keys.count > 1 else { return false }
        keys.sort { $0.hash < $1.hash }
        var first = 0
        while first < keys.count {
            var end = first + 1
            while end < keys.count, keys[end].hash == keys[first].hash { end += 1 }
            // Keys of one hash: almost always one, compared pairwise when not.
            for i in first..<end {
                for j in (i + 1)..<end where keys[i].key.elementsEqual(keys[j].key) { return true }
            }
            first = end
        }
        return false
    }
}

extension UserInfoCoding.Reader where Builder == UserInfoCoding.AnyBuilder {
    /// The top-level dictionary, built directly as the `[AnyHashable: Any]` the API returns.
    mutating func userInfo() throws(UserInfoDecodingError) -> [AnyHashable: Any] {
        guard offset < bytes.count, bytes[offset] == UserInfoCoding.Tag.dictionary.rawValue else {
            _ = try value(depth: 0)
            throw .notADictionary
        }
        offset += 1
        let count = try length(minimumElementSize: 2)
        // Room to spare: probing a full table compares `AnyHashable`s, which is slow.
        var result = [AnyHashable: Any](minimumCapacity: count * 2)
        var kinds = KeyKinds()
        for index in 0..<count {
            let keyOffset = offset
            try admitKey(&kinds)
            let key = try key(depth: 1)
            result[key] = try value(depth: 1)
            guard result.count == index + 1 else {
                throw .malformed(offset: keyOffset, "dictionary key appears twice")
            }
        }
        return result
    }
}

/// Why bytes could not be decoded as a `userInfo`; each case says where.
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

extension UserInfoValue {
    /// True when every dictionary key and set member in the value, at any depth, is a string.
    var keysAreStrings: Bool {
        switch self {
        case .array(let items): return items.allSatisfy(\.keysAreStrings)
        case .set(let members):
            return members.allSatisfy { if case .string = $0 { return true } else { return false } }
        case .dictionary(let entries):
            return entries.allSatisfy { key, value in
                guard case .string = key else { return false }
                return value.keysAreStrings
            }
        default: return true
        }
    }
}
