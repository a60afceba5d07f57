import Crypto
import Foundation
import HandoffWire
import SwiftASN1
import X509

/// A device's own identity in its account: a P-256 key made on the device, and a certificate
/// for it that the other members pin. The private key never leaves `device.json`, which only
/// the owner can read.
package struct DeviceIdentity: Sendable {
    package let id: UUID
    package let name: String
    package let privateKey: P256.Signing.PrivateKey
    package let certificate: Certificate
    /// What this device shows in handshakes instead of `certificate`, and the account keys its
    /// links prove membership with (`LinkCertificates`). Copies of an identity share it.
    package let links: LinkCertificates
    /// SHA-256 of the certificate, in hex: what a member pins and a person can compare. Made
    /// once: every local client's `hello` is answered with it.
    package let fingerprint: String

    package static let fileName = "device.json"

    package init(id: UUID, name: String, privateKey: P256.Signing.PrivateKey, certificate: Certificate, links: LinkCertificates? = nil) {
        self.id = id
        self.name = name
        self.privateKey = privateKey
        self.certificate = certificate
        self.links = links ?? LinkCertificates()
        self.fingerprint = Self.fingerprint(ofCertificate: Self.der(certificate))
    }

    /// The same identity showing a certificate of its own in handshakes, the same for as long
    /// as it is used (the pairing listener's, pinned by the codes it hands out), and holding no
    /// account keys.
    package func showingOwnCertificates() -> DeviceIdentity {
        DeviceIdentity(id: id, name: name, privateKey: privateKey, certificate: certificate, links: LinkCertificates(lifetime: .seconds(86_400 * 365)))
    }

    /// The same identity showing its long-term certificate in handshakes, holding no account
    /// keys: a device joining an account, on the link to the pairing listener its invitation
    /// pins. TLS 1.3 sends a client's certificate only once the server's is accepted, so no one
    /// else is shown it; and the inviting device sees that the certificate in the request is
    /// the one whose key made the handshake.
    package func showingLongTermCertificate() -> DeviceIdentity {
        DeviceIdentity(id: id, name: name, privateKey: privateKey, certificate: certificate, links: LinkCertificates(showing: certificateDER, key: privateKey))
    }

    /// The same identity, its links sealing membership proofs with the account's retired keys
    /// too (`LinkCertificates.sealingWithRetiredKeys`).
    package func sealingWithRetiredKeys() -> DeviceIdentity {
        DeviceIdentity(id: id, name: name, privateKey: privateKey, certificate: certificate, links: links.sealingWithRetiredKeys())
    }

    /// Makes a new identity: a fresh key and a self-signed certificate naming the device.
    package static func generate(id: UUID = UUID(), name: String, now: Date = Date(), validFor: TimeInterval = 10 * 365 * 86_400) throws -> DeviceIdentity {
        let key = P256.Signing.PrivateKey()
        let subject = try DistinguishedName {
            CommonName(name)
            OrganizationalUnitName(id.uuidString)
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(validFor),
            issuer: subject,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
            },
            issuerPrivateKey: .init(key))
        return DeviceIdentity(id: id, name: name, privateKey: key, certificate: certificate)
    }

    /// The certificate in DER, as members store and pin it.
    package var certificateDER: [UInt8] { Self.der(certificate) }

    private static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        do {
            try serializer.serialize(certificate)
        } catch {
            preconditionFailure("a certificate made or parsed by swift-certificates serializes: \(error)")
        }
        return serializer.serializedBytes
    }

    package static func fingerprint(ofCertificate der: [UInt8]) -> String {
        Hex.lowercase(SHA256.hash(data: der))
    }

    private struct Stored: Codable {
        var id: UUID
        var name: String
        /// PKCS#8 PEM.
        var privateKey: String
        /// PEM.
        var certificate: String
    }

    /// Saves the identity, owner-only, atomically.
    package func save(to store: StateStore) throws(StateError) {
        let pem: String
        do {
            pem = try certificate.serializeAsPEM().pemString
        } catch {
            throw .unwritable(path: store.url(Self.fileName).path, reason: "the certificate could not be encoded: \(error)")
        }
        try store.save(Stored(id: id, name: name, privateKey: privateKey.pemRepresentation, certificate: pem), to: Self.fileName)
    }

    /// Loads the identity, or nil if this device has none yet. A damaged file is named.
    package static func load(from store: StateStore) throws(StateError) -> DeviceIdentity? {
        guard let stored = try store.load(Stored.self, from: fileName) else { return nil }
        let path = store.url(fileName).path
        let key: P256.Signing.PrivateKey
        let certificate: Certificate
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: stored.privateKey)
        } catch {
            throw .corrupt(path: path, reason: "privateKey is not a P-256 key in PEM")
        }
        do {
            certificate = try Certificate(pemEncoded: stored.certificate)
        } catch {
            throw .corrupt(path: path, reason: "certificate is not a PEM certificate")
        }
        guard certificate.publicKey == Certificate.PublicKey(key.publicKey) else {
            throw .corrupt(path: path, reason: "the certificate is not for this device's key")
        }
        return DeviceIdentity(id: stored.id, name: stored.name, privateKey: key, certificate: certificate)
    }
}
