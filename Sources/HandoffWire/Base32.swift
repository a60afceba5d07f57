import Foundation

/// Crockford's base32: digits and capitals without I, L, O, U, so a code read aloud or
/// retyped survives; decoding takes lower case and reads I and L as 1, O as 0.
package enum Base32 {
    package static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    package static func encode(_ bytes: [UInt8]) -> String {
        var out = ""
        var buffer = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | Int(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[(buffer >> (bits - 5)) & 31])
                bits -= 5
            }
            buffer &= (1 << bits) - 1
        }
        if bits > 0 { out.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return out
    }

    package static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer = 0
        var bits = 0
        for character in text.uppercased() {
            let normalized: Character = switch character {
            case "I", "L": "1"
            case "O": "0"
            default: character
            }
            guard let value = alphabet.firstIndex(of: normalized) else { return nil }
            buffer = buffer << 5 | value
            bits += 5
            if bits >= 8 {
                out.append(UInt8((buffer >> (bits - 8)) & 0xFF))
                bits -= 8
            }
            buffer &= (1 << bits) - 1
        }
        return out
    }
}
