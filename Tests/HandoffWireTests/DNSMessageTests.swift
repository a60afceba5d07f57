import Foundation
import Testing

@testable import HandoffWire

@Suite("DNS messages (the mDNS wire format)")
struct DNSMessageTests {
    let service = DNSName("_handoff._tcp.local")
    var instance: DNSName { service.prepending("k3x9w2q7") }
    let host = DNSName("h-5f2a.local")

    var announcement: DNSMessage {
        DNSMessage(
            isResponse: true, isAuthoritative: true,
            answers: [
                DNSRecord(name: service, ttl: 4500, data: .ptr(instance)),
                DNSRecord(name: instance, cacheFlush: true, ttl: 120, data: .srv(priority: 0, weight: 0, port: 47_170, target: host)),
                DNSRecord(name: instance, cacheFlush: true, ttl: 4500, data: .txt([Array("v=1".utf8)])),
            ],
            additionals: [
                DNSRecord(name: host, cacheFlush: true, ttl: 120, data: .a([10, 0, 0, 2])),
                DNSRecord(name: host, cacheFlush: true, ttl: 120, data: .aaaa([0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1])),
                DNSRecord(name: instance, cacheFlush: true, ttl: 120, data: .nsec(next: instance, types: [DNSType.txt, DNSType.srv])),
            ])
    }

    @Test("A response with every record type DNS-SD uses reads back as written, with names compressed")
    func roundTrip() throws {
        let bytes = announcement.encoded()
        #expect(try DNSMessage(bytes: bytes) == announcement)
        // The instance name comes six times: compressed, "_handoff" is written once among the
        // records' names, and once more whole in the NSEC record's data, which is never compressed.
        #expect(bytes.count < 220, "\(bytes.count) bytes")
        #expect(bytes.indices.filter { bytes[$0...].starts(with: Array("_handoff".utf8)) }.count == 2)
    }

    @Test("A query as another responder writes it reads: the QU bit, the question's name and type")
    func query() throws {
        // A PTR query for _handoff._tcp.local with the QU bit, written by hand as RFC 1035 lays it out.
        var bytes: [UInt8] = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
        for label in ["_handoff", "_tcp", "local"] {
            bytes.append(UInt8(label.utf8.count))
            bytes += Array(label.utf8)
        }
        bytes += [0, 0, 12, 0x80, 1]
        let message = try DNSMessage(bytes: bytes)
        #expect(!message.isResponse)
        #expect(message.questions == [DNSQuestion(name: DNSName("_HANDOFF._tcp.local."), type: DNSType.ptr, unicastResponse: true)])
    }

    @Test("Names compare without regard to case, as DNS does")
    func caseInsensitive() {
        #expect(DNSName("Laptop.Local") == DNSName("laptop.local."))
        #expect(Set([DNSName("A.local"), DNSName("a.LOCAL")]).count == 1)
        #expect(DNSName("a.local").description == "a.local.")
    }

    @Test("Bad bytes are refused with a reason, never read past: loops, forward pointers, overruns, lying counts, oversize")
    func hostile() {
        let header: [UInt8] = [0, 0, 0x84, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        let cases: [(String, [UInt8], String)] = [
            ("a pointer to itself", header + [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0], "backwards"),
            ("a forward pointer", header + [0xC0, 40, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0], "backwards"),
            ("a label past the end", [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 65, 65, 65, 65, 65], "past the end"),
            ("a record's data past the end", header + [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 200, 1, 2], "overruns"),
            ("an A record of 3 bytes", header + [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 3, 1, 2, 3], "4 bytes"),
            ("a count of 60000 answers", [0, 0, 0x84, 0, 0, 0, 0xEA, 0x60, 0, 0, 0, 0] + [0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0], "counts"),
            ("a TXT string past its record", header + [0, 0, 16, 0, 1, 0, 0, 0, 0, 0, 2, 5, 65], "overruns"),
            ("an extended label type", header + [0x40, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0], "not supported"),
            ("a cut-off header", [0, 0, 0x84], "ends early"),
        ]
        for (what, bytes, reason) in cases {
            do {
                _ = try DNSMessage(bytes: bytes)
                Issue.record("\(what) was accepted")
            } catch {
                #expect(error.message.contains(reason), "\(what): \(error.message)")
            }
        }
        // A pointer chain that goes back and forth: each must land before the one followed last.
        var looping = header + [1, 65, 0xC0, 12]
        looping += [0, 1, 0, 1, 0, 0, 0, 0, 0, 0]
        #expect(throws: DNSError.self) { try DNSMessage(bytes: looping) }
        #expect(throws: DNSError.self) { try DNSMessage(bytes: [UInt8](repeating: 0, count: DNSMessage.maximumSize + 1)) }
    }

    @Test("Random bytes never crash the reader")
    func fuzzed() {
        var generator = SystemRandomNumberGenerator()
        let valid = announcement.encoded()
        for _ in 0..<2000 {
            var bytes = valid
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            if Bool.random(using: &generator) { bytes.removeLast(Int.random(in: 0..<bytes.count, using: &generator)) }
            _ = try? DNSMessage(bytes: bytes)
        }
    }
}
