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
    /// The keys from the top of `userInfo` down to the bad value, e.g. `["shapes", "[2]", "color"]`.
    public var keyPath: [String]
    /// The Swift type of the bad value.
    public var typeName: String

    public init(keyPath: [String], typeName: String) {
        self.keyPath = keyPath
        self.typeName = typeName
    }

    public var description: String {
        let path = keyPath.isEmpty ? "userInfo" : "userInfo." + keyPath.joined(separator: ".")
        return "\(path) holds a value of type \(typeName), which a user activity cannot carry; "
            + "use String, a number, Bool, Data, Date, URL, UUID, NSNull, or an array, set or dictionary of those"
    }
}

extension UserInfoValue {
    /// Converts a Swift or Foundation value into the model, or throws naming where an
    /// unsupported value sits.
    public init(_ value: Any) throws(UserInfoError) {
        self = try Self.convert(value, path: [])
    }

    /// Converts a whole `userInfo` dictionary.
    public static func dictionary(from userInfo: [AnyHashable: Any]) throws(UserInfoError) -> [UserInfoValue: UserInfoValue] {
        var result: [UserInfoValue: UserInfoValue] = [:]
        result.reserveCapacity(userInfo.count)
        for (key, value) in userInfo {
            let keyName = String(describing: key.base)
            let convertedKey = try convert(key.base, path: [keyName + " (key)"])
            result[convertedKey] = try convert(value, path: [keyName])
        }
        return result
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

    // The order of the casts matters: on Linux a Swift `Bool` never casts to an integer and
    // back, but Foundation's reference types must be tried after the value types they bridge.
    private static func convert(_ value: Any, path: [String]) throws(UserInfoError) -> UserInfoValue {
        switch value {
        case let v as String: return .string(v)
        case let v as Bool: return .bool(v)
        case let v as Int: return .integer(UserInfoInteger(v))
        case let v as Double: return .double(v)
        case let v as Date: return .date(v)
        case let v as Data: return .data(v)
        case let v as URL: return .url(v)
        case let v as UUID: return .uuid(v)
        case let v as Float: return .float(v)
        case let v as Int64: return .integer(.init(width: .int64, bits: UInt64(bitPattern: v)))
        case let v as Int32: return .integer(.init(width: .int32, bits: UInt64(bitPattern: Int64(v))))
        case let v as Int16: return .integer(.init(width: .int16, bits: UInt64(bitPattern: Int64(v))))
        case let v as Int8: return .integer(.init(width: .int8, bits: UInt64(bitPattern: Int64(v))))
        case let v as UInt: return .integer(.init(width: .uint, bits: UInt64(v)))
        case let v as UInt64: return .integer(.init(width: .uint64, bits: v))
        case let v as UInt32: return .integer(.init(width: .uint32, bits: UInt64(v)))
        case let v as UInt16: return .integer(.init(width: .uint16, bits: UInt64(v)))
        case let v as UInt8: return .integer(.init(width: .uint8, bits: UInt64(v)))
        case let v as CGFloat: return .double(Double(v))
        case let v as UserInfoValue: return v
        case let v as [Any]:
            var items: [UserInfoValue] = []
            items.reserveCapacity(v.count)
            for (index, item) in v.enumerated() {
                items.append(try convert(item, path: path + ["[\(index)]"]))
            }
            return .array(items)
        case let v as [AnyHashable: Any]:
            var items: [UserInfoValue: UserInfoValue] = [:]
            items.reserveCapacity(v.count)
            for (key, item) in v {
                let keyName = String(describing: key.base)
                let convertedKey = try convert(key.base, path: path + [keyName + " (key)"])
                items[convertedKey] = try convert(item, path: path + [keyName])
            }
            return .dictionary(items)
        case let v as Set<AnyHashable>:
            var items = Set<UserInfoValue>()
            items.reserveCapacity(v.count)
            for item in v {
                items.insert(try convert(item.base, path: path + ["{\(item.base)}"]))
            }
            return .set(items)
        case is NSNull: return .null
        case let v as NSNumber: return numberValue(v)
        case let v as NSString: return .string(v as String)
        case let v as NSData: return .data(v as Data)
        case let v as NSDate: return .date(v as Date)
        case let v as NSURL:
            guard let url = v as URL? else { throw UserInfoError(keyPath: path, typeName: "NSURL") }
            return .url(url)
        default:
            throw UserInfoError(keyPath: path, typeName: String(describing: type(of: value)))
        }
    }

    private static func numberValue(_ number: NSNumber) -> UserInfoValue {
        switch String(cString: number.objCType) {
        case "d": return .double(number.doubleValue)
        case "f": return .float(number.floatValue)
        case "Q", "L", "I", "S", "C": return .integer(.init(width: .uint64, bits: number.uint64Value))
        default: return .integer(.init(width: .int64, bits: UInt64(bitPattern: number.int64Value)))
        }
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
