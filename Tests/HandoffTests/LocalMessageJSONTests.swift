import Foundation
import HandoffLocalAPI
import Testing

/// The hand-written JSON of the messages a continuation carries (`LocalMessageJSON`) against
/// Foundation's: the same bytes written, the same messages read, and nothing read that
/// `JSONDecoder` refuses or reads otherwise.
@Suite("Local messages written and read by hand")
struct LocalMessageJSONTests {
    /// A small deterministic generator (SplitMix64), so that a failure repeats.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Pieces of strings that JSON writers get wrong: quotes, backslashes, slashes, every
    /// kind of control character, DEL, multi-byte characters, a character outside the BMP,
    /// the line separators JavaScript dislikes.
    static let pieces = ["a", "Map", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{8}", "\u{C}", "\u{0}", "\u{1F}", "\u{7F}", "é", "😀", "\u{2028}", "日本", "https://example.com/a?b=c&d", "{}", "[", ":", ","]

    static func text(_ rng: inout Seeded) -> String {
        (0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
    }

    static func maybe<T>(_ rng: inout Seeded, _ make: (inout Seeded) -> T) -> T? {
        Bool.random(using: &rng) ? make(&rng) : nil
    }

    static func double(_ rng: inout Seeded, finite: Bool) -> Double {
        let special: [Double] = [0, -0.0, 1, 0.0012, 1e-7, 1e16, 1e21, 123_456_789.25, 1.7976931348623157e308, .leastNonzeroMagnitude, 0.1 + 0.2]
        let nonFinite: [Double] = [.infinity, -.infinity, .nan]
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return special.randomElement(using: &rng)!
        case 1 where !finite: return nonFinite.randomElement(using: &rng)!
        case 2: return Double(Int.random(in: -1_000_000...1_000_000, using: &rng))
        default: return Double.random(in: -1e12...1e12, using: &rng)
        }
    }

    static func activity(_ rng: inout Seeded, finite: Bool) -> ActivityAnnouncement {
        ActivityAnnouncement(
            id: UUID(), activityType: text(&rng), title: maybe(&rng, text), bundleIdentifier: maybe(&rng, text),
            teamIdentifier: maybe(&rng, text), hasWebpageURL: .random(using: &rng), supportsContinuationStreams: .random(using: &rng),
            expirationDate: maybe(&rng) { Date(timeIntervalSince1970: double(&$0, finite: true)) })
    }

    static func strings(_ rng: inout Seeded) -> [String] {
        (0..<Int.random(in: 0...3, using: &rng)).map { _ in text(&rng) }
    }

    static func record(_ rng: inout Seeded, finite: Bool) -> ActivityRecord {
        ActivityRecord(
            activity: activity(&rng, finite: finite), webpageURL: maybe(&rng, text), referrerURL: maybe(&rng, text), keywords: strings(&rng),
            requiredUserInfoKeys: maybe(&rng, strings), persistentIdentifier: maybe(&rng, text), targetContentIdentifier: maybe(&rng, text),
            isEligibleForSearch: .random(using: &rng), isEligibleForPublicIndexing: .random(using: &rng),
            isEligibleForPrediction: .random(using: &rng),
            userInfo: maybe(&rng) { rng in Data((0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }) },
            untranslatedFileURLs: maybe(&rng, strings))
    }

    static func error(_ rng: inout Seeded) -> LocalError {
        let kinds: [LocalError.Kind] = [.badRequest, .notAllowed, .notFound, .account, .continuation, .failed]
        return LocalError(kinds.randomElement(using: &rng)!, code: maybe(&rng) { Int.random(in: -5000...5000, using: &$0) }, text(&rng))
    }

    /// One of the messages the hand-written JSON covers.
    static func message(_ rng: inout Seeded, finite: Bool = true) -> LocalMessage {
        let request = [UInt64(0), 1, 9, 10, 4_096, UInt64(1) << 53 - 1, .max].randomElement(using: &rng)!
        switch Int.random(in: 0..<15, using: &rng) {
        case 0: return .call(request: request, .continue(activity: maybe(&rng) { _ in UUID() }))
        case 1: return .save(request: request, activity: UUID())
        case 2: return .saved(request: request, record(&rng, finite: finite))
        case 3: return .willContinue(continuation: UUID(), activityType: text(&rng))
        case 4:
            return .deliver(
                continuation: UUID(), record: record(&rng, finite: finite), origin: LocalOrigin(device: UUID(), deviceName: text(&rng), activity: UUID()))
        case 5: return .wasContinued(activity: UUID())
        case 6: return .resigned(activity: UUID())
        case 7: return .invalidated(activity: UUID())
        case 8: return .becameCurrent(activity(&rng, finite: finite))
        case 9:
            let continued = LocalContinued(
                continuation: UUID(), device: text(&rng), activity: activity(&rng, finite: finite), app: maybe(&rng, text), webpageURL: maybe(&rng, text),
                seconds: double(&rng, finite: finite))
            return .reply(request: request, LocalReply(continued: continued))
        case 10:
            let version = [0, 1, 2, -1, Int.max, Int.min].randomElement(using: &rng)!
            return .call(request: request, .hello(version: version, role: Bool.random(using: &rng) ? .app : .control, bundleIdentifier: maybe(&rng, text)))
        case 11: return .prove(nonce: nonce(&rng))
        case 12: return .proof(nonce: nonce(&rng))
        case 13: return .reply(request: request, fullReply(&rng))
        default: return .reply(request: request, .failure(error(&rng)))
        }
    }

    static func nonce(_ rng: inout Seeded) -> Data {
        Data((0..<[0, 1, 2, 3, 16, 32].randomElement(using: &rng)!).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }

    /// A reply as the agent answers `hello`.
    static func fullReply(_ rng: inout Seeded) -> LocalReply {
        var reply = LocalReply(
            version: 2, device: LocalDevice(id: UUID(), name: text(&rng), isThisDevice: true, isNearby: .random(using: &rng), lastHeard: maybe(&rng) { double(&$0, finite: true) }),
            app: maybe(&rng) { rng in
                LocalApp(
                    bundleIdentifier: text(&rng), teamIdentifier: maybe(&rng, text), executable: text(&rng), activityTypes: strings(&rng),
                    running: Int.random(in: -2...1_000, using: &rng), signedBy: maybe(&rng, text), teamSource: maybe(&rng, text))
            },
            account: maybe(&rng, text),
            containers: maybe(&rng) { rng in (0..<Int.random(in: 0...2, using: &rng)).map { _ in LocalContainer(identifier: text(&rng), folder: text(&rng)) } })
        if Bool.random(using: &rng) { reply.error = error(&rng) }
        return reply
    }

    @Test("Writes the bytes JSONEncoder writes, for every message it covers")
    func writesFoundationsBytes() throws {
        var rng = Seeded(state: 1)
        for _ in 0..<1_000 {
            let message = Self.message(&rng, finite: false)
            let written = try #require(LocalMessageJSON.encode(message), "not covered: \(message)")
            let foundation = message.foundationFrame.payload
            #expect(written == foundation, "\(String(decoding: written, as: UTF8.self))\n\(String(decoding: foundation, as: UTF8.self))")
            if written != foundation { return }
        }
    }

    @Test("Leaves other messages to JSONEncoder")
    func leavesTheRest() {
        let others: [LocalMessage] = [
            .call(request: 2, .status), .reply(request: 3, LocalReply(account: "home")),
            .reply(request: 4, LocalReply(version: 2, devices: [LocalDevice(id: UUID(), name: "d", isThisDevice: true, isNearby: true)])),
            .event(LocalEvent(change: .gone, device: UUID(), deviceName: "d", activity: nil)),
        ]
        for message in others {
            #expect(LocalMessageJSON.encode(message) == nil)
            #expect(message.frame == message.foundationFrame)
        }
    }

    @Test("Reads back what it writes, as JSONDecoder does")
    func readsWhatItWrites() throws {
        var rng = Seeded(state: 2)
        for _ in 0..<1_000 {
            let message = Self.message(&rng)
            let payload = message.frame.payload
            let read = try #require(LocalMessageJSON.decode(payload), "not read: \(String(decoding: payload, as: UTF8.self))")
            #expect(read == message)
            #expect(try LocalMessage(foundationFrame: message.frame) == read)
        }
    }

    /// Tokens that make JSON unusual or wrong, spliced into real messages.
    static let splices: [String] = [
        "\\u0000", "\\ud83d", "\\ud83d\\ude00", "\\u00e9", "\\/", "\\x", "07", "7.0", "7e0", "-0", "-", "1e400", "0.", ".5", "null", "true", "fals",
        "\"type\":\"save\",", ",\"request\":1", ",\"ok\":true", ",\"extra\":[1,{\"a\":null}]", ",\"account\":\"x\"", "\"\"", "{", "}", "[", "]", ",", ":",
        " ", "\t", "\u{0}", "\u{1F}", "\u{7F}", "\"", "\\", "é", "\u{FEFF}",
    ]

    static func mutate(_ payload: [UInt8], _ rng: inout Seeded) -> [UInt8] {
        var bytes = payload
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            guard !bytes.isEmpty else { break }
            let at = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: bytes[at] = UInt8.random(in: 0...255, using: &rng)
            case 1: bytes[at] = Array("\"\\{}[],:0123456789.eE-+ ntfu/".utf8).randomElement(using: &rng)!
            case 2: bytes.remove(at: at)
            case 3: bytes.insert(contentsOf: Array(splices.randomElement(using: &rng)!.utf8), at: at)
            case 4:
                // A key and its value again: the same key twice.
                let end = min(bytes.count, at + Int.random(in: 1...40, using: &rng))
                bytes.insert(contentsOf: bytes[at..<end], at: end)
            default: bytes.removeLast(Int.random(in: 0...min(8, bytes.count), using: &rng))
            }
        }
        return bytes
    }

    @Test("Never reads what JSONDecoder refuses, nor reads anything differently (mutated messages)")
    func agreesWithFoundationOnMutations() {
        var rng = Seeded(state: 3)
        var accepted = 0, refusedByBoth = 0
        let rounds = 6_000
        for _ in 0..<rounds {
            let payload = Self.mutate(Self.message(&rng).frame.payload, &rng)
            let fast = LocalMessageJSON.decode(payload)
            let foundation = try? LocalMessage(foundationFrame: Frame(kind: LocalMessage.frameKind, payload: payload))
            if let fast {
                accepted += 1
                #expect(fast == foundation, "read by hand as \(fast), by JSONDecoder as \(String(describing: foundation)): \(String(decoding: payload, as: UTF8.self))")
                if fast != foundation { return }
            } else if foundation == nil {
                refusedByBoth += 1
            }
        }
        // The mutations must reach both sides of the fast path to prove anything.
        #expect(accepted > rounds / 20, "only \(accepted) of \(rounds) mutated messages were read by hand")
        #expect(refusedByBoth > rounds / 5, "only \(refusedByBoth) of \(rounds) mutated messages were refused")
    }

    @Test("A character outside the BMP escaped as its two halves is read as JSONDecoder reads it; half of one is left to JSONDecoder")
    func surrogatePairs() throws {
        let id = UUID().uuidString
        func message(_ type: String) -> [UInt8] { Array(#"{"activityType":"\#(type)","continuation":"\#(id)","type":"willContinue"}"#.utf8) }
        for type in [#"a\ud83d\ude00b"#, #"\uD83D\uDE00"#, #"\udbff\udfff"#] {
            let decoded = try LocalMessage(foundationFrame: Frame(kind: LocalMessage.frameKind, payload: message(type)))
            #expect(LocalMessageJSON.decode(message(type)) == decoded, "\(type)")
        }
        for half in [#"\ud83d"#, #"\ude00"#, #"\ud83dx"#, #"\ud83d\u0041"#, #"\ud83d\ud83d"#, #"\ud83d\"#] {
            #expect(LocalMessageJSON.decode(message(half)) == nil, "\(half)")
        }
    }

    @Test("A reply's outcome (request and error) is read as JSONDecoder reads it, its other fields passed over")
    func replyOutcome() throws {
        var rng = Seeded(state: 4)
        var read = 0, refusedByBoth = 0
        for round in 0..<4_000 {
            let request = UInt64.random(in: 0...UInt64(1) << 53, using: &rng)
            let reply: LocalReply = Bool.random(using: &rng) ? Self.fullReply(&rng) : .failure(Self.error(&rng))
            var payload = LocalMessage.reply(request: request, reply).frame.payload
            if round % 2 == 1 { payload = Self.mutate(payload, &rng) }
            let outcome = LocalJSONReader.replyOutcome(payload)
            let foundation = try? LocalMessage(foundationFrame: Frame(kind: LocalMessage.frameKind, payload: payload))
            if round % 2 == 0 {
                let outcome = try #require(outcome, "not read: \(String(decoding: payload, as: UTF8.self))")
                #expect(outcome.request == request && outcome.error == reply.error)
            }
            guard let outcome else {
                if foundation == nil { refusedByBoth += 1 }
                continue
            }
            read += 1
            // Whatever the outcome reader takes is a reply; where JSONDecoder reads it too, the two agree.
            if case .reply(let number, let decoded)? = foundation {
                #expect(outcome.request == number && outcome.error == decoded.error, "\(String(decoding: payload, as: UTF8.self))")
            } else if let foundation {
                Issue.record("read as a reply by hand, as \(foundation) by JSONDecoder: \(String(decoding: payload, as: UTF8.self))")
            }
        }
        #expect(read > 2_000 && refusedByBoth > 400, "read \(read), refused by both \(refusedByBoth)")
        // Not a reply, or not JSON: nil, and the frame goes to JSONDecoder.
        #expect(LocalJSONReader.replyOutcome(LocalMessage.prove(nonce: Data([1])).frame.payload) == nil)
        #expect(LocalJSONReader.replyOutcome(Array("{\"type\":\"reply\",\"request\":1".utf8)) == nil)
        #expect(LocalJSONReader.replyOutcome(Array("{\"type\":\"reply\",\"request\":1,\"x\":[}".utf8)) == nil)
    }

    @Test("Many keys: passed over in an object it skips, left to JSONDecoder in one it checks")
    func manyKeys() {
        // The duplicate check of an object the reader reads is quadratic, so it stops at 64
        // members; an object it skips is not checked (JSONDecoder does not check it either).
        let keys = (0..<100_000).map { "\"k\($0)\":0" }.joined(separator: ",")
        let id = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"
        let skipped = "{\"type\":\"save\",\"request\":1,\"activity\":\"\(id)\",\"x\":{\(keys)}}"
        #expect(LocalMessageJSON.decode(Array(skipped.utf8)) == .save(request: 1, activity: UUID(uuidString: id)!))
        let checked = "{\"type\":\"becameCurrent\",\"activity\":{\"id\":\"\(id)\",\"activityType\":\"a\",\(keys)}}"
        #expect(LocalMessageJSON.decode(Array(checked.utf8)) == nil)
        let small = "{\"type\":\"becameCurrent\",\"activity\":{\"id\":\"\(id)\",\"activityType\":\"a\",\"k\":0}}"
        #expect(LocalMessageJSON.decode(Array(small.utf8)) == .becameCurrent(ActivityAnnouncement(id: UUID(uuidString: id)!, activityType: "a")))
    }

    @Test(
        "userInfo's base64 is read as Foundation reads it, canonical or not",
        arguments: ["", "AQ==", "AQI=", "AQID", "AQID+g==", "AQID+h==", "AQID+g", "AQ=D", "=AAA", "AQID\\/g==", "AQ ID", "AQID====", "A===", "////", "++++AQ=="])
    func base64(_ text: String) throws {
        let json = "{\"type\":\"saved\",\"request\":1,\"record\":{\"activity\":{\"id\":\"6BA7B810-9DAD-11D1-80B4-00C04FD430C8\",\"activityType\":\"a\"},\"userInfo\":\"\(text)\"}}"
        let payload = Array(json.utf8)
        let foundation = try? LocalMessage(foundationFrame: Frame(kind: LocalMessage.frameKind, payload: payload))
        let fast = LocalMessageJSON.decode(payload)
        if let fast { #expect(fast == foundation) }
        // What Foundation reads, the frame reads the same.
        #expect((try? LocalMessage(frame: Frame(kind: LocalMessage.frameKind, payload: payload))) == foundation)
    }

    @Test("userInfo of every length up to 300 bytes is written as Foundation writes it and read back; a wrong character anywhere is read as Foundation reads it")
    func base64Lengths() throws {
        var rng = Seeded(state: 7)
        let id = UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C8")!
        for count in 0...300 {
            let bytes = Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) })
            let message = LocalMessage.saved(request: 1, ActivityRecord(activity: ActivityAnnouncement(id: id, activityType: "a"), userInfo: bytes))
            let written = try #require(LocalMessageJSON.encode(message))
            #expect(written == message.foundationFrame.payload, "\(count) bytes")
            #expect(LocalMessageJSON.decode(written) == message, "\(count) bytes")
        }
        // Every place of a 64-character text (and its last group's), each kind of wrong character.
        let text = Array(Data((0..<48).map { UInt8($0 * 5 + 1) }).base64EncodedString().utf8)
        for place in 0..<text.count {
            for wrong: UInt8 in [UInt8(ascii: "="), UInt8(ascii: "-"), UInt8(ascii: "_"), 0x00, 0x80, 0xFF, UInt8(ascii: " ")] {
                var changed = text
                changed[place] = wrong
                let json = Array("{\"type\":\"saved\",\"request\":1,\"record\":{\"activity\":{\"id\":\"\(id)\",\"activityType\":\"a\"},\"userInfo\":\"".utf8) + changed + Array("\"}}".utf8)
                let foundation = try? LocalMessage(foundationFrame: Frame(kind: LocalMessage.frameKind, payload: json))
                let fast = LocalMessageJSON.decode(json)
                #expect(fast == nil || fast == foundation, "\(wrong) at \(place)")
                #expect((try? LocalMessage(frame: Frame(kind: LocalMessage.frameKind, payload: json))) == foundation, "\(wrong) at \(place)")
            }
        }
    }

    @Test("A skipped string is checked as a read one is, whatever byte comes at whatever place")
    func skippedStrings() {
        // Unknown keys are passed over eight bytes at a time; each special byte at each place
        // of a long string must still send the message to JSONDecoder when it refuses it.
        let id = "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"
        for special: [UInt8] in [[0x00], [0x1F], [0x20], [0x7F], [0x80], [0xFF], [0xC3, 0xA9], [0x5C, 0x6E], [0x5C], [0x5C, 0x78], [0x22]] {
            for place in 0..<24 {
                var text = Array(repeating: UInt8(ascii: "a"), count: 24)
                text.insert(contentsOf: special, at: place)
                let payload = Array("{\"type\":\"save\",\"request\":1,\"activity\":\"\(id)\",\"x\":\"".utf8) + text + Array("\"}".utf8)
                let fast = LocalMessageJSON.decode(payload)
                let foundation = try? LocalMessage(foundationFrame: Frame(kind: LocalMessage.frameKind, payload: payload))
                #expect(fast == nil || fast == foundation, "\(special) at \(place)")
            }
        }
    }
}

@Suite("Expiration dates that are not numbers")
struct NonFiniteExpirationTests {
    @Test(
        "An app's expiration date that is not a finite number is announced as none (NaN, +∞) or already expired (−∞): the message encodes, by hand and by Foundation alike, and reads back",
        arguments: [Double.nan, .infinity, -.infinity, 1_000])
    func nonFinite(seconds: Double) throws {
        let expected: Date? = seconds.isNaN || seconds == .infinity ? nil : seconds == -.infinity ? Date.distantPast : Date(timeIntervalSince1970: seconds)
        var activity = ActivityAnnouncement(id: UUID(), activityType: "com.example.edit", expirationDate: Date(timeIntervalSince1970: seconds))
        #expect(activity.expirationDate == expected)
        activity.expirationDate = Date(timeIntervalSince1970: seconds)
        #expect(activity.expirationDate == expected)
        let message = LocalMessage.becameCurrent(activity)
        // Foundation's encoder refuses a non-finite date, and a local message that does not
        // encode stops the process.
        let foundation = message.foundationFrame
        #expect(message.frame == foundation)
        #expect(try LocalMessage(frame: foundation) == message)
    }
}
