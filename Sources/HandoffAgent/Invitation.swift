import Crypto
import HandoffWire
import Foundation
import X509

/// An invitation to join the account, as the code a person carries from the inviting device
/// to the new one. It says where the inviting device waits (address and port of its pairing
/// listener), how to recognise its certificate and a one-time secret. See
/// `docs/wire-protocol.md`, Pairing.
package struct Invitation: Sendable, Hashable {
    package enum Kind: UInt8, Sendable {
        /// Typed by a person; the join waits for confirmation on the inviting device, and both
        /// screens show a verification number to compare.
        case interactive = 1
        /// For scripts: a long, high-entropy token; the join needs no prompt.
        case token = 2
    }

    /// How the code lays out its bytes, and so how it pins the inviting device's certificate.
    enum Layout: Sendable, Hashable {
        /// A token, and an interactive code of earlier versions (read, no longer made): the
        /// fingerprint's first bytes, and a secret beside it.
        case prefix
        /// An interactive code: a 32-bit tag of the fingerprint keyed by the secret, which only
        /// the code's holder can compute.
        case keyed
    }

    /// The pairing listener's port when the link port is the default (47170 plus one): a code
    /// for it leaves the port out.
    package static let defaultPort = 47_171

    package var kind: Kind
    var layout: Layout
    package var host: String
    package var port: Int
    /// What the code holds to recognise the inviting device's certificate: the first bytes of
    /// its fingerprint (SHA-256), or, in an interactive code, a tag of it keyed by the secret.
    package var fingerprint: [UInt8]
    package var secret: [UInt8]

    /// Bytes of the pin and the secret in each layout.
    static func sizes(_ layout: Layout, _ kind: Kind) -> (fingerprint: Int, secret: Int) {
        switch (layout, kind) {
        case (.keyed, _): (4, 5)
        case (.prefix, .interactive): (10, 10)
        case (.prefix, .token): (32, 32)
        }
    }

    /// The first byte of an interactive code: `0x3` and the address form (`4` IPv4, `0` a
    /// name), with `1` added when the port is the default one and left out.
    static let keyedTag: UInt8 = 0x30

    /// Makes an invitation with a fresh secret; an interactive one is of the short, keyed layout.
    package static func make(_ kind: Kind, host: String, port: Int, fingerprint hex: String) -> Invitation {
        let layout: Layout = kind == .interactive ? .keyed : .prefix
        let sizes = sizes(layout, kind)
        let secret = SystemRandom.bytes(sizes.secret)
        let full = Self.bytes(fromHex: hex)
        let pin = layout == .keyed ? tag(of: full, secret: secret) : Array(full.prefix(sizes.fingerprint))
        return Invitation(kind: kind, layout: layout, host: host, port: port, fingerprint: pin, secret: secret)
    }

    /// The keyed tag of a fingerprint: the first 4 bytes of HMAC-SHA256 keyed by the secret.
    static func tag(of fingerprint: [UInt8], secret: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array("handoff pin v1".utf8) + fingerprint, using: SymmetricKey(data: secret)).prefix(4))
    }

    /// The code: Crockford base32 of the fields and a checksum, in groups of four.
    package var code: String {
        var bytes: [UInt8]
        let address: [UInt8]
        let form: UInt8
        if let v4 = IPv4(host) {
            (form, address) = (4, v4)
        } else {
            let name = Array(host.utf8.prefix(255))
            (form, address) = (0, [UInt8(name.count)] + name)
        }
        let port = [UInt8(port >> 8 & 0xFF), UInt8(port & 0xFF)]
        switch layout {
        case .keyed:
            let omitted = self.port == Self.defaultPort
            bytes = [Self.keyedTag | form | (omitted ? 1 : 0)] + address + (omitted ? [] : port)
        case .prefix:
            bytes = [kind.rawValue, form] + address + port
        }
        bytes += fingerprint + secret
        bytes += Self.checksum(bytes, layout)
        let text = Base32.encode(bytes)
        return stride(from: 0, to: text.count, by: 4).map { start in
            let from = text.index(text.startIndex, offsetBy: start)
            return String(text[from..<(text.index(from, offsetBy: 4, limitedBy: text.endIndex) ?? text.endIndex)])
        }.joined(separator: "-")
    }

    /// A typed code ends in a CRC-8 (polynomial x⁸+x²+x+1): a character stands for 5 bits, so
    /// any one character mistyped is an error burst of at most 5 bits, which a CRC of degree 8
    /// always finds; other typos it misses one time in 256, and they still fail safely, at the
    /// pin, the address or the secret. A token (pasted, not typed) ends in the first two bytes
    /// of SHA-256.
    static func checksum(_ bytes: some Collection<UInt8>, _ layout: Layout) -> [UInt8] {
        guard layout == .keyed else { return Array(SHA256.hash(data: Array(bytes)).prefix(2)) }
        var crc: UInt8 = 0
        for byte in bytes {
            crc ^= byte
            for _ in 0..<8 { crc = crc & 0x80 != 0 ? (crc << 1) ^ 0x07 : crc << 1 }
        }
        return [crc]
    }

    /// Reads a code, forgiving case, spaces and dashes; a typo is told apart from a wrong code.
    package init(parsing code: String) throws(PairingError) {
        guard let decoded = Base32.decode(code.filter { $0 != "-" && !$0.isWhitespace }), decoded.count > 4 else {
            throw PairingError("'\(code)' is not an invitation code; copy it again from 'handoff device invite'")
        }
        let first = decoded[0]
        let layout: Layout = first & 0xF0 == Self.keyedTag ? .keyed : .prefix
        if layout == .prefix, Kind(rawValue: first) == nil {
            throw PairingError("the invitation code has a typo, or is of a kind this version does not know (then update Handoff); copy it again")
        }
        let checksum = layout == .keyed ? 1 : 2
        guard Self.checksum(decoded.dropLast(checksum), layout) == Array(decoded.suffix(checksum)) else {
            throw PairingError("the invitation code has a typo (its checksum does not match); copy it again")
        }
        var reader = decoded.dropLast(checksum)[...]
        func take(_ count: Int) throws(PairingError) -> [UInt8] {
            guard reader.count >= count else { throw PairingError("the invitation code is too short; copy it again") }
            defer { reader = reader.dropFirst(count) }
            return Array(reader.prefix(count))
        }
        let kind: Kind
        let form: UInt8
        var defaultPort = false
        switch layout {
        case .keyed:
            kind = .interactive
            _ = try take(1)
            form = first & 0x0E
            defaultPort = first & 1 == 1
        case .prefix:
            kind = Kind(rawValue: try take(1)[0]) ?? .token
            form = try take(1)[0]
        }
        let host: String
        switch form {
        case 4: host = try take(4).map(String.init).joined(separator: ".")
        case 0:
            let length = Int(try take(1)[0])
            guard let name = String(validating: try take(length), as: UTF8.self) else { throw PairingError("the invitation code's host is not text") }
            host = name
        default:
            throw PairingError("the invitation code's address is of an unknown kind; update Handoff")
        }
        let port = defaultPort ? Self.defaultPort : try take(2).reduce(0) { $0 << 8 | Int($1) }
        let sizes = Self.sizes(layout, kind)
        fingerprint = try take(sizes.fingerprint)
        secret = try take(sizes.secret)
        guard reader.isEmpty else { throw PairingError("the invitation code is too long; copy it again") }
        self.kind = kind
        self.layout = layout
        self.host = host
        self.port = port
    }

    init(kind: Kind, layout: Layout, host: String, port: Int, fingerprint: [UInt8], secret: [UInt8]) {
        self.kind = kind
        self.layout = layout
        self.host = host
        self.port = port
        self.fingerprint = fingerprint
        self.secret = secret
    }

    /// Whether a certificate fingerprint (hex) is the inviting device's.
    package func matches(fingerprint hex: String) -> Bool {
        let full = Self.bytes(fromHex: hex)
        let expected = layout == .keyed ? Self.tag(of: full, secret: secret) : Array(full.prefix(fingerprint.count))
        guard full.count == 32, expected.count == fingerprint.count else { return false }
        // Compared in full whatever differs, so the time taken tells nothing of the tag.
        return zip(expected, fingerprint).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// What the joining device sends to show it holds the secret, bound to its certificate and
    /// name, so that neither can be swapped on the way.
    package func proof(certificate: [UInt8], name: String) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Self.context("join", certificate: certificate, name: name), using: SymmetricKey(data: secret)))
    }

    /// Checks a proof in constant time.
    package func isValid(proof: [UInt8], certificate: [UInt8], name: String) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(proof, authenticating: Self.context("join", certificate: certificate, name: name), using: SymmetricKey(data: secret))
    }

    /// The six digits both screens show for an interactive join, as "123 456".
    package func verificationNumber(certificate: [UInt8]) -> String {
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
package typealias SignedAccount = SignedChange

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
    package init(_ account: AccountState, by identity: DeviceIdentity) throws(PairingError) {
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
    package func account() throws(PairingError) -> AccountState {
        try Self.decode(state)
    }

    /// The account, if the signature is by a member of `current` and the change is newer and
    /// for the same account.
    package func verified(against current: AccountState) throws(PairingError) -> AccountState {
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
