import Foundation
import HandoffWire

/// A `_handoff._tcp` service another host publishes, resolved: where its link listens.
package struct DNSSDService: Sendable, Hashable {
    /// The instance's label (`k3j9x0q2m7ab` in `k3j9x0q2m7ab._handoff._tcp.local.`).
    package var instance: String
    /// The interface it was found on.
    package var interface: String
    /// The host name its SRV record points to.
    package var host: String
    package var port: UInt16
    /// Its host's addresses on that link; an IPv6 link-local one with its scope (`fe80::1%eth0`).
    package var addresses: [String]
    /// Its TXT record's `key=value` strings, as they came.
    package var txt: [String]
}

/// The records heard for `_handoff._tcp` on one link, each kept for its TTL (RFC 6762, 10),
/// and the services they resolve to. Bounded: past `capacity` records, those heard longest ago
/// go first (but for those of `kept` names: services known to be the account's), so a
/// flood of records costs a fixed amount of memory. `evicted` counts what a flood pushed
/// out, for the browser to ask again once it is over. Records about anything but our service
/// type, its instances and their hosts are not kept at all.
struct DNSSDCache: Sendable {
    struct Entry: Sendable {
        var record: DNSRecord
        var received: ContinuousClock.Instant
        var expires: ContinuousClock.Instant
        /// How many of the refresh queries (at 80, 85, 90, 95% of the TTL) were asked.
        var refreshesAsked: Int = 0
    }

    private struct Key: Hashable {
        var name: DNSName
        var type: UInt16
        var data: DNSRecordData
    }

    let capacity: Int
    private var entries: [Key: Entry] = [:]
    /// Records pushed out to stay within `capacity`, ever.
    private(set) var evicted = 0

    init(capacity: Int = 256) { self.capacity = capacity }

    var count: Int { entries.count }

    /// Adds what a response said. Records with the cache-flush bit replace those of the same
    /// name and type heard more than a second ago (RFC 6762, 10.2); a TTL of 0 (a goodbye)
    /// keeps a record for one more second. Returns whether the resolved services may have changed.
    @discardableResult
    mutating func insert(_ records: [DNSRecord], now: ContinuousClock.Instant, keeping kept: Set<DNSName> = []) -> Bool {
        // Service records first, so that the addresses of the hosts they name are kept.
        let ordered = records.sorted { rank($0) < rank($1) }
        var changed = false
        var flushed: Set<Key> = []
        for record in ordered where isRelevant(record) {
            if record.cacheFlush {
                let group = Key(name: record.name, type: record.type, data: .other(type: 0, []))
                if flushed.insert(group).inserted {
                    for (key, entry) in entries where key.name == record.name && key.type == record.type && now - entry.received > .seconds(1) {
                        entries[key] = nil
                        changed = true
                    }
                }
            }
            let key = Key(name: record.name, type: record.type, data: record.data)
            // No record is kept longer than 75 minutes, whatever TTL it claims: a flood of
            // everlasting records cannot take the cache for good.
            var record = record
            record.ttl = min(record.ttl, DNSSDResponder.otherTTL)
            let lifetime: Duration = record.ttl == 0 ? .seconds(1) : .seconds(Int(record.ttl))
            if entries[key] == nil { changed = true }
            if record.ttl == 0 { changed = true }
            entries[key] = Entry(record: record, received: now, expires: now + lifetime)
        }
        if entries.count > capacity {
            let excess = entries.sorted { left, right in
                let (leftKept, rightKept) = (Self.isKept(left.key, kept), Self.isKept(right.key, kept))
                // The oldest news go first: what a host answers after a flood is kept, even when
                // the flood's records claim longer lives.
                return leftKept != rightKept ? !leftKept : left.value.received < right.value.received
            }.prefix(entries.count - capacity)
            for (key, _) in excess { entries[key] = nil }
            evicted += excess.count
            changed = true
        }
        return changed
    }

    /// Drops expired records; returns whether any went.
    @discardableResult
    mutating func expire(now: ContinuousClock.Instant) -> Bool {
        let before = entries.count
        entries = entries.filter { $0.value.expires > now }
        return entries.count != before
    }

    /// A record of a kept instance or host, or the PTR that names a kept instance.
    private static func isKept(_ key: Key, _ kept: Set<DNSName>) -> Bool {
        if kept.contains(key.name) { return true }
        if case .ptr(let instance) = key.data { return kept.contains(instance) }
        return false
    }

    private func rank(_ record: DNSRecord) -> Int {
        switch record.type {
        case DNSType.ptr: 0
        case DNSType.srv: 1
        default: 2
        }
    }

    /// Our type's PTRs, SRV and TXT records of its instances, and addresses of the hosts
    /// those SRV records name.
    private func isRelevant(_ record: DNSRecord) -> Bool {
        switch record.data {
        case .ptr: return record.name == DNSSDResponder.serviceType
        case .srv, .txt: return record.name.isBelow(DNSSDResponder.serviceType) && record.name.labels.count == 4
        case .a, .aaaa:
            return entries.values.contains { entry in
                if case .srv(_, _, _, let target) = entry.record.data { target == record.name } else { false }
            }
        default: return false
        }
    }

    private func live(_ now: ContinuousClock.Instant) -> [Entry] {
        entries.values.filter { $0.expires > now && $0.record.ttl > 0 }
    }

    /// The services these records resolve to (SRV and at least one address), but for the
    /// instances in `excluding` (our own).
    func services(on interface: String, excluding: Set<DNSName>, now: ContinuousClock.Instant) -> [DNSSDService] {
        let records = live(now).map(\.record)
        var found: [DNSSDService] = []
        for pointer in records where pointer.type == DNSType.ptr {
            guard case .ptr(let instance) = pointer.data, !excluding.contains(instance) else { continue }
            guard let srv = records.first(where: { $0.name == instance && $0.type == DNSType.srv }),
                case .srv(_, _, let port, let target) = srv.data
            else { continue }
            let addresses = records.filter { $0.name == target }.compactMap { record -> String? in
                switch record.data {
                case .a(let bytes): return bytes.map(String.init).joined(separator: ".")
                case .aaaa(let bytes):
                    let text = Self.ipv6Text(bytes)
                    return text.hasPrefix("fe80:") ? "\(text)%\(interface)" : text
                default: return nil
                }
            }
            guard !addresses.isEmpty else { continue }
            let txt = records.first { $0.name == instance && $0.type == DNSType.txt }.map { record -> [String] in
                guard case .txt(let strings) = record.data else { return [] }
                return strings.map { String(decoding: $0, as: UTF8.self) }
            } ?? []
            found.append(DNSSDService(instance: instance.labels.first ?? "", interface: interface, host: target.description,
                                      port: port, addresses: addresses.sorted(), txt: txt))
        }
        return found.sorted { $0.instance < $1.instance }
    }

    /// What a query for `name` and `type` lists as known answers: records with more than
    /// half their TTL left (RFC 6762, 7.1).
    func knownAnswers(name: DNSName, type: UInt16, now: ContinuousClock.Instant) -> [DNSRecord] {
        live(now).compactMap { entry in
            guard entry.record.name == name, entry.record.type == type else { return nil }
            let left = entry.expires - now
            guard left > .seconds(Int(entry.record.ttl)) / 2 else { return nil }
            var record = entry.record
            record.ttl = UInt32(left.components.seconds)
            record.cacheFlush = false
            return record
        }
    }

    /// The questions due to refresh records the services use before they expire: each at
    /// 80, 85, 90 and 95% of its TTL (RFC 6762, 5.2).
    mutating func refreshQuestions(now: ContinuousClock.Instant) -> [DNSQuestion] {
        var questions: Set<DNSQuestion> = []
        for (key, entry) in entries where entry.record.ttl > 0 && entry.refreshesAsked < 4 {
            let lifetime = Duration.seconds(Int(entry.record.ttl))
            let due = entry.received + lifetime * (0.80 + 0.05 * Double(entry.refreshesAsked))
            guard now >= due else { continue }
            entries[key]?.refreshesAsked += 1
            questions.insert(DNSQuestion(name: entry.record.name, type: entry.record.type))
        }
        return questions.sorted { $0.name.description < $1.name.description }
    }

    /// Questions for what is missing: the SRV and TXT of an instance known only by its PTR,
    /// the addresses of a host known only from an SRV, for 10 seconds after the PTR or SRV
    /// arrived. Past that, the rest is not coming (a host that left without a goodbye, or
    /// its records expired): asking on would cost every device traffic for nothing.
    func missingQuestions(now: ContinuousClock.Instant) -> [DNSQuestion] {
        let live = live(now)
        let records = live.map(\.record)
        let recent = Set(live.filter { now - $0.received < .seconds(10) }.map(\.record))
        var questions: [DNSQuestion] = []
        for pointer in records where pointer.type == DNSType.ptr {
            guard case .ptr(let instance) = pointer.data else { continue }
            guard let srv = records.first(where: { $0.name == instance && $0.type == DNSType.srv }),
                case .srv(_, _, _, let target) = srv.data
            else {
                if recent.contains(pointer) {
                    questions.append(DNSQuestion(name: instance, type: DNSType.srv))
                    questions.append(DNSQuestion(name: instance, type: DNSType.txt))
                }
                continue
            }
            if recent.contains(srv), !records.contains(where: { $0.name == target && ($0.type == DNSType.a || $0.type == DNSType.aaaa) }) {
                questions.append(DNSQuestion(name: target, type: DNSType.a))
                questions.append(DNSQuestion(name: target, type: DNSType.aaaa))
            }
        }
        return questions
    }

    static func ipv6Text(_ bytes: [UInt8]) -> String {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes.prefix(16)) }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil else { return "::" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
