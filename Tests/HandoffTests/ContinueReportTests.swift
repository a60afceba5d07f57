import Foundation
import HandoffCommandLine
import HandoffLocalAPI
import Testing

/// What `handoff continue` prints, read from the agent's reply without Foundation
/// (`ContinueReport`, `JSONIndent`, `ActivityID`), against what Foundation's coders say.
@Suite("handoff continue's report, read without Foundation")
struct ContinueReportTests {
    typealias Make = LocalMessageJSONTests

    /// The commands' `--json` output for `value`, as `handoff-cli` prints it.
    static func pretty(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func continued(_ rng: inout Make.Seeded) -> LocalContinued {
        LocalContinued(
            continuation: UUID(), device: Make.text(&rng), activity: Make.activity(&rng, finite: true), app: Make.maybe(&rng, Make.text),
            webpageURL: Make.maybe(&rng, Make.text), seconds: Make.double(&rng, finite: true))
    }

    @Test("Its --json output is JSONEncoder's for the reply's `continued`, whether the agent wrote the reply by hand or with JSONEncoder")
    func jsonAsFoundationPrintsIt() throws {
        var rng = Make.Seeded(state: 11)
        for _ in 0..<500 {
            let continued = Self.continued(&rng)
            let message = LocalMessage.reply(request: 2, LocalReply(continued: continued))
            let expected = try Self.pretty(continued)
            for payload in [message.frame.payload, message.foundationFrame.payload] {
                let output = ContinueReport.output(reply: payload, json: true)
                #expect(output == .success(expected), "\(String(decoding: payload, as: UTF8.self))")
                if output != .success(expected) { return }
            }
        }
    }

    @Test("Its text names the activity (its title, else its type), the device, and the app or the web page")
    func text() {
        let activity = ActivityAnnouncement(id: UUID(), activityType: "com.example.edit", title: "Notes \"today\"")
        func report(_ continued: LocalContinued) -> Result<String?, LocalError> {
            ContinueReport.output(reply: LocalMessage.reply(request: 2, LocalReply(continued: continued)).frame.payload, json: false)
        }
        #expect(
            report(LocalContinued(continuation: UUID(), device: "laptop", activity: activity, app: "com.example.Editor", webpageURL: nil, seconds: 0.0123))
                == .success("Continued \"Notes \"today\"\" from laptop in com.example.Editor (12 ms)."))
        var untitled = activity
        untitled.title = nil
        #expect(
            report(LocalContinued(continuation: UUID(), device: "laptop", activity: untitled, app: nil, webpageURL: "https://example.com/a", seconds: 1))
                == .success("Opened https://example.com/a (\"com.example.edit\" from laptop) in the web browser."))
        #expect(report(LocalContinued(continuation: UUID(), device: "laptop", activity: activity, app: nil, webpageURL: nil, seconds: 1)) == .success(nil))
        // A time no agent measures is printed, not a trap.
        #expect(
            report(LocalContinued(continuation: UUID(), device: "d", activity: untitled, app: "A", webpageURL: nil, seconds: 1e300))
                == .success("Continued \"com.example.edit\" from d in A (1e+303 ms)."))
    }

    @Test("A refusal is the agent's own error; a reply with nothing continued, or one it cannot read, is an error that says so")
    func failures() {
        let refusal = LocalError(.continuation, code: 4609, "the device 'laptop' cannot be reached")
        #expect(ContinueReport.output(reply: LocalMessage.reply(request: 2, .failure(refusal)).frame.payload, json: false) == .failure(refusal))
        #expect(ContinueReport.output(reply: LocalMessage.reply(request: 2, .failure(refusal)).foundationFrame.payload, json: true) == .failure(refusal))
        guard case .failure(let nothing) = ContinueReport.output(reply: Array(#"{"ok":true,"request":2,"type":"reply"}"#.utf8), json: false) else {
            Issue.record("a reply with nothing continued was taken")
            return
        }
        #expect(nothing.kind == .failed && nothing.message == "the agent did not say what it continued")
        for broken in [#"{"ok":true,"request":2,"#, #"{"continued":{"device":"d"},"ok":true,"request":2,"type":"reply"}"#, "[]", ""] {
            guard case .failure(let error) = ContinueReport.output(reply: Array(broken.utf8), json: false) else {
                Issue.record("read: \(broken)")
                continue
            }
            #expect(error.kind == .failed && error.message.contains("could not be read"), "\(error)")
        }
    }

    @Test("Fields it does not know, from a newer agent, are passed over in the reply and shown in --json")
    func newerAgent() throws {
        let reply = #"{"continued":{"activity":{"activityType":"t","future":[1,{"a":null}]},"device":"d","app":"A","seconds":0.5,"via":"bridge"},"hint":"x","ok":true,"request":2,"type":"reply"}"#
        #expect(ContinueReport.output(reply: Array(reply.utf8), json: false) == .success("Continued \"t\" from d in A (500 ms)."))
        guard case .success(let json?) = ContinueReport.output(reply: Array(reply.utf8), json: true) else {
            Issue.record("no --json output")
            return
        }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["via"] as? String == "bridge" && object["app"] as? String == "A")
    }

    @Test("Indents as JSONEncoder does: empty and nested objects and arrays, escapes, numbers, booleans and null")
    func indents() throws {
        struct Sample: Codable {
            var empty: [Int] = []
            var emptyObject: [String: Int] = [:]
            var nested = ["k": [[String: [Int]]()], "l": [["x": [1, 2]]]]
            var text = "a \"quoted\" {brace}, [bracket]: \\ / \u{1} é 😀"
            var numbers = [0.1, -2.5e-8, 1e21, 3]
            var flag = true
            var none: String? = nil
            var emptyNested = [[Int]()]
        }
        let compact = JSONEncoder()
        compact.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let bytes = try compact.encode(Sample())
        #expect(JSONIndent.pretty(bytes) == (try Self.pretty(Sample())))
        // JSONEncoder leaves out a nil it is not told to write; one it is told to write is
        // `null`, in an object and in an array.
        struct Nulls: Encodable {
            enum Key: CodingKey { case a, b }
            func encode(to encoder: any Encoder) throws {
                var object = encoder.container(keyedBy: Key.self)
                try object.encodeNil(forKey: .a)
                var array = object.nestedUnkeyedContainer(forKey: .b)
                try array.encodeNil()
                try array.encode(1)
            }
        }
        #expect(JSONIndent.pretty(try compact.encode(Nulls())) == (try Self.pretty(Nulls())))
        #expect(JSONIndent.pretty(Array("{}".utf8)) == "{\n\n}")
        #expect(JSONIndent.pretty(Array("[]".utf8)) == "[\n\n]")
    }

    @Test("Takes an activity id in its 36-character form, either case, and reads it as Foundation does; what else Foundation's parser lets through on Linux (a space or a sign in a group) is refused")
    func activityIDs() {
        var rng = Make.Seeded(state: 12)
        let alphabet = Array("0123456789abcdefABCDEFgG-+{} \u{0}é".unicodeScalars)
        var taken = 0, lenient = 0
        for round in 0..<20_000 {
            let id = UUID()
            var text = Array(id.uuidString.unicodeScalars)
            if round % 3 == 0 { text = Array(id.uuidString.lowercased().unicodeScalars) }
            if round % 2 == 0 {
                #expect(ActivityID.canonical(String(String.UnicodeScalarView(text))) == id.uuidString)
                continue
            }
            for _ in 0..<Int.random(in: 1...2, using: &rng) {
                let at = Int.random(in: 0..<text.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: text[at] = alphabet.randomElement(using: &rng)!
                case 1: text.remove(at: at)
                default: text.insert(alphabet.randomElement(using: &rng)!, at: at)
                }
            }
            let spelled = String(String.UnicodeScalarView(text))
            let foundation = UUID(uuidString: spelled)
            if let canonical = ActivityID.canonical(spelled) {
                taken += 1
                #expect(canonical == foundation?.uuidString, "\(spelled)")
            } else if foundation != nil {
                // "B0EDAF15-DFA1-426F-AF9B-D704F6449 2D", "4D1A30B9--776-4A91-…": not ids.
                lenient += 1
            }
        }
        #expect(taken > 1_000, "taken \(taken), refused though Foundation takes them \(lenient)")
    }
}
