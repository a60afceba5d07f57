import Crypto
import Synchronization

/// Membership-proof signatures this process has made, and those it has checked, by what they
/// cover. What a proof signs is its role and the link's two shown certificates
/// (`LinkProof.transcript`), so a link opened again between the same two devices, before either
/// renews its shown certificate (15 minutes at most), signs exactly what the last one signed:
/// the signature made for that one serves again, and one checked before is valid again, byte for
/// byte. Opening a link waits on four of them in turn (B signs, A checks and signs, B checks),
/// each 0.1 to 0.3 ms on the cold caches of a link that opens after quiet.
///
/// Nothing else of a proof is reused: each box is sealed anew with fresh nonces and filler, and
/// every opening still opens a box with an account key, reads the member's certificate, checks
/// it is valid at that moment and pinned. A check is kept only for a proof that opened with an
/// account key, so strangers cannot fill the table; each table keeps at most `capacity` and
/// starts again when full.
final class ProofSignatures: Sendable {
    static let shared = ProofSignatures()

    let capacity: Int
    private let made = Mutex<[SHA256Digest: [UInt8]]>([:])
    private let checked = Mutex<Set<SHA256Digest>>([])

    init(capacity: Int = 64) {
        self.capacity = capacity
    }

    /// A signature by `key` over `transcript`: the one made before for the same signer (named
    /// by `signer`, its long-term certificate's fingerprint) and transcript, else a new one.
    func signature(by key: P256.Signing.PrivateKey, signer: String, over transcript: [UInt8]) -> [UInt8] {
        var hash = SHA256()
        hash.update(data: Array(signer.utf8))
        hash.update(data: [0])
        hash.update(data: transcript)
        let name = hash.finalize()
        if let known = made.withLock({ $0[name] }) { return known }
        let signature: [UInt8]
        do {
            signature = Array(try key.signature(for: transcript).rawRepresentation)
        } catch {
            preconditionFailure("a P-256 key signs a short message: \(error)")
        }
        made.withLock { made in
            if made.count >= capacity { made.removeAll(keepingCapacity: true) }
            made[name] = signature
        }
        return signature
    }

    /// Whether `signature` is `key`'s over `transcript`: checked once for the same certificate
    /// (whose key `key` is), signature and transcript, and then known.
    func isValid(_ signature: ArraySlice<UInt8>, certificate: [UInt8], key: P256.Signing.PublicKey, over transcript: [UInt8]) -> Bool {
        var hash = SHA256()
        for part in [certificate, Array(signature), transcript] {
            hash.update(data: [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: part.count >> $0) })
            hash.update(data: part)
        }
        let name = hash.finalize()
        if checked.withLock({ $0.contains(name) }) { return true }
        guard let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature), key.isValidSignature(parsed, for: transcript) else {
            return false
        }
        checked.withLock { checked in
            if checked.count >= capacity { checked.removeAll(keepingCapacity: true) }
            checked.insert(name)
        }
        return true
    }

    /// How many of each are kept now (for tests).
    var counts: (made: Int, checked: Int) { (made.withLock { $0.count }, checked.withLock { $0.count }) }
}
