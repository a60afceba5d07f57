import Crypto
import Foundation
import HandoffWire

/// A team: a P-256 signing key. The team identifier is derived from the public key, so that
/// no one can sign as a team without its private key, and no registry is needed to say who
/// a team is.
public struct TeamKey: Sendable {
    public let privateKey: P256.Signing.PrivateKey

    public static func generate() -> TeamKey { TeamKey(privateKey: P256.Signing.PrivateKey()) }

    public init(privateKey: P256.Signing.PrivateKey) { self.privateKey = privateKey }

    /// Reads a key file (PKCS#8 PEM, as `handoff team create` writes it).
    public init(pemRepresentation pem: String, file: String) throws(AppSignatureError) {
        do {
            privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw AppSignatureError(.invalid, "\(file): not a team key (a P-256 private key in PEM, as 'handoff team create' writes)")
        }
    }

    public var pemRepresentation: String { privateKey.pemRepresentation }

    public var teamIdentifier: String { Self.identifier(of: privateKey.publicKey) }

    /// The first 80 bits of the SHA-256 of the public key (DER), in Crockford's base32 (digits
    /// and capitals without I, L, O and U): 16 characters. Eighty bits keep a second key with
    /// the same identifier out of reach.
    public static func identifier(of publicKey: P256.Signing.PublicKey) -> String {
        Base32.encode(Array(SHA256.hash(data: publicKey.derRepresentation).prefix(10)))
    }

    /// Whether `text` has the form of a derived team identifier.
    public static func isDerivedIdentifier(_ text: String) -> Bool {
        text.utf8.count == 16 && text.allSatisfy { Base32.alphabet.contains($0) }
    }
}

/// Why an app's signature cannot be made or does not hold.
public struct AppSignatureError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The app carries no signature at all.
        case unsigned
        /// It carries one that does not hold, or cannot be read.
        case invalid
    }

    public var kind: Kind
    public var message: String
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }
    public var description: String { message }
}

/// The signature of an app directory: every file in it (its `Info.plist`, its entitlements,
/// its executable and anything else), by SHA-256, signed with the team's key. It lives in
/// the directory at `AppSignature.path`. See `docs/apps.md`.
public struct AppSignature: Codable, Sendable, Hashable {
    /// Where in the app directory the signature is.
    public static let path = "_CodeSignature/Handoff.json"
    public static let version = 1
    /// At most this many files are signed, and the signature file is at most this large.
    public static let maximumFiles = 10_000
    public static let maximumSize = 4 << 20

    public var version: Int
    public var teamIdentifier: String
    /// The team's public key, DER (SubjectPublicKeyInfo), base64.
    public var publicKey: String
    /// Each file's path in the directory (`/` between folders) and its SHA-256, in hex.
    public var files: [String: String]
    /// ECDSA P-256 with SHA-256 over `signedText`, DER, base64.
    public var signature: String

    /// The exact bytes the signature covers.
    static func signedText(version: Int, team: String, publicKey: String, files: [String: String]) -> Data {
        var text = "handoff app signature \(version)\nteam \(team)\nkey \(publicKey)\n"
        for (path, digest) in files.sorted(by: { $0.key < $1.key }) { text += "file \(digest) \(path)\n" }
        return Data(text.utf8)
    }

    /// Signs the app in `directory` as `key`'s team and writes the signature into it,
    /// replacing any there was.
    @discardableResult
    public static func sign(_ directory: URL, with key: TeamKey) throws(AppSignatureError) -> AppSignature {
        let files = try digests(in: directory)
        let publicKey = key.privateKey.publicKey.derRepresentation.base64EncodedString()
        let team = key.teamIdentifier
        let text = signedText(version: version, team: team, publicKey: publicKey, files: files)
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try key.privateKey.signature(for: text)
        } catch {
            throw AppSignatureError(.invalid, "could not sign: \(error)")
        }
        let made = AppSignature(
            version: version, teamIdentifier: team, publicKey: publicKey, files: files, signature: signature.derRepresentation.base64EncodedString())
        let file = directory.appendingPathComponent(path)
        do {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            try encoder.encode(made).write(to: file, options: .atomic)
        } catch {
            throw AppSignatureError(.invalid, "could not write \(file.path): \(error.localizedDescription)")
        }
        return made
    }

    /// Checks the signature of the app in `directory`: that it is there, that its key is its
    /// team's, that it signs exactly the files the directory holds, and each as it is now.
    /// Returns the team that signed.
    public static func verify(_ directory: URL) throws(AppSignatureError) -> String {
        let file = directory.appendingPathComponent(path)
        // Not followed if it is a link: a link or a pipe here could make the reader wait forever.
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file.path) else {
            throw AppSignatureError(.unsigned, "\(directory.path) is not signed (no \(path))")
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw AppSignatureError(.invalid, "\(file.path) is a link or special file, not a signature")
        }
        let size = (attributes[.size] as? NSNumber)?.intValue ?? 0
        guard size <= maximumSize else { throw AppSignatureError(.invalid, "\(file.path) is \(size) bytes, over the limit of \(maximumSize)") }
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: file)
            defer { try? handle.close() }
            data = try handle.read(upToCount: maximumSize + 1) ?? Data()
        } catch {
            throw AppSignatureError(.invalid, "cannot read \(file.path): \(error.localizedDescription)")
        }
        guard data.count <= maximumSize else { throw AppSignatureError(.invalid, "\(file.path) is over the limit of \(maximumSize) bytes") }
        let signed: AppSignature
        do {
            signed = try JSONDecoder().decode(AppSignature.self, from: data)
        } catch {
            throw AppSignatureError(.invalid, "\(file.path) is not a signature this agent reads: \(error)")
        }
        guard signed.version == version else {
            throw AppSignatureError(.invalid, "\(file.path): signature version \(signed.version) is not one this agent reads (\(version))")
        }
        guard let keyBytes = Data(base64Encoded: signed.publicKey), let key = try? P256.Signing.PublicKey(derRepresentation: keyBytes) else {
            throw AppSignatureError(.invalid, "\(file.path): publicKey is not a P-256 public key")
        }
        let keyTeam = TeamKey.identifier(of: key)
        guard signed.teamIdentifier == keyTeam else {
            throw AppSignatureError(.invalid, "\(file.path) names team '\(signed.teamIdentifier)', but its key is team '\(keyTeam)''s")
        }
        guard let signatureBytes = Data(base64Encoded: signed.signature),
            let signature = try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes),
            key.isValidSignature(signature, for: signedText(version: signed.version, team: signed.teamIdentifier, publicKey: signed.publicKey, files: signed.files))
        else {
            throw AppSignatureError(.invalid, "\(file.path): the signature does not verify with team '\(keyTeam)''s key; the signature file was altered")
        }
        let present = try digests(in: directory)
        let missing = Set(signed.files.keys).subtracting(present.keys).sorted()
        let added = Set(present.keys).subtracting(signed.files.keys).sorted()
        let changed = present.keys.filter { signed.files[$0] != nil && signed.files[$0] != present[$0] }.sorted()
        var problems: [String] = []
        if !changed.isEmpty { problems.append("changed after signing: \(changed.joined(separator: ", "))") }
        if !added.isEmpty { problems.append("added after signing: \(added.joined(separator: ", "))") }
        if !missing.isEmpty { problems.append("signed but missing: \(missing.joined(separator: ", "))") }
        guard problems.isEmpty else {
            throw AppSignatureError(.invalid, "\(directory.path) does not match its signature by team '\(keyTeam)': \(problems.joined(separator: "; "))")
        }
        return keyTeam
    }

    /// Every regular file under `directory` but the signature, by relative path, with its
    /// SHA-256. Links and other special files are refused: what they point at could change
    /// without the signature noticing.
    static func digests(in directory: URL) throws(AppSignatureError) -> [String: String] {
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        guard fileManager.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw AppSignatureError(.invalid, "\(directory.path): no such directory")
        }
        var files: [String: String] = [:]
        var pending = [""]
        while let folder = pending.popLast() {
            let names: [String]
            do {
                names = try fileManager.contentsOfDirectory(atPath: folder.isEmpty ? directory.path : directory.path + "/" + folder)
            } catch {
                throw AppSignatureError(.invalid, "cannot list \(directory.path)/\(folder): \(error.localizedDescription)")
            }
            for name in names.sorted() {
                let relative = folder.isEmpty ? name : folder + "/" + name
                guard relative != path else { continue }
                guard !name.contains(where: { $0.isNewline || $0 == "\0" }) else {
                    throw AppSignatureError(.invalid, "\(directory.path): a file name holds a line break: \(relative.debugDescription)")
                }
                let full = directory.path + "/" + relative
                let type = (try? fileManager.attributesOfItem(atPath: full)[.type] as? FileAttributeType) ?? nil
                switch type {
                case .typeDirectory?:
                    pending.append(relative)
                case .typeRegular?:
                    // Names Swift compares as equal (Unicode equivalents) would share one entry.
                    guard files[relative] == nil else {
                        throw AppSignatureError(.invalid, "\(directory.path): two file names read as the same text: \(relative.debugDescription)")
                    }
                    guard files.count < maximumFiles else {
                        throw AppSignatureError(.invalid, "\(directory.path) holds more than \(maximumFiles) files")
                    }
                    let data: Data
                    do {
                        data = try Data(contentsOf: URL(fileURLWithPath: full), options: .mappedIfSafe)
                    } catch {
                        throw AppSignatureError(.invalid, "cannot read \(full): \(error.localizedDescription)")
                    }
                    files[relative] = Hex.lowercase(SHA256.hash(data: data))
                default:
                    throw AppSignatureError(
                        .invalid, "\(full) is a link or special file; an app directory holds only files and folders, which its signature covers")
                }
            }
        }
        return files
    }
}
