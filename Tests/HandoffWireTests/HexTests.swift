import Crypto
import Foundation
import Testing

@testable import HandoffWire

@Suite("Hexadecimal")
struct HexTests {
    @Test("Writes what String(format: \"%02x\") writes, byte for byte")
    func asFormatWrites() {
        var generator = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 15, 32, 100] {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Hex.lowercase(bytes) == bytes.map { String(format: "%02x", $0) }.joined())
        }
        #expect(Hex.lowercase(Array(0...255)) == (0...255).map { String(format: "%02x", $0) }.joined())
        let digest = SHA256.hash(data: Data("abc".utf8))
        #expect(Hex.lowercase(digest) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
