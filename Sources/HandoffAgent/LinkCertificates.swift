import Crypto
import Foundation
import SwiftASN1
import Synchronization
import X509

/// The certificates of a device's TLS handshakes (links and pairing).
///
/// A device never shows its long-term certificate (which names it, and whose key is its
/// identity in the account) in a handshake: anyone can start one, and an active prober would
/// learn a stable identifier that undoes the rotating DNS-SD names. It shows instead a
/// certificate made on the device for a period: a fresh key, a random serial number, random
/// validity bounds, the subject `CN=Handoff` that every device uses, and a signature by its
/// long-term key. A stranger sees nothing that names the device or stays the same from one
/// period to the next; a member checks the signature against the long-term certificates it
/// knows, and so learns which member it is talking to. The shown certificate is renewed with
/// the DNS-SD names, and at the latest after `lifetime`.
///
/// It also holds the long-term certificates this device recognises as signers (members, and
/// former members: recognising is not accepting; the pins decide who is accepted).
public final class LinkCertificates: Sendable {
    /// What a handshake shows: the certificate (DER) and its key.
    public struct Shown: Sendable {
        public let certificateDER: [UInt8]
        public let privateKey: P256.Signing.PrivateKey
        let made: ContinuousClock.Instant
    }

    /// The subject and issuer of every shown certificate, the same on every device.
    static let commonName = "Handoff"
    /// The most long-term certificates recognised; the oldest are let go past it.
    static let recognisedCapacity = 256

    private let signer: P256.Signing.PrivateKey
    private let shown = Mutex<Shown?>(nil)
    private let recognised = Mutex<[[UInt8]]>([])
    private let lifetimeStorage: Mutex<Duration>

    /// How long one shown certificate is used at most.
    public var lifetime: Duration {
        get { lifetimeStorage.withLock { $0 } }
        set { lifetimeStorage.withLock { $0 = newValue } }
    }

    init(signer: P256.Signing.PrivateKey, lifetime: Duration = .seconds(15 * 60)) {
        self.signer = signer
        self.lifetimeStorage = Mutex(lifetime)
    }

    /// The certificate to show now, made anew when the last one is older than `lifetime`.
    public func current(now: ContinuousClock.Instant = .now) -> Shown {
        let lifetime = self.lifetime
        return shown.withLock { shown in
            if let existing = shown, now - existing.made < lifetime { return existing }
            let made = Self.make(signedBy: signer, made: now)
            shown = made
            return made
        }
    }

    /// Shows a new certificate from the next handshake on (the DNS-SD names were renewed).
    public func renew() {
        shown.withLock { $0 = nil }
    }

    /// Recognises `certificates` (long-term, DER) as signers from now on.
    public func recognise(_ certificates: [[UInt8]]) {
        recognised.withLock { recognised in
            for certificate in certificates where !recognised.contains(certificate) {
                recognised.append(certificate)
            }
            if recognised.count > Self.recognisedCapacity { recognised.removeFirst(recognised.count - Self.recognisedCapacity) }
        }
    }

    /// The long-term certificate (DER) behind `presented`: a recognised certificate whose key
    /// signed it, or nil.
    public func signer(of presented: Certificate) -> [UInt8]? {
        let candidates = recognised.withLock { $0 }
        return candidates.first { Self.isSigned(presented, by: $0) }
    }

    /// Whether the key of `longTerm` (DER) signed `presented`, a shown certificate.
    public static func isSigned(_ presented: Certificate, by longTerm: [UInt8]) -> Bool {
        guard let signer = try? Certificate(derEncoded: longTerm) else { return false }
        return signer.publicKey.isValidSignature(presented.signature, for: presented)
    }

    static func make(signedBy signer: P256.Signing.PrivateKey, made: ContinuousClock.Instant, now: Date = Date()) -> Shown {
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
                issuerPrivateKey: .init(signer))
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Shown(certificateDER: serializer.serializedBytes, privateKey: key, made: made)
        } catch {
            preconditionFailure("a certificate of fixed fields and a fresh P-256 key is made and serialized: \(error)")
        }
    }
}
