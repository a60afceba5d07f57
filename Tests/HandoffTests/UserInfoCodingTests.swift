import Foundation
import Testing

@testable import Handoff
@testable import HandoffCore

/// A seeded generator, so that a failing random case can be found again from its seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random values of the model: every case, nested up to a depth. NaN is left out because it is
/// never equal to itself; `specialFloatingPointValues` covers it.
struct RandomUserInfo {
    var generator: SplitMix64
    /// Whether set members and dictionary keys may themselves be arrays, sets or dictionaries.
    var containerKeys = false

    mutating func value(maximumDepth: Int) -> UserInfoValue {
        let containers = maximumDepth > 0 && Int.random(in: 0..<3, using: &generator) == 0
        guard containers else { return leaf() }
        let count = Int.random(in: 0...4, using: &generator)
        switch Int.random(in: 0..<3, using: &generator) {
        case 0:
            return .array((0..<count).map { _ in value(maximumDepth: maximumDepth - 1) })
        case 1:
            return .set(Set((0..<count).map { _ in key(maximumDepth: maximumDepth - 1) }))
        default:
            var items: [UserInfoValue: UserInfoValue] = [:]
            for _ in 0..<count {
                items[key(maximumDepth: maximumDepth - 1)] = value(maximumDepth: maximumDepth - 1)
            }
            return .dictionary(items)
        }
    }

    private mutating func key(maximumDepth: Int) -> UserInfoValue {
        containerKeys ? value(maximumDepth: maximumDepth) : leaf()
    }

    mutating func leaf() -> UserInfoValue {
        switch Int.random(in: 0..<11, using: &generator) {
        case 0: return .string(string())
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .integer(integer())
        case 3: return .double(Double(bitPattern: bits { !Double(bitPattern: $0).isNaN }))
        case 4: return .float(Float(bitPattern: UInt32(truncatingIfNeeded: bits { !Float(bitPattern: UInt32(truncatingIfNeeded: $0)).isNaN })))
        case 5: return .data(Data((0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
        case 6: return .date(Date(timeIntervalSinceReferenceDate: Double.random(in: -1e10...1e10, using: &generator)))
        case 7: return .url(URL(string: "https://example.com/\(Int.random(in: 0...9999, using: &generator))/notes?q=\(Int.random(in: 0...99, using: &generator))")!)
        case 8:
            let b = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            return .uuid(UUID(uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])))
        case 9: return .null
        default: return .string("")
        }
    }

    private mutating func bits(where accepted: (UInt64) -> Bool) -> UInt64 {
        while true {
            let candidate = generator.next()
            if accepted(candidate) { return candidate }
        }
    }

    private mutating func string() -> String {
        // ASCII, Latin, CJK and emoji, so that every UTF-8 length is exercised.
        let ranges: [ClosedRange<UInt32>] = [0x20...0x7E, 0xA0...0x17F, 0x4E00...0x4FFF, 0x1F600...0x1F64F, 0x0...0x1F]
        var text = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &generator) {
            let range = ranges.randomElement(using: &generator)!
            text.append(Unicode.Scalar(UInt32.random(in: range, using: &generator))!)
        }
        return String(text)
    }

    private mutating func integer() -> UserInfoInteger {
        let width = UserInfoInteger.Width.allCases.randomElement(using: &generator)!
        let raw = generator.next()
        let bits: UInt64 =
            switch width {
            case .int, .int64: raw
            case .int8: UInt64(bitPattern: Int64(Int8(truncatingIfNeeded: raw)))
            case .int16: UInt64(bitPattern: Int64(Int16(truncatingIfNeeded: raw)))
            case .int32: UInt64(bitPattern: Int64(Int32(truncatingIfNeeded: raw)))
            case .uint, .uint64: raw
            case .uint8: UInt64(UInt8(truncatingIfNeeded: raw))
            case .uint16: UInt64(UInt16(truncatingIfNeeded: raw))
            case .uint32: UInt64(UInt32(truncatingIfNeeded: raw))
            }
        return UserInfoInteger(width: width, bits: bits)
    }
}

/// A value with one of every case, for the tests that take a valid encoding apart.
private let everyCase: UserInfoValue = .dictionary([
    .string("title"): .string("Grüße 👋"),
    .string("flags"): .array([.bool(true), .bool(false), .null]),
    .string("numbers"): .array(UserInfoInteger.Width.allCases.map { .integer(UserInfoInteger(width: $0, bits: 100)) }),
    .string("negative"): .integer(UserInfoInteger(-123_456)),
    .string("ratio"): .double(0.1),
    .string("scale"): .float(1.5),
    .string("blob"): .data(Data([1, 2, 3, 0xFF])),
    .string("edited"): .date(Date(timeIntervalSinceReferenceDate: 794_000_000.25)),
    .string("page"): .url(URL(string: "https://example.com/notes/42")!),
    .string("id"): .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!),
    .string("tags"): .set([.string("a"), .string("b")]),
    .integer(UserInfoInteger(7)): .dictionary([.bool(true): .string("nested")]),
])

private func decodes(_ bytes: [UInt8]) throws(UserInfoDecodingError) -> UserInfoValue {
    try UserInfoCoding.decode(Data(bytes))
}

/// `count` arrays nested inside one another around `innermost`.
private func nested(_ count: Int, around innermost: UserInfoValue = .null) -> UserInfoValue {
    var value = innermost
    for _ in 0..<count { value = .array([value]) }
    return value
}

/// The bytes of `count` arrays of one element, each the next: the start of deep nesting.
private func arrayHeaders(_ count: Int) -> [UInt8] {
    Array(repeating: [UserInfoCoding.Tag.array.rawValue, 0x01], count: count).flatMap { $0 }
}

/// The LEB128 bytes of `value`, as the encoding writes lengths.
private func varint(_ value: UInt64) -> [UInt8] {
    var bytes: [UInt8] = []
    var v = value
    while v >= 0x80 {
        bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
        v >>= 7
    }
    bytes.append(UInt8(v))
    return bytes
}

private let header: [UInt8] = [0x48, UserInfoCoding.version]

@Suite("Encoding and decoding userInfo")
struct UserInfoCodingRoundTripTests {
    @Test("Random values of every case, nested up to six deep, decode to what was encoded")
    func randomRoundTrips() throws {
        var random = RandomUserInfo(generator: SplitMix64(seed: 0x48_616E_646F_6666))
        for iteration in 0..<300 {
            let original = random.value(maximumDepth: 6)
            let decoded = try UserInfoCoding.decode(UserInfoCoding.encode(original))
            #expect(decoded == original, "iteration \(iteration)")
        }
    }

    @Test("Random values whose keys and set members are themselves containers decode to what was encoded")
    func randomRoundTripsWithContainerKeys() throws {
        var random = RandomUserInfo(generator: SplitMix64(seed: 0x4B_6579_73), containerKeys: true)
        for iteration in 0..<300 {
            let original = random.value(maximumDepth: 6)
            let decoded = try UserInfoCoding.decode(UserInfoCoding.encode(original))
            #expect(decoded == original, "iteration \(iteration)")
        }
    }

    @Test("A set of arrays, and a dictionary keyed by arrays or dictionaries, come back")
    func containerKeysInUserInfo() throws {
        let userInfo: [AnyHashable: Any] = [
            "routes": Set([[1, 2], [3]]),
            "byPath": [["a", "b"]: 1] as [AnyHashable: Any],
            "byStyle": [["fill": "red"]: true] as [AnyHashable: Any],
        ]
        let decoded = try UserInfoCoding.decodeUserInfo(UserInfoCoding.encode(userInfo))
        #expect(try UserInfoValue.dictionary(from: decoded) == UserInfoValue.dictionary(from: userInfo))
    }

    @Test("Model keys that differ only in numeric type, such as 1 and 1.0, both come back")
    func numericKeysOfDifferentTypes() throws {
        let value = UserInfoValue.dictionary([
            .integer(UserInfoInteger(1)): .string("Int"),
            .integer(UserInfoInteger(width: .int8, bits: 1)): .string("Int8"),
            .double(1.0): .string("Double"),
        ])
        #expect(try UserInfoCoding.decode(UserInfoCoding.encode(value)) == value)
    }

    @Test("A userInfo dictionary of Swift values decodes to the same values")
    func userInfoRoundTrip() throws {
        let userInfo: [AnyHashable: Any] = [
            "note": "42", "count": Int32(3), "edited": Date(timeIntervalSinceReferenceDate: 10.5),
            "tags": Set(["a", "b"]), "nested": ["page": URL(string: "https://example.com")!], 7: [true, NSNull()] as [Any],
        ]
        let decoded = try UserInfoCoding.decodeUserInfo(UserInfoCoding.encode(userInfo))
        #expect(try UserInfoValue.dictionary(from: decoded) == UserInfoValue.dictionary(from: userInfo))
    }

    @Test("A date keeps its sub-second part bit for bit")
    func datePrecision() throws {
        for interval in [794_000_000.123_456_789, -0.000_001, 1e-300, 4_102_444_800.999_999_9] {
            let decoded = try UserInfoCoding.decode(UserInfoCoding.encode(.date(Date(timeIntervalSinceReferenceDate: interval))))
            guard case .date(let date) = decoded else {
                Issue.record("expected a date, got \(decoded)")
                continue
            }
            #expect(date.timeIntervalSinceReferenceDate.bitPattern == interval.bitPattern)
        }
    }

    @Test("NaN, infinities, -0.0 and the extreme doubles and floats keep their exact bits")
    func specialFloatingPointValues() throws {
        let doubles: [Double] = [.nan, .signalingNaN, -.nan, .infinity, -.infinity, -0.0, .leastNonzeroMagnitude, .greatestFiniteMagnitude]
        for double in doubles {
            guard case .double(let back) = try UserInfoCoding.decode(UserInfoCoding.encode(.double(double))) else {
                Issue.record("\(double) did not come back as a double")
                continue
            }
            #expect(back.bitPattern == double.bitPattern)
        }
        let floats: [Float] = [.nan, .infinity, -.infinity, -0.0, .leastNonzeroMagnitude, .greatestFiniteMagnitude]
        for float in floats {
            guard case .float(let back) = try UserInfoCoding.decode(UserInfoCoding.encode(.float(float))) else {
                Issue.record("\(float) did not come back as a float")
                continue
            }
            #expect(back.bitPattern == float.bitPattern)
        }
    }

    @Test("An empty string, data, array, set and dictionary come back empty")
    func emptyValues() throws {
        for value: UserInfoValue in [.string(""), .data(Data()), .array([]), .set([]), .dictionary([:])] {
            #expect(try UserInfoCoding.decode(UserInfoCoding.encode(value)) == value)
        }
        #expect(try UserInfoCoding.decodeUserInfo(UserInfoCoding.encode([:])).isEmpty)
    }

    @Test("400 levels of nested arrays decode")
    func deepNesting() throws {
        let deep = nested(400)
        #expect(try UserInfoCoding.decode(UserInfoCoding.encode(deep)) == deep)
    }

    @Test("A value nested exactly maximumDepth levels deep decodes")
    func nestingAtTheLimit() throws {
        let deep = nested(UserInfoCoding.maximumDepth)
        #expect(try UserInfoCoding.decode(UserInfoCoding.encode(deep)) == deep)
    }

    @Test("An encoding inside a larger buffer decodes from a slice of it")
    func decodesSlice() throws {
        let buffer = try Data([9, 9, 9]) + UserInfoCoding.encode(everyCase) + Data([9])
        #expect(try UserInfoCoding.decode(buffer[3..<(buffer.count - 1)]) == everyCase)
    }

    @Test("The encoding starts with 'H' and the version")
    func startsWithMagicAndVersion() throws {
        let bytes = [UInt8](try UserInfoCoding.encode(.null))
        #expect(bytes == [0x48, UserInfoCoding.version, 0x00])
    }
}

@Suite("The decoder refuses malformed bytes")
struct UserInfoDecodingErrorTests {
    @Test("Empty input is refused as truncated")
    func emptyInput() {
        #expect(throws: UserInfoDecodingError.truncated(offset: 0)) { try decodes([]) }
    }

    @Test("Input that does not start with 'H' is refused")
    func wrongMagic() {
        #expect(throws: UserInfoDecodingError.notUserInfo) { try decodes([0x00, UserInfoCoding.version, 0x00]) }
        #expect(throws: UserInfoDecodingError.notUserInfo) { try decodes(Array("{\"a\":1}".utf8)) }
    }

    @Test("An unsupported version is refused with a message naming it")
    func unsupportedVersion() {
        let error = #expect(throws: UserInfoDecodingError.unsupportedVersion(2)) { try decodes([0x48, 0x02, 0x00]) }
        #expect(error?.description.contains("version 2 is not supported") == true)
    }

    @Test("Every strict prefix of a valid encoding is refused")
    func everyPrefixIsRefused() throws {
        let bytes = [UInt8](try UserInfoCoding.encode(everyCase))
        for length in 0..<bytes.count {
            #expect(throws: UserInfoDecodingError.self, "prefix of \(length) bytes") {
                try decodes(Array(bytes[..<length]))
            }
        }
    }

    @Test("Bytes after the value are refused")
    func trailingBytes() throws {
        let bytes = [UInt8](try UserInfoCoding.encode(everyCase))
        #expect(throws: UserInfoDecodingError.trailingBytes(offset: bytes.count)) { try decodes(bytes + [0x00]) }
    }

    @Test("A string length of 16 MiB in a 10-byte input is refused before anything is allocated")
    func hugeStringLength() {
        let bytes = header + [0x03] + varint(16 << 20) + Array("abc".utf8)
        #expect(bytes.count == 10)
        let error = #expect(throws: UserInfoDecodingError.self) { try decodes(bytes) }
        guard case .malformed(offset: 3, let why)? = error else {
            Issue.record("expected a malformed length at byte 3, got \(String(describing: error))")
            return
        }
        #expect(why.contains("declares 16777216 elements but only 3 bytes follow"))
    }

    @Test(
        "A count near 2^62 for data, an array, a set or a dictionary is refused, not allocated",
        arguments: [(0x04, "data"), (0x0A, "array"), (0x0B, "set"), (0x0C, "dictionary")] as [(UInt8, String)]
    )
    func hugeCounts(tag: UInt8, kind: String) {
        #expect(throws: UserInfoDecodingError.self, "\(kind)") {
            try decodes(header + [tag] + varint(1 << 62) + [0x00, 0x00])
        }
    }

    @Test("Nesting one level beyond maximumDepth is refused")
    func tooDeep() {
        let bytes = header + arrayHeaders(UserInfoCoding.maximumDepth + 1) + [0x00]
        let error = #expect(throws: UserInfoDecodingError.self) { try decodes(bytes) }
        guard case .tooDeep? = error else {
            Issue.record("expected tooDeep, got \(String(describing: error))")
            return
        }
    }

    @Test("Far deeper nesting than maximumDepth is refused without exhausting the stack")
    func farTooDeep() {
        // 100 000 array headers, each declaring one element: a hostile input of 200 kB.
        let bytes = header + arrayHeaders(100_000) + [0x00]
        #expect(throws: UserInfoDecodingError.self) { try decodes(bytes) }
    }

    @Test("A string that is not valid UTF-8 is refused", arguments: [[0xC3, 0x28], [0xED, 0xA0, 0x80], [0xC0, 0x80], [0xFF]] as [[UInt8]])
    func invalidUTF8(_ text: [UInt8]) {
        let error = #expect(throws: UserInfoDecodingError.self) {
            try decodes(header + [0x03] + varint(UInt64(text.count)) + text)
        }
        #expect(error == .malformed(offset: 3, "string is not valid UTF-8"))
    }

    @Test("A URL whose text is not valid UTF-8 is refused")
    func invalidUTF8URL() {
        #expect(throws: UserInfoDecodingError.self) { try decodes(header + [0x08, 0x02, 0xC3, 0x28]) }
    }

    @Test("A dictionary with a key twice is refused")
    func duplicateDictionaryKeys() {
        let bytes = header + [0x0C, 0x02] + [0x03, 0x01, 0x61, 0x01] + [0x03, 0x01, 0x61, 0x02]
        #expect(throws: UserInfoDecodingError.malformed(offset: 8, "dictionary key appears twice")) { try decodes(bytes) }
    }

    @Test("A set with a member twice is refused")
    func duplicateSetMembers() {
        let bytes = header + [0x0B, 0x02] + [0x10, 0x02] + [0x10, 0x02]
        #expect(throws: UserInfoDecodingError.malformed(offset: 6, "set member appears twice")) { try decodes(bytes) }
    }

    @Test("An unknown tag is refused", arguments: [0x0D, 0x0E, 0x0F, 0x1A, 0x7F, 0xFF] as [UInt8])
    func unknownTags(tag: UInt8) {
        #expect(throws: UserInfoDecodingError.malformed(offset: 2, "unknown tag \(tag)")) { try decodes(header + [tag, 0x00]) }
    }

    @Test("A varint longer than 64 bits is refused")
    func overlongVarint() {
        let bytes = header + [0x10] + Array(repeating: 0xFF, count: 9) + [0x02]
        #expect(throws: UserInfoDecodingError.malformed(offset: 3, "varint overflows 64 bits")) { try decodes(bytes) }
    }

    @Test("decodeUserInfo refuses a valid encoding of something other than a dictionary")
    func notADictionary() {
        #expect(throws: UserInfoDecodingError.notADictionary) {
            try UserInfoCoding.decodeUserInfo(UserInfoCoding.encode(.array([])))
        }
    }

    @Test("An integer outside the range of its declared width is refused")
    func integerOutOfRange() {
        let int8 = UserInfoCoding.Tag.integerBase.rawValue + UserInfoInteger.Width.int8.rawValue
        let uint8 = UserInfoCoding.Tag.integerBase.rawValue + UserInfoInteger.Width.uint8.rawValue
        // 1000 (zigzag 2000) is no Int8, and 256 no UInt8.
        #expect(throws: UserInfoDecodingError.self) { try decodes(header + [int8] + varint(2000)) }
        #expect(throws: UserInfoDecodingError.self) { try decodes(header + [uint8] + varint(256)) }
    }

    @Test("Random mutations of valid encodings are decoded or refused, never a crash")
    func randomMutations() throws {
        var random = RandomUserInfo(generator: SplitMix64(seed: 0xF00D))
        var refused = 0
        for _ in 0..<1_500 {
            var bytes = [UInt8](try UserInfoCoding.encode(random.value(maximumDepth: 4)))
            for _ in 0...Int.random(in: 0..<4, using: &random.generator) {
                let position = Int.random(in: 0..<bytes.count, using: &random.generator)
                switch Int.random(in: 0..<4, using: &random.generator) {
                case 0: bytes[position] = UInt8.random(in: 0...255, using: &random.generator)
                case 1: bytes[position] ^= 1 << UInt8.random(in: 0..<8, using: &random.generator)
                case 2: bytes.insert(UInt8.random(in: 0...255, using: &random.generator), at: position)
                default: if bytes.count > 1 { bytes.remove(at: position) }
                }
            }
            do {
                _ = UserInfoValue.userInfo(from: [.null: try decodes(bytes)])
            } catch {
                refused += 1
            }
        }
        #expect(refused > 0)
    }
}

@Suite("userInfo keys that are containers")
struct ContainerKeyTests {
    @Test("Dictionaries used as keys are all of one type, so comparing two never casts one dictionary type to another (which traps on Linux with nested dictionaries; found by fuzzing)")
    func dictionaryKeysOfOneType() {
        let nested: [String: Any] = ["y": 1]
        let stringKeyed = UserInfoCoding.AnyBuilder.key(["x": nested] as [String: Any])
        let anyKeyed = UserInfoCoding.AnyBuilder.key([AnyHashable("x"): nested] as [AnyHashable: Any])
        #expect(type(of: stringKeyed.base) == type(of: anyKeyed.base))
        #expect(stringKeyed == anyKeyed)
        // Many such keys in one set compare with each other without trapping.
        let keys = (0..<200).map { index in UserInfoCoding.AnyBuilder.key(index % 2 == 0 ? ["k": ["v": index % 7]] as [String: Any] : [AnyHashable(index % 7): ["v": 1]] as [AnyHashable: Any]) }
        #expect(Set(keys).count <= 14)
    }
}

extension ContainerKeyTests {
    @Test("A userInfo whose dictionary keys or set members mix collections with other kinds is refused with a reason when read as [AnyHashable: Any] (Foundation on Linux traps comparing such keys); the typed model reads it")
    func collectionKeysRefused() throws {
        let keyed = UserInfoValue.dictionary([
            .dictionary([.string("k"): .array([.dictionary([.string("a"): .integer(UserInfoInteger(1))])])]): .string("v"),
            .null: .string("n"),
        ])
        let bytes = try UserInfoCoding.encode(keyed)
        #expect(try UserInfoCoding.decode(bytes) == keyed)
        #expect {
            _ = try UserInfoCoding.decodeUserInfo(bytes)
        } throws: { error in
            "\(error)".contains("mix collections with other kinds")
        }
        let member = UserInfoValue.dictionary([.string("s"): .set([.array([.string("x")]), .null])])
        #expect(throws: UserInfoDecodingError.self) { try UserInfoCoding.decodeUserInfo(try UserInfoCoding.encode(member)) }
    }
}

@Suite("The agent's one-pass check of a userInfo")
struct DecodeForAppTests {
    /// What the agent did before: `decodeUserInfo`, then `decode`, each error as it came.
    static func twoPasses(_ data: Data) -> Result<UserInfoValue, UserInfoDecodingError> {
        do throws(UserInfoDecodingError) {
            _ = try UserInfoCoding.decodeUserInfo(data)
            return .success(try UserInfoCoding.decode(data))
        } catch {
            return .failure(error)
        }
    }

    static func onePass(_ data: Data) -> Result<UserInfoValue, UserInfoDecodingError> {
        do throws(UserInfoDecodingError) {
            return .success(try UserInfoCoding.decodeForApp(data))
        } catch {
            return .failure(error)
        }
    }

    @Test("Keys that collide only as AnyHashable (1 and Int8(1), in a dictionary or a set, at any depth) are refused as before")
    func collidingKeys() throws {
        let one = UserInfoValue.integer(UserInfoInteger(1)), oneInt8 = UserInfoValue.integer(UserInfoInteger(width: .int8, bits: 1))
        let values: [UserInfoValue] = [
            .dictionary([one: .null, oneInt8: .null]),
            .dictionary([.string("a"): .dictionary([one: .null, oneInt8: .null])]),
            .dictionary([.string("a"): .array([.set([one, oneInt8])])]),
            .array([.string("not a dictionary")]),
        ]
        for value in values {
            let data = try UserInfoCoding.encode(value)
            #expect(throws: UserInfoDecodingError.self) { try UserInfoCoding.decodeUserInfo(data) }
            #expect(Self.onePass(data) == Self.twoPasses(data))
        }
    }

    @Test("Random values, with keys of every kind, and their mutations: the same value or the same error as the two passes")
    func sameAsTwoPasses() throws {
        var random = RandomUserInfo(generator: SplitMix64(seed: 0xC0FFEE))
        var failures = 0, skippedSecondPass = 0
        for round in 0..<1_500 {
            random.containerKeys = round % 3 == 0
            var value = random.value(maximumDepth: 4)
            if round % 2 == 0 { value = .dictionary([.string("k"): value, .string("l"): .string("x")]) }
            var bytes = [UInt8](try UserInfoCoding.encode(value))
            if round % 4 == 3 {
                let position = Int.random(in: 0..<bytes.count, using: &random.generator)
                bytes[position] = UInt8.random(in: 0...255, using: &random.generator)
            }
            let data = Data(bytes)
            let expected = Self.twoPasses(data)
            #expect(Self.onePass(data) == expected)
            if case .failure = expected { failures += 1 }
            if case .success(let v) = expected, case .dictionary = v, v.keysAreStrings { skippedSecondPass += 1 }
        }
        // Both paths of the check are exercised.
        #expect(failures > 50)
        #expect(skippedSecondPass > 150)
    }

    /// What `checkForApp` must answer: `decodeForApp`'s error, or nil where its value holds
    /// no file URL, or its value.
    static func checked(_ data: Data) -> Result<UserInfoValue?, UserInfoDecodingError> {
        do throws(UserInfoDecodingError) {
            return .success(try UserInfoCoding.checkForApp(data))
        } catch {
            return .failure(error)
        }
    }

    static func holdsFileURL(_ value: UserInfoValue) -> Bool {
        switch value {
        case .url(let url): return url.isFileURL
        case .array(let items): return items.contains(where: holdsFileURL)
        case .set(let members): return members.contains(where: holdsFileURL)
        case .dictionary(let entries): return entries.contains { holdsFileURL($0.key) || holdsFileURL($0.value) }
        default: return false
        }
    }

    /// A string's bytes as the encoding writes them (tag, length, body), any bytes allowed.
    static func rawString(_ body: [UInt8]) -> [UInt8] {
        precondition(body.count < 128)
        return [UserInfoCoding.Tag.string.rawValue, UInt8(body.count)] + body
    }

    /// A dictionary of these keys (raw string bodies), each mapped to `value`'s bytes.
    static func rawDictionary(_ keys: [[UInt8]], value: [UInt8]) -> [UInt8] {
        precondition(keys.count < 128)
        return [UserInfoCoding.Tag.dictionary.rawValue, UInt8(keys.count)] + keys.flatMap { rawString($0) + value }
    }

    @Test("The quick check answers as decodeForApp where bytes differ but strings are equal, keys repeat, or UTF-8 is wrong")
    func quickCheckOnCraftedBytes() {
        let header: [UInt8] = [UserInfoCoding.magic, UserInfoCoding.version]
        let null: [UInt8] = [UserInfoCoding.Tag.null.rawValue]
        let many = (0..<40).map { Array("key\($0)".utf8) }
        let composed = Array("caf\u{E9}".utf8), decomposed = Array("cafe\u{301}".utf8)
        let bodies: [[UInt8]] = [
            Self.rawDictionary([Array("a".utf8), Array("b".utf8)], value: null),
            Self.rawDictionary([Array("a".utf8), Array("a".utf8)], value: null),
            Self.rawDictionary(many, value: null),
            Self.rawDictionary(many + [Array("key17".utf8)], value: null),
            Self.rawDictionary([Array("key17".utf8)] + many, value: null),
            Self.rawDictionary([Array("x".utf8)], value: Self.rawDictionary(many + [Array("key0".utf8)], value: null)),
            Self.rawDictionary([Array("x".utf8)], value: [UserInfoCoding.Tag.array.rawValue, 1] + Self.rawDictionary([Array("k".utf8), Array("k".utf8)], value: null)),
            Self.rawDictionary([Array("".utf8), Array("".utf8)], value: null),
            // Different bytes, the same String; the same letters, different strings.
            Self.rawDictionary([composed, decomposed], value: null),
            Self.rawDictionary([composed, Array("cafe".utf8)], value: null),
            Self.rawDictionary([composed], value: null),
            // UTF-8 that is not, as a key and as a value; valid multi-byte values.
            Self.rawDictionary([[0x61, 0xC3]], value: null),
            Self.rawDictionary([Array("a".utf8)], value: Self.rawString([0x61, 0x80, 0x62])),
            Self.rawDictionary([Array("a".utf8)], value: Self.rawString([0xED, 0xA0, 0x80])),
            Self.rawDictionary([Array("a".utf8)], value: Self.rawString(Array("0123456789ab\u{E9}".utf8))),
            Self.rawDictionary([Array("a".utf8)], value: Self.rawString(Array(repeating: 0x41, count: 20) + [0xFF])),
            // Bytes after the value; a count larger than what follows; nothing at all.
            Self.rawDictionary([Array("a".utf8)], value: null) + null,
            [UserInfoCoding.Tag.dictionary.rawValue, 5] + Self.rawString(Array("a".utf8)) + null,
            Self.rawDictionary([], value: null),
        ]
        for body in bodies {
            let data = Data(header + body)
            switch (Self.checked(data), Self.onePass(data)) {
            case (.failure(let error), .failure(let expected)): #expect(error == expected, "\(body)")
            case (.success(nil), .success(let expected)): #expect(!Self.holdsFileURL(expected), "\(body)")
            case (.success(let value?), .success(let expected)): #expect(value == expected, "\(body)")
            case (let got, let expected): Issue.record("checkForApp gave \(got) where decodeForApp gave \(expected): \(body)")
            }
        }
        // Nested past the deepest the decoders read: arrays, then one dictionary at the bottom.
        for depth in [UserInfoCoding.maximumDepth - 2, UserInfoCoding.maximumDepth - 1, UserInfoCoding.maximumDepth, UserInfoCoding.maximumDepth + 1] {
            var bytes: [UInt8] = header + [UserInfoCoding.Tag.dictionary.rawValue, 1] + Self.rawString(Array("a".utf8))
            for _ in 0..<depth { bytes += [UserInfoCoding.Tag.array.rawValue, 1] }
            bytes += Self.rawDictionary([Array("b".utf8)], value: null)
            let data = Data(bytes)
            switch (Self.checked(data), Self.onePass(data)) {
            case (.failure(let error), .failure(let expected)): #expect(error == expected, "depth \(depth)")
            case (.success(nil), .success): break
            case (.success(let value?), .success(let expected)): #expect(value == expected, "depth \(depth)")
            case (let got, let expected): Issue.record("checkForApp gave \(got) where decodeForApp gave \(expected) at depth \(depth)")
            }
        }
    }

    @Test("The quick check answers as decodeForApp: its error, nil only for a readable userInfo without file URLs, else its value")
    func quickCheck() throws {
        var random = RandomUserInfo(generator: SplitMix64(seed: 0xFEED))
        let one = UserInfoValue.integer(UserInfoInteger(1)), oneInt8 = UserInfoValue.integer(UserInfoInteger(width: .int8, bits: 1))
        let file = UserInfoValue.url(URL(fileURLWithPath: "/home/someone/Documents/plan.shapes"))
        var samples: [Data] = try [
            // Keys that collide only as AnyHashable, a set, keys of other kinds, one alone.
            .dictionary([one: .null, oneInt8: .null]),
            .dictionary([.string("a"): .dictionary([one: .null, oneInt8: .null])]),
            .dictionary([.string("a"): .array([.set([one, oneInt8])])]),
            .dictionary([.string("a"): .set([.string("b")])]),
            .dictionary([one: .string("x")]),
            .dictionary([.string("a"): one, one: .string("x")]),
            // Not a dictionary; file URLs at the top, deep, as a key.
            .array([.string("not a dictionary")]),
            .dictionary([.string("f"): file]),
            .dictionary([.string("a"): .array([.dictionary([.string("b"): file])])]),
            .dictionary([file: .null]),
            // One member or one key alone: no repeat, but what is in it the quick pass keeps not.
            .dictionary([.string("a"): .set([file])]),
            .dictionary([.string("a"): .dictionary([file: .null])]),
            .dictionary([.string("web"): .url(URL(string: "https://example.com/a")!)]),
        ].map(UserInfoCoding.encode)
        for round in 0..<1_500 {
            random.containerKeys = round % 3 == 0
            var value = random.value(maximumDepth: 4)
            if round % 2 == 0 { value = .dictionary([.string("k"): value, .string("l"): .string("x")]) }
            if round % 5 == 1 { value = .dictionary([.string("k"): value, .string("file"): file]) }
            var bytes = [UInt8](try UserInfoCoding.encode(value))
            if round % 4 == 3 {
                let position = Int.random(in: 0..<bytes.count, using: &random.generator)
                bytes[position] = UInt8.random(in: 0...255, using: &random.generator)
            }
            samples.append(Data(bytes))
        }
        var quick = 0, failures = 0, models = 0
        for data in samples {
            switch (Self.checked(data), Self.onePass(data)) {
            case (.failure(let error), .failure(let expected)):
                #expect(error == expected)
                failures += 1
            case (.success(nil), .success(let expected)):
                #expect(!Self.holdsFileURL(expected), "nil for a userInfo with a file URL")
                quick += 1
            case (.success(let value?), .success(let expected)):
                #expect(value == expected)
                models += 1
            case (let got, let expected):
                Issue.record("checkForApp gave \(got) where decodeForApp gave \(expected)")
            }
        }
        // Each answer is exercised.
        #expect(quick > 150)
        #expect(failures > 50)
        #expect(models > 150)
    }
}
