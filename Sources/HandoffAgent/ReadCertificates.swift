import Crypto
import Foundation
import Synchronization
import X509

/// Certificates a link's opening has already read, by their DER bytes. Each opening reads the
/// other side's shown certificate (in the TLS handshake) and a member's long-term certificate
/// (in the membership proof), and the same ones come again on every link to that device until
/// its shown certificate is renewed: reading one with swift-certificates and making its key
/// cost about a tenth of a millisecond each time (docs/agent.md, Performance). What is kept is
/// what the checks use, the validity period and the P-256 key, and the checks themselves run
/// at every use. At most 64 are kept; the table starts again when full.
enum ReadCertificates {
    struct Read: Sendable {
        var notValidBefore: Date
        var notValidAfter: Date
        /// Nil when the certificate's key is not P-256.
        var key: P256.Signing.PublicKey?

        func isValid(now: Date) -> Bool { notValidBefore <= now && now <= notValidAfter }
    }

    static let capacity = 64
    private static let table = Mutex<[[UInt8]: Read]>([:])

    /// The certificate `der`, read once; nil when it is not one.
    static func read(_ der: [UInt8]) -> Read? {
        if let known = table.withLock({ $0[der] }) { return known }
        guard let certificate = try? Certificate(derEncoded: der) else { return nil }
        let read = Read(
            notValidBefore: certificate.notValidBefore, notValidAfter: certificate.notValidAfter, key: P256.Signing.PublicKey(certificate.publicKey))
        table.withLock { table in
            if table.count >= capacity { table.removeAll(keepingCapacity: true) }
            table[der] = read
        }
        return read
    }

    /// How many are kept now (for tests).
    static var count: Int { table.withLock { $0.count } }
}
