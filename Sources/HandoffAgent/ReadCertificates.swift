import Crypto
import Foundation
import Synchronization
import X509

/// Certificates a link's opening has already read, by their DER bytes. Each opening reads the
/// other side's shown certificate (in the TLS handshake) and a member's long-term certificate
/// (in the membership proof), and the same ones come again on every link to that device until
/// its shown certificate is renewed: reading one with swift-certificates and making its key
/// cost about a tenth of a millisecond each time (docs/agent.md, Performance). What is kept is
/// what the checks use, the validity period and the P-256 key; the checks themselves run at
/// every use.
///
/// Two tables, so that strangers cannot push members out: anyone who starts a handshake can
/// have a shown certificate read, but only a proof that opened with an account key has its
/// long-term certificate read. Each keeps at most 64, and starts again when full; a
/// certificate over 2 KB (a handshake may carry 100 KB; ours are a few hundred bytes) is read
/// each time and never kept.
final class ReadCertificates: Sendable {
    struct Read: Sendable {
        var notValidBefore: Date
        var notValidAfter: Date
        /// Nil when the certificate's key is not P-256.
        var key: P256.Signing.PublicKey?

        func isValid(now: Date) -> Bool { LinkTLS.isValid(from: notValidBefore, until: notValidAfter, now: now) }
    }

    /// Certificates shown in TLS handshakes.
    static let shown = ReadCertificates()
    /// Members' long-term certificates, from proofs that opened.
    static let members = ReadCertificates()

    let capacity: Int
    let largestKept: Int
    private let table = Mutex<[[UInt8]: Read]>([:])

    init(capacity: Int = 64, largestKept: Int = 2048) {
        self.capacity = capacity
        self.largestKept = largestKept
    }

    /// The certificate `der`, read once; nil when it is not one.
    func read(_ der: [UInt8]) -> Read? {
        let kept = der.count <= largestKept
        if kept, let known = table.withLock({ $0[der] }) { return known }
        guard let certificate = try? Certificate(derEncoded: der) else { return nil }
        let read = Read(
            notValidBefore: certificate.notValidBefore, notValidAfter: certificate.notValidAfter, key: P256.Signing.PublicKey(certificate.publicKey))
        if kept {
            table.withLock { table in
                if table.count >= capacity { table.removeAll(keepingCapacity: true) }
                table[der] = read
            }
        }
        return read
    }

    /// How many are kept now, and whether `der` is (for tests).
    var count: Int { table.withLock { $0.count } }
    func keeps(_ der: [UInt8]) -> Bool { table.withLock { $0[der] != nil } }
}
