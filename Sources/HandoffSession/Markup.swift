/// A strict reader of the XML subset GLib's GMarkup reads, and so of what GLib writes for the
/// recently-used list: elements with attributes (namespace prefixes resolved), the five named
/// entities and character references, comments, processing instructions and CDATA. A document
/// type declaration is refused, as GMarkup refuses it, so no entity is ever defined or expanded.
/// Text is skipped: XBEL keeps what matters in attributes. Pure Swift, bounded by its input.
///
/// (FoundationXML's XMLParser, over libxml2, crashed on a list that declared another encoding
/// and on mutations the fuzzer made of real lists; see docs/system-activities.md.)
struct Markup {
    struct Element {
        /// The namespace the element's prefix names ("" for none).
        var namespace: String
        var name: String
        var attributes: [String: String]
    }

    struct Failure: Error {
        let message: String
        let offset: Int
    }

    /// The deepest nesting read: XBEL has five levels.
    static let maximumDepth = 64

    let bytes: [UInt8]
    private var index = 0
    /// Each open element's qualified name and the prefixes it declared.
    private var open: [(name: String, prefixes: [String: String])] = []

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Reads the document, calling `start` and `end` for each element in order.
    mutating func read(start: (Element, Int) -> Void, end: (Element, Int) -> Void) throws(Failure) {
        var sawRoot = false
        while index < bytes.count {
            guard let lt = bytes[index...].firstIndex(of: UInt8(ascii: "<")) else {
                index = bytes.count
                break
            }
            if open.isEmpty, sawRoot, bytes[index..<lt].contains(where: { !Self.isSpace($0) }) { throw fail("text after the root element") }
            index = lt
            if starts("<?") {
                try skip(past: "?>")
            } else if starts("<!--") {
                try skip(past: "-->")
            } else if starts("<![CDATA[") {
                guard !open.isEmpty else { throw fail("CDATA outside the root element") }
                try skip(past: "]]>")
            } else if starts("<!") {
                throw fail("a document type declaration, which this list never has")
            } else if starts("</") {
                index += 2
                let name = readName()
                skipSpaces()
                guard consume(">") else { throw fail("a closing tag that does not end") }
                guard let last = open.popLast(), last.name == name else { throw fail("</\(name)> closes no element open") }
                end(try element(name, attributes: [:], prefixes: last.prefixes), open.count + 1)
            } else {
                index += 1
                guard !(open.isEmpty && sawRoot) else { throw fail("a second root element") }
                let name = readName()
                guard !name.isEmpty else { throw fail("a tag without a name") }
                var attributes: [String: String] = [:]
                var selfClosing = false
                while true {
                    skipSpaces()
                    if consume("/>") {
                        selfClosing = true
                        break
                    }
                    if consume(">") { break }
                    let attribute = readName()
                    guard !attribute.isEmpty else { throw fail("an attribute without a name in <\(name)>") }
                    skipSpaces()
                    guard consume("=") else { throw fail("attribute \(attribute) of <\(name)> has no value") }
                    skipSpaces()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else {
                        throw fail("the value of \(attribute) is not quoted")
                    }
                    let quote = bytes[index]
                    index += 1
                    guard let close = bytes[index...].firstIndex(of: quote) else { throw fail("the value of \(attribute) does not end") }
                    let raw = bytes[index..<close]
                    guard !raw.contains(UInt8(ascii: "<")) else { throw fail("a '<' in the value of \(attribute)") }
                    index = close + 1
                    guard attributes[attribute] == nil else { throw fail("attribute \(attribute) twice in <\(name)>") }
                    attributes[attribute] = try decode(raw)
                }
                var prefixes: [String: String] = [:]
                for (key, value) in attributes {
                    if key == "xmlns" { prefixes[""] = value } else if key.hasPrefix("xmlns:") { prefixes[String(key.dropFirst(6))] = value }
                }
                guard open.count < Self.maximumDepth else { throw fail("elements nested deeper than \(Self.maximumDepth)") }
                open.append((name, prefixes))
                sawRoot = true
                let opened = try element(name, attributes: attributes, prefixes: prefixes)
                start(opened, open.count)
                if selfClosing {
                    open.removeLast()
                    end(opened, open.count + 1)
                }
            }
        }
        guard sawRoot else { throw fail("no root element") }
        guard open.isEmpty else { throw fail("<\(open.last!.name)> is not closed") }
    }

    private func element(_ qualified: String, attributes: [String: String], prefixes: [String: String]) throws(Failure) -> Element {
        let parts = qualified.split(separator: ":", maxSplits: 1)
        let (prefix, name) = parts.count == 2 ? (String(parts[0]), String(parts[1])) : ("", qualified)
        var namespace: String?
        for scope in [prefixes] + open.reversed().map(\.prefixes) {
            if let found = scope[prefix] {
                namespace = found
                break
            }
        }
        guard let namespace = namespace ?? (prefix.isEmpty ? "" : nil) else { throw fail("the prefix \(prefix) of <\(qualified)> is not declared") }
        return Element(namespace: namespace, name: name, attributes: attributes)
    }

    /// Text with its entity and character references replaced.
    private func decode(_ raw: ArraySlice<UInt8>) throws(Failure) -> String {
        guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
        var out: [UInt8] = []
        var position = raw.startIndex
        while position < raw.endIndex {
            let byte = raw[position]
            guard byte == UInt8(ascii: "&") else {
                out.append(byte)
                position += 1
                continue
            }
            guard let semicolon = raw[position...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else { throw fail("an '&' that is not a reference") }
            let reference = String(decoding: raw[(position + 1)..<semicolon], as: UTF8.self)
            switch reference {
            case "amp": out.append(UInt8(ascii: "&"))
            case "lt": out.append(UInt8(ascii: "<"))
            case "gt": out.append(UInt8(ascii: ">"))
            case "quot": out.append(UInt8(ascii: "\""))
            case "apos": out.append(UInt8(ascii: "'"))
            default:
                let number: UInt32?
                if reference.hasPrefix("#x") {
                    number = UInt32(reference.dropFirst(2), radix: 16)
                } else if reference.hasPrefix("#") {
                    number = UInt32(reference.dropFirst(), radix: 10)
                } else {
                    number = nil
                }
                guard let number, number != 0, let scalar = Unicode.Scalar(number) else { throw fail("&\(reference); is not a reference this list has") }
                out += Array(String(Character(scalar)).utf8)
            }
            position = semicolon + 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    private func starts(_ text: String) -> Bool { bytes[index...].starts(with: text.utf8) }

    private mutating func consume(_ text: String) -> Bool {
        guard starts(text) else { return false }
        index += text.utf8.count
        return true
    }

    private mutating func skip(past text: String) throws(Failure) {
        let pattern = Array(text.utf8)
        var position = index
        while position + pattern.count <= bytes.count {
            if bytes[position] == pattern[0], bytes[position..<(position + pattern.count)].elementsEqual(pattern) {
                index = position + pattern.count
                return
            }
            position += 1
        }
        throw fail("'\(text)' never comes")
    }

    private mutating func readName() -> String {
        let start = index
        while index < bytes.count, !Self.isSpace(bytes[index]), ![UInt8(ascii: ">"), UInt8(ascii: "/"), UInt8(ascii: "="), UInt8(ascii: "<")].contains(bytes[index]) {
            index += 1
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private mutating func skipSpaces() {
        while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 }
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    private func fail(_ message: String) -> Failure { Failure(message: message, offset: index) }
}
