import Foundation
import HandoffWire

/// What this device publishes over multicast DNS (RFC 6762) as a DNS-SD service (RFC 6763),
/// and how it answers: pure logic over messages, with the sockets and timers in
/// `ServiceDiscovery`.
///
/// The service is `_handoff._tcp` on the link port. Its instance name and the host name its
/// SRV record points to are random and change at every rotation, so that nothing a bystander
/// reads in them is tied to the device; its TXT record holds keys from `allowedTXTKeys` only.
///
/// ```
///   probing(0) ─250 ms─▶ probing(1) ─▶ probing(2) ─250 ms─▶ announcing ─1 s─▶ announced
///       ▲                                                                         │
///       └──────────── a conflict, or a rotation: new names ◀───────────────────────┘
/// ```
struct DNSSDResponder: Sendable {
    static let serviceType = DNSName("_handoff._tcp.local")
    /// Where browsers list the service types on a link (RFC 6763, 9).
    static let serviceTypes = DNSName("_services._dns-sd._udp.local")
    /// The only TXT keys published: the protocol's version. No name, model, account or address.
    static let allowedTXTKeys: Set<String> = ["v"]
    static let txt: [String: String] = ["v": "1"]
    /// RFC 6762, 10: records that name a host live 120 s in caches, the others 75 minutes.
    static let hostTTL: UInt32 = 120
    static let otherTTL: UInt32 = 4500

    enum Phase: Sendable, Equatable {
        /// Asking whether anyone else uses the names (three probes, 250 ms apart).
        case probing
        /// The names are ours: announced, answered, defended.
        case announced
        /// Stopped: goodbyes sent, nothing answered.
        case stopped
    }

    private(set) var instance: String
    private(set) var host: String
    let port: UInt16
    /// Each interface's addresses (4 or 16 bytes), for the host name's A and AAAA records there.
    var addresses: [String: [[UInt8]]]
    private(set) var phase: Phase = .probing
    /// Set when another host turned out to use our names: the caller picks new ones.
    private(set) var conflicted = false
    /// When each record was last multicast on each interface: at most once a second (RFC 6762, 6).
    private var lastMulticast: [MulticastKey: ContinuousClock.Instant] = [:]

    private struct MulticastKey: Hashable {
        var interface: String
        var name: DNSName
        var type: UInt16
    }

    init(port: UInt16, addresses: [String: [[UInt8]]] = [:]) {
        self.port = port
        self.addresses = addresses
        instance = Self.randomLabel()
        host = Self.randomLabel()
    }

    var instanceName: DNSName { Self.serviceType.prepending(instance) }
    var hostName: DNSName { DNSName(labels: [host, "local"]) }

    /// New random names, probed again before use: at a rotation, and after a conflict.
    mutating func renew() {
        instance = Self.randomLabel()
        host = Self.randomLabel()
        phase = .probing
        conflicted = false
        lastMulticast = [:]
    }

    mutating func probingSucceeded() {
        if phase == .probing { phase = .announced }
    }

    mutating func stop() { phase = .stopped }

    /// Stops answering for the names in use (their goodbyes are on the way); probing new ones
    /// starts it again.
    mutating func withdraw() {
        if phase == .announced { phase = .probing }
    }

    /// Twelve random lowercase letters and digits: about 62 bits, nothing derived from the device.
    static func randomLabel() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<12).map { _ in alphabet.randomElement()! })
    }

    /// The TXT strings, from the allow-list only.
    static func txtStrings(_ values: [String: String]) -> [[UInt8]] {
        values.filter { allowedTXTKeys.contains($0.key) }.sorted { $0.key < $1.key }.map { Array("\($0.key)=\($0.value)".utf8) }
    }

    // MARK: Records

    /// The unique records: ours alone, so they carry the cache-flush bit and are probed.
    func uniqueRecords(on interface: String, ttlScale: UInt32 = 1) -> [DNSRecord] {
        var records = [
            DNSRecord(name: instanceName, cacheFlush: true, ttl: Self.hostTTL * ttlScale,
                      data: .srv(priority: 0, weight: 0, port: port, target: hostName)),
            DNSRecord(name: instanceName, cacheFlush: true, ttl: Self.otherTTL * ttlScale, data: .txt(Self.txtStrings(Self.txt))),
        ]
        for address in addresses[interface] ?? [] {
            records.append(DNSRecord(name: hostName, cacheFlush: true, ttl: Self.hostTTL * ttlScale,
                                     data: address.count == 4 ? .a(address) : .aaaa(address)))
        }
        return records
    }

    /// The shared records: every instance of the type has its own PTR to it.
    func sharedRecords(ttlScale: UInt32 = 1) -> [DNSRecord] {
        [
            DNSRecord(name: Self.serviceType, ttl: Self.otherTTL * ttlScale, data: .ptr(instanceName)),
            DNSRecord(name: Self.serviceTypes, ttl: Self.otherTTL * ttlScale, data: .ptr(Self.serviceType)),
        ]
    }

    func allRecords(on interface: String) -> [DNSRecord] {
        sharedRecords() + uniqueRecords(on: interface)
    }

    /// A probe (RFC 6762, 8.1): "does anyone have these names?", with the records we mean to
    /// use in the authority section for a simultaneous prober to compare.
    func probe(on interface: String) -> DNSMessage {
        DNSMessage(
            isResponse: false,
            questions: [DNSQuestion(name: instanceName, type: DNSType.any, unicastResponse: false),
                        DNSQuestion(name: hostName, type: DNSType.any, unicastResponse: false)],
            // The cache-flush bit belongs to responses only (RFC 6762, 10.2).
            authorities: uniqueRecords(on: interface).map { record in
                var record = record
                record.cacheFlush = false
                return record
            })
    }

    /// An unsolicited response with every record: after probing, and again a second later.
    mutating func announcement(on interface: String, now: ContinuousClock.Instant) -> DNSMessage {
        let records = allRecords(on: interface)
        for record in records { lastMulticast[MulticastKey(interface: interface, name: record.name, type: record.type)] = now }
        return DNSMessage(isResponse: true, isAuthoritative: true, answers: records)
    }

    /// Every record with TTL 0: caches drop them within a second (RFC 6762, 10.1).
    func goodbye(on interface: String) -> DNSMessage {
        DNSMessage(isResponse: true, isAuthoritative: true, answers: sharedRecords(ttlScale: 0) + uniqueRecords(on: interface, ttlScale: 0))
    }

    // MARK: Receiving

    /// How an answer goes back.
    enum Reply: Sendable, Equatable {
        /// To the group, after `delay` (20-120 ms for shared records, so that answers from
        /// several hosts aggregate; at once for ours alone).
        case multicast(DNSMessage, delay: Duration)
        /// To the asker's address and port: a legacy resolver (not from port 5353) or a
        /// question asking for a unicast answer.
        case unicast(DNSMessage)
    }

    /// Looks at a message another host sent on `interface`: notes a conflict with our names,
    /// and returns the answer to send, if any. `legacy` is a query from a port other than
    /// the mDNS port (a plain DNS resolver): answered by unicast, with its id and question,
    /// short TTLs and no cache-flush bits (RFC 6762, 6.7).
    mutating func receive(_ message: DNSMessage, on interface: String, legacy: Bool, now: ContinuousClock.Instant) -> Reply? {
        guard phase != .stopped else { return nil }
        if message.isResponse {
            if conflicts(message.answers + message.additionals, on: interface) { conflicted = true }
            // Another device's goodbye for a record we share (the `_services` PTR every Handoff
            // device publishes) would take it from every cache: it is said again.
            guard phase == .announced else { return nil }
            let shared = sharedRecords().filter { record in
                message.answers.contains { $0.ttl == 0 && $0.name == record.name && $0.data == record.data }
            }
            guard !shared.isEmpty else { return nil }
            for record in shared { lastMulticast[MulticastKey(interface: interface, name: record.name, type: record.type)] = now }
            return .multicast(DNSMessage(isResponse: true, isAuthoritative: true, answers: shared), delay: .milliseconds(Int.random(in: 20...120)))
        }
        if phase == .probing {
            // Another host probing for one of our names at the same time: the lexicographically
            // later set of records wins (RFC 6762, 8.2); equal sets are our own probe.
            let theirs = message.authorities.filter { $0.name == instanceName || $0.name == hostName }
            if !theirs.isEmpty, Self.compare(theirs, uniqueRecords(on: interface).filter { r in theirs.contains { $0.name == r.name } }) > 0 {
                conflicted = true
            }
            return nil
        }
        var answers: [DNSRecord] = []
        var unicastWanted = legacy
        let mine = allRecords(on: interface)
        for question in message.questions {
            let matching = mine.filter { $0.name == question.name && (question.type == DNSType.any || question.type == $0.type) }
            guard !matching.isEmpty else { continue }
            if question.unicastResponse { unicastWanted = true }
            for record in matching where !answers.contains(record) { answers.append(record) }
        }
        // Known-answer suppression (RFC 6762, 7.1): what the asker holds with at least half
        // its TTL left is not sent again.
        answers.removeAll { answer in
            message.answers.contains { $0.name == answer.name && $0.data == answer.data && $0.ttl >= answer.ttl / 2 }
        }
        guard !answers.isEmpty else { return nil }
        var additionals: [DNSRecord] = []
        for answer in answers {
            let follows: [DNSRecord]
            switch answer.data {
            case .ptr(let target) where target == instanceName:
                follows = mine.filter { $0.name == instanceName || $0.name == hostName }
            case .srv:
                follows = mine.filter { $0.name == hostName }
            default:
                follows = []
            }
            for record in follows where !answers.contains(record) && !additionals.contains(record) { additionals.append(record) }
        }
        if legacy {
            let capped = { (record: DNSRecord) -> DNSRecord in
                var record = record
                record.ttl = min(record.ttl, 10)
                record.cacheFlush = false
                return record
            }
            return .unicast(DNSMessage(id: message.id, isResponse: true, isAuthoritative: true, questions: message.questions,
                                       answers: answers.map(capped), additionals: additionals.map(capped)))
        }
        if unicastWanted {
            return .unicast(DNSMessage(isResponse: true, isAuthoritative: true, answers: answers, additionals: additionals))
        }
        // No record multicast again within a second of the last time, a probe's defence excepted
        // (RFC 6762, 6: 250 ms).
        let isProbe = !message.authorities.isEmpty
        answers.removeAll { record in
            guard let last = lastMulticast[MulticastKey(interface: interface, name: record.name, type: record.type)] else { return false }
            return now - last < (isProbe ? .milliseconds(250) : .seconds(1))
        }
        guard !answers.isEmpty else { return nil }
        for record in answers + additionals {
            lastMulticast[MulticastKey(interface: interface, name: record.name, type: record.type)] = now
        }
        let onlyOurs = answers.allSatisfy(\.cacheFlush)
        let delay: Duration = onlyOurs ? .zero : .milliseconds(Int.random(in: 20...120))
        return .multicast(DNSMessage(isResponse: true, isAuthoritative: true, answers: answers, additionals: additionals), delay: delay)
    }

    /// Whether records another host sent claim one of our names with other data (RFC 6762, 9).
    /// A goodbye claims nothing; a record we publish on another interface is ours.
    private func conflicts(_ records: [DNSRecord], on interface: String) -> Bool {
        let ours = addresses.keys.flatMap { uniqueRecords(on: $0) }
        return records.contains { record in
            guard record.ttl > 0, record.name == instanceName || record.name == hostName else { return false }
            // Another address for our host name is a conflict only if none of our interfaces has it.
            let sameKind = ours.filter { $0.name == record.name && $0.type == record.type }
            return !sameKind.isEmpty && !sameKind.contains { $0.data == record.data }
        }
    }

    /// Compares two sets of records as RFC 6762, 8.2 says: sorted, then record by record by
    /// class, type and canonical data, the longer set winning a tie. Positive: `lhs` wins.
    static func compare(_ lhs: [DNSRecord], _ rhs: [DNSRecord]) -> Int {
        func key(_ record: DNSRecord) -> [UInt8] {
            [UInt8(record.type >> 8), UInt8(record.type & 0xFF)] + record.data.canonicalBytes
        }
        let left = lhs.map(key).sorted { $0.lexicographicallyPrecedes($1) }
        let right = rhs.map(key).sorted { $0.lexicographicallyPrecedes($1) }
        for (a, b) in zip(left, right) where a != b {
            return a.lexicographicallyPrecedes(b) ? -1 : 1
        }
        return left.count == right.count ? 0 : (left.count > right.count ? 1 : -1)
    }
}
