import Crypto
import HandoffWire
import Foundation
import X509

/// Why pairing failed; the message says what to do.
public struct PairingError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// An invitation to join the account, as the code a person carries from the inviting device
/// to the new one. It says where the inviting device waits (address and port of its pairing
/// listener), which certificate it has (a fingerprint, whole or its first bytes) and a
/// one-time secret. See `docs/wire-protocol.md`, Pairing.
public struct Invitation: Sendable, Hashable {
    public enum Kind: UInt8, Sendable {
        /// Typed by a person; the join waits for confirmation on the inviting device, and both
        /// screens show a verification number to compare.
        case interactive = 1
        /// For scripts: a long, high-entropy token; the join needs no prompt.
        case token = 2
    }

    public var kind: Kind
    public var host: String
    public var port: Int
    /// The inviting device's certificate fingerprint (SHA-256), or its first bytes.
    public var fingerprint: [UInt8]
    public var secret: [UInt8]

    /// Bytes of fingerprint and secret in each kind: 80 bits each in a code a person types, the
    /// full 256 in a token.
    static func sizes(_ kind: Kind) -> (fingerprint: Int, secret: Int) {
        kind == .interactive ? (10, 10) : (32, 32)
    }

    /// Makes an invitation with a fresh secret.
    public static func make(_ kind: Kind, host: String, port: Int, fingerprint hex: String) -> Invitation {
        let sizes = sizes(kind)
        let fingerprint = Array(Self.bytes(fromHex: hex).prefix(sizes.fingerprint))
        let secret = SystemRandom.bytes(sizes.secret)
        return Invitation(kind: kind, host: host, port: port, fingerprint: fingerprint, secret: secret)
    }

    /// The code: Crockford base32 of the fields and a 2-byte checksum, in groups of four.
    public var code: String {
        var bytes: [UInt8] = [kind.rawValue]
        if let v4 = IPv4(host) {
            bytes += [4] + v4
        } else {
            let name = Array(host.utf8.prefix(255))
            bytes += [0, UInt8(name.count)] + name
        }
        bytes += [UInt8(port >> 8), UInt8(port & 0xFF)]
        bytes += fingerprint + secret
        bytes += Array(SHA256.hash(data: bytes).prefix(2))
        let text = Base32.encode(bytes)
        return stride(from: 0, to: text.count, by: 4).map { start in
            let from = text.index(text.startIndex, offsetBy: start)
            return String(text[from..<(text.index(from, offsetBy: 4, limitedBy: text.endIndex) ?? text.endIndex)])
        }.joined(separator: "-")
    }

    /// Reads a code, forgiving case, spaces and dashes; a typo is told apart from a wrong code.
    public init(parsing code: String) throws(PairingError) {
        guard let bytes = Base32.decode(code.filter { $0 != "-" && !$0.isWhitespace }), bytes.count > 4 else {
            throw PairingError("'\(code)' is not an invitation code; copy it again from 'handoff device invite'")
        }
        let body = Array(bytes.dropLast(2))
        guard Array(SHA256.hash(data: body).prefix(2)) == Array(bytes.suffix(2)) else {
            throw PairingError("the invitation code has a typo (its checksum does not match); copy it again")
        }
        var reader = body[...]
        func take(_ count: Int) throws(PairingError) -> [UInt8] {
            guard reader.count >= count else { throw PairingError("the invitation code is too short; copy it again") }
            defer { reader = reader.dropFirst(count) }
            return Array(reader.prefix(count))
        }
        guard let kind = Kind(rawValue: try take(1)[0]) else {
            throw PairingError("the invitation code is of a kind this version does not know; update Handoff")
        }
        let host: String
        switch try take(1)[0] {
        case 4: host = try take(4).map(String.init).joined(separator: ".")
        case 0:
            let length = Int(try take(1)[0])
            guard let name = String(validating: try take(length), as: UTF8.self) else { throw PairingError("the invitation code's host is not text") }
            host = name
        default:
            throw PairingError("the invitation code's address is of an unknown kind; update Handoff")
        }
        let port = try take(2).reduce(0) { $0 << 8 | Int($1) }
        let sizes = Self.sizes(kind)
        fingerprint = try take(sizes.fingerprint)
        secret = try take(sizes.secret)
        guard reader.isEmpty else { throw PairingError("the invitation code is too long; copy it again") }
        self.kind = kind
        self.host = host
        self.port = port
    }

    public init(kind: Kind, host: String, port: Int, fingerprint: [UInt8], secret: [UInt8]) {
        self.kind = kind
        self.host = host
        self.port = port
        self.fingerprint = fingerprint
        self.secret = secret
    }

    /// Whether a certificate fingerprint (hex) is the inviting device's.
    public func matches(fingerprint hex: String) -> Bool {
        let full = Self.bytes(fromHex: hex)
        return full.count >= fingerprint.count && Array(full.prefix(fingerprint.count)) == fingerprint
    }

    /// What the joining device sends to show it holds the secret, bound to its certificate and
    /// name, so that neither can be swapped on the way.
    public func proof(certificate: [UInt8], name: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Self.context("join", certificate: certificate, name: name), using: SymmetricKey(data: secret)))
    }

    /// Checks a proof in constant time.
    public func isValid(proof: [UInt8], certificate: [UInt8], name: String) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(proof, authenticating: Self.context("join", certificate: certificate, name: name), using: SymmetricKey(data: secret))
    }

    /// The six digits both screens show for an interactive join, as "123 456".
    public func verificationNumber(certificate: [UInt8]) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Self.context("verify", certificate: certificate, name: ""), using: SymmetricKey(data: secret))
        let value = Array(code).prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % 1_000_000
        let digits = String(format: "%06u", value)
        return "\(digits.prefix(3)) \(digits.suffix(3))"
    }

    private static func context(_ purpose: String, certificate: [UInt8], name: String) -> [UInt8] {
        Array("handoff \(purpose) v1".utf8) + Array(SHA256.hash(data: certificate)) + Array(name.utf8)
    }

    private func IPv4(_ host: String) -> [UInt8]? {
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let bytes = parts.compactMap { UInt8($0) }
        return bytes.count == 4 && parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) }) ? bytes : nil
    }

    static func bytes(fromHex hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), index < hex.endIndex {
            guard let byte = UInt8(hex[index..<next], radix: 16) else { break }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}


/// A change to the account, signed by the member that made it (`SignedChange` as it travels).
public typealias SignedAccount = SignedChange

extension SignedChange {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .secondsSince1970
        return encoder
    }()

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return decoder
    }()

    /// Signs `account` as `identity`.
    public init(_ account: AccountState, by identity: DeviceIdentity) throws(PairingError) {
        let state: [UInt8]
        let signature: [UInt8]
        do {
            state = Array(try Self.encoder.encode(account))
            signature = Array(try identity.privateKey.signature(for: state).derRepresentation)
        } catch {
            throw PairingError("could not sign the account: \(error)")
        }
        self.init(signer: identity.id, state: state, signature: signature)
    }

    /// The account this change makes, unchecked.
    public func account() throws(PairingError) -> AccountState {
        try Self.decode(state)
    }

    /// The account, if the signature is by a member of `current` and the change is newer and
    /// for the same account.
    public func verified(against current: AccountState) throws(PairingError) -> AccountState {
        guard let member = current.members.first(where: { $0.id == signer }), let der = member.certificate else {
            throw PairingError("the change is signed by a device that is not a member of '\(current.name)'")
        }
        let key: P256.Signing.PublicKey
        let signature: P256.Signing.ECDSASignature
        do {
            let certificate = try Certificate(derEncoded: Array(der))
            guard let parsed = P256.Signing.PublicKey(certificate.publicKey) else {
                throw PairingError("the signer's certificate has no P-256 key")
            }
            key = parsed
            signature = try P256.Signing.ECDSASignature(derRepresentation: self.signature)
        } catch let error as PairingError {
            throw error
        } catch {
            throw PairingError("the change's signature cannot be read: \(error)")
        }
        guard key.isValidSignature(signature, for: state) else {
            throw PairingError("the change's signature does not match '\(member.name)'s key")
        }
        let account = try Self.decode(state)
        guard account.id == current.id else { throw PairingError("the change is for another account") }
        guard Set(account.members.map(\.id)).count == account.members.count else {
            throw PairingError("the change lists one device id twice")
        }
        guard account.revision > current.revision else {
            throw PairingError("the change (revision \(account.revision)) is not newer than this device's (revision \(current.revision))")
        }
        return account
    }

    static func decode(_ bytes: [UInt8]) throws(PairingError) -> AccountState {
        do {
            return try decoder.decode(AccountState.self, from: Data(bytes))
        } catch {
            throw PairingError("the account sent is not readable: \(error)")
        }
    }
}
