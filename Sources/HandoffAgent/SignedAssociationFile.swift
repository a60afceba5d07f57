import Crypto
import Foundation
import HandoffWire
import SwiftASN1
import X509

/// A signed association file (the 2014 form): CMS signed data (RFC 5652) with the JSON
/// attached, as `openssl smime -sign -nodetach -outform DER` writes it. Verified here rather
/// than with swift-certificates' CMS, which refuses the `NULL` digest parameters OpenSSL writes.
package enum SignedAssociationFile {
    static let signedDataType = try! ASN1ObjectIdentifier(dotRepresentation: "1.2.840.113549.1.7.2")
    static let dataType = try! ASN1ObjectIdentifier(dotRepresentation: "1.2.840.113549.1.7.1")
    static let messageDigest = try! ASN1ObjectIdentifier(dotRepresentation: "1.2.840.113549.1.9.4")
    /// The most certificates a signed file may carry: its signer and a few intermediates.
    static let maximumCertificates = 6

    /// Whether the bytes are the signed form: DER, a SEQUENCE, where JSON starts with `{`
    /// (after white space, or a byte-order mark the JSON reader then refuses).
    static func looksSigned(_ bytes: [UInt8]) -> Bool {
        bytes.first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } == 0x30
    }

    package enum Digest {
        /// SHA-1 is what sites signed with when Apple introduced signed files (2014), and Apple
        /// accepts it there: the certificate, not the digest, decides whom the file is from.
        case sha1, sha256, sha384, sha512

        init?(_ oid: ASN1ObjectIdentifier) {
            switch oid.description {
            case "1.3.14.3.2.26": self = .sha1
            case "2.16.840.1.101.3.4.2.1": self = .sha256
            case "2.16.840.1.101.3.4.2.2": self = .sha384
            case "2.16.840.1.101.3.4.2.3": self = .sha512
            default: return nil
            }
        }

        func hash(_ bytes: some DataProtocol) -> [UInt8] {
            switch self {
            case .sha1: return Array(Insecure.SHA1.hash(data: bytes))
            case .sha256: return Array(SHA256.hash(data: bytes))
            case .sha384: return Array(SHA384.hash(data: bytes))
            case .sha512: return Array(SHA512.hash(data: bytes))
            }
        }

        /// The signature algorithms a signer with this digest may have used.
        var algorithms: [Certificate.SignatureAlgorithm] {
            switch self {
            case .sha1: return [.sha1WithRSAEncryption]
            case .sha256: return [.ecdsaWithSHA256, .sha256WithRSAEncryption]
            case .sha384: return [.ecdsaWithSHA384, .sha384WithRSAEncryption]
            case .sha512: return [.ecdsaWithSHA512, .sha512WithRSAEncryption]
            }
        }
    }

    /// Whether `signature` over `bytes` verifies with `certificate`'s key for this digest. ECDSA
    /// with SHA-1, which swift-certificates does not name, is checked on the digest itself.
    static func verifies(_ signature: [UInt8], over bytes: [UInt8], by certificate: Certificate, digest: Digest) -> Bool {
        if digest.algorithms.contains(where: { certificate.publicKey.isValidSignature(signature, for: bytes, signatureAlgorithm: $0) }) {
            return true
        }
        guard digest == .sha1, let ecdsa = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
        let hashed = Insecure.SHA1.hash(data: bytes)
        if let key = P256.Signing.PublicKey(certificate.publicKey) { return key.isValidSignature(ecdsa, for: hashed) }
        return false
    }

    /// The JSON of a signed file whose one signature verifies with a certificate in it that is
    /// valid now, for `host`, and chains (through the file's other certificates) to `roots`.
    /// A refusal says which of these failed: a broken signature, an expired (or not yet valid)
    /// certificate, a certificate for another host, or one no trusted authority issued.
    static func verify(_ bytes: [UInt8], host: String, roots: CertificateStore, now: Date = Date()) async throws(SiteAssociationError) -> [UInt8] {
        let parsed: (content: [UInt8], certificates: [Certificate], digest: Digest, signedBytes: [UInt8], signature: [UInt8])
        do {
            parsed = try parse(bytes)
        } catch let error as SiteAssociationError {
            throw error
        } catch {
            throw SiteAssociationError(
                "the signed file cannot be read: it is not DER CMS signed data with the JSON attached (as 'openssl smime -sign -nodetach -outform DER' writes)")
        }
        guard let signer = parsed.certificates.first(where: { verifies(parsed.signature, over: parsed.signedBytes, by: $0, digest: parsed.digest) }) else {
            throw SiteAssociationError(
                "the file's signature does not verify with any certificate in it: the JSON was changed after signing, or the signature is not of this content")
        }
        let who = "the file's signer, \(signer.subject)"
        if now > signer.notValidAfter {
            throw SiteAssociationError("\(who), has a certificate that expired on \(Self.day(signer.notValidAfter)); sign the file again with a current certificate")
        }
        if now < signer.notValidBefore {
            throw SiteAssociationError("\(who), has a certificate that is not valid until \(Self.day(signer.notValidBefore))")
        }
        let names = ((try? signer.extensions.subjectAlternativeNames) ?? nil)?.compactMap { name -> String? in
            if case .dnsName(let dns) = name { return dns }
            return nil
        } ?? []
        guard names.contains(where: { Self.name($0, covers: host) }) else {
            let named = names.isEmpty ? "names no host" : "is for \(names.joined(separator: ", "))"
            throw SiteAssociationError("\(who), has a certificate that \(named), not \(host)")
        }
        var verifier = Verifier(rootCertificates: roots) {
            RFC5280Policy()
            ServerIdentityPolicy(serverHostname: host, serverIP: nil)
        }
        let result = await verifier.validate(leaf: signer, intermediates: CertificateStore(parsed.certificates))
        guard case .validCertificate = result else {
            throw SiteAssociationError(
                "\(who), has a certificate issued by \(signer.issuer), which does not lead to a certificate authority this device trusts (a private authority is added with --association-ca)")
        }
        return parsed.content
    }

    /// Whether a certificate's DNS name covers `host`: the same, ignoring case, or `*.` for
    /// one label, as TLS compares them.
    static func name(_ name: String, covers host: String) -> Bool {
        let name = name.lowercased()
        let host = host.lowercased()
        if name.hasPrefix("*.") {
            guard let dot = host.firstIndex(of: ".") else { return false }
            return host[dot...] == name.dropFirst()
        }
        return name == host
    }

    private static func day(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: date)
    }

    package static func parse(_ bytes: [UInt8]) throws -> (content: [UInt8], certificates: [Certificate], digest: Digest, signedBytes: [UInt8], signature: [UInt8]) {
        func children(_ node: ASN1Node) throws -> [ASN1Node] {
            guard case .constructed(let nodes) = node.content else { throw SiteAssociationError("not CMS signed data") }
            return Array(nodes)
        }
        let contentInfo = try children(try BER.parse(bytes))
        guard contentInfo.count == 2, try ASN1ObjectIdentifier(berEncoded: contentInfo[0]) == signedDataType,
            let signedData = try children(contentInfo[1]).first
        else { throw SiteAssociationError("the signed file is not CMS signed data") }
        let fields = try children(signedData)
        guard fields.count >= 4 else { throw SiteAssociationError("the signed file's signed data is incomplete") }

        let encapsulated = try children(fields[2])
        guard encapsulated.count == 2, try ASN1ObjectIdentifier(berEncoded: encapsulated[0]) == dataType,
            let octets = try children(encapsulated[1]).first
        else { throw SiteAssociationError("the signed file carries no JSON (a detached signature?)") }
        let content = Array(try ASN1OctetString(berEncoded: octets).bytes)

        var certificates: [Certificate] = []
        var signerInfos: [ASN1Node] = []
        for node in fields.dropFirst(3) {
            if node.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
                for certificate in try children(node) {
                    certificates.append(try Certificate(derEncoded: Array(certificate.encodedBytes)))
                }
            } else if node.identifier == .set {
                signerInfos = try children(node)
            }
        }
        guard signerInfos.count == 1 else { throw SiteAssociationError("the signed file has \(signerInfos.count) signatures, not one") }
        // A chain search tries orderings of the certificates given: a few, all different, or a
        // hostile file could keep the verifier busy for ever.
        guard certificates.count <= maximumCertificates else {
            throw SiteAssociationError("the signed file carries \(certificates.count) certificates, more than the \(maximumCertificates) a chain needs")
        }
        guard Set(certificates.map { "\($0.subject)|\($0.publicKey)" }).count == certificates.count else {
            throw SiteAssociationError("the signed file carries the same certificate subject and key twice")
        }
        let signer = try children(signerInfos[0])
        guard signer.count >= 5, let digestOID = try children(signer[2]).first,
            let digest = Digest(try ASN1ObjectIdentifier(berEncoded: digestOID))
        else { throw SiteAssociationError("the signed file's digest is not SHA-1, SHA-256, SHA-384 or SHA-512") }
        var index = 3
        var signedBytes = content
        if signer[index].identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            // Signed attributes: the signature covers them as a SET, and they carry the content's digest.
            let attributes = try children(signer[index])
            let digested = try attributes.compactMap { attribute -> [UInt8]? in
                let parts = try children(attribute)
                guard parts.count == 2, try ASN1ObjectIdentifier(berEncoded: parts[0]) == messageDigest, let value = try children(parts[1]).first else { return nil }
                return Array(try ASN1OctetString(berEncoded: value).bytes)
            }
            guard digested.count == 1, digested[0] == digest.hash(content) else {
                throw SiteAssociationError("the signed file's message digest does not match its JSON")
            }
            signedBytes = Array(signer[index].encodedBytes)
            signedBytes[0] = 0x31
            index += 1
        }
        guard signer.count > index + 1 else { throw SiteAssociationError("the signed file's signer info is incomplete") }
        let signature = Array(try ASN1OctetString(berEncoded: signer[index + 1]).bytes)
        return (content, certificates, digest, signedBytes, signature)
    }
}
