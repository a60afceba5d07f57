import Crypto
import Foundation
import HandoffWire
import NIOCore
import NIOEmbedded
import Testing

@testable import HandoffAgent

/// The membership proof's own logic: what opens, and what a replay or reflection gets.
@Suite("Link membership proof")
struct LinkProofTests {
    let member = try! DeviceIdentity.generate(name: "member")
    let key = SymmetricKey(size: .bits256)
    let connecting = LinkCertificates().current().certificateDER
    let answering = LinkCertificates().current().certificateDER

    @Test("A proof opens with the account's key and names the member's long-term certificate")
    func opens() throws {
        let boxes = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [SymmetricKey(size: .bits256), key])
        #expect(boxes.count == LinkProof.connectingBoxes)
        let opened = try #require(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key]))
        #expect(opened.certificate == member.certificateDER)
        #expect(opened.key == key)
    }

    @Test("The sealing keys are derived as the account keys are set, kept beside them and dropped with them; a proof sealed with a kept one opens with a derived one")
    func sealingKeysKeptWithTheAccountKeys() throws {
        let links = LinkCertificates()
        let (first, second, third) = (SymmetricKey(size: .bits256), SymmetricKey(size: .bits256), SymmetricKey(size: .bits256))
        links.useAccountKeys([first, second].map { $0.withUnsafeBytes { Array($0) } })
        #expect(links.keptSealingKeys == 2)
        #expect(links.sealingKey(for: first) == LinkProof.sealingKey(first))
        #expect(links.sealingKey(for: second) == LinkProof.sealingKey(second))
        #expect(links.sealingKey(for: first) != links.sealingKey(for: second))
        links.retiredKeys = [third]
        #expect(links.keptSealingKeys == 3)
        links.useAccountKeys([third.withUnsafeBytes { Array($0) }])
        #expect(links.keptSealingKeys == 1, "the replaced keys' derived keys were kept")
        // A key not held is derived at its use.
        #expect(links.sealingKey(for: first) == LinkProof.sealingKey(first))
        #expect(links.sealingWithRetiredKeys().keptSealingKeys == 1)
        // A device that leaves its account forgets its keys: the derived ones go with them.
        links.useAccountKeys([])
        #expect(links.keptSealingKeys == 0)
        member.links.useAccountKeys([key.withUnsafeBytes { Array($0) }])
        let boxes = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key])?.certificate == member.certificateDER)
    }

    @Test("A proof does not open with another key, on another link, in the other role, or past its certificate's validity")
    func refuses() throws {
        let boxes = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        let other = LinkCertificates().current().certificateDER
        #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [SymmetricKey(size: .bits256)]) == nil)
        #expect(LinkProof.open(boxes, .connecting, connecting: other, answering: answering, keys: [key]) == nil, "replayed by another client")
        #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: other, keys: [key]) == nil, "replayed to another listener")
        #expect(LinkProof.open(boxes, .answering, connecting: connecting, answering: answering, keys: [key]) == nil, "reflected back as the answer")
        #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key], now: Date().addingTimeInterval(20 * 365 * 86_400)) == nil)
    }

    /// The signature inside the first box of `boxes`, opened with `key`.
    func signature(in boxes: [[UInt8]], _ role: LinkProof.Role) throws -> [UInt8] {
        let plain = Array(try ChaChaPoly.open(ChaChaPoly.SealedBox(combined: boxes[0]), using: LinkProof.sealingKey(key), authenticating: [role.rawValue]))
        let length = Int(plain[0]) << 8 | Int(plain[1])
        return Array(plain[(2 + length)..<(2 + length + 64)])
    }

    /// `boxes`' first box with `change` made to its signature, sealed again with `key`.
    func resealed(_ boxes: [[UInt8]], _ role: LinkProof.Role, signature change: ([UInt8]) throws -> [UInt8]) throws -> [[UInt8]] {
        var plain = Array(try ChaChaPoly.open(ChaChaPoly.SealedBox(combined: boxes[0]), using: LinkProof.sealingKey(key), authenticating: [role.rawValue]))
        let length = Int(plain[0]) << 8 | Int(plain[1])
        plain.replaceSubrange((2 + length)..<(2 + length + 64), with: try change(Array(plain[(2 + length)..<(2 + length + 64)])))
        return [Array(try ChaChaPoly.seal(plain, using: LinkProof.sealingKey(key), authenticating: [role.rawValue]).combined)]
    }

    @Test("A link opened again between the same shown certificates carries the signature made for the last one; another link's is made anew; the boxes are sealed anew")
    func signatureMadeOnce() throws {
        let first = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        let again = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        // ECDSA signatures are randomized: made twice, they would differ.
        #expect(try signature(in: first, .connecting) == signature(in: again, .connecting))
        #expect(first[0] != again[0], "a box is sealed with a fresh nonce every time")
        let other = LinkCertificates().current().certificateDER
        let elsewhere = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: other, keys: [key])
        #expect(try signature(in: elsewhere, .connecting) != signature(in: first, .connecting))
        let answer = LinkProof.make(.answering, identity: member, connecting: connecting, answering: answering, keys: [key])
        #expect(try signature(in: answer, .answering) != signature(in: first, .connecting))
        let otherMember = try DeviceIdentity.generate(name: "other member")
        let theirs = LinkProof.make(.connecting, identity: otherMember, connecting: connecting, answering: answering, keys: [key])
        #expect(try signature(in: theirs, .connecting) != signature(in: first, .connecting))
        #expect(LinkProof.open(theirs, .connecting, connecting: connecting, answering: answering, keys: [key])?.certificate == otherMember.certificateDER)
    }

    @Test("A signature checked once is known only byte for byte: a changed one, one moved to another link or role, or one under an expired certificate is refused after it")
    func signatureCheckedOnce() throws {
        let boxes = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        for _ in 0..<2 { #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key]) != nil) }
        // Every byte of the signature matters.
        for index in [0, 31, 32, 63] {
            let changed = try resealed(boxes, .connecting) { signature in
                var signature = signature
                signature[index] ^= 0x01
                return signature
            }
            #expect(LinkProof.open(changed, .connecting, connecting: connecting, answering: answering, keys: [key]) == nil, "byte \(index) changed")
        }
        // The signature of the link checked is refused on another one, and in the other role.
        let other = LinkCertificates().current().certificateDER
        let moved = try resealed(LinkProof.make(.connecting, identity: member, connecting: connecting, answering: other, keys: [key]), .connecting) { _ in
            try signature(in: boxes, .connecting)
        }
        #expect(LinkProof.open(moved, .connecting, connecting: connecting, answering: other, keys: [key]) == nil)
        let reflected = try resealed(LinkProof.make(.answering, identity: member, connecting: connecting, answering: answering, keys: [key]), .answering) { _ in
            try signature(in: boxes, .connecting)
        }
        #expect(LinkProof.open(reflected, .answering, connecting: connecting, answering: answering, keys: [key]) == nil)
        // Known valid, but its certificate is not valid then.
        #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key], now: Date().addingTimeInterval(20 * 365 * 86_400)) == nil)
        // Another member's certificate with this signature.
        let otherMember = try DeviceIdentity.generate(name: "other member")
        let theirs = LinkProof.make(.connecting, identity: otherMember, connecting: connecting, answering: answering, keys: [key])
        let borrowed = try resealed(theirs, .connecting) { _ in try signature(in: boxes, .connecting) }
        #expect(LinkProof.open(borrowed, .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
    }

    @Test("The made and checked signatures kept start again when full")
    func signaturesKeptAreBounded() throws {
        let kept = ProofSignatures(capacity: 4)
        let transcripts = (0..<9).map { LinkProof.transcript(.connecting, connecting: [UInt8($0)], answering: answering) }
        for transcript in transcripts {
            let signature = kept.signature(by: member.privateKey, signer: member.fingerprint, over: transcript)
            #expect(kept.isValid(signature[...], certificate: member.certificateDER, key: member.privateKey.publicKey, over: transcript))
            #expect(kept.counts.made <= 4 && kept.counts.checked <= 4)
        }
        #expect(kept.counts.made == 1 && kept.counts.checked == 1)
    }

    @Test("The certificates a link's opening keeps are checked again at every use: past or before its validity, a kept one is refused")
    func keptIsCheckedAgain() throws {
        let boxes = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        let later = Date().addingTimeInterval(20 * 365 * 86_400), earlier = Date().addingTimeInterval(-20 * 365 * 86_400)
        // Each is read (and kept) at the first call, and checked again at the next ones.
        for _ in 0..<2 {
            #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key]) != nil)
            #expect(LinkTLS.acceptsShown(connecting, .members({ _ in true })))
            for now in [later, earlier] {
                #expect(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key], now: now) == nil)
                #expect(!LinkTLS.acceptsShown(connecting, .members({ _ in true }), now: now))
            }
        }
        #expect(!LinkTLS.acceptsShown(Array(connecting.dropLast()), .members({ _ in true })), "not a certificate")
    }

    @Test("A table of read certificates keeps each by its bytes, at most its capacity, and nothing over its size limit")
    func keptTable() throws {
        let table = ReadCertificates(capacity: 8, largestKept: 2048)
        let first = LinkCertificates().current().certificateDER
        let read = try #require(table.read(first))
        #expect(table.keeps(first) && table.count == 1)
        // Another certificate with the same name (every shown one is CN=Handoff) and other dates
        // is read on its own, never taken for the one kept.
        let expired = LinkCertificates.make(made: .now, now: Date().addingTimeInterval(-30 * 86_400)).certificateDER
        let other = try #require(table.read(expired))
        #expect(!other.isValid(now: Date()) && read.isValid(now: Date()))
        #expect(other.key?.rawRepresentation != read.key?.rawRepresentation)
        for _ in 0..<20 { _ = table.read(LinkCertificates().current().certificateDER) }
        #expect(table.count <= 8)
        // Over the size limit: read, not kept.
        let small = ReadCertificates(capacity: 8, largestKept: first.count - 1)
        #expect(small.read(first) != nil && !small.keeps(first) && small.count == 0)
        #expect(table.read(Array(first.dropLast())) == nil && !table.keeps(Array(first.dropLast())))
        // The tables the agent uses are two: a stranger's handshakes fill only the shown one.
        #expect(ReadCertificates.shown !== ReadCertificates.members)
    }

    @Test("A box sealed with the account's key but holding a certificate another key signed for does not verify")
    func forgedContent() throws {
        let impostor = try DeviceIdentity.generate(name: "impostor")
        // The impostor's signature with the member's certificate: sealed properly, signed wrongly.
        let signature = try impostor.privateKey.signature(for: LinkProof.transcript(.connecting, connecting: connecting, answering: answering)).rawRepresentation
        let certificate = member.certificateDER
        let plain = [UInt8(certificate.count >> 8), UInt8(certificate.count & 0xFF)] + certificate + Array(signature)
        let box = Array(try ChaChaPoly.seal(plain, using: LinkProof.sealingKey(key), authenticating: [LinkProof.Role.connecting.rawValue]).combined)
        #expect(LinkProof.open([box], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
        // Truncated and empty boxes are refused, never trapped on.
        #expect(LinkProof.open([Array(box.prefix(20)), []], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
    }

    @Test("A proof's size says nothing of the device: names of 1 and 64 bytes, one key or two, make proofs of one size")
    func sameSize() throws {
        let short = try DeviceIdentity.generate(name: "a")
        let long = try DeviceIdentity.generate(name: String(repeating: "n", count: 64))
        let one = LinkProof.make(.connecting, identity: short, connecting: connecting, answering: answering, keys: [key])
        let two = LinkProof.make(.connecting, identity: long, connecting: connecting, answering: answering, keys: [key, SymmetricKey(size: .bits256)])
        #expect(LinkMessage.proof(boxes: one).frame.encoded.count == LinkMessage.proof(boxes: two).frame.encoded.count)
        let answerShort = LinkProof.make(.answering, identity: short, connecting: connecting, answering: answering, keys: [key])
        let answerLong = LinkProof.make(.answering, identity: long, connecting: connecting, answering: answering, keys: [key])
        #expect(answerShort.map(\.count) == answerLong.map(\.count))
        #expect(one.allSatisfy { $0.count == LinkProof.boxSize })
        // A box of another size is refused before anything is opened.
        #expect(LinkProof.open([Array(one[0].dropLast())], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
    }

    @Test("The boxes a connecting member has no key for are random: of the box size, each unlike the others and unlike the last proof's")
    func fillerBoxes() {
        let first = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        let second = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        let fillers = Array(first.dropFirst()) + Array(second.dropFirst())
        #expect(fillers.count == 2 * (LinkProof.connectingBoxes - 1))
        #expect(fillers.allSatisfy { $0.count == LinkProof.boxSize })
        #expect(Set(fillers).count == fillers.count)
        // Not a fixed pattern: every byte value shows up across 14 KiB of random bytes.
        #expect(Set(fillers.joined()).count == 256)
        #expect(SystemRandom.bytes(0).isEmpty)
        #expect(SystemRandom.bytes(100_000).count == 100_000)
    }

    @Test("A connecting proof carries early frames inside its seal, at no cost in size; an answer says whether it took them; frames that do not fit are left out")
    func earlyFrames() throws {
        let hello = LinkMessage.hello(version: LinkMessage.version, device: member.id).frame
        let fetch = LinkMessage.fetch(request: 1, activityID: UUID()).frame
        let plain = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key])
        let target = String(repeating: "ab", count: 32)
        let carrying = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key], early: [hello, fetch], target: target)
        #expect(carrying.map(\.count) == plain.map(\.count))
        let opened = try #require(LinkProof.open(carrying, .connecting, connecting: connecting, answering: answering, keys: [key]))
        #expect(opened.early == [hello, fetch])
        #expect(opened.earlyTarget == target)
        // Without a target, nothing is carried.
        let untargeted = LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key], early: [hello, fetch])
        #expect(try #require(LinkProof.open(untargeted, .connecting, connecting: connecting, answering: answering, keys: [key])).early.isEmpty)
        #expect(try #require(LinkProof.open(plain, .connecting, connecting: connecting, answering: answering, keys: [key])).early.isEmpty)
        // Sealed: the frames' bytes are nowhere in the boxes.
        #expect(!carrying.contains { $0.contains(fetch.payload) })
        // Too large for the room: left out, and the proof is what it would have been.
        let large = Frame(kind: 9, payload: [UInt8](repeating: 7, count: LinkProof.earlyRoom(member)))
        let tooMuch = try #require(LinkProof.open(
            LinkProof.make(.connecting, identity: member, connecting: connecting, answering: answering, keys: [key], early: [hello, large], target: target), .connecting,
            connecting: connecting, answering: answering, keys: [key]))
        #expect(tooMuch.early.isEmpty)
        // The answering side's word.
        for took in [true, false] {
            let answer = LinkProof.make(.answering, identity: member, connecting: connecting, answering: answering, keys: [key], tookEarly: took)
            #expect(try #require(LinkProof.open(answer, .answering, connecting: connecting, answering: answering, keys: [key])).tookEarly == took)
        }
    }

    @Test("A connecting proof whose early frames are cut short, or whose section runs past the box, is refused (a member's proof, rightly signed and sealed)")
    func earlyFramesCutShort() throws {
        let signature = try member.privateKey.signature(for: LinkProof.transcript(.connecting, connecting: connecting, answering: answering)).rawRepresentation
        let certificate = member.certificateDER
        let head = [UInt8(certificate.count >> 8), UInt8(certificate.count & 0xFF)] + certificate + Array(signature)
        let frame = Array(String(repeating: "ab", count: 32).utf8) + LinkMessage.fetch(request: 1, activityID: UUID()).frame.encoded
        func box(_ tail: [UInt8]) throws -> [UInt8] {
            let plain = head + tail + [UInt8](repeating: 0, count: 2 + LinkProof.certificateRoom + 64 - head.count - tail.count)
            return Array(try ChaChaPoly.seal(plain, using: LinkProof.sealingKey(key), authenticating: [LinkProof.Role.connecting.rawValue]).combined)
        }
        let whole = try box([0, UInt8(frame.count)] + frame)
        #expect(try #require(LinkProof.open([whole], .connecting, connecting: connecting, answering: answering, keys: [key])).early.count == 1)
        // The section says one byte fewer than the frame: the frame is cut short.
        #expect(LinkProof.open([try box([0, UInt8(frame.count - 1)] + frame)], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
        // A frame whose header declares more than the section holds.
        var lying = frame
        lying[LinkProof.targetSize + 3] &+= 40
        #expect(LinkProof.open([try box([0, UInt8(lying.count)] + lying)], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
        // A section longer than the room left in the box; one too short for its target.
        #expect(LinkProof.open([try box([0xFF, 0xFF])], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
        #expect(LinkProof.open([try box([0, 10] + Array(frame.prefix(10)))], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
        // A frame that declares 4 GiB less one byte (the length's top bit set).
        let huge = Array(frame.prefix(64)) + [0xFF, 0xFF, 0xFF, 0xFF, 1]
        #expect(LinkProof.open([try box([0, UInt8(huge.count)] + huge)], .connecting, connecting: connecting, answering: answering, keys: [key]) == nil)
    }

    /// Whether `future` failed already (an embedded channel's future that is never completed
    /// would block `wait()` for ever).
    static func failed(_ future: EventLoopFuture<LinkPeer>) -> Bool {
        let failed = Shared(false)
        future.whenFailure { _ in failed.update { $0 = true } }
        return failed.value
    }

    /// An answering side's proof handler behind a frame decoder, in an embedded channel.
    func answering(deadline: TimeAmount = .seconds(10)) throws -> (EmbeddedChannel, LinkProofHandler) {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(FrameHandler(maximumPayload: 1 << 20))
        let handler = LinkProofHandler(.answering, identity: member, shown: answering, accepting: { _ in true }, maximumFrame: 1 << 20, deadline: deadline, eventLoop: channel.eventLoop)
        try channel.pipeline.syncOperations.addHandler(handler)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, handler)
    }

    @Test("Before the proof, a frame that declares more than 16 KiB closes the link from its header alone")
    func smallFramesBeforeTheProof() throws {
        let (channel, handler) = try answering()
        // A 100 KiB frame's header: the link's own limit (1 MiB) would wait for its body.
        #expect(throws: FrameError.self) { try channel.writeInbound(ByteBuffer(bytes: [0x00, 0x01, 0x90, 0x00, 0x02])) }
        #expect(!channel.isActive)
        #expect(Self.failed(handler.peer.futureResult))
    }

    @Test("A link whose proof does not come within the deadline is closed")
    func proofDeadline() throws {
        let (channel, handler) = try answering(deadline: .seconds(2))
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
        #expect(Self.failed(handler.peer.futureResult))
    }

    @Test("A proof frame round-trips and refuses more boxes than allowed")
    func frame() throws {
        let message = LinkMessage.proof(boxes: [[1, 2, 3], [4]])
        #expect(try LinkMessage(frame: message.frame) == message)
        let tooMany = LinkMessage.proof(boxes: Array(repeating: [1], count: LinkMessage.maximumProofBoxes + 1)).frame
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: tooMany) }
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: LinkMessage.proof(boxes: []).frame) }
    }
}
