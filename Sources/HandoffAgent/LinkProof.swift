import Crypto
import Foundation
import HandoffWire
import NIOCore
import NIOSSL
import NIOTLS
import Synchronization
import X509

/// How a link decides who is at the other end.
package enum LinkTrust: Sendable {
    /// The account's members, by the fingerprints of their long-term certificates that
    /// `accepts` approves (asked again before each frame). The certificates shown in the TLS
    /// handshake name no one; each side proves inside the link that it holds a member's
    /// long-term key (`LinkProof`). Links between members.
    case members(@Sendable (String) -> Bool)
    /// The certificate shown in the TLS handshake itself, by its own fingerprint, which
    /// `accepts` approves: the pairing listener (pinned by the invitation's code) and the
    /// device joining through it, which is not a member yet.
    case shown(@Sendable (String) -> Bool)

    package var accepts: @Sendable (String) -> Bool {
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

    /// The key a proof is sealed with, from one of the account's keys. `LinkCertificates`
    /// keeps it beside the account key it holds, and drops both together; nothing else keeps it.
    static func sealingKey(_ accountKey: SymmetricKey) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: accountKey, info: keyInfo, outputByteCount: 32)
    }

    /// The room for the long-term certificate in a proof: every proof is padded to it, so
    /// that a proof's size says nothing of the device (a certificate's length follows its
    /// name; a name of 64 bytes makes about 500). A joining device with a longer certificate is
    /// refused.
    static let certificateRoom = 1024
    /// How many boxes the connecting side sends, whatever number of keys it holds: the boxes
    /// it has no key for are random bytes of the same size.
    static let connectingBoxes = LinkMessage.maximumProofBoxes
    /// The size of every box: nonce, certificate length, the room, signature, tag.
    static let boxSize = 12 + 2 + certificateRoom + 64 + 16
    /// The most a frame may hold before the peer is proven: a connecting proof (8 boxes and
    /// their lengths) fits.
    static let maximumFrame = 16 * 1024

    /// How many bytes of early frames a connecting proof of `identity` can carry: the room its
    /// certificate leaves, less the section's 2-byte length and the target's fingerprint.
    static func earlyRoom(_ identity: DeviceIdentity) -> Int {
        max(0, certificateRoom - identity.certificateDER.count - 2 - targetSize)
    }

    /// The size of the target's fingerprint in early frames' section (SHA-256 in hex).
    static let targetSize = 64

    /// The proof `identity` gives as `role` on the link whose shown certificates are
    /// `connecting` and `answering`: one box per key in `keys`, and for the connecting side
    /// random boxes up to `connectingBoxes`.
    ///
    /// After the signature, in the room the certificate leaves (zeros in proofs made before),
    /// the connecting side may carry `early` frames for the member whose fingerprint is
    /// `target` (its `hello` and first request: that member, once it has accepted the proof,
    /// reads them as if they had followed it), and the answering side says whether it
    /// `tookEarly` (then the connecting side does not send them again). Frames that do not fit
    /// are left out: the caller sends them after.
    static func make(
        _ role: Role, identity: DeviceIdentity, connecting: [UInt8], answering: [UInt8], keys: [SymmetricKey], early: [Frame] = [], target: String? = nil,
        tookEarly: Bool = false
    ) -> [[UInt8]] {
        let sealingKey = identity.links.sealingKey(for:)
        let signature = ProofSignatures.shared.signature(
            by: identity.privateKey, signer: identity.fingerprint, over: transcript(role, connecting: connecting, answering: answering))
        let certificate = identity.certificateDER
        var tail: [UInt8] = []
        switch role {
        case .connecting:
            let bytes = early.flatMap(\.encoded)
            if !bytes.isEmpty, bytes.count <= earlyRoom(identity), let target, target.utf8.count == targetSize {
                let section = Array(target.utf8) + bytes
                tail = [UInt8(section.count >> 8), UInt8(section.count & 0xFF)] + section
            }
        case .answering:
            tail = [tookEarly ? 1 : 0]
        }
        // A certificate over the room (never one that joined) makes a box no member opens.
        let size = max(boxSize, 12 + 2 + certificate.count + 64 + tail.count + 16)
        let padding = [UInt8](repeating: 0, count: size - (12 + 2 + certificate.count + 64 + tail.count + 16))
        let plain = [UInt8(certificate.count >> 8), UInt8(certificate.count & 0xFF)] + certificate + signature + tail + padding
        var boxes = keys.prefix(connectingBoxes).map { key in
            do {
                return Array(try ChaChaPoly.seal(plain, using: sealingKey(key), authenticating: [role.rawValue]).combined)
            } catch {
                preconditionFailure("ChaCha20-Poly1305 seals with a 256-bit key: \(error)")
            }
        }
        if role == .connecting {
            // One call to the system's generator for each box: drawn a byte at a time, the seven
            // boxes cost about 7,800 system calls, 4 to 8 ms of every link opened.
            while boxes.count < connectingBoxes { boxes.append(SystemRandom.bytes(size)) }
        }
        return boxes
    }

    /// A proof opened and verified: the member's long-term certificate (DER), and the account
    /// key that opened it (the answer is sealed with the same); in a connecting proof, the
    /// frames it carried early and the fingerprint of the member they are for; in an answering
    /// one, whether those were taken.
    struct Opened: Sendable {
        var certificate: [UInt8]
        var key: SymmetricKey
        var early: [Frame] = []
        var earlyTarget: String?
        var tookEarly = false
    }

    /// The frames in `bytes`, back to back; nil if the last one is cut short.
    static func frames(in bytes: ArraySlice<UInt8>) -> [Frame]? {
        var frames: [Frame] = []
        var rest = bytes
        while !rest.isEmpty {
            guard rest.count >= Frame.headerSize else { return nil }
            let start = rest.startIndex
            let length = Int(UInt32(rest[start]) << 24 | UInt32(rest[start + 1]) << 16 | UInt32(rest[start + 2]) << 8 | UInt32(rest[start + 3]))
            guard length >= 0, length <= rest.count - Frame.headerSize else { return nil }
            frames.append(Frame(kind: rest[start + 4], payload: Array(rest[(start + Frame.headerSize)..<(start + Frame.headerSize + length)])))
            rest = rest[(start + Frame.headerSize + length)...]
        }
        return frames
    }

    /// Opens the proof `boxes` that the side in `role` gave, with any of `keys`; nil unless a box
    /// opens, holds a certificate valid `now`, and that certificate's key signed this link's
    /// transcript for `role` (and early frames, if it carries any, are whole). Boxes of any
    /// other size than a proof's are refused unopened.
    static func open(
        _ boxes: [[UInt8]], _ role: Role, connecting: [UInt8], answering: [UInt8], keys: [SymmetricKey], now: Date = Date(),
        sealingKey: (SymmetricKey) -> SymmetricKey = sealingKey
    ) -> Opened? {
        guard !boxes.isEmpty, boxes.count <= LinkMessage.maximumProofBoxes, boxes.allSatisfy({ $0.count == boxSize }) else { return nil }
        let sealing = keys.map { ($0, sealingKey($0)) }
        for box in boxes {
            guard let sealed = try? ChaChaPoly.SealedBox(combined: box) else { continue }
            for (key, sealingKey) in sealing {
                guard let plain = try? Array(ChaChaPoly.open(sealed, using: sealingKey, authenticating: [role.rawValue])) else { continue }
                // Sealed with an account key: a member made it, and what it holds is checked now.
                // A box of `boxSize` opens to more than 1,000 bytes: the reads below stay inside.
                let length = Int(plain[0]) << 8 | Int(plain[1])
                guard plain.count >= 2 + length + 64 else { return nil }
                let certificate = Array(plain[2..<2 + length])
                guard let read = ReadCertificates.members.read(certificate), read.isValid(now: now), let publicKey = read.key,
                    ProofSignatures.shared.isValid(
                        plain[(2 + length)..<(2 + length + 64)], certificate: certificate, key: publicKey,
                        over: transcript(role, connecting: connecting, answering: answering))
                else { return nil }
                var opened = Opened(certificate: certificate, key: key)
                // What follows the signature: zeros in a proof that carries nothing more.
                let tail = plain[(2 + length + 64)...]
                switch role {
                case .connecting:
                    guard tail.count >= 2 else { break }
                    let size = Int(tail[tail.startIndex]) << 8 | Int(tail[tail.startIndex + 1])
                    guard size > 0 else { break }
                    guard size >= targetSize, size <= tail.count - 2, let early = frames(in: tail.dropFirst(2 + targetSize).prefix(size - targetSize)) else { return nil }
                    opened.early = early
                    opened.earlyTarget = String(decoding: tail.dropFirst(2).prefix(targetSize), as: UTF8.self)
                case .answering:
                    opened.tookEarly = tail.first == 1
                }
                return opened
            }
        }
        return nil
    }
}

/// How many frames the answering sides of a listener's links took from connecting proofs (for
/// tests, and to see that the first request rode in the proof), and how many of those links'
/// proofs were flushed with something written after them (as a rule, the first request's answer).
package final class EarlyFrameCount: Sendable {
    private let count = Atomic<Int>(0)
    private let withProof = Atomic<Int>(0)
    package init() {}
    package var value: Int { count.load(ordering: .relaxed) }
    /// Links whose answering proof was flushed together with something written after it (as a
    /// rule the answer to the first request, made without waiting; with no greeting, the answer
    /// to the hello).
    package var answersWithProof: Int { withProof.load(ordering: .relaxed) }
    func add(_ frames: Int) { count.add(frames, ordering: .relaxed) }
    func answeredWithProof() { withProof.add(1, ordering: .relaxed) }
}

/// Why a link's membership proof failed.
struct LinkProofError: Error, CustomStringConvertible {
    var description: String
}

/// Runs the membership proof at the start of a link between members (`LinkProof`), after
/// the TLS handshake and before any other frame: the connecting side sends its proof and holds
/// back every frame written until the answering side's proof arrives and is accepted; the
/// answering side reads the connecting side's proof first and answers only a member it
/// accepts. Until then frames are limited to `LinkProof.maximumFrame` bytes (raised to the
/// link's own limit once proven), and the proof must come within `deadline`. Anything else
/// closes the link. `peer` gives who the other side is, once proven.
///
/// With `target` (the fingerprint of the member the link is opened to), the connecting side
/// also seals the first frames it holds (its `hello` and first request, as many as fit) inside
/// its proof, with that fingerprint; the answering side, if it is that member and accepts the
/// proof, reads them as the frames that follow it, says so in its own proof, and answers them
/// at once: the first request's round trip overlaps the proof's. Sealed with the account's
/// keys like the proof itself, they are read by no one who could not read the proof, and are
/// acted on only by the member they are for, once the proof is accepted. An answering side of
/// an earlier version ignores them and says nothing; the connecting side then sends them as it
/// always did. A link opened to one member that another answers is closed before anything held
/// is sent.
final class LinkProofHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = Frame

    private enum State {
        case handshaking
        case awaitingProof(peerShown: [UInt8])
        /// Proven; the frames held back are being written, in order (new ones queue behind).
        case releasing
        case proven
        case failed
    }

    private let role: LinkProof.Role
    private let identity: DeviceIdentity
    private let shown: [UInt8]
    private let accepts: @Sendable (String) -> Bool
    private let maximumFrame: Int
    private let deadline: TimeAmount
    /// The member the link is opened to (connecting side, with a first request), by fingerprint.
    private let target: String?
    private let readsEarly: Bool
    private let earlyCount: EarlyFrameCount?
    /// The listener's number for this connection (answering side), given to the peer.
    private let connection: UInt64?
    let peer: EventLoopPromise<LinkPeer>
    private var state = State.handshaking
    /// This (connecting) side's proof, made while the handshake was under way for the shown
    /// certificate the member showed last time (`lastShown`): used only if the handshake shows
    /// that one again and the keys are the same; made anew otherwise.
    private var ahead: (peerShown: [UInt8], keys: [SymmetricKey], early: Int, boxes: [[UInt8]])?
    private var held: [(Frame, EventLoopPromise<Void>?)] = []
    /// Answering side, with frames read from the proof, while this side's proof is written and
    /// not flushed yet: whether anything was written after it. Nil otherwise.
    private var proofUnflushed: Bool?
    /// How many of the frames held went inside this (connecting) side's proof.
    private var sentEarly = 0
    private var timer: Scheduled<Void>?

    /// `shown` is the certificate (DER) this side shows in the handshake; `maximumFrame` the
    /// link's frame limit once proven.
    init(
        _ role: LinkProof.Role, identity: DeviceIdentity, shown: [UInt8], accepting accepts: @escaping @Sendable (String) -> Bool,
        maximumFrame: Int, deadline: TimeAmount = .seconds(10), target: String? = nil, readsEarly: Bool = true, earlyCount: EarlyFrameCount? = nil,
        connection: UInt64? = nil, eventLoop: any EventLoop
    ) {
        self.connection = connection
        self.role = role
        self.identity = identity
        self.shown = shown
        self.accepts = accepts
        self.maximumFrame = maximumFrame
        self.deadline = deadline
        // Never on a link sealed with retired keys, which a removed device may hold.
        self.target = role == .connecting && !identity.links.sealsWithRetiredKeys ? target : nil
        // False only to act as an answering side of an earlier version, which ignores them (tests).
        self.readsEarly = readsEarly
        self.earlyCount = earlyCount
        self.peer = eventLoop.makePromise(of: LinkPeer.self)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        try? context.pipeline.syncOperations.handler(type: FrameHandler.self).setMaximumPayload(min(maximumFrame, LinkProof.maximumFrame))
        let seconds = deadline.nanoseconds / 1_000_000_000
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(in: deadline) {
            let (handler, context) = loopBound.value
            if case .proven = handler.state { return }
            handler.fail(context: context, "no membership proof within \(seconds) s")
        }
    }

    /// The shown certificate each member (by fingerprint) answered a link opened to it with, last
    /// time: it shows the same one until it renews it (15 minutes at most), so the next link's
    /// proof, which covers it, can be made before the handshake shows it again.
    static let lastShown = Mutex<[String: [UInt8]]>([:])

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        // NIOSSL sends the ClientHello once this returns: made just after it, on this loop, while
        // the answer is on its way (this thread has nothing else to do until it comes).
        guard role == .connecting, let target, Self.lastShown.withLock({ $0[target] }) != nil else { return }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute { loopBound.value.makeAhead(for: target) }
    }

    /// Makes this side's proof for the shown certificate `target` showed last time.
    private func makeAhead(for target: String) {
        guard case .handshaking = state, ahead == nil, let peerShown = Self.lastShown.withLock({ $0[target] }) else { return }
        let keys = identity.links.accountKeys
        guard !keys.isEmpty else { return }
        let early = earlyFrames()
        let boxes = LinkProof.make(.connecting, identity: identity, connecting: shown, answering: peerShown, keys: keys, early: early, target: target)
        ahead = (peerShown, keys, early.count, boxes)
    }

    /// The frames held that go inside this side's proof: in order, as many as fit.
    private func earlyFrames() -> [Frame] {
        guard target != nil else { return [] }
        var early: [Frame] = []
        var room = LinkProof.earlyRoom(identity)
        for (frame, _) in held {
            let size = Frame.headerSize + frame.payload.count
            guard size <= room else { break }
            early.append(frame)
            room -= size
        }
        return early
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event, case .handshaking = state {
            HopTrace.stamp("handshake done")
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
                let boxes: [[UInt8]]
                // Frames held since it was made (a first fetch written once a name was looked up)
                // would have ridden in it: it is made anew then.
                if let ahead, ahead.peerShown == peerShown, ahead.keys == keys, ahead.early == earlyFrames().count {
                    // Made while the handshake was under way, for this very certificate.
                    sentEarly = ahead.early
                    boxes = ahead.boxes
                    identity.links.countProofMadeAhead()
                } else {
                    let early = earlyFrames()
                    sentEarly = early.count
                    boxes = LinkProof.make(.connecting, identity: identity, connecting: shown, answering: peerShown, keys: keys, early: early, target: target)
                }
                ahead = nil
                context.writeAndFlush(wrapOutboundOut(LinkMessage.proof(boxes: boxes).frame), promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .proven, .releasing:
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
            let keys = identity.links.accountKeys + identity.links.retiredKeys
            guard let opened = LinkProof.open(boxes, role.other, connecting: connecting, answering: answering, keys: keys, sealingKey: identity.links.sealingKey(for:)) else {
                fail(context: context, "the membership proof did not verify")
                return
            }
            let fingerprint = DeviceIdentity.fingerprint(ofCertificate: opened.certificate)
            guard accepts(fingerprint) else {
                fail(context: context, "the proven device is not accepted")
                return
            }
            if let target, fingerprint != target {
                // Nothing held (a first request) goes to a member it was not meant for.
                fail(context: context, "the proven device is not the one the link was opened to")
                return
            }
            if role == .connecting, let target {
                Self.lastShown.withLock { shown in
                    if shown.count >= 64, shown[target] == nil { shown.removeAll() }
                    shown[target] = peerShown
                }
            }
            if role == .connecting, opened.tookEarly, sentEarly > 0 {
                // The answering side read them from the proof: they are not sent again.
                let sent = held.prefix(sentEarly)
                held.removeFirst(sent.count)
                for (_, promise) in sent { promise?.succeed() }
            }
            let peer = LinkPeer(
                fingerprint: fingerprint, certificate: opened.certificate, presented: peerShown, address: context.channel.remoteAddress?.ipAddress,
                connection: connection)
            guard role == .answering else { return proven(context: context, peer, answer: nil) }
            // Only the member they are for takes them.
            let early = readsEarly && opened.earlyTarget == identity.fingerprint ? opened.early : []
            // With frames to read, the proof is not flushed yet: an answer made without waiting
            // (an early save, settled) is written with it, for the other side to read both in one
            // turn.
            proven(context: context, peer, answer: LinkProof.make(.answering, identity: identity, connecting: connecting, answering: answering, keys: [opened.key], tookEarly: !early.isEmpty), flush: early.isEmpty)
            // The frames the proof carried, as if they had followed it.
            if !early.isEmpty { earlyCount?.add(early.count) }
            for frame in early {
                // An answer written inline may have found the connection gone and closed it.
                guard case .proven = state, context.channel.isActive else { break }
                context.fireChannelRead(wrapInboundOut(frame))
            }
            // An answer written inline (a listener that answers without a task hop) has flushed
            // the proof already. In handoffd the answer comes back from the agent's actor as a
            // job queued on this loop, ahead of this flush: it flushes the proof if that job did
            // not. An answer that waits (for the app) follows the proof as before.
            if proofUnflushed != nil {
                let channel = context.channel
                context.eventLoop.execute { channel.flush() }
            }
        }
    }

    /// The other side is proven: the answer (if this side answers) goes first, then the frames
    /// held back, in order, then whatever comes next; the frame limit is the link's own. Without
    /// `flush`, the caller flushes.
    private func proven(context: ChannelHandlerContext, _ peer: LinkPeer, answer: [[UInt8]]?, flush: Bool = true) {
        HopTrace.stamp("proven")
        timer?.cancel()
        timer = nil
        state = .releasing
        try? context.pipeline.syncOperations.handler(type: FrameHandler.self).setMaximumPayload(maximumFrame)
        if let answer { context.write(wrapOutboundOut(LinkMessage.proof(boxes: answer).frame), promise: nil) }
        // A write's promise may write again as it completes: that frame queues behind.
        while !held.isEmpty, case .releasing = state {
            let batch = held
            held = []
            for (frame, promise) in batch { context.write(wrapOutboundOut(frame), promise: promise) }
        }
        guard case .releasing = state else { return }
        state = .proven
        if flush { context.flush() } else { proofUnflushed = false }
        self.peer.succeed(peer)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch state {
        case .proven:
            if proofUnflushed != nil { proofUnflushed = true }
            context.write(data, promise: promise)
        case .failed:
            promise?.fail(LinkProofError(description: "the link was refused"))
        case .handshaking, .awaitingProof, .releasing:
            // Nothing of this device leaves before the other side is proven a member.
            held.append((unwrapOutboundIn(data), promise))
        }
    }

    func flush(context: ChannelHandlerContext) {
        // Held frames are flushed when they are released.
        guard case .proven = state else { return }
        if let answered = proofUnflushed {
            proofUnflushed = nil
            if answered { earlyCount?.answeredWithProof() }
        }
        context.flush()
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle("the link closed before the membership proof")
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        settle("the link ended before the membership proof")
    }

    private func fail(context: ChannelHandlerContext, _ why: String) {
        settle(why)
        context.close(promise: nil)
    }

    /// Fails `peer` and the frames held back, unless proven.
    private func settle(_ why: String) {
        switch state {
        case .proven, .failed: return
        case .handshaking, .awaitingProof, .releasing: break
        }
        state = .failed
        timer?.cancel()
        timer = nil
        let error = LinkProofError(description: why)
        peer.fail(error)
        let held = self.held
        self.held = []
        for (_, promise) in held { promise?.fail(error) }
    }
}
