/// Lower-case hexadecimal, as fingerprints and file digests are shown and stored. Written out
/// by hand: `String(format: "%02x")` costs about 2 µs a byte on Linux, and the agent shows its
/// fingerprint in the answer to every local client's `hello`.
package enum Hex {
    package static func lowercase(_ bytes: some Sequence<UInt8>) -> String {
        let digits: StaticString = "0123456789abcdef"
        var text: [UInt8] = []
        text.reserveCapacity(bytes.underestimatedCount * 2)
        digits.withUTF8Buffer { digits in
            for byte in bytes {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: text, as: UTF8.self)
    }
}
