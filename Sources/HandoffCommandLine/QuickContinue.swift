import HandoffLocalSocket

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `handoff continue` in its plain forms (an id or `--latest`, with `--json` and `--socket`
/// in any order), run without the argument parser, Foundation or a thread: a command typed or
/// scripted to continue an activity should cost little more than the continuation
/// (docs/agent.md, Performance). Anything else, help and every mistake included, goes to the
/// argument parser, which says what is wrong as it always has. The full command line's
/// `continue` runs this too, so both print the same.
public struct QuickContinue: Sendable {
    /// The activity's id in its 36-character form, upper case; nil for `--latest`.
    public let activity: String?
    public let json: Bool
    public let socket: String?

    /// Nil unless `arguments` (without the program's name) are exactly a plain `continue`.
    public init?(arguments: [String]) {
        guard arguments.first == "continue" else { return nil }
        var id: String?, latest = false, json = false, socket: String?
        var rest = arguments.dropFirst()
        while let argument = rest.popFirst() {
            switch argument {
            case "--latest" where !latest: latest = true
            case "--json" where !json: json = true
            case "--socket" where socket == nil:
                // A value that looks like an option is the parser's to judge.
                guard let value = rest.popFirst(), !value.hasPrefix("-") else { return nil }
                socket = value
            default:
                if argument.hasPrefix("--socket="), socket == nil {
                    socket = String(argument.dropFirst("--socket=".count))
                } else if id == nil, !argument.hasPrefix("-"), let parsed = ActivityID.canonical(argument) {
                    id = parsed
                } else {
                    return nil
                }
            }
        }
        // Exactly one of an id and --latest, as `Continue.validate` asks.
        guard (id == nil) == latest else { return nil }
        self.init(activity: id, json: json, socket: socket)
    }

    /// A continuation of `activity` (its id as `ActivityID.canonical` gives it; nil for the
    /// most recent), through the agent at `socket` (nil: the default socket).
    public init(activity: String?, json: Bool, socket: String?) {
        self.activity = activity
        self.json = json
        self.socket = socket
    }

    /// Continues the activity, prints what `handoff continue` prints, and exits.
    public func run() -> Never {
        do {
            let reply = try LocalSocketIO.callOnce(path: socket ?? LocalSocket.defaultPath(), call: LocalJSONWriter.continueCall(request: 2, activity: activity))
            switch ContinueReport.output(reply: reply, json: json) {
            case .success(let text): if let text { print(text) }
            case .failure(let error): fail(error)
            }
        } catch {
            fail(error)
        }
        exit(0)
    }
}

/// An activity's id as people type it and the agent reads it.
public enum ActivityID {
    /// `text` in the form the agent reads (upper case) when it is a UUID in its 36-character
    /// form, in either case; else nil. (Foundation's `UUID(uuidString:)` on Linux also takes a
    /// space or a sign inside a group; those are not ids.)
    public static func canonical(_ text: String) -> String? {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(36)
        for (index, byte) in utf8.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return nil }
                out.append(byte)
            default:
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "F"): out.append(byte)
                case UInt8(ascii: "a")...UInt8(ascii: "f"): out.append(byte - 0x20)
                default: return nil
                }
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// What `handoff continue` prints for the agent's reply.
public enum ContinueReport {
    /// The text to print (nil: nothing, when the agent continued in neither an app nor a
    /// browser), or the error to end with: the agent's refusal, or its reply unreadable.
    /// `reply` is the reply's JSON as the agent wrote it; with `json`, the text is the reply's
    /// `continued`, indented as the other commands' `--json` output is.
    public static func output(reply: [UInt8], json: Bool) -> Result<String?, LocalError> {
        let read: Result<Reply, LocalJSONUnusual> = reply.withUnsafeBufferPointer { buffer in
            var reader = LocalJSONReader(bytes: buffer)
            do throws(LocalJSONUnusual) {
                return .success(try Reply(&reader))
            } catch {
                return .failure(error)
            }
        }
        guard case .success(let answer) = read else {
            return .failure(LocalError(.failed, "the agent's reply to 'continue' could not be read; see 'handoff list' for what is offered now"))
        }
        if let error = answer.error { return .failure(error) }
        guard let continued = answer.continued else {
            return .failure(LocalError(.failed, "the agent did not say what it continued"))
        }
        if json { return .success(JSONIndent.pretty(reply[continued.range])) }
        let what = continued.title ?? continued.activityType
        if let app = continued.app {
            let milliseconds = continued.seconds * 1000
            let shown = abs(milliseconds) < 1e15 ? String(Int(milliseconds)) : String(milliseconds)
            return .success("Continued \"\(what)\" from \(continued.device) in \(app) (\(shown) ms).")
        }
        if let page = continued.webpageURL {
            return .success("Opened \(page) (\"\(what)\" from \(continued.device)) in the web browser.")
        }
        return .success(nil)
    }

    /// The fields of a reply the report needs; every other field is checked as JSON and
    /// passed over, as `JSONDecoder` passes over keys it does not know.
    private struct Reply {
        var error: LocalError?
        var continued: Continued?

        init(_ reader: inout LocalJSONReader) throws(LocalJSONUnusual) {
            try reader.object { (key, field) throws(LocalJSONUnusual) in
                switch key {
                case "error": if !field.null() { error = try field.error() }
                case "continued": if !field.null() { continued = try Continued(&field) }
                default: try field.skip(depth: 1)
                }
            }
            reader.whitespace()
            guard reader.offset == reader.bytes.count else { throw LocalJSONUnusual() }
        }
    }

    private struct Continued {
        var range: Range<Int>
        var device: String
        var title: String?
        var activityType: String
        var app: String?
        var webpageURL: String?
        var seconds: Double

        init(_ reader: inout LocalJSONReader) throws(LocalJSONUnusual) {
            reader.whitespace()
            let start = reader.offset
            var device: String?, title: String?, activityType: String?, app: String?, webpageURL: String?, seconds: Double?
            try reader.object { (key, field) throws(LocalJSONUnusual) in
                switch key {
                case "device": device = try field.string()
                case "app": app = try field.optionalString()
                case "webpageURL": webpageURL = try field.optionalString()
                case "seconds": seconds = try field.double()
                case "activity":
                    try field.object { (key, field) throws(LocalJSONUnusual) in
                        switch key {
                        case "title": title = try field.optionalString()
                        case "activityType": activityType = try field.string()
                        default: try field.skip(depth: 3)
                        }
                    }
                default: try field.skip(depth: 2)
                }
            }
            guard let device, let activityType, let seconds else { throw LocalJSONUnusual() }
            (range, self.device, self.title, self.activityType, self.app, self.webpageURL, self.seconds) =
                (start..<reader.offset, device, title, activityType, app, webpageURL, seconds)
        }
    }
}

/// JSON indented as `JSONEncoder` indents it with `.prettyPrinted`: two spaces a level,
/// `"key" : value`, and an empty object or array as two lines.
public enum JSONIndent {
    /// `compact` (valid JSON, as the agent writes it) indented; strings are copied as they are.
    public static func pretty(_ compact: some Collection<UInt8>) -> String {
        let bytes = Array(compact)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        var depth = 0
        var index = 0
        func newline() {
            out.append(0x0A)
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: depth * 2))
        }
        /// Where the next byte that is not whitespace is.
        func nextSignificant(after position: Int) -> Int {
            var at = position + 1
            while at < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
            return at
        }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                // Copied up to its closing quote, escapes and all.
                out.append(byte)
                index += 1
                while index < bytes.count {
                    let inside = bytes[index]
                    out.append(inside)
                    index += 1
                    if inside == UInt8(ascii: "\\"), index < bytes.count {
                        out.append(bytes[index])
                        index += 1
                    } else if inside == UInt8(ascii: "\"") {
                        break
                    }
                }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                out.append(byte)
                let next = nextSignificant(after: index)
                if next < bytes.count, bytes[next] == byte + 2 {
                    // Empty (`}` and `]` are two after `{` and `[`): a blank line inside.
                    out.append(0x0A)
                    newline()
                    out.append(bytes[next])
                    index = next + 1
                    continue
                }
                depth += 1
                newline()
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                newline()
                out.append(byte)
            case UInt8(ascii: ","):
                out.append(byte)
                newline()
            case UInt8(ascii: ":"):
                out.append(contentsOf: [UInt8(ascii: " "), byte, UInt8(ascii: " ")])
            case 0x20, 0x09, 0x0A, 0x0D:
                break
            default:
                out.append(byte)
            }
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}
