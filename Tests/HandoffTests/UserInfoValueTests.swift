import Foundation
import Testing

@testable import Handoff
@testable import HandoffCore

/// A type of the app's own, which `userInfo` cannot carry; hashable, so it can be a key.
private struct Shape: Hashable {
    var sides: Int
}

/// A type of the app's own that is not hashable.
private struct Pen {
    var width: Double
}

/// Another of the app's own types: an enum, which Swift makes hashable without a word.
private enum Mode {
    case reading, editing
}

/// `value` converted into the model and back, as the app reads it.
private func convertedBack(_ value: Any) throws -> Any {
    try UserInfoValue(value).anyValue
}

/// Whether `value` comes back from the model as the same Swift type with the same value.
private func comesBackAsItself<T: Equatable>(_ value: T) throws -> Bool {
    let back = try convertedBack(value)
    return type(of: back) == T.self && back as? T == value
}

@Suite("Converting userInfo values into the model and back")
struct UserInfoValueConversionTests {
    @Test("A String comes back as the same String")
    func string() throws {
        #expect(try comesBackAsItself("Grüße, 世界 👋"))
        #expect(try comesBackAsItself(""))
    }

    @Test("A Bool comes back as a Bool")
    func bool() throws {
        #expect(try comesBackAsItself(true))
        #expect(try comesBackAsItself(false))
    }

    @Test("Every integer type comes back as that type, at both ends of its range", arguments: UserInfoInteger.Width.allCases)
    func integers(width: UserInfoInteger.Width) throws {
        switch width {
        case .int: #expect(try comesBackAsItself(Int.min) && comesBackAsItself(Int.max) && comesBackAsItself(0 as Int))
        case .int8: #expect(try comesBackAsItself(Int8.min) && comesBackAsItself(Int8.max) && comesBackAsItself(-1 as Int8))
        case .int16: #expect(try comesBackAsItself(Int16.min) && comesBackAsItself(Int16.max))
        case .int32: #expect(try comesBackAsItself(Int32.min) && comesBackAsItself(Int32.max))
        case .int64: #expect(try comesBackAsItself(Int64.min) && comesBackAsItself(Int64.max))
        case .uint: #expect(try comesBackAsItself(UInt.min) && comesBackAsItself(UInt.max))
        case .uint8: #expect(try comesBackAsItself(UInt8.min) && comesBackAsItself(UInt8.max))
        case .uint16: #expect(try comesBackAsItself(UInt16.min) && comesBackAsItself(UInt16.max))
        case .uint32: #expect(try comesBackAsItself(UInt32.min) && comesBackAsItself(UInt32.max))
        case .uint64: #expect(try comesBackAsItself(UInt64.min) && comesBackAsItself(UInt64.max))
        }
    }

    @Test("A Double comes back as a Double and a Float as a Float")
    func floatingPoint() throws {
        #expect(try comesBackAsItself(3.141592653589793))
        #expect(try comesBackAsItself(Float(2.5)))
    }

    @Test("Data comes back as the same Data")
    func data() throws {
        #expect(try comesBackAsItself(Data([0, 1, 2, 255])))
    }

    @Test("A Date comes back as the same Date, sub-second part included")
    func date() throws {
        let date = Date(timeIntervalSinceReferenceDate: 794_000_000.123_456_7)
        let back = try #require(try convertedBack(date) as? Date)
        #expect(back.timeIntervalSinceReferenceDate.bitPattern == date.timeIntervalSinceReferenceDate.bitPattern)
    }

    @Test("A URL comes back as the same URL")
    func url() throws {
        #expect(try comesBackAsItself(try #require(URL(string: "https://example.com/notes/42?q=a%20b#top"))))
        #expect(try comesBackAsItself(URL(fileURLWithPath: "/tmp/notes/42.txt")))
    }

    @Test("A UUID comes back as the same UUID")
    func uuid() throws {
        #expect(try comesBackAsItself(UUID()))
    }

    @Test("NSNull comes back as NSNull")
    func null() throws {
        #expect(try convertedBack(NSNull()) is NSNull)
    }

    @Test("An array comes back with its elements, in order, as their own types")
    func array() throws {
        let back = try #require(try convertedBack([1, 2, 3]) as? [Any])
        #expect(back.count == 3)
        #expect(back as? [Int] == [1, 2, 3])
        let mixed = try #require(try convertedBack(["a", true, Int8(3)] as [Any]) as? [Any])
        #expect(mixed[0] as? String == "a")
        #expect(mixed[1] as? Bool == true)
        #expect(type(of: mixed[2]) == Int8.self)
    }

    @Test("A set comes back as a set of the same members")
    func set() throws {
        let back = try convertedBack(Set(["a", "b", "c"]))
        #expect(back as? Set<String> == ["a", "b", "c"])
        #expect(try convertedBack(Set([UInt16(1), 2])) as? Set<UInt16> == [1, 2])
    }

    @Test("Nested dictionaries come back nested")
    func nestedDictionaries() throws {
        let back = try #require(try convertedBack(["outer": ["inner": ["count": 3]]]) as? [AnyHashable: Any])
        let outer = try #require(back["outer"] as? [AnyHashable: Any])
        #expect(outer["inner"] as? [String: Int] == ["count": 3])
    }

    @Test("Dictionary keys that are not strings come back as their own types")
    func nonStringKeys() throws {
        let id = UUID()
        let userInfo: [AnyHashable: Any] = [1: "one", Int8(2): "two", true: "yes", id: "id", 2.5: "half"]
        let back = UserInfoValue.userInfo(from: try UserInfoValue.dictionary(from: userInfo))
        #expect(back.count == 5)
        #expect(back[AnyHashable(1)] as? String == "one")
        #expect(back[AnyHashable(true)] as? String == "yes")
        #expect(back[AnyHashable(id)] as? String == "id")
        #expect(back[AnyHashable(2.5)] as? String == "half")
        let int8Key = try #require(back.keys.first { $0.base is Int8 })
        #expect(back[int8Key] as? String == "two")
    }

    @Test("A Bool does not come back as an integer, nor an integer as a Bool")
    func boolAndIntStayApart() throws {
        let back = UserInfoValue.userInfo(from: try UserInfoValue.dictionary(from: ["b": true, "i": 1]))
        #expect(back["b"] as? Bool == true)
        #expect((back["b"] as? Int) == nil)
        #expect(back["i"] as? Int == 1)
        #expect((back["i"] as? Bool) == nil)
    }

    @Test("A Bool and an Int survive encoding as themselves")
    func boolAndIntStayApartWhenEncoded() throws {
        let back = try UserInfoCoding.decodeUserInfo(try UserInfoCoding.encode(["b": true, "i": 1]))
        #expect(back["b"] as? Bool == true)
        #expect((back["b"] as? Int) == nil)
        #expect(back["i"] as? Int == 1)
        #expect((back["i"] as? Bool) == nil)
    }

    @Test("A set of dictionaries keyed by arrays converts without crashing")
    func setOfDictionariesKeyedByArrays() async {
        // In a child process, so that a regression to a trap fails one test, not the run.
        await #expect(processExitsWith: .success) {
            let routes: Set<AnyHashable> = [
                AnyHashable([AnyHashable([1]): AnyHashable("one")]),
                AnyHashable([AnyHashable([2]): AnyHashable("two")]),
            ]
            let value = try? UserInfoValue(routes)
            guard case .set(let members)? = value, members.count == 2 else { exit(1) }
        }
    }

    @Test("A UserInfoValue put in userInfo is carried as it is")
    func modelValuePassesThrough() throws {
        let value = UserInfoValue.integer(UserInfoInteger(width: .uint16, bits: 7))
        #expect(try UserInfoValue(value) == value)
    }
}

@Suite("Values userInfo cannot carry")
struct UnsupportedUserInfoValueTests {
    /// The two ways a `userInfo` is checked: converted into the model, or encoded directly.
    enum Check: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case model, encoding

        var testDescription: String { rawValue }

        func run(_ userInfo: [AnyHashable: Any]) throws(UserInfoError) {
            switch self {
            case .model: _ = try UserInfoValue.dictionary(from: userInfo)
            case .encoding: _ = try UserInfoCoding.encode(userInfo)
            }
        }
    }

    @Test("A value of an unsupported type under a top-level key is named by its key and type", arguments: Check.allCases)
    func topLevelKey(check: Check) {
        #expect(throws: UserInfoError(keyPath: ["pen"], typeName: "Pen")) {
            try check.run(["note": "42", "pen": Pen(width: 2)])
        }
    }

    @Test("A value in a nested dictionary is named by the keys down to it", arguments: Check.allCases)
    func nestedDictionaryKey(check: Check) {
        #expect(throws: UserInfoError(keyPath: ["document", "layout", "pen"], typeName: "Pen")) {
            try check.run(["document": ["layout": ["pen": Pen(width: 2)]]])
        }
    }

    @Test("A value in an array is named by its index", arguments: Check.allCases)
    func arrayIndex(check: Check) throws {
        let error = #expect(throws: UserInfoError.self) {
            try check.run(["pens": ["fine", Pen(width: 2)] as [Any]])
        }
        #expect(error == UserInfoError(keyPath: ["pens", "[1]"], typeName: "Pen"))
        #expect(error?.description.hasPrefix("userInfo.pens.[1] holds a value of type Pen, which a user activity cannot carry") == true)
    }

    @Test("A set member of an unsupported type is named by the member")
    func setMember() {
        #expect(throws: UserInfoError(keyPath: ["shapes", "{Shape(sides: 3)}"], typeName: "Shape")) {
            try UserInfoValue.dictionary(from: ["shapes": Set([AnyHashable(Shape(sides: 3))])])
        }
    }

    @Test("A dictionary key of an unsupported type is named as a key")
    func unsupportedKey() {
        #expect(throws: UserInfoError(keyPath: ["Shape(sides: 3) (key)"], typeName: "Shape")) {
            try UserInfoValue.dictionary(from: [Shape(sides: 3): "triangle"])
        }
    }

    @Test("An unsupported value on its own is named as userInfo itself")
    func unsupportedRoot() {
        let error = #expect(throws: UserInfoError.self) {
            try UserInfoValue(Pen(width: 2))
        }
        #expect(error == UserInfoError(keyPath: [], typeName: "Pen"))
        #expect(error?.description.hasPrefix("userInfo holds a value of type Pen") == true)
    }

    @Test("Encoding a value of the app's own hashable type throws instead of crashing")
    func encodingHashableValueThrows() async {
        // In a child process: today the encoder overflows the stack.
        await #expect(processExitsWith: .success) {
            do throws(UserInfoError) {
                _ = try UserInfoCoding.encode(["mode": Mode.editing])
                exit(1)
            } catch {
                exit(error == UserInfoError(keyPath: ["mode"], typeName: "Mode") ? 0 : 2)
            }
        }
    }
}

@Suite("Foundation numbers")
struct FoundationNumberTests {
    @Test("A userInfo made by JSONSerialization keeps its booleans and integers apart")
    func jsonBooleans() throws {
        let json = try JSONSerialization.jsonObject(with: Data(#"{"done": true, "count": 1, "ratio": 0.5}"#.utf8)) as! [String: Any]
        let back = try UserInfoCoding.decodeUserInfo(UserInfoCoding.encode(json))
        #expect(back["done"] as? Bool == true)
        #expect(back["count"] as? Int == 1)
        #expect((back["count"] as? Bool) == nil)
        #expect(back["ratio"] as? Double == 0.5)
    }
}
