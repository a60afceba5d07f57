import Foundation
import HandoffTesting
import NIOSSL
import Testing

@testable import HandoffAgent

/// The TLS contexts links are made with: each connection's own, made ahead.
@Suite("Link TLS contexts")
struct LinkContextTests {
    /// The context `links` made ahead, once it has one.
    func ahead(_ links: LinkCertificates) async throws -> NIOSSLContext {
        #expect(await eventually { links.contextAhead != nil }, "no context was made ahead")
        return try #require(links.contextAhead)
    }

    @Test("Every handshake has a context no other had; the one made ahead is taken once, and the next is made after it")
    func oneContextPerHandshake() async throws {
        let links = LinkCertificates()
        let shown = links.current()
        #expect(links.contextAhead == nil, "nothing is made before it is asked for")
        links.makeContextAhead(after: .zero)
        // Kept, so that no address is reused for a later one.
        var seen: [NIOSSLContext] = []
        for _ in 0..<4 {
            let made = try await ahead(links)
            let taken = try links.context(for: shown)
            #expect(taken === made, "the context made ahead is used")
            #expect(links.contextAhead !== taken, "and is not kept for another handshake")
            seen.append(taken)
        }
        // Taken back to back, before the next is made: a context of its own each time.
        let one = try links.context(for: shown), two = try links.context(for: shown)
        seen += [one, two]
        #expect(Set(seen.map(ObjectIdentifier.init)).count == seen.count, "a context served two handshakes")
    }

    @Test("A context made ahead for a certificate that was since renewed is not used")
    func renewedCertificate() async throws {
        let links = LinkCertificates()
        _ = links.current()
        links.makeContextAhead(after: .zero)
        let old = try await ahead(links)
        links.renew()
        let shown = links.current()
        let taken = try links.context(for: shown)
        #expect(taken !== old)
        // The next one made ahead shows the renewed certificate, and is used.
        #expect(await eventually { links.contextAhead != nil && links.contextAhead !== old })
        let next = try #require(links.contextAhead)
        #expect(next !== old)
        #expect(try links.context(for: shown) === next)
    }

    @Test("A copy that seals with retired keys makes nothing ahead: it serves one link")
    func copiesMakeNothingAhead() async throws {
        let copy = LinkCertificates().sealingWithRetiredKeys()
        _ = try copy.context(for: copy.current())
        copy.makeContextAhead(after: .zero)
        // Nothing to wait for: longer than a context made at once takes (a few milliseconds).
        try await Task.sleep(for: .milliseconds(300))
        #expect(copy.contextAhead == nil)
    }
}
