import Crypto
import Foundation
import HandoffLocalAPI
import SwiftASN1
import HandoffTesting
import Testing
import X509

@testable import HandoffAgent

/// S1 attacked as an active prober would: a stranger connects to a device's link port (and to
/// its pairing port while it invites) and keeps the certificate each handshake shows.
@Suite("S1: what a stranger's handshake learns", .serialized)
struct StrangerProbeTests {
    /// What a stranger's handshake with 127.0.0.1:`port` is shown: the certificate (DER) and
    /// the public keys recovered from its signature (x9.63), if it was shown one.
    struct Shown: Equatable {
        var certificate: [UInt8]
        var recoveredKeys: [[UInt8]]
    }

    static func probe(port: Int) async throws -> [UInt8]? {
        try await probeRecovering(port: port)?.certificate
    }

    static func probeRecovering(port: Int) async throws -> Shown? {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("tls_probe.py").path
        let (_, output) = try await runCommand(URL(fileURLWithPath: "/usr/bin/env"), ["python3", script, "127.0.0.1", "\(port)"])
        func bytes(_ line: Substring.SubSequence) -> [UInt8] {
            let hex = Array(line.utf8)
            return stride(from: 0, to: hex.count - 1, by: 2).compactMap { UInt8(String(decoding: hex[$0...$0 + 1], as: UTF8.self), radix: 16) }
        }
        let lines = output.split(separator: "\n")
        guard let line = lines.first(where: { $0.hasPrefix("CERT ") }) else { return nil }
        return Shown(certificate: bytes(line.dropFirst(5)), recoveredKeys: lines.filter { $0.hasPrefix("KEY ") }.map { bytes($0.dropFirst(4)) })
    }

    /// What a stranger learns of `identity` from `shown`: what its certificate holds
    /// (`identifying`), and whether the long-term key is recovered from its signature.
    static func identifying(_ shown: Shown, of identity: DeviceIdentity) -> [String] {
        let longTerm = Array(identity.privateKey.publicKey.x963Representation)
        return identifying(shown.certificate, of: identity) + (shown.recoveredKeys.contains(longTerm) ? ["its long-term public key, recovered from the signature"] : [])
    }

    /// What in `certificate` names `identity`: its name, its id (as text or bytes), its
    /// long-term certificate's fingerprint (as hex or bytes), or its long-term public key.
    static func identifying(_ certificate: [UInt8], of identity: DeviceIdentity) -> [String] {
        func contains(_ needle: [UInt8]) -> Bool {
            guard !needle.isEmpty, certificate.count >= needle.count else { return false }
            return (0...(certificate.count - needle.count)).contains { Array(certificate[$0..<$0 + needle.count]) == needle }
        }
        let uuid = withUnsafeBytes(of: identity.id.uuid) { Array($0) }
        let fingerprint = Array(SHA256.hash(data: identity.certificateDER))
        let publicKey = Array(identity.privateKey.publicKey.x963Representation)
        let candidates: [(String, [UInt8])] = [
            ("its name", Array(identity.name.utf8)), ("its id", Array(identity.id.uuidString.utf8)),
            ("its id in lower case", Array(identity.id.uuidString.lowercased().utf8)), ("its id's bytes", uuid),
            ("its fingerprint", Array(identity.fingerprint.utf8)), ("its fingerprint's bytes", fingerprint),
            ("its long-term public key", Array(publicKey.dropFirst().prefix(32))),
        ]
        return candidates.filter { contains($0.1) }.map(\.0)
    }

    /// Probes until `count` different certificates were shown (or `seconds` passed).
    static func certificates(shownBy port: Int, count: Int, within seconds: Double) async throws -> [Shown] {
        var seen: [Shown] = []
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while seen.count < count, ContinuousClock.now < deadline {
            if let shown = try await probeRecovering(port: port), !seen.contains(where: { $0.certificate == shown.certificate }) { seen.append(shown) }
            // Probes spaced as a stranger watching over time would space them.
            try await Task.sleep(for: .milliseconds(500))
        }
        return seen
    }

    /// No two certificates share a key, a serial number or validity bounds: nothing links one
    /// period's certificate to the next (what they share, every device's certificates share).
    static func unlinkable(_ certificates: [[UInt8]]) throws -> Bool {
        let parsed = try certificates.map { try Certificate(derEncoded: $0) }
        return Set(parsed.map(\.publicKey)).count == parsed.count && Set(parsed.map(\.serialNumber)).count == parsed.count
            && Set(parsed.map(\.notValidBefore)).count == parsed.count
    }

    @Test("S1: A stranger's handshakes with the link port across two rotations show nothing of the device's name, id or long-term key, and nothing that links them")
    func linkPort() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha-laptop") { $0.nameRotation = .seconds(5) }
            try await a.call(.createAccount(name: "home"))
            let port = try #require(await a.agent?.linkPort)
            let identity = try #require(await a.agent?.identity)
            let shown = try await Self.certificates(shownBy: port, count: 3, within: 30)
            #expect(shown.count == 3, "the certificate changed \(max(0, shown.count - 1)) times in two rotations")
            for certificate in shown {
                #expect(!certificate.recoveredKeys.isEmpty, "no key was recovered from the signature (is python3-cryptography installed?)")
                #expect(Self.identifying(certificate, of: identity).isEmpty, "a stranger was shown \(Self.identifying(certificate, of: identity))")
            }
            #expect(try Self.unlinkable(shown.map(\.certificate)), "certificates of different periods share a key, a serial number or a signature")
        }
    }

    @Test("S1: A stranger's handshake with the pairing port while the device invites shows nothing of the device, and each invitation shows another certificate")
    func pairingPort() async throws {
        try await withHarness { harness in
            let a = try await harness.start("alpha-laptop")
            try await a.call(.createAccount(name: "home"))
            let identity = try #require(await a.agent?.identity)
            var shown: [[UInt8]] = []
            for _ in 0..<2 {
                let invitation = try #require(try await a.call(.invite(token: true, host: nil, lifetime: 1)).invitation)
                let certificate = try #require(try await Self.probeRecovering(port: invitation.port), "the pairing port showed no certificate")
                #expect(!certificate.recoveredKeys.isEmpty, "no key was recovered from the signature (is python3-cryptography installed?)")
                #expect(Self.identifying(certificate, of: identity).isEmpty, "a stranger was shown \(Self.identifying(certificate, of: identity))")
                shown.append(certificate.certificate)
                // The invitation expires, and the pairing listener closes soon after.
                try #require(await eventually(within: .seconds(20)) { (try? await Self.probe(port: invitation.port)) == nil }, "the pairing listener stayed open")
            }
            #expect(try Self.unlinkable(shown), "two invitations showed linkable certificates")
        }
    }
}
