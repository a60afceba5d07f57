import Foundation
#if canImport(Glibc)
import CHandoffSystem
#endif

extension UUID {
    /// A new random (version 4) UUID from the system's generator (getrandom), as random as
    /// `UUID()`. Foundation's `UUID()` on Linux opens, reads and closes /dev/urandom for each
    /// one: three system calls on a path an agent takes for every continuation.
    /// One system call for the 16 bytes (Swift's generator makes one for every 8).
    public static func random() -> UUID {
        var words: (UInt64, UInt64) = (0, 0)
        #if canImport(Glibc)
        let filled = withUnsafeMutableBytes(of: &words) { handoff_random($0.baseAddress, 16) }
        #else
        let filled = 0
        #endif
        if filled != 16 {
            // Interrupted, or no such call: Swift's generator, which cannot fail.
            var generator = SystemRandomNumberGenerator()
            words = (generator.next(), generator.next())
        }
        let (high, low) = words
        var bytes = (
            UInt8(truncatingIfNeeded: high >> 56), UInt8(truncatingIfNeeded: high >> 48), UInt8(truncatingIfNeeded: high >> 40),
            UInt8(truncatingIfNeeded: high >> 32), UInt8(truncatingIfNeeded: high >> 24), UInt8(truncatingIfNeeded: high >> 16),
            UInt8(truncatingIfNeeded: high >> 8), UInt8(truncatingIfNeeded: high),
            UInt8(truncatingIfNeeded: low >> 56), UInt8(truncatingIfNeeded: low >> 48), UInt8(truncatingIfNeeded: low >> 40),
            UInt8(truncatingIfNeeded: low >> 32), UInt8(truncatingIfNeeded: low >> 24), UInt8(truncatingIfNeeded: low >> 16),
            UInt8(truncatingIfNeeded: low >> 8), UInt8(truncatingIfNeeded: low)
        )
        bytes.6 = (bytes.6 & 0x0F) | 0x40  // version 4
        bytes.8 = (bytes.8 & 0x3F) | 0x80  // the RFC 4122 variant
        return UUID(uuid: bytes)
    }
}
