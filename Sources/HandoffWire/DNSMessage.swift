import Foundation

// DNS messages as multicast DNS uses them (RFC 1035, RFC 6762): the wire format our DNS-SD
// responder and browser read and write. Pure functions over bytes; every length is checked
// against what remains before anything is read, and compressed names cannot loop.

/// A domain name: its labels, compared without regard to ASCII case, as DNS does.
public struct DNSName: Sendable, Hashable, CustomStringConvertible {
    public var labels: [String]

    public init(labels: [String]) { self.labels = labels }

    /// `"_handoff._tcp.local"` or `"_handoff._tcp.local."`. Dots inside a label are not escaped here.
    public init(_ text: String) {
        labels = text.split(separator: ".", omittingEmptySubsequences: true).map(String.init)
    }

    public var description: String { labels.joined(separator: ".") + "." }

    public static func == (lhs: DNSName, rhs: DNSName) -> Bool {
        lhs.labels.count == rhs.labels.count && zip(lhs.labels, rhs.labels).allSatisfy { foldCase($0) == foldCase($1) }
    }

    public func hash(into hasher: inout Hasher) {
        for label in labels { hasher.combine(Self.foldCase(label)) }
    }

    /// A label with ASCII letters in lower case and every other byte as it is: DNS folds
    /// only ASCII (RFC 4343), so `É` and `é` stay two names.
    static func foldCase(_ label: String) -> String {
        String(decoding: label.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Whether this name is `parent` with labels in front of it.
    public func isBelow(_ parent: DNSName) -> Bool {
        labels.count > parent.labels.count && DNSName(labels: Array(labels.suffix(parent.labels.count))) == parent
    }

    /// The name with `prefix` labels in front: `DNSName("_tcp.local").prepending("_handoff")`.
    public func prepending(_ prefix: String...) -> DNSName { DNSName(labels: prefix + labels) }
}

/// The record types DNS-SD uses.
public enum DNSType {
    public static let a: UInt16 = 1
    public static let ptr: UInt16 = 12
    public static let txt: UInt16 = 16
    public static let aaaa: UInt16 = 28
    public static let srv: UInt16 = 33
    public static let nsec: UInt16 = 47
    public static let any: UInt16 = 255
}

public struct DNSQuestion: Sendable, Hashable {
    public var name: DNSName
    public var type: UInt16
    /// The mDNS "QU" bit: the asker would take a unicast answer.
    public var unicastResponse: Bool

    public init(name: DNSName, type: UInt16, unicastResponse: Bool = false) {
        self.name = name
        self.type = type
        self.unicastResponse = unicastResponse
    }
}

/// What a record says.
public enum DNSRecordData: Sendable, Hashable {
    case a([UInt8])
    case aaaa([UInt8])
    case ptr(DNSName)
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// The strings of a TXT record (each at most 255 bytes).
    case txt([[UInt8]])
    /// The next name, and the types that exist for this one.
    case nsec(next: DNSName, types: [UInt16])
    /// A type this codec does not read: its data as is.
    case other(type: UInt16, [UInt8])

    var type: UInt16 {
        switch self {
        case .a: DNSType.a
        case .aaaa: DNSType.aaaa
        case .ptr: DNSType.ptr
        case .srv: DNSType.srv
        case .txt: DNSType.txt
        case .nsec: DNSType.nsec
        case .other(let type, _): type
        }
    }
}

extension DNSRecordData {
    /// The data as DNS writes it with no compression and names in lower case (RFC 4034, 6.2):
    /// what probes compare to break a tie (RFC 6762, 8.2).
    public var canonicalBytes: [UInt8] {
        var writer = DNSWriter()
        writer.compresses = false
        writer.lowercasesNames = true
        writer.record(DNSRecord(name: DNSName(labels: []), ttl: 0, data: self))
        // Past the root name (1), type (2), class (2), TTL (4) and length (2).
        return Array(writer.bytes.dropFirst(11))
    }
}

public struct DNSRecord: Sendable, Hashable {
    public var name: DNSName
    /// The mDNS cache-flush bit: this record replaces what caches hold for the name and type.
    public var cacheFlush: Bool
    /// Seconds; 0 is a goodbye.
    public var ttl: UInt32
    public var data: DNSRecordData

    public var type: UInt16 { data.type }

    public init(name: DNSName, cacheFlush: Bool = false, ttl: UInt32, data: DNSRecordData) {
        self.name = name
        self.cacheFlush = cacheFlush
        self.ttl = ttl
        self.data = data
    }
}

/// Why bytes are not a DNS message we accept.
public struct DNSError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

public struct DNSMessage: Sendable, Hashable {
    public var id: UInt16
    public var isResponse: Bool
    public var isAuthoritative: Bool
    public var questions: [DNSQuestion]
    public var answers: [DNSRecord]
    public var authorities: [DNSRecord]
    public var additionals: [DNSRecord]

    /// The largest message read: an mDNS message fits a jumbo Ethernet frame (RFC 6762, 17).
    public static let maximumSize = 9000

    public init(
        id: UInt16 = 0, isResponse: Bool, isAuthoritative: Bool = false, questions: [DNSQuestion] = [], answers: [DNSRecord] = [],
        authorities: [DNSRecord] = [], additionals: [DNSRecord] = []
    ) {
        self.id = id
        self.isResponse = isResponse
        self.isAuthoritative = isAuthoritative
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    // MARK: Writing

    /// The message's bytes, names compressed.
    public func encoded() -> [UInt8] {
        var writer = DNSWriter()
        writer.u16(id)
        writer.u16((isResponse ? 0x8000 : 0) | (isAuthoritative ? 0x0400 : 0))
        writer.u16(UInt16(questions.count))
        writer.u16(UInt16(answers.count))
        writer.u16(UInt16(authorities.count))
        writer.u16(UInt16(additionals.count))
        for question in questions {
            writer.name(question.name)
            writer.u16(question.type)
            writer.u16((question.unicastResponse ? 0x8000 : 0) | 1)
        }
        for record in answers + authorities + additionals {
            writer.record(record)
        }
        return writer.bytes
    }

    // MARK: Reading

    public init(bytes: [UInt8]) throws(DNSError) {
        guard bytes.count <= Self.maximumSize else { throw DNSError("a DNS message of \(bytes.count) bytes is over \(Self.maximumSize)") }
        var reader = DNSReader(bytes)
        id = try reader.u16()
        let flags = try reader.u16()
        isResponse = flags & 0x8000 != 0
        isAuthoritative = flags & 0x0400 != 0
        guard flags & 0x7800 == 0 else { throw DNSError("opcode \((flags >> 11) & 0xF) is not a standard query") }
        // RFC 6762, 18.11: a message with a non-zero response code is ignored.
        guard flags & 0x000F == 0 else { throw DNSError("response code \(flags & 0xF) is not zero") }
        let counts = (try reader.u16(), try reader.u16(), try reader.u16(), try reader.u16())
        // Each question takes at least 5 bytes and each record 11: counts beyond that are lies.
        guard Int(counts.0) * 5 + (Int(counts.1) + Int(counts.2) + Int(counts.3)) * 11 <= reader.remaining else {
            throw DNSError("the counts promise more entries than the message holds")
        }
        questions = []
        for _ in 0..<counts.0 {
            let name = try reader.name()
            let type = try reader.u16()
            let qclass = try reader.u16()
            questions.append(DNSQuestion(name: name, type: type, unicastResponse: qclass & 0x8000 != 0))
        }
        // Records of a class other than IN (or ANY) are read past and left out.
        var sections: [[DNSRecord]] = [[], [], []]
        for (index, count) in [counts.1, counts.2, counts.3].enumerated() {
            for _ in 0..<count {
                if let record = try reader.record() { sections[index].append(record) }
            }
        }
        answers = sections[0]
        authorities = sections[1]
        additionals = sections[2]
    }
}

struct DNSWriter {
    var bytes: [UInt8] = []
    /// Where each name suffix already written starts, for compression pointers.
    private var offsets: [DNSName: Int] = [:]
    var compresses = true
    var lowercasesNames = false

    mutating func u16(_ value: UInt16) {
        bytes.append(UInt8(value >> 8))
        bytes.append(UInt8(value & 0xFF))
    }

    mutating func u32(_ value: UInt32) {
        u16(UInt16(value >> 16))
        u16(UInt16(value & 0xFFFF))
    }

    mutating func name(_ name: DNSName) {
        var labels = name.labels[...]
        while !labels.isEmpty {
            let suffix = DNSName(labels: Array(labels))
            if compresses, let offset = offsets[suffix] {
                u16(0xC000 | UInt16(offset))
                return
            }
            if bytes.count < 0x3FFF { offsets[suffix] = bytes.count }
            let label = Array(folded(labels.first!).utf8.prefix(63))
            bytes.append(UInt8(label.count))
            bytes.append(contentsOf: label)
            labels = labels.dropFirst()
        }
        bytes.append(0)
    }

    /// A label as written: in ASCII lower case for canonical bytes, as it is otherwise.
    private func folded(_ label: String) -> String {
        lowercasesNames ? DNSName.foldCase(label) : label
    }

    mutating func record(_ record: DNSRecord) {
        name(record.name)
        u16(record.type)
        u16((record.cacheFlush ? 0x8000 : 0) | 1)
        u32(record.ttl)
        let lengthAt = bytes.count
        u16(0)
        switch record.data {
        case .a(let address), .aaaa(let address):
            bytes.append(contentsOf: address)
        case .ptr(let target):
            name(target)
        case .srv(let priority, let weight, let port, let target):
            u16(priority)
            u16(weight)
            u16(port)
            // Written whole, as unicast DNS (RFC 2782) and NSEC (RFC 4034) readers expect; this
            // reader takes them compressed too (RFC 6762, 18.14).
            for label in target.labels {
                let bytesOfLabel = Array(folded(label).utf8.prefix(63))
                bytes.append(UInt8(bytesOfLabel.count))
                bytes.append(contentsOf: bytesOfLabel)
            }
            bytes.append(0)
        case .txt(let strings):
            // An empty TXT record is one empty string (RFC 6763, 6.1).
            for string in strings.isEmpty ? [[]] : strings {
                let kept = string.prefix(255)
                bytes.append(UInt8(kept.count))
                bytes.append(contentsOf: kept)
            }
        case .nsec(let next, let types):
            // Written whole, like the SRV target.
            for label in next.labels {
                let bytesOfLabel = Array(folded(label).utf8.prefix(63))
                bytes.append(UInt8(bytesOfLabel.count))
                bytes.append(contentsOf: bytesOfLabel)
            }
            bytes.append(0)
            // One bitmap per window of 256 types that has any, in order (RFC 4034, 4.1.2).
            for window in Set(types.map { $0 >> 8 }).sorted() {
                let present = Set(types.filter { $0 >> 8 == window }.map { Int($0 & 0xFF) })
                var bitmap = [UInt8](repeating: 0, count: present.max()! / 8 + 1)
                for type in present { bitmap[type / 8] |= 0x80 >> UInt8(type % 8) }
                bytes.append(UInt8(window))
                bytes.append(UInt8(bitmap.count))
                bytes.append(contentsOf: bitmap)
            }
        case .other(_, let data):
            bytes.append(contentsOf: data)
        }
        let length = bytes.count - lengthAt - 2
        bytes[lengthAt] = UInt8(length >> 8)
        bytes[lengthAt + 1] = UInt8(length & 0xFF)
    }
}

struct DNSReader {
    private let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    mutating func u8() throws(DNSError) -> UInt8 {
        guard offset < bytes.count else { throw DNSError("the message ends early") }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func u16() throws(DNSError) -> UInt16 {
        UInt16(try u8()) << 8 | UInt16(try u8())
    }

    mutating func u32() throws(DNSError) -> UInt32 {
        UInt32(try u16()) << 16 | UInt32(try u16())
    }

    mutating func take(_ count: Int) throws(DNSError) -> [UInt8] {
        guard count >= 0, count <= remaining else { throw DNSError("a field of \(count) bytes overruns the message") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// A name at the current offset, following compression pointers, each of which must point
    /// before the one followed last (so they cannot loop), to at most 255 bytes of name.
    mutating func name() throws(DNSError) -> DNSName {
        var labels: [String] = []
        var position = offset
        var jumped = false
        var length = 0
        var lowestTarget = offset
        while true {
            guard position < bytes.count else { throw DNSError("a name runs past the end of the message") }
            let byte = bytes[position]
            switch byte & 0xC0 {
            case 0x00:
                position += 1
                if byte == 0 {
                    if !jumped { offset = position }
                    return DNSName(labels: labels)
                }
                let count = Int(byte)
                guard position + count <= bytes.count else { throw DNSError("a label runs past the end of the message") }
                length += count + 1
                guard length <= 255 else { throw DNSError("a name is longer than 255 bytes") }
                // mDNS names are UTF-8 (RFC 6762, 16); a label that is not cannot be written back.
                guard let label = String(validating: bytes[position..<position + count], as: UTF8.self) else {
                    throw DNSError("a label is not UTF-8")
                }
                labels.append(label)
                position += count
            case 0xC0:
                guard position + 1 < bytes.count else { throw DNSError("a compression pointer is cut off") }
                let target = Int(byte & 0x3F) << 8 | Int(bytes[position + 1])
                guard target < lowestTarget else { throw DNSError("a compression pointer does not point backwards") }
                lowestTarget = target
                if !jumped { offset = position + 2 }
                jumped = true
                position = target
            default:
                throw DNSError("a label type 0x\(String(byte & 0xC0, radix: 16)) is not supported")
            }
        }
    }

    /// The next record; nil (read past) for one of a class other than IN or ANY.
    mutating func record() throws(DNSError) -> DNSRecord? {
        let name = try name()
        let type = try u16()
        let rclass = try u16()
        let ttl = try u32()
        let length = Int(try u16())
        guard length <= remaining else { throw DNSError("a record's data of \(length) bytes overruns the message") }
        let end = offset + length
        let data: DNSRecordData
        switch type {
        case DNSType.a:
            guard length == 4 else { throw DNSError("an A record holds 4 bytes, not \(length)") }
            data = .a(try take(4))
        case DNSType.aaaa:
            guard length == 16 else { throw DNSError("an AAAA record holds 16 bytes, not \(length)") }
            data = .aaaa(try take(16))
        case DNSType.ptr:
            data = .ptr(try self.name())
        case DNSType.srv:
            let priority = try u16(), weight = try u16(), port = try u16()
            data = .srv(priority: priority, weight: weight, port: port, target: try self.name())
        case DNSType.txt:
            var strings: [[UInt8]] = []
            while offset < end {
                let count = Int(try u8())
                guard offset + count <= end else { throw DNSError("a TXT string overruns its record") }
                strings.append(try take(count))
            }
            // No data at all reads as the one empty string it stands for (RFC 6763, 6.1), as
            // this writer writes it.
            data = .txt(strings.isEmpty ? [[]] : strings)
        case DNSType.nsec:
            let next = try self.name()
            var types: [UInt16] = []
            var lastWindow = -1
            while offset < end {
                let window = try u8()
                guard Int(window) > lastWindow else { throw DNSError("an NSEC bitmap's windows are not in increasing order") }
                lastWindow = Int(window)
                let count = Int(try u8())
                guard (1...32).contains(count), offset + count <= end else { throw DNSError("an NSEC bitmap overruns its record") }
                for (index, bits) in try take(count).enumerated() {
                    for bit in 0..<8 where bits & (0x80 >> UInt8(bit)) != 0 {
                        types.append(UInt16(window) << 8 | UInt16(index * 8 + bit))
                    }
                }
            }
            data = .nsec(next: next, types: types)
        default:
            data = .other(type: type, try take(length))
        }
        guard offset == end else { throw DNSError("a record's data is \(length) bytes, but its fields take \(offset - (end - length))") }
        guard rclass & 0x7FFF == 1 || rclass & 0x7FFF == 255 else { return nil }
        return DNSRecord(name: name, cacheFlush: rclass & 0x8000 != 0, ttl: ttl, data: data)
    }
}
