import Crypto
import Foundation
import HandoffWire
import NIOCore
import NIOSSL
import NIOTLS
import X509

/// How a link decides who is at the other end.
public enum LinkTrust: Sendable {
    /// The account's members, by the fingerprints of their long-term certificates that
    /// `accepts` approves (asked again before each frame). The certificates shown in the TLS
    /// handshake name no one; each side proves inside the link that it holds a member's
    /// long-term key (`LinkProof`). Links between members.
    case members(@Sendable (String) -> Bool)
    /// The certificate shown in the TLS handshake itself, by its own fingerprint, which
    /// `accepts` approves: the pairing listener (pinned by the invitation's code) and the
    /// device joining through it, which is not a member yet.
    case shown(@Sendable (String) -> Bool)

    var accepts: @Sendable (String) -> Bool {
        switch self {
        case .members(let accepts), .shown(let accepts): return accepts
        }
    }
}

/// A member's proof, inside a link, that it holds the long-term key of a member: its long-term
/// certificate and that key's signature over the link's two shown certificates and its role,
/// sealed with the account's keys (ChaCha20-Poly1305, with a key derived from each account key).
///
/// The connecting side proves first, and the answering side only to a member it accepts: a
/// stranger without the account's keys can make no proof, and reads none. The signature
/// binds the proof to this link (a proof replayed on another link, or reflected back, does
/// not verify), and the shown certificates' keys are proven by TLS itself.
enum LinkProof {
    enum Role: UInt8, Sendable {
        case connecting = 1
        case answering = 2

        var other: Role { self == .connecting ? .answering : .connecting }
    }

    static let context = Array("handoff link proof 1".utf8)
    static let keyInfo = Array("handoff link proof key".utf8)

    /// What the long-term key signs.
    static func transcript(_ role: Role, connecting: [UInt8], answering: [UInt8]) -> [UInt8] {
        context + [role.rawValue] + Array(SHA256.hash(data: connecting)) + Array(SHA256.hash(data: answering))
    }

    /// The key a proof is sealed with, from one of the account's keys.
    static func sealingKey(_ accountKey: SymmetricKey) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: accountKey, info: keyInfo, outputByteCount: 32)
    }

    /// The proof `identity` gives as `role` on the link whose shown certificates are
    /// `connecting` and `answering`: one box per key in `keys`.
    static func make(_ role: Role, identity: DeviceIdentity, connecting: [UInt8], answering: [UInt8], keys: [SymmetricKey]) -> [[UInt8]] {
        let signature: [UInt8]
        do {
            signature = Array(try identity.privateKey.signature(for: transcript(role, connecting: connecting, answering: answering)).rawRepresentation)
        } catch {
            preconditionFailure("a P-256 key signs a short message: \(error)")
        }
        let certificate = identity.certificateDER
        let plain = [UInt8(certificate.count >> 8), UInt8(certificate.count & 0xFF)] + certificate + signature
        return keys.prefix(LinkMessage.maximumProofBoxes).map { key in
            do {
                return Array(try ChaChaPoly.seal(plain, using: sealingKey(key), authenticating: [role.rawValue]).combined)
            } catch {
                preconditionFailure("ChaCha20-Poly1305 seals with a 256-bit key: \(error)")
            }
        }
    }

    /// A proof opened and verified: the member's long-term certificate (DER), and the account
    /// key that opened it (the answer is sealed with the same).
    struct Opened: Sendable {
        var certificate: [UInt8]
        var key: SymmetricKey
    }

    /// Opens the proof `boxes` that the side in `role` gave, with any of `keys`; nil unless a box
    /// opens, holds a certificate valid `now`, and that certificate's key signed this link's
    /// transcript for `role`.
    static func open(_ boxes: [[UInt8]], _ role: Role, connecting: [UInt8], answering: [UInt8], keys: [SymmetricKey], now: Date = Date()) -> Opened? {
        let sealing = keys.map { ($0, sealingKey($0)) }
        for box in boxes.prefix(LinkMessage.maximumProofBoxes) {
            guard let sealed = try? ChaChaPoly.SealedBox(combined: box) else { continue }
            for (key, sealingKey) in sealing {
                guard let plain = try? Array(ChaChaPoly.open(sealed, using: sealingKey, authenticating: [role.rawValue])) else { continue }
                // Sealed with an account key: a member made it, and what it holds is checked now.
                guard plain.count > 2 + 64 else { return nil }
                let length = Int(plain[0]) << 8 | Int(plain[1])
                guard plain.count == 2 + length + 64 else { return nil }
                let certificate = Array(plain[2..<2 + length])
                guard let parsed = try? Certificate(derEncoded: certificate), LinkTLS.isValidNow(parsed, now: now),
                    let publicKey = P256.Signing.PublicKey(parsed.publicKey),
                    let signature = try? P256.Signing.ECDSASignature(rawRepresentation: plain[(2 + length)...]),
                    publicKey.isValidSignature(signature, for: transcript(role, connecting: connecting, answering: answering))
                else { return nil }
                return Opened(certificate: certificate, key: key)
            }
        }
        return nil
    }
}

/// Why a link's membership proof failed.
struct LinkProofError: Error, CustomStringConvertible {
    var description: String
}

/// Runs the membership proof at the start of a link between members (`LinkProof`), after
/// the TLS handshake and before any other frame: the connecting side sends its proof and holds
/// back every frame written until the answering side's proof arrives and is accepted; the
/// answering side reads the connecting side's proof first and answers only a member it
/// accepts. Anything else closes the link. `peer` gives who the other side is, once proven.
final class LinkProofHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = Frame

    private enum State {
        case handshaking
        case awaitingProof(peerShown: [UInt8])
        case proven
        case failed
    }

    private let role: LinkProof.Role
    private let identity: DeviceIdentity
    private let shown: [UInt8]
    private let accepts: @Sendable (String) -> Bool
    let peer: EventLoopPromise<LinkPeer>
    private var state = State.handshaking
    private var held: [(Frame, EventLoopPromise<Void>?)] = []
    private var flushHeld = false

    /// `shown` is the certificate (DER) this side shows in the handshake.
    init(_ role: LinkProof.Role, identity: DeviceIdentity, shown: [UInt8], accepting accepts: @escaping @Sendable (String) -> Bool, eventLoop: any EventLoop) {
        self.role = role
        self.identity = identity
        self.shown = shown
        self.accepts = accepts
        self.peer = eventLoop.makePromise(of: LinkPeer.self)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event, case .handshaking = state {
            guard let certificate = try? context.pipeline.syncOperations.nioSSL_peerCertificate(), let peerShown = try? certificate.toDERBytes() else {
                fail(context: context, "the peer showed no certificate")
                return
            }
            state = .awaitingProof(peerShown: peerShown)
            if role == .connecting {
                let keys = identity.links.accountKeys
                guard !keys.isEmpty else {
                    fail(context: context, "this device is in no account: it has no keys to prove membership with")
                    return
                }
                let boxes = LinkProof.make(.connecting, identity: identity, connecting: shown, answering: peerShown, keys: keys)
                context.writeAndFlush(wrapOutboundOut(LinkMessage.proof(boxes: boxes).frame), promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .proven:
            context.fireChannelRead(data)
        case .failed:
            return
        case .handshaking:
            fail(context: context, "a frame came before the handshake ended")
        case .awaitingProof(let peerShown):
            guard case .proof(let boxes)? = try? LinkMessage(frame: unwrapInboundIn(data)) else {
                fail(context: context, "the first frame was not a membership proof")
                return
            }
            let (connecting, answering) = role == .connecting ? (shown, peerShown) : (peerShown, shown)
            guard let opened = LinkProof.open(boxes, role.other, connecting: connecting, answering: answering, keys: identity.links.accountKeys) else {
                fail(context: context, "the membership proof did not verify")
                return
            }
            let fingerprint = DeviceIdentity.fingerprint(ofCertificate: opened.certificate)
            guard accepts(fingerprint) else {
                fail(context: context, "the proven device is not accepted")
                return
            }
            if role == .answering {
                let boxes = LinkProof.make(.answering, identity: identity, connecting: connecting, answering: answering, keys: [opened.key])
                context.writeAndFlush(wrapOutboundOut(LinkMessage.proof(boxes: boxes).frame), promise: nil)
            }
            state = .proven
            peer.succeed(LinkPeer(fingerprint: fingerprint, certificate: opened.certificate, presented: peerShown, address: context.channel.remoteAddress?.ipAddress))
            let held = self.held
            self.held = []
            for (frame, promise) in held { context.write(wrapOutboundOut(frame), promise: promise) }
            if flushHeld || !held.isEmpty { context.flush() }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch state {
        case .proven:
            context.write(data, promise: promise)
        case .failed:
            promise?.fail(LinkProofError(description: "the link was refused"))
        case .handshaking, .awaitingProof:
            // Nothing of this device leaves before the other side is proven a member.
            held.append((unwrapOutboundIn(data), promise))
        }
    }

    func flush(context: ChannelHandlerContext) {
        if case .proven = state { context.flush() } else { flushHeld = true }
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle("the link closed before the membership proof")
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        settle("the link ended before the membership proof")
    }

    private func fail(context: ChannelHandlerContext, _ why: String) {
        settle(why)
        state = .failed
        context.close(promise: nil)
    }

    /// Fails `peer` and the frames held back, unless proven.
    private func settle(_ why: String) {
        if case .proven = state { return }
        if case .failed = state { return }
        state = .failed
        let error = LinkProofError(description: why)
        peer.fail(error)
        let held = self.held
        self.held = []
        for (_, promise) in held { promise?.fail(error) }
    }
}
