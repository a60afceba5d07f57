import Foundation
import HandoffWire
import NIOCore
import Testing

@testable import HandoffAgent

/// The DNS-SD responder and cache as pure logic: messages in, messages out.
@Suite("DNS-SD responder and cache")
struct DNSSDTests {
    let address: [UInt8] = [10, 0, 0, 5]

    func responder() -> DNSSDResponder {
        var responder = DNSSDResponder(port: 47_170, addresses: ["eth0": [address]])
        responder.probingSucceeded()
        return responder
    }

    func query(_ name: DNSName, _ type: UInt16, known: [DNSRecord] = [], unicast: Bool = false) -> DNSMessage {
        DNSMessage(isResponse: false, questions: [DNSQuestion(name: name, type: type, unicastResponse: unicast)], answers: known)
    }

    @Test("S1: The published records name nothing of the device: random names, the link port, and only allow-listed TXT keys")
    func publishedRecords() {
        let responder = responder()
        let records = responder.allRecords(on: "eth0")
        #expect(responder.instance.count == 12 && responder.host.count == 12)
        #expect(responder.instance != responder.host)
        #expect(records.contains { $0.data == .srv(priority: 0, weight: 0, port: 47_170, target: responder.hostName) })
        #expect(records.contains { $0.data == .txt([Array("v=1".utf8)]) })
        #expect(DNSSDResponder.txtStrings(["v": "1", "name": "laptop", "model": "X1"]) == [Array("v=1".utf8)])
        // Every name is made of the two random labels and the fixed ones, nothing else.
        let allowed: Set<String> = [responder.instance, responder.host, "_handoff", "_tcp", "_services", "_dns-sd", "_udp", "local"]
        for record in records {
            #expect(Set(record.name.labels).isSubset(of: allowed), "\(record.name)")
        }
        // Two responders share nothing in their names.
        let other = DNSSDResponder(port: 47_170)
        #expect(other.instance != responder.instance && other.host != responder.host)
    }

    @Test("A browse for _handoff._tcp is answered with the PTR, and the SRV, TXT and address follow as additional records")
    func answersBrowse() {
        var responder = responder()
        let reply = responder.receive(query(DNSSDResponder.serviceType, DNSType.ptr), on: "eth0", legacy: false, now: .now)
        guard case .multicast(let message, let delay)? = reply else { Issue.record("expected a multicast answer"); return }
        #expect(delay >= .milliseconds(20) && delay <= .milliseconds(120), "shared records wait 20-120 ms")
        #expect(message.answers.map(\.data) == [.ptr(responder.instanceName)])
        #expect(Set(message.additionals.map(\.type)) == [DNSType.srv, DNSType.txt, DNSType.a])
    }

    @Test("What the asker already holds with half its TTL left is not sent again")
    func knownAnswerSuppression() {
        var responder = responder()
        let held = DNSRecord(name: DNSSDResponder.serviceType, ttl: DNSSDResponder.otherTTL, data: .ptr(responder.instanceName))
        #expect(responder.receive(query(DNSSDResponder.serviceType, DNSType.ptr, known: [held]), on: "eth0", legacy: false, now: .now) == nil)
        var old = held
        old.ttl = 100
        #expect(responder.receive(query(DNSSDResponder.serviceType, DNSType.ptr, known: [old]), on: "eth0", legacy: false, now: .now) != nil)
    }

    @Test("A record is multicast at most once a second, however often it is asked for")
    func rateLimited() {
        var responder = responder()
        let start = ContinuousClock.now
        let question = query(responder.instanceName, DNSType.srv)
        #expect(responder.receive(question, on: "eth0", legacy: false, now: start) != nil)
        for step in 1..<10 {
            #expect(responder.receive(question, on: "eth0", legacy: false, now: start + .milliseconds(step * 100)) == nil)
        }
        #expect(responder.receive(question, on: "eth0", legacy: false, now: start + .milliseconds(1001)) != nil)
    }

    @Test("A plain DNS resolver's query (not from port 5353) gets a unicast answer with its id, its question, short TTLs and no cache-flush bit")
    func legacyUnicast() {
        var responder = responder()
        var question = query(responder.hostName, DNSType.a)
        question.id = 0x1234
        let reply = responder.receive(question, on: "eth0", legacy: true, now: .now)
        guard case .unicast(let message)? = reply else { Issue.record("expected a unicast answer"); return }
        #expect(message.id == 0x1234)
        #expect(message.questions == question.questions)
        #expect(message.answers.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush })
        #expect(message.answers.map(\.data) == [.a(address)])
    }

    @Test("Another host's record with our name and other data is a conflict; our own data, a goodbye, or another name are not")
    func conflicts() {
        var responder = responder()
        let ours = responder.uniqueRecords(on: "eth0")
        _ = responder.receive(DNSMessage(isResponse: true, answers: ours), on: "eth0", legacy: false, now: .now)
        #expect(!responder.conflicted)
        _ = responder.receive(DNSMessage(isResponse: true, answers: [DNSRecord(name: responder.hostName, cacheFlush: true, ttl: 0, data: .a([10, 0, 0, 9]))]), on: "eth0", legacy: false, now: .now)
        #expect(!responder.conflicted)
        _ = responder.receive(DNSMessage(isResponse: true, answers: [DNSRecord(name: DNSName("other.local"), cacheFlush: true, ttl: 120, data: .a([10, 0, 0, 9]))]), on: "eth0", legacy: false, now: .now)
        #expect(!responder.conflicted)
        _ = responder.receive(DNSMessage(isResponse: true, answers: [DNSRecord(name: responder.instanceName, cacheFlush: true, ttl: 120, data: .srv(priority: 0, weight: 0, port: 1, target: DNSName("x.local")))]), on: "eth0", legacy: false, now: .now)
        #expect(responder.conflicted)
        responder.renew()
        #expect(!responder.conflicted && responder.phase == .probing)
    }

    @Test("Two hosts probing for one name at once: the lexicographically later records win, and our own probe heard back changes nothing")
    func simultaneousProbes() {
        var responder = DNSSDResponder(port: 47_170, addresses: ["eth0": [address]])
        _ = responder.receive(responder.probe(on: "eth0"), on: "eth0", legacy: false, now: .now)
        #expect(!responder.conflicted, "our own probe")
        var later = responder.probe(on: "eth0")
        later.authorities = later.authorities.map { record in
            var record = record
            if case .a = record.data { record.data = .a([10, 0, 0, 200]) }
            return record
        }
        var earlier = responder.probe(on: "eth0")
        earlier.authorities = earlier.authorities.map { record in
            var record = record
            if case .a = record.data { record.data = .a([10, 0, 0, 1]) }
            return record
        }
        _ = responder.receive(earlier, on: "eth0", legacy: false, now: .now)
        #expect(!responder.conflicted, "ours is later: we win")
        _ = responder.receive(later, on: "eth0", legacy: false, now: .now)
        #expect(responder.conflicted, "theirs is later: we choose another name")
        #expect(DNSSDResponder.compare(later.authorities, earlier.authorities) > 0)
    }

    @Test("While probing, nothing is answered; a goodbye sends every record with TTL 0")
    func probingAndGoodbye() {
        var responder = DNSSDResponder(port: 47_170, addresses: ["eth0": [address]])
        #expect(responder.receive(query(DNSSDResponder.serviceType, DNSType.ptr), on: "eth0", legacy: false, now: .now) == nil)
        responder.probingSucceeded()
        let goodbye = responder.goodbye(on: "eth0")
        #expect(goodbye.isResponse && goodbye.answers.allSatisfy { $0.ttl == 0 } && goodbye.answers.count == 5)
    }

    // MARK: The cache

    func service(_ instance: String, port: UInt16 = 4242, address: [UInt8] = [10, 0, 0, 7], ttl: UInt32 = 120) -> [DNSRecord] {
        let name = DNSSDResponder.serviceType.prepending(instance)
        let host = DNSName(labels: ["host-\(instance)", "local"])
        return [
            DNSRecord(name: DNSSDResponder.serviceType, ttl: 4500, data: .ptr(name)),
            DNSRecord(name: name, cacheFlush: true, ttl: ttl, data: .srv(priority: 0, weight: 0, port: port, target: host)),
            DNSRecord(name: name, cacheFlush: true, ttl: 4500, data: .txt([Array("v=1".utf8)])),
            DNSRecord(name: host, cacheFlush: true, ttl: ttl, data: .a(address)),
        ]
    }

    @Test("Records resolve to a service with its address and port; the TTL ends it, and so does a goodbye, a second later")
    func cacheResolves() {
        var cache = DNSSDCache()
        let now = ContinuousClock.now
        cache.insert(service("printer"), now: now)
        let found = cache.services(on: "eth0", excluding: [], now: now)
        #expect(found == [DNSSDService(instance: "printer", interface: "eth0", host: "host-printer.local.", port: 4242, addresses: ["10.0.0.7"], txt: ["v=1"])])
        #expect(cache.services(on: "eth0", excluding: [DNSSDResponder.serviceType.prepending("printer")], now: now).isEmpty, "our own")
        cache.expire(now: now + .seconds(121))
        #expect(cache.services(on: "eth0", excluding: [], now: now + .seconds(121)).isEmpty)

        var other = DNSSDCache()
        other.insert(service("printer"), now: now)
        other.insert(service("printer", ttl: 0), now: now + .seconds(5))
        #expect(other.services(on: "eth0", excluding: [], now: now + .seconds(5)).isEmpty)
    }

    @Test("A record with the cache-flush bit replaces older data for its name: a service that moved is found at its new port")
    func cacheFlush() {
        var cache = DNSSDCache()
        let now = ContinuousClock.now
        cache.insert(service("printer", port: 1000), now: now)
        cache.insert(service("printer", port: 2000), now: now + .seconds(3))
        #expect(cache.services(on: "eth0", excluding: [], now: now + .seconds(3)).map(\.port) == [2000])
    }

    @Test("S10: A flood of records costs a bounded cache; records about other services and hosts are not kept at all")
    func cacheBounded() {
        var cache = DNSSDCache(capacity: 64)
        let now = ContinuousClock.now
        for index in 0..<1000 { cache.insert(service("s\(index)"), now: now) }
        #expect(cache.count <= 64)
        var unrelated = DNSSDCache()
        unrelated.insert([
            DNSRecord(name: DNSName("_ipp._tcp.local"), ttl: 4500, data: .ptr(DNSName("x._ipp._tcp.local"))),
            DNSRecord(name: DNSName("somebody.local"), ttl: 120, data: .a([10, 0, 0, 1])),
        ], now: now)
        #expect(unrelated.count == 0)
    }

    @Test("S10: A flood of records pushes out the oldest, never those of a service known to be the account's; what comes after the flood is kept")
    func floodKeepsKnownServices() {
        var cache = DNSSDCache(capacity: 64)
        let start = ContinuousClock.now
        let known = DNSSDResponder.serviceType.prepending("member")
        let kept: Set<DNSName> = [known, DNSName(labels: ["host-member", "local"])]
        cache.insert(service("member", port: 1111), now: start, keeping: kept)
        cache.insert(service("other", port: 2222), now: start, keeping: kept)
        for index in 0..<1000 { cache.insert(service("s\(index)", ttl: 4500), now: start + .milliseconds(index + 1), keeping: kept) }
        let after = start + .seconds(2)
        #expect(cache.services(on: "lo", excluding: [], now: after).contains { $0.port == 1111 }, "the account's service was pushed out")
        #expect(!cache.services(on: "lo", excluding: [], now: after).contains { $0.port == 2222 })
        #expect(cache.evicted > 0)
        cache.insert(service("other", port: 2222), now: after, keeping: kept)
        #expect(cache.services(on: "lo", excluding: [], now: after).contains { $0.port == 2222 }, "an answer after the flood was pushed out by the flood's records")
    }

    @Test("The browser asks for what is missing for 10 s, and refreshes a record at 80% of its TTL")
    func cacheQuestions() {
        var cache = DNSSDCache()
        let now = ContinuousClock.now
        let pointer = DNSRecord(name: DNSSDResponder.serviceType, ttl: 4500, data: .ptr(DNSSDResponder.serviceType.prepending("half")))
        cache.insert([pointer], now: now)
        #expect(Set(cache.missingQuestions(now: now).map(\.type)) == [DNSType.srv, DNSType.txt])
        #expect(cache.missingQuestions(now: now + .seconds(11)).isEmpty, "what has not come in 10 s is not asked for again")
        cache.insert(service("printer", ttl: 100), now: now)
        #expect(cache.refreshQuestions(now: now + .seconds(50)).isEmpty)
        let due = cache.refreshQuestions(now: now + .seconds(81))
        #expect(due.contains { $0.type == DNSType.srv })
        #expect(cache.refreshQuestions(now: now + .seconds(82)).isEmpty, "asked once per step")
        #expect(cache.knownAnswers(name: DNSSDResponder.serviceType, type: DNSType.ptr, now: now).count == 2)
    }

    @Test("Names compare without regard to ASCII case only, and canonical data is uncompressed and lower case")
    func caseAndCanonical() {
        #expect(DNSName("Printer._HANDOFF._tcp.local") == DNSName("printer._handoff._tcp.local"))
        #expect(DNSName("É.local") != DNSName("é.local"))
        let data = DNSRecordData.ptr(DNSName("A.Local"))
        #expect(data.canonicalBytes == [1, 0x61, 5] + Array("local".utf8) + [0])
    }

    @Test("No record stays longer than 75 minutes, whatever TTL it claims")
    func ttlCapped() {
        var cache = DNSSDCache()
        let now = ContinuousClock.now
        cache.insert(service("forever", ttl: .max), now: now)
        #expect(!cache.services(on: "eth0", excluding: [], now: now).isEmpty)
        cache.expire(now: now + .seconds(4501))
        #expect(cache.count == 0)
    }

    @Test("Only on-link senders and addresses count: another network's address is neither answered nor sent beacons")
    func onLink() throws {
        let link = ServiceDiscovery.Link(
            name: "eth0", v4: nil, v6: nil, addresses: [[10, 0, 0, 5]],
            ownAddresses: [[10, 0, 0, 5], [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5]],
            networks: [(0x0A00_0005, 0xFFFF_FF00)])
        #expect(ServiceDiscovery.isOnLink(text: "10.0.0.77", link))
        #expect(ServiceDiscovery.isOnLink(text: "fe80::1%eth0", link))
        #expect(ServiceDiscovery.isOnLink(text: "2001:db8:0:1::9", link))
        #expect(!ServiceDiscovery.isOnLink(text: "192.0.2.1", link))
        #expect(!ServiceDiscovery.isOnLink(text: "2001:db8:0:2::9", link))
        #expect(ServiceDiscovery.isOwnAddress(try SocketAddress(ipAddress: "10.0.0.5", port: 5353), link))
        #expect(!ServiceDiscovery.isOwnAddress(try SocketAddress(ipAddress: "10.0.0.6", port: 5353), link))
    }

    @Test("A message with a non-zero response code is refused; a record of another class is read past and left out")
    func rcodeAndClass() throws {
        var bytes = DNSMessage(isResponse: true, answers: service("printer")).encoded()
        bytes[3] |= 0x03
        #expect(throws: DNSError.self) { try DNSMessage(bytes: bytes) }
        var chaos = DNSMessage(isResponse: true, answers: [DNSRecord(name: DNSName("x.local"), ttl: 120, data: .a([10, 0, 0, 1]))]).encoded()
        // The class field of the one record (after the 12-byte header, the name and the type).
        let classAt = 12 + 9 + 2
        chaos[classAt] = 0
        chaos[classAt + 1] = 3
        #expect(try DNSMessage(bytes: chaos).answers.isEmpty)
    }

    @Test("Another device's goodbye for the shared _services record is answered with it again; its goodbye for its own instance is not")
    func sharedRecordSaidAgain() {
        var responder = responder()
        let goodbye = DNSRecord(name: DNSSDResponder.serviceTypes, ttl: 0, data: .ptr(DNSSDResponder.serviceType))
        let reply = responder.receive(DNSMessage(isResponse: true, answers: [goodbye]), on: "eth0", legacy: false, now: .now)
        guard case .multicast(let message, _)? = reply else { Issue.record("expected the record again"); return }
        #expect(message.answers.map(\.data) == [.ptr(DNSSDResponder.serviceType)] && message.answers.allSatisfy { $0.ttl > 0 })
        let theirs = DNSRecord(name: DNSSDResponder.serviceType, ttl: 0, data: .ptr(DNSSDResponder.serviceType.prepending("other")))
        #expect(responder.receive(DNSMessage(isResponse: true, answers: [theirs]), on: "eth0", legacy: false, now: .now) == nil)
    }
}
