#if canImport(Glibc)
import CHandoffSystem
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Bytes from the system's generator in one call. Swift's `SystemRandomNumberGenerator`, and
/// the generators built on it, make one system call for every 8 bytes; a link's membership
/// proof needs about 7,800 random bytes, which that way cost about 1,000 calls.
enum SystemRandom {
    static func bytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            guard count > 0 else { return }
            #if canImport(Glibc)
            var filled = 0
            while filled < count {
                let got = handoff_random(buffer.baseAddress! + filled, UInt(count - filled))
                if got < 0 {
                    // Interrupted by a signal: try again. The call fails otherwise only when
                    // the kernel has no such call, older than any Linux Swift runs on.
                    precondition(errno == EINTR, "getrandom failed: \(errno)")
                    continue
                }
                filled += Int(got)
            }
            #else
            arc4random_buf(buffer.baseAddress!, count)
            #endif
            initialized = count
        }
    }
}
