import Foundation

/// One value of an activity's `userInfo`, in the property-list model Apple allows there:
/// strings, numbers, booleans, data, dates, arrays, dictionaries, null, sets, URLs and UUIDs.
///
/// The model keeps what untyped property lists lose: a `Bool` never comes back as an
/// integer (nor an integer as a `Bool`), an `Int32` comes back as an `Int32`, a date keeps
/// its sub-second part, and URLs, sets, UUIDs and `NSNull` survive a round trip.
public indirect enum UserInfoValue: Sendable, Hashable {
    case string(String)
    case bool(Bool)
    case integer(UserInfoInteger)
    case double(Double)
    case float(Float)
    case data(Data)
    case date(Date)
    case url(URL)
    case uuid(UUID)
    case null
    case array([UserInfoValue])
    case set(Set<UserInfoValue>)
    case dictionary([UserInfoValue: UserInfoValue])
}

/// An integer together with the Swift type it was made from, so that it is handed back as
/// that same type.
public struct UserInfoInteger: Sendable, Hashable {
    /// The Swift integer types a `userInfo` may hold.
    public enum Width: UInt8, Sendable, CaseIterable {
        case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64
    }

    public var width: Width
    /// The value's two's-complement bits, sign-extended for signed widths.
    public var bits: UInt64

    public init(width: Width, bits: UInt64) {
        self.width = width
        self.bits = bits
    }

    public init(_ value: Int) { self.init(width: .int, bits: UInt64(bitPattern: Int64(value))) }

    /// The value as the Swift type it was made from.
    public var anyValue: Any {
        let signed = Int64(bitPattern: bits)
        switch width {
        case .int: return Int(truncatingIfNeeded: signed)
        case .int8: return Int8(truncatingIfNeeded: signed)
        case .int16: return Int16(truncatingIfNeeded: signed)
        case .int32: return Int32(truncatingIfNeeded: signed)
        case .int64: return signed
        case .uint: return UInt(truncatingIfNeeded: bits)
        case .uint8: return UInt8(truncatingIfNeeded: bits)
        case .uint16: return UInt16(truncatingIfNeeded: bits)
        case .uint32: return UInt32(truncatingIfNeeded: bits)
        case .uint64: return bits
        }
    }

    var isSigned: Bool {
        switch width {
        case .int, .int8, .int16, .int32, .int64: return true
        case .uint, .uint8, .uint16, .uint32, .uint64: return false
        }
    }
}

/// A `userInfo` value that Handoff cannot carry, with where it was found.
public struct UserInfoError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong with the value.
    public enum Reason: Sendable, Hashable {
        /// Its type is not one a user activity can carry.
        case unsupportedType
        /// It is nested deeper than `UserInfoCoding.maximumDepth`, which no device reads.
        case nestedTooDeeply
        /// It would not read back as written, e.g. two URL keys with the same absolute string.
        case unreadable(String)
    }

    /// The keys from the top of `userInfo` down to the bad value, e.g. `["shapes", "[2]", "color"]`.
    public var keyPath: [String]
    /// The Swift type of the bad value.
    public var typeName: String
    public var reason: Reason

    public init(keyPath: [String], typeName: String, reason: Reason = .unsupportedType) {
        self.keyPath = keyPath
        self.typeName = typeName
        self.reason = reason
    }

    public var description: String {
        // A very deep path is shortened: its start says where, its length says how deep.
        let shown = keyPath.count > 12 ? Array(keyPath.prefix(8)) + ["…"] : keyPath
        let path = keyPath.isEmpty ? "userInfo" : "userInfo." + shown.joined(separator: ".")
        switch reason {
        case .unsupportedType:
            return "\(path) holds a value of type \(typeName), which a user activity cannot carry; "
                + "use String, a number, Bool, Data, Date, URL, UUID, NSNull, or an array, set or dictionary of those"
        case .nestedTooDeeply:
            return "\(path) is nested \(keyPath.count) levels deep, deeper than the \(UserInfoCoding.maximumDepth) levels a device reads"
        case .unreadable(let why):
            return "\(path) would not read back as written: \(why)"
        }
    }
}

extension UserInfoValue {
    /// Converts a Swift or Foundation value into the model, or throws naming where an
    /// unsupported value sits. It accepts exactly what the encoder accepts, because it is
    /// the encoder's own check.
    public init(_ value: Any) throws(UserInfoError) {
        let bytes = try UserInfoCoding.encode(any: value)
        do {
            self = try UserInfoCoding.decode(bytes)
        } catch {
            throw UserInfoError(keyPath: [], typeName: String(describing: type(of: value)), reason: .unreadable("\(error)"))
        }
    }

    /// Converts a whole `userInfo` dictionary.
    public static func dictionary(from userInfo: [AnyHashable: Any]) throws(UserInfoError) -> [UserInfoValue: UserInfoValue] {
        guard case .dictionary(let dictionary) = try UserInfoValue(userInfo) else {
            preconditionFailure("a dictionary converts to a dictionary")
        }
        return dictionary
    }

    /// Converts the model back to a `userInfo` dictionary of Swift values.
    public static func userInfo(from dictionary: [UserInfoValue: UserInfoValue]) -> [AnyHashable: Any] {
        var result: [AnyHashable: Any] = [:]
        result.reserveCapacity(dictionary.count)
        for (key, value) in dictionary {
            result[key.hashableValue] = value.anyValue
        }
        return result
    }

    /// The value as the Swift type an app reads back with `as?`.
    public var anyValue: Any {
        switch self {
        case .string(let v): return v
        case .bool(let v): return v
        case .integer(let v): return v.anyValue
        case .double(let v): return v
        case .float(let v): return v
        case .data(let v): return v
        case .date(let v): return v
        case .url(let v): return v
        case .uuid(let v): return v
        case .null: return NSNull()
        case .array(let v): return v.map(\.anyValue)
        case .set(let v): return Set(v.map(\.hashableValue))
        case .dictionary(let v): return Self.userInfo(from: v)
        }
    }

    /// The value as a hashable Swift value, for dictionary keys and set members.
    public var hashableValue: AnyHashable {
        switch self {
        case .string(let v): return v
        case .bool(let v): return v
        case .integer(let v): return v.anyValue as! AnyHashable  // every integer type is Hashable
        case .double(let v): return v
        case .float(let v): return v
        case .data(let v): return v
        case .date(let v): return v
        case .url(let v): return v
        case .uuid(let v): return v
        case .null: return NSNull()
        case .array(let v): return v.map(\.hashableValue)
        case .set(let v): return Set(v.map(\.hashableValue))
        case .dictionary(let v):
            var result: [AnyHashable: AnyHashable] = [:]
            for (key, value) in v { result[key.hashableValue] = value.hashableValue }
            return result
        }
    }
}
