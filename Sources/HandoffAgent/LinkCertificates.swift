import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import Synchronization
import X509

/// What a device shows in its TLS handshakes (links and pairing), and the account keys its
/// links prove membership with.
///
/// A device never shows its long-term certificate (which names it, and whose key is its
/// identity in the account) in a handshake, nor anything its long-term key signed: anyone can
/// start a handshake, and an active prober would learn a stable identifier that undoes the
/// rotating DNS-SD names (an ECDSA signature gives away the public key that made it). It
/// shows instead a certificate made on the device for a period: a fresh key that signs its own
/// certificate, a random serial number, random validity bounds and the subject `CN=Handoff`
/// that every device uses. The shown certificate is renewed with the DNS-SD names, and at the
/// latest after `lifetime`.
///
/// Who is at the other end of a link is learned inside it, once TLS is up: each side proves it
/// holds a member's long-term key (`LinkProof`), sealed with the account's keys, which this
/// object also holds; the side that connected proves first, so a stranger never sees the
/// answering device's proof.
package final class LinkCertificates: Sendable {
    /// What a handshake shows: the certificate (DER) and its key.
    package struct Shown: Sendable {
        package let certificateDER: [UInt8]
        package let privateKey: P256.Signing.PrivateKey
        let made: ContinuousClock.Instant
        /// The certificate and key as TLS takes them, parsed once for every handshake of the
        /// period (each link makes a TLS context of its own from them).
        let tls: Result<TLSMaterial, LinkError>

        init(certificateDER: [UInt8], privateKey: P256.Signing.PrivateKey, made: ContinuousClock.Instant) {
            self.certificateDER = certificateDER
            self.privateKey = privateKey
            self.made = made
            do {
                tls = .success(
                    TLSMaterial(
                        certificate: try NIOSSLCertificate(bytes: certificateDER, format: .der),
                        key: try NIOSSLPrivateKey(bytes: Array(privateKey.derRepresentation), format: .der)))
            } catch {
                tls = .failure(LinkError.badIdentity("\(error)"))
            }
        }
    }

    /// A shown certificate and its key, parsed for TLS.
    struct TLSMaterial: Sendable {
        let certificate: NIOSSLCertificate
        let key: NIOSSLPrivateKey
    }

    /// The subject and issuer of every shown certificate, the same on every device.
    static let commonName = "Handoff"

    private let shown = Mutex<Shown?>(nil)
    /// What is shown instead of certificates made for a period (`init(showing:)`).
    private let fixed: Shown?
    private let lifetimeStorage: Mutex<Duration>
    private let keys = Mutex(Keys())

    /// The account keys, and the key each seals proofs with (`LinkProof.sealingKey`), derived
    /// once as they are set and dropped with them: a link's opening derived four, 30–70 µs each
    /// on cold caches, on its path.
    private struct Keys {
        private(set) var current: [SymmetricKey] = []
        private(set) var retired: [SymmetricKey] = []
        private var sealing: [(account: SymmetricKey, sealing: SymmetricKey)] = []

        init() {}

        init(current: [SymmetricKey], retired: [SymmetricKey]) {
            self.current = current
            self.retired = retired
            sealing = (current + retired).map { ($0, LinkProof.sealingKey($0)) }
        }

        func sealingKey(for key: SymmetricKey) -> SymmetricKey? {
            sealing.first { $0.account == key }?.sealing
        }

        var keptSealingKeys: Int { sealing.count }
    }
    /// The TLS context made ahead for the next handshake, with the certificate it shows.
    private let spare = Mutex<(certificate: [UInt8], context: NIOSSLContext)?>(nil)
    private let makingSpare = Atomic<Bool>(false)
    private let madeAhead = Atomic<Int>(0)

    /// How many of this device's connecting proofs were made while their handshake was under
    /// way (`LinkProofHandler`), and used.
    package var proofsMadeAhead: Int { madeAhead.load(ordering: .relaxed) }
    func countProofMadeAhead() { madeAhead.add(1, ordering: .relaxed) }

    /// How long one shown certificate is used at most.
    package var lifetime: Duration {
        get { lifetimeStorage.withLock { $0 } }
        set { lifetimeStorage.withLock { $0 = newValue } }
    }

    /// Whether proofs are sealed with the retired keys too (`sealingWithRetiredKeys()`): such a
    /// link's proof never carries early frames, which a removed device holding a retired key
    /// could read.
    let sealsWithRetiredKeys: Bool

    init(lifetime: Duration = .seconds(15 * 60), sealsWithRetiredKeys: Bool = false) {
        self.lifetimeStorage = Mutex(lifetime)
        self.fixed = nil
        self.sealsWithRetiredKeys = sealsWithRetiredKeys
    }

    /// Shows `certificate` (DER) with `key` in every handshake.
    init(showing certificate: [UInt8], key: P256.Signing.PrivateKey) {
        self.lifetimeStorage = Mutex(.seconds(0))
        self.fixed = Shown(certificateDER: certificate, privateKey: key, made: .now)
        self.sealsWithRetiredKeys = false
    }

    /// The certificate to show now, made anew when the last one is older than `lifetime`.
    package func current(now: ContinuousClock.Instant = .now) -> Shown {
        if let fixed { return fixed }
        let lifetime = self.lifetime
        return shown.withLock { shown in
            if let existing = shown, now - existing.made < lifetime { return existing }
            let made = Self.make(made: now)
            shown = made
            return made
        }
    }

    /// Shows a new certificate from the next handshake on (the DNS-SD names were renewed).
    package func renew() {
        shown.withLock { $0 = nil }
        if spare.withLock({ $0 != nil }) { makeContextAhead() }
    }

    /// A TLS context for one handshake that shows `shown`, never used for another: a context
    /// keeps the keys of the session tickets it issues (and a cache of sessions), and a resumed
    /// session skips the certificate check, so no two connections share one (`LinkTLS`). It is
    /// the one made ahead when that shows `shown`, and taking it has the next one made off the
    /// event loops, a little later: making one (0.05 to 0.3 ms; NIOSSL advises against making
    /// them on an event loop) is then no part of a link's opening.
    func context(for shown: Shown) throws -> NIOSSLContext {
        let ahead = spare.withLock { spare -> NIOSSLContext? in
            defer { spare = nil }
            return spare.flatMap { $0.certificate == shown.certificateDER ? $0.context : nil }
        }
        makeContextAhead()
        return try ahead ?? LinkTLS.context(showing: shown)
    }

    /// Makes a context for the next handshake after `delay`, on a task of its own, unless one
    /// is being made; none for a copy that seals with retired keys, which lives for one link.
    func makeContextAhead(after delay: Duration = .milliseconds(200)) {
        guard !sealsWithRetiredKeys, !makingSpare.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Needs no owner: it ends within `delay` and one context's making, and holds only this
        // object, which it keeps alive that long.
        Task.detached(priority: .utility) { [self] in
            // After the handshake that took the last one, so as not to compete with it.
            if delay > .zero { try? await Task.sleep(for: delay) }
            let shown = current()
            if spare.withLock({ $0?.certificate != shown.certificateDER }), let context = try? LinkTLS.context(showing: shown) {
                spare.withLock { $0 = (shown.certificateDER, context) }
            }
            makingSpare.store(false, ordering: .releasing)
        }
    }

    /// The context made ahead, if there is one (for tests).
    var contextAhead: NIOSSLContext? { spare.withLock { $0?.context } }

    /// The account keys membership proofs are sealed with: the account's current beacon keys.
    /// No keys, no account: every link that proves membership is refused.
    package var accountKeys: [SymmetricKey] {
        get { keys.withLock { $0.current } }
        set { keys.withLock { $0 = Keys(current: newValue, retired: $0.retired) } }
    }

    /// Keys that only open proofs: the account's retired beacon keys, all that a member that
    /// was away (or a device removed while away) still seals with.
    package var retiredKeys: [SymmetricKey] {
        get { keys.withLock { $0.retired } }
        set { keys.withLock { $0 = Keys(current: $0.current, retired: newValue) } }
    }

    /// The key that `key` (an account key) seals proofs with: kept with this object's keys,
    /// derived now for any other.
    func sealingKey(for key: SymmetricKey) -> SymmetricKey {
        keys.withLock { $0.sealingKey(for: key) } ?? LinkProof.sealingKey(key)
    }

    /// How many derived sealing keys are kept (for tests): one per account key held.
    var keptSealingKeys: Int { keys.withLock { $0.keptSealingKeys } }

    /// Uses the raw keys (32 bytes each; others are skipped) as the account's.
    package func useAccountKeys(_ current: [[UInt8]], retired: [[UInt8]] = []) {
        let keys = { (raw: [[UInt8]]) in raw.filter { $0.count == 32 }.map { SymmetricKey(data: $0) } }
        let made = Keys(current: keys(current), retired: keys(retired))
        self.keys.withLock { $0 = made }
    }

    /// A copy that shows its own certificates and seals its proofs with the retired keys too:
    /// for a link to a device that may hold only those (catching up a member that was away,
    /// telling a device removed while away). Ordinary links never seal with retired keys, so a
    /// removed device that draws a member's connection learns nothing from it.
    func sealingWithRetiredKeys() -> LinkCertificates {
        let copy = LinkCertificates(lifetime: lifetime, sealsWithRetiredKeys: true)
        let (current, retired) = keys.withLock { ($0.current, $0.retired) }
        let made = Keys(current: current + retired, retired: [])
        copy.keys.withLock { $0 = made }
        return copy
    }

    static func make(made: ContinuousClock.Instant, now: Date = Date()) -> Shown {
        let key = P256.Signing.PrivateKey()
        // Random bounds: a certificate's dates say nothing of when the device made it.
        let notBefore = now.addingTimeInterval(-Double.random(in: 3_600...86_400))
        do {
            let name = try DistinguishedName { CommonName(commonName) }
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: .init(key.publicKey),
                notValidBefore: notBefore,
                notValidAfter: notBefore.addingTimeInterval(4 * 86_400),
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    try ExtendedKeyUsage([.serverAuth, .clientAuth])
                },
                // Signed by its own fresh key: the signature gives away only that key.
                issuerPrivateKey: .init(key))
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Shown(certificateDER: serializer.serializedBytes, privateKey: key, made: made)
        } catch {
            preconditionFailure("a certificate of fixed fields and a fresh P-256 key is made and serialized: \(error)")
        }
    }
}
