import Foundation

/// The JSON of the messages a continuation carries, written and read by hand.
///
/// Foundation's `JSONEncoder` and `JSONDecoder` cost 5–50 µs a message (the 3 KB `userInfo`
/// as a base64 string escaped character by character, the `Codable` machinery's type
/// look-ups, UUIDs through `sscanf`/`snprintf`), and a continuation passes seven messages
/// through four processes. This writes the same bytes as `JSONEncoder` with the local API's
/// settings (sorted keys, slashes unescaped, non-finite numbers as strings) for `save`,
/// `saved`, `willContinue`, `deliver`, `wasContinued`, `becameCurrent`, `resigned`,
/// `invalidated`, the `hello` and `continue` calls, `prove` and `proof`, the answer to `hello`,
/// and a reply that carries only `continued` or `error`; every other message goes through
/// `JSONEncoder`.
///
/// Reading is a fast path only: it returns the message when the bytes are plainly one of those
/// messages, and nil whenever anything is unusual (an escape it does not handle, a number
/// written as `7.0`, a key that appears twice, a field of the wrong type, a reply with more in
/// it), so that `JSONDecoder` reads those bytes as before and says what is wrong with the
/// same words. It never accepts bytes `JSONDecoder` refuses, nor reads them differently: a
/// test compares the two on mutated messages.
package enum LocalMessageJSON {
    /// False when the environment says `HANDOFF_LOCAL_JSON=foundation`: every message then
    /// goes through Foundation's coders, for comparison (`Benchmarks/agent.sh`).
    package static let enabled = getenv("HANDOFF_LOCAL_JSON").map { String(cString: $0) } != "foundation"

    // MARK: Writing

    /// The message's JSON, or nil for a message this writer leaves to `JSONEncoder`.
    package static func encode(_ message: LocalMessage) -> [UInt8]? {
        var w = Writer()
        switch message {
        case .call(let request, .continue(let activity)):
            return LocalJSONWriter.continueCall(request: request, activity: activity?.uuidString)
        case .call(let request, .hello(let version, let role, let bundleIdentifier)):
            return LocalJSONWriter.hello(request: request, version: version, role: role, bundleIdentifier: bundleIdentifier)
        case .prove(let nonce), .proof(let nonce):
            w.open()
            w.key("nonce"); w.base64(nonce)
            w.key("type")
            if case .prove = message { w.ascii("\"prove\"") } else { w.ascii("\"proof\"") }
            w.close()
        case .save(let request, let activity):
            w.open()
            w.key("activity"); w.uuid(activity)
            w.key("request"); w.unsigned(request)
            w.key("type"); w.ascii("\"save\"")
            w.close()
        case .saved(let request, let record):
            w.reserve(record)
            w.open()
            w.key("record"); w.record(record)
            w.key("request"); w.unsigned(request)
            w.key("type"); w.ascii("\"saved\"")
            w.close()
        case .willContinue(let continuation, let activityType):
            w.open()
            w.key("activityType"); w.string(activityType)
            w.key("continuation"); w.uuid(continuation)
            w.key("type"); w.ascii("\"willContinue\"")
            w.close()
        case .deliver(let continuation, let record, let origin):
            w.reserve(record)
            w.open()
            w.key("continuation"); w.uuid(continuation)
            w.key("origin"); w.origin(origin)
            w.key("record"); w.record(record)
            w.key("type"); w.ascii("\"deliver\"")
            w.close()
        case .wasContinued(let activity), .resigned(let activity), .invalidated(let activity):
            w.open()
            w.key("activity"); w.uuid(activity)
            w.key("type")
            switch message {
            case .wasContinued: w.ascii("\"wasContinued\"")
            case .resigned: w.ascii("\"resigned\"")
            default: w.ascii("\"invalidated\"")
            }
            w.close()
        case .becameCurrent(let activity):
            w.open()
            w.key("activity"); w.activity(activity)
            w.key("type"); w.ascii("\"becameCurrent\"")
            w.close()
        case .reply(let request, let reply) where reply.carriesOnlyHelloAnswer:
            w.open()
            if let value = reply.account { w.key("account"); w.string(value) }
            if let value = reply.app { w.key("app"); w.app(value) }
            if let value = reply.containers {
                w.key("containers"); w.containers(value)
            }
            if let value = reply.device { w.key("device"); w.device(value) }
            if let error = reply.error { w.key("error"); w.error(error) }
            w.key("ok"); w.bool(reply.ok)
            w.key("request"); w.unsigned(request)
            w.key("type"); w.ascii("\"reply\"")
            if let value = reply.version { w.key("version"); w.signed(value) }
            w.close()
        case .reply(let request, let reply):
            guard reply.carriesOnlyContinuedOrError else { return nil }
            w.open()
            if let continued = reply.continued { w.key("continued"); w.continued(continued) }
            if let error = reply.error { w.key("error"); w.error(error) }
            w.key("ok"); w.bool(reply.ok)
            w.key("request"); w.unsigned(request)
            w.key("type"); w.ascii("\"reply\"")
            w.close()
        default:
            return nil
        }
        return w.bytes
    }

    typealias Writer = LocalJSONWriter

    // MARK: Reading

    /// The message in `payload` when it is plainly one of the messages this reads, else nil
    /// (and `JSONDecoder` reads it).
    package static func decode(_ payload: [UInt8]) -> LocalMessage? {
        payload.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer)
            return try? reader.message()
        }
    }

    static let base64Alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    /// Each byte's value in base64: 0–63, 0xFE for the padding `=`, 0xFF for the rest.
    static let base64Values: [UInt8] = {
        var values = [UInt8](repeating: 0xFF, count: 256)
        base64Alphabet.withUTF8Buffer { table in
            for (value, byte) in table.enumerated() { values[Int(byte)] = UInt8(value) }
        }
        values[Int(UInt8(ascii: "="))] = 0xFE
        return values
    }()

    /// The two characters of every 12-bit value, the first in the low byte.
    static let base64Pairs: [UInt16] = {
        var pairs = [UInt16](repeating: 0, count: 4096)
        base64Alphabet.withUTF8Buffer { table in
            for value in 0..<4096 { pairs[value] = UInt16(table[value >> 6]) | UInt16(table[value & 0x3F]) << 8 }
        }
        return pairs
    }()

    /// Each character's value placed for its position in a group of four (`position * 256 +
    /// character`): the value shifted into the group's 24 bits, or 0xFF00_0000 for a character
    /// that is not in the alphabet (the padding `=` included).
    static let base64Placed: [UInt32] = {
        var placed = [UInt32](repeating: 0xFF00_0000, count: 1024)
        for position in 0..<4 {
            for character in 0..<256 where base64Values[character] < 64 {
                placed[position * 256 + character] = UInt32(base64Values[character]) << (18 - 6 * position)
            }
        }
        return placed
    }()

    typealias Unusual = LocalJSONUnusual

    typealias Reader = LocalJSONReader
}

extension LocalJSONWriter {
    mutating func reserve(_ record: ActivityRecord) {
        bytes.reserveCapacity(512 + (record.userInfo?.count ?? 0) * 4 / 3)
    }

    /// Upper-case, as Foundation prints a UUID.
    mutating func uuid(_ value: UUID) {
        let hex: StaticString = "0123456789ABCDEF"
        bytes.append(UInt8(ascii: "\""))
        withUnsafeBytes(of: value.uuid) { raw in
            hex.withUTF8Buffer { digits in
                for (index, byte) in raw.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
                    bytes.append(digits[Int(byte >> 4)])
                    bytes.append(digits[Int(byte & 0x0F)])
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Standard base64 with padding, as `Data.base64EncodedString()`; none of its
    /// characters needs escaping in a JSON string. Six bytes at a time, two characters per
    /// table look-up (a profile found the byte-at-a-time loop at 14 instructions a byte).
    mutating func base64(_ data: Data) {
        let count = (data.count + 2) / 3 * 4
        let start = bytes.count
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: repeatElement(0, count: count))
        bytes.append(UInt8(ascii: "\""))
        bytes.withUnsafeMutableBufferPointer { buffer in
            let out = UnsafeMutableRawPointer(buffer.baseAddress!) + start + 1
            data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
                LocalMessageJSON.base64Pairs.withUnsafeBufferPointer { pairs in
                    var index = 0, at = 0
                    // Eight bytes read (six used) while eight remain.
                    while index + 8 <= raw.count {
                        let value = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self))
                        let first = UInt64(pairs[Int(value >> 52)]) | UInt64(pairs[Int(value >> 40 & 0xFFF)]) << 16
                        let second = UInt64(pairs[Int(value >> 28 & 0xFFF)]) | UInt64(pairs[Int(value >> 16 & 0xFFF)]) << 16
                        out.storeBytes(of: (first | second << 32).littleEndian, toByteOffset: at, as: UInt64.self)
                        index += 6
                        at += 8
                    }
                    LocalMessageJSON.base64Alphabet.withUTF8Buffer { table in
                        while index + 3 <= raw.count {
                            let value = UInt32(raw[index]) << 16 | UInt32(raw[index + 1]) << 8 | UInt32(raw[index + 2])
                            out.storeBytes(of: table[Int(value >> 18)], toByteOffset: at, as: UInt8.self)
                            out.storeBytes(of: table[Int(value >> 12 & 0x3F)], toByteOffset: at + 1, as: UInt8.self)
                            out.storeBytes(of: table[Int(value >> 6 & 0x3F)], toByteOffset: at + 2, as: UInt8.self)
                            out.storeBytes(of: table[Int(value & 0x3F)], toByteOffset: at + 3, as: UInt8.self)
                            index += 3
                            at += 4
                        }
                        let left = raw.count - index
                        if left > 0 {
                            let value = UInt32(raw[index]) << 16 | (left == 2 ? UInt32(raw[index + 1]) << 8 : 0)
                            out.storeBytes(of: table[Int(value >> 18)], toByteOffset: at, as: UInt8.self)
                            out.storeBytes(of: table[Int(value >> 12 & 0x3F)], toByteOffset: at + 1, as: UInt8.self)
                            out.storeBytes(of: left == 2 ? table[Int(value >> 6 & 0x3F)] : UInt8(ascii: "="), toByteOffset: at + 2, as: UInt8.self)
                            out.storeBytes(of: UInt8(ascii: "="), toByteOffset: at + 3, as: UInt8.self)
                        }
                    }
                }
            }
        }
    }

    mutating func activity(_ a: ActivityAnnouncement) {
        open()
        key("activityType"); string(a.activityType)
        if let value = a.bundleIdentifier { key("bundleIdentifier"); string(value) }
        if let value = a.expirationDate { key("expirationDate"); double(value.timeIntervalSince1970) }
        key("hasWebpageURL"); bool(a.hasWebpageURL)
        key("id"); uuid(a.id)
        key("supportsContinuationStreams"); bool(a.supportsContinuationStreams)
        if let value = a.teamIdentifier { key("teamIdentifier"); string(value) }
        if let value = a.title { key("title"); string(value) }
        close()
    }

    mutating func record(_ r: ActivityRecord) {
        open()
        key("activity"); activity(r.activity)
        key("isEligibleForPrediction"); bool(r.isEligibleForPrediction)
        key("isEligibleForPublicIndexing"); bool(r.isEligibleForPublicIndexing)
        key("isEligibleForSearch"); bool(r.isEligibleForSearch)
        key("keywords"); strings(r.keywords)
        if let value = r.persistentIdentifier { key("persistentIdentifier"); string(value) }
        if let value = r.referrerURL { key("referrerURL"); string(value) }
        if let value = r.requiredUserInfoKeys { key("requiredUserInfoKeys"); strings(value) }
        if let value = r.targetContentIdentifier { key("targetContentIdentifier"); string(value) }
        if let value = r.untranslatedFileURLs { key("untranslatedFileURLs"); strings(value) }
        if let value = r.userInfo { key("userInfo"); base64(value) }
        if let value = r.webpageURL { key("webpageURL"); string(value) }
        close()
    }

    mutating func origin(_ o: LocalOrigin) {
        open()
        key("activity"); uuid(o.activity)
        key("device"); uuid(o.device)
        key("deviceName"); string(o.deviceName)
        close()
    }

    mutating func continued(_ c: LocalContinued) {
        open()
        key("activity"); activity(c.activity)
        if let value = c.app { key("app"); string(value) }
        key("continuation"); uuid(c.continuation)
        key("device"); string(c.device)
        key("seconds"); double(c.seconds)
        if let value = c.webpageURL { key("webpageURL"); string(value) }
        close()
    }

    mutating func device(_ d: LocalDevice) {
        open()
        if let value = d.address { key("address"); string(value) }
        if let value = d.fingerprint { key("fingerprint"); string(value) }
        key("id"); uuid(d.id)
        key("isNearby"); bool(d.isNearby)
        key("isThisDevice"); bool(d.isThisDevice)
        if let value = d.lastHeard { key("lastHeard"); double(value) }
        key("name"); string(d.name)
        close()
    }

    mutating func app(_ a: LocalApp) {
        open()
        key("activityTypes"); strings(a.activityTypes)
        key("bundleIdentifier"); string(a.bundleIdentifier)
        key("executable"); string(a.executable)
        key("running"); signed(a.running)
        if let value = a.signedBy { key("signedBy"); string(value) }
        if let value = a.teamIdentifier { key("teamIdentifier"); string(value) }
        if let value = a.teamSource { key("teamSource"); string(value) }
        close()
    }

    mutating func containers(_ values: [LocalContainer]) {
        bytes.append(UInt8(ascii: "["))
        for (index, container) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            open()
            key("folder"); string(container.folder)
            key("identifier"); string(container.identifier)
            close()
        }
        bytes.append(UInt8(ascii: "]"))
    }
}

extension LocalJSONReader {

    // The top level: each key's value is skipped (checked) and found again by its offset
    // once `type` says which keys matter (sorted keys put `type` last).
    mutating func message() throws(Unusual) -> LocalMessage {
        var fields: [(key: String, offset: Int)] = []
        try object { (key, reader) throws(Unusual) in
            fields.append((key, reader.offset))
            try reader.skip(depth: 1)
        }
        whitespace()
        guard offset == bytes.count else { throw Unusual() }
        func field(_ name: String) -> LocalJSONReader? {
            fields.first { $0.key == name }.map { LocalJSONReader(bytes: bytes, offset: $0.offset) }
        }
        func required(_ name: String) throws(Unusual) -> LocalJSONReader {
            guard let reader = field(name) else { throw Unusual() }
            return reader
        }
        func request() throws(Unusual) -> UInt64 {
            var reader = try required("request")
            return try reader.unsigned()
        }
        func uuid(_ name: String) throws(Unusual) -> UUID {
            var reader = try required(name)
            return try reader.uuid()
        }
        guard var typeReader = field("type") else { throw Unusual() }
        let typeName = try typeReader.string()
        switch typeName {
        case "continue":
            var activity: UUID?
            if var reader = field("activity"), !reader.null() { activity = try reader.uuid() }
            return .call(request: try request(), .continue(activity: activity))
        case "hello":
            var version = try required("version"), role = try required("role")
            guard let known = LocalRole(rawValue: try role.string()) else { throw Unusual() }
            var bundleIdentifier: String?
            if var reader = field("bundleIdentifier") { bundleIdentifier = try reader.optionalString() }
            return .call(request: try request(), .hello(version: try version.signed(), role: known, bundleIdentifier: bundleIdentifier))
        case "prove", "proof":
            var reader = try required("nonce")
            let nonce = try reader.base64()
            return typeName == "prove" ? .prove(nonce: nonce) : .proof(nonce: nonce)
        case "save": return .save(request: try request(), activity: try uuid("activity"))
        case "saved":
            var reader = try required("record")
            return .saved(request: try request(), try reader.record())
        case "willContinue":
            var reader = try required("activityType")
            return .willContinue(continuation: try uuid("continuation"), activityType: try reader.string())
        case "deliver":
            var record = try required("record"), origin = try required("origin")
            return .deliver(continuation: try uuid("continuation"), record: try record.record(), origin: try origin.origin())
        case "wasContinued": return .wasContinued(activity: try uuid("activity"))
        case "resigned": return .resigned(activity: try uuid("activity"))
        case "invalidated": return .invalidated(activity: try uuid("activity"))
        case "becameCurrent":
            var reader = try required("activity")
            return .becameCurrent(try reader.activity())
        case "reply":
            // Only a reply with nothing but `ok` and `continued` or `error`, or an answer to
            // `hello`.
            let known = ["type", "request", "ok", "continued", "error", "version", "device", "app", "account", "containers"]
            guard fields.allSatisfy({ known.contains($0.key) }) else { throw Unusual() }
            var ok = try required("ok")
            var reply = LocalReply()
            reply.ok = try ok.bool()
            if var reader = field("continued"), !reader.null() { reply.continued = try reader.continued() }
            if var reader = field("error"), !reader.null() { reply.error = try reader.error() }
            if var reader = field("version"), !reader.null() { reply.version = try reader.signed() }
            if var reader = field("device"), !reader.null() { reply.device = try reader.device() }
            if var reader = field("app"), !reader.null() { reply.app = try reader.app() }
            if var reader = field("account"), !reader.null() { reply.account = try reader.string() }
            if var reader = field("containers"), !reader.null() { reply.containers = try reader.containers() }
            return .reply(request: try request(), reply)
        default:
            throw Unusual()
        }
    }

    // MARK: The types

    mutating func activity() throws(Unusual) -> ActivityAnnouncement {
        var id: UUID?, activityType: String?, title: String?, bundleIdentifier: String?, teamIdentifier: String?
        var hasWebpageURL = false, supportsContinuationStreams = false
        var expirationDate: Date?
        try object { (key, r) throws(Unusual) in
            switch key {
            case "id": id = try r.uuid()
            case "activityType": activityType = try r.string()
            case "title": title = try r.optionalString()
            case "bundleIdentifier": bundleIdentifier = try r.optionalString()
            case "teamIdentifier": teamIdentifier = try r.optionalString()
            case "hasWebpageURL": hasWebpageURL = try r.null() ? false : r.bool()
            case "supportsContinuationStreams": supportsContinuationStreams = try r.null() ? false : r.bool()
            case "expirationDate": expirationDate = try r.null() ? nil : Date(timeIntervalSince1970: r.double())
            default: try r.skip(depth: 2)
            }
        }
        guard let id, let activityType else { throw Unusual() }
        return ActivityAnnouncement(
            id: id, activityType: activityType, title: title, bundleIdentifier: bundleIdentifier, teamIdentifier: teamIdentifier,
            hasWebpageURL: hasWebpageURL, supportsContinuationStreams: supportsContinuationStreams, expirationDate: expirationDate)
    }

    mutating func record() throws(Unusual) -> ActivityRecord {
        var activity: ActivityAnnouncement?
        var webpageURL: String?, referrerURL: String?, persistentIdentifier: String?, targetContentIdentifier: String?
        var keywords: [String] = [], requiredUserInfoKeys: [String]?, untranslatedFileURLs: [String]?
        var isEligibleForSearch = false, isEligibleForPublicIndexing = false, isEligibleForPrediction = false
        var userInfo: Data?
        try object { (key, r) throws(Unusual) in
            switch key {
            case "activity": activity = try r.activity()
            case "webpageURL": webpageURL = try r.optionalString()
            case "referrerURL": referrerURL = try r.optionalString()
            case "keywords": keywords = try r.null() ? [] : r.strings()
            case "requiredUserInfoKeys": requiredUserInfoKeys = try r.null() ? nil : r.strings()
            case "persistentIdentifier": persistentIdentifier = try r.optionalString()
            case "targetContentIdentifier": targetContentIdentifier = try r.optionalString()
            case "isEligibleForSearch": isEligibleForSearch = try r.null() ? false : r.bool()
            case "isEligibleForPublicIndexing": isEligibleForPublicIndexing = try r.null() ? false : r.bool()
            case "isEligibleForPrediction": isEligibleForPrediction = try r.null() ? false : r.bool()
            case "userInfo": userInfo = try r.null() ? nil : r.base64()
            case "untranslatedFileURLs": untranslatedFileURLs = try r.null() ? nil : r.strings()
            default: try r.skip(depth: 2)
            }
        }
        guard let activity else { throw Unusual() }
        return ActivityRecord(
            activity: activity, webpageURL: webpageURL, referrerURL: referrerURL, keywords: keywords,
            requiredUserInfoKeys: requiredUserInfoKeys, persistentIdentifier: persistentIdentifier,
            targetContentIdentifier: targetContentIdentifier, isEligibleForSearch: isEligibleForSearch,
            isEligibleForPublicIndexing: isEligibleForPublicIndexing, isEligibleForPrediction: isEligibleForPrediction,
            userInfo: userInfo, untranslatedFileURLs: untranslatedFileURLs)
    }

    mutating func origin() throws(Unusual) -> LocalOrigin {
        var device: UUID?, deviceName: String?, activity: UUID?
        try object { (key, r) throws(Unusual) in
            switch key {
            case "device": device = try r.uuid()
            case "deviceName": deviceName = try r.string()
            case "activity": activity = try r.uuid()
            default: try r.skip(depth: 2)
            }
        }
        guard let device, let deviceName, let activity else { throw Unusual() }
        return LocalOrigin(device: device, deviceName: deviceName, activity: activity)
    }

    mutating func continued() throws(Unusual) -> LocalContinued {
        var continuation: UUID?, device: String?, activity: ActivityAnnouncement?, app: String?, webpageURL: String?, seconds: Double?
        try object { (key, r) throws(Unusual) in
            switch key {
            case "continuation": continuation = try r.uuid()
            case "device": device = try r.string()
            case "activity": activity = try r.activity()
            case "app": app = try r.optionalString()
            case "webpageURL": webpageURL = try r.optionalString()
            case "seconds": seconds = try r.double()
            default: try r.skip(depth: 2)
            }
        }
        guard let continuation, let device, let activity, let seconds else { throw Unusual() }
        return LocalContinued(continuation: continuation, device: device, activity: activity, app: app, webpageURL: webpageURL, seconds: seconds)
    }

    mutating func device() throws(Unusual) -> LocalDevice {
        var id: UUID?, name: String?, isThisDevice: Bool?, isNearby: Bool?, address: String?, lastHeard: Double?, fingerprint: String?
        try object { (key, r) throws(Unusual) in
            switch key {
            case "id": id = try r.uuid()
            case "name": name = try r.string()
            case "isThisDevice": isThisDevice = try r.bool()
            case "isNearby": isNearby = try r.bool()
            case "address": address = try r.optionalString()
            case "lastHeard": lastHeard = try r.null() ? nil : r.double()
            case "fingerprint": fingerprint = try r.optionalString()
            default: try r.skip(depth: 3)
            }
        }
        guard let id, let name, let isThisDevice, let isNearby else { throw Unusual() }
        return LocalDevice(id: id, name: name, isThisDevice: isThisDevice, isNearby: isNearby, address: address, lastHeard: lastHeard, fingerprint: fingerprint)
    }

    mutating func app() throws(Unusual) -> LocalApp {
        var bundleIdentifier: String?, teamIdentifier: String?, executable: String?, activityTypes: [String]?, running: Int?, signedBy: String?
        var teamSource: String?
        try object { (key, r) throws(Unusual) in
            switch key {
            case "bundleIdentifier": bundleIdentifier = try r.string()
            case "teamIdentifier": teamIdentifier = try r.optionalString()
            case "executable": executable = try r.string()
            case "activityTypes": activityTypes = try r.strings()
            case "running": running = try r.signed()
            case "signedBy": signedBy = try r.optionalString()
            case "teamSource": teamSource = try r.optionalString()
            default: try r.skip(depth: 3)
            }
        }
        guard let bundleIdentifier, let executable, let activityTypes, let running else { throw Unusual() }
        return LocalApp(
            bundleIdentifier: bundleIdentifier, teamIdentifier: teamIdentifier, executable: executable, activityTypes: activityTypes, running: running,
            signedBy: signedBy, teamSource: teamSource)
    }

    mutating func containers() throws(Unusual) -> [LocalContainer] {
        try expect(UInt8(ascii: "["))
        var values: [LocalContainer] = []
        if try peek() == UInt8(ascii: "]") {
            offset += 1
            return values
        }
        while true {
            var identifier: String?, folder: String?
            try object { (key, r) throws(Unusual) in
                switch key {
                case "identifier": identifier = try r.string()
                case "folder": folder = try r.string()
                default: try r.skip(depth: 4)
                }
            }
            guard let identifier, let folder else { throw Unusual() }
            values.append(LocalContainer(identifier: identifier, folder: folder))
            switch try peek() {
            case UInt8(ascii: ","): offset += 1
            case UInt8(ascii: "]"):
                offset += 1
                return values
            default: throw Unusual()
            }
        }
    }

    /// A UUID in its 36-character form, either case; any other spelling is unusual.
    mutating func uuid() throws(Unusual) -> UUID {
        try expect(UInt8(ascii: "\""))
        guard bytes.count - offset >= 37, bytes[offset + 36] == UInt8(ascii: "\"") else { throw Unusual() }
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var position = offset
        try withUnsafeMutableBytes(of: &raw) { (out: UnsafeMutableRawBufferPointer) throws(Unusual) in
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    guard bytes[position] == UInt8(ascii: "-") else { throw Unusual() }
                    position += 1
                }
                guard let high = Self.hexValue(bytes[position]), let low = Self.hexValue(bytes[position + 1]) else { throw Unusual() }
                out[index] = high << 4 | low
                position += 2
            }
        }
        offset += 37
        return UUID(uuid: raw)
    }

    /// Base64 as `encode` writes it, straight from the message's bytes: the standard
    /// alphabet, padded, no escapes, unused bits zero. Anything else is read the way
    /// `JSONDecoder` reads `Data`, the string then Foundation's base64.
    mutating func base64() throws(Unusual) -> Data {
        try expect(UInt8(ascii: "\""))
        let start = offset
        // Base64 has no quote: the string ends at the first one, and decoding checks the
        // characters before it.
        var end = bytes.count
        if let base = bytes.baseAddress, start < bytes.count, let quote = memchr(base + start, 0x22, bytes.count - start) {
            end = base.distance(to: quote.assumingMemoryBound(to: UInt8.self))
        }
        if end < bytes.count, let data = Self.base64(UnsafeBufferPointer(rebasing: bytes[start..<end])) {
            offset = end + 1
            return data
        }
        offset = start - 1
        guard let data = Data(base64Encoded: try string()) else { throw Unusual() }
        return data
    }

    /// Canonical padded base64, or nil. Each full group of four characters takes four table
    /// look-ups and one check; the last group, which may hold padding, is read as before.
    static func base64(_ text: UnsafeBufferPointer<UInt8>) -> Data? {
        guard text.count % 4 == 0 else { return nil }
        if text.isEmpty { return Data() }
        let padding = text[text.count - 1] == UInt8(ascii: "=") ? (text[text.count - 2] == UInt8(ascii: "=") ? 2 : 1) : 0
        let count = text.count / 4 * 3 - padding
        var data = Data(count: count)
        let ok = data.withUnsafeMutableBytes { (out: UnsafeMutableRawBufferPointer) -> Bool in
            LocalMessageJSON.base64Placed.withUnsafeBufferPointer { placed in
                var at = 0
                var index = 0
                // Every group but the last: three bytes written as four while a fourth has room.
                let full = text.count - 4
                while index < full {
                    let value = placed[Int(text[index])] | placed[256 + Int(text[index + 1])]
                        | placed[512 + Int(text[index + 2])] | placed[768 + Int(text[index + 3])]
                    guard value < 0x0100_0000 else { return false }
                    if at + 4 <= out.count {
                        out.storeBytes(of: (value << 8).bigEndian, toByteOffset: at, as: UInt32.self)
                    } else {
                        out[at] = UInt8(truncatingIfNeeded: value >> 16)
                        out[at + 1] = UInt8(truncatingIfNeeded: value >> 8)
                        out[at + 2] = UInt8(truncatingIfNeeded: value)
                    }
                    at += 3
                    index += 4
                }
                let values = LocalMessageJSON.base64Values
                let a = values[Int(text[index])], b = values[Int(text[index + 1])]
                let c = values[Int(text[index + 2])], d = values[Int(text[index + 3])]
                guard a < 64, b < 64 else { return false }
                switch padding {
                case 2:
                    guard c == 0xFE, d == 0xFE, b & 0x0F == 0 else { return false }
                    out[at] = a << 2 | b >> 4
                case 1:
                    guard c < 64, d == 0xFE, c & 0x03 == 0 else { return false }
                    out[at] = a << 2 | b >> 4
                    out[at + 1] = (b & 0x0F) << 4 | c >> 2
                default:
                    guard c < 64, d < 64 else { return false }
                    out[at] = a << 2 | b >> 4
                    out[at + 1] = (b & 0x0F) << 4 | c >> 2
                    out[at + 2] = (c & 0x03) << 6 | d
                }
                return true
            }
        }
        return ok ? data : nil
    }
}

extension LocalReply {
    /// True when the reply holds what the agent answers `hello` with (and `ok`, or an `error`)
    /// and nothing else.
    var carriesOnlyHelloAnswer: Bool {
        version != nil && status == nil && devices == nil && activities == nil && apps == nil && continued == nil && invitation == nil
            && joinRequest == nil && verification == nil && probe == nil && checks == nil && warnings == nil && clipboard == nil && pasting == nil
            && siteAssociation == nil
    }

    /// True when the reply holds nothing but `ok` and its `continued` or `error`.
    var carriesOnlyContinuedOrError: Bool {
        version == nil && device == nil && app == nil && status == nil && devices == nil && activities == nil && apps == nil
            && account == nil && invitation == nil && joinRequest == nil && verification == nil && probe == nil && checks == nil
            && containers == nil && warnings == nil && clipboard == nil && pasting == nil && siteAssociation == nil
    }
}

