import Crypto
import Foundation
import HandoffWire
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
        #expect(boxes.count == 2)
        let opened = try #require(LinkProof.open(boxes, .connecting, connecting: connecting, answering: answering, keys: [key]))
        #expect(opened.certificate == member.certificateDER)
        #expect(opened.key == key)
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

    @Test("A proof frame round-trips and refuses more boxes than allowed")
    func frame() throws {
        let message = LinkMessage.proof(boxes: [[1, 2, 3], [4]])
        #expect(try LinkMessage(frame: message.frame) == message)
        let tooMany = LinkMessage.proof(boxes: Array(repeating: [1], count: LinkMessage.maximumProofBoxes + 1)).frame
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: tooMany) }
        #expect(throws: LinkMessageError.self) { try LinkMessage(frame: LinkMessage.proof(boxes: []).frame) }
    }
}
