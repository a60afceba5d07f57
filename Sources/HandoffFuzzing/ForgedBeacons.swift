import Foundation
import HandoffWire

/// S3 under load: random and bit-flipped beacons offered to the beacon opener and, for any
/// that opened, to the replay guard. Run for 10^7 by `Scripts/fuzz.sh`, for a bounded count
/// by the suite, and by the flood benchmark.
public enum ForgedBeacons {
    /// What a run found.
    public struct Outcome: Sendable {
        public var offered: Int
        /// Forged beacons that opened: any is a broken promise.
        public var opened: Int
        /// Senders the replay guard tracks after the run: any is a broken promise.
        public var guardEntries: Int
        public var seconds: Double
    }

    /// Offers `count` forged beacons: every other one 512 random bytes, the rest a valid
    /// beacon with `bitsFlipped` distinct bits flipped (nonce, ciphertext or tag; 1 to 3 unless
    /// a test asks for 0, to see that an opening beacon is counted).
    public static func run(count: Int, bitsFlipped: ClosedRange<Int> = 1...3, seed: UInt64 = UInt64.random(in: 0...UInt64.max)) -> Outcome {
        let key = BeaconKey.generate()
        let valid: [UInt8]
        do {
            valid = try Beacon.seal(
                BeaconContent(sender: UUID(), sequence: 1, timestamp: Date(), linkPort: 1, activity: ActivityAnnouncement(id: UUID(), activityType: "t.x")),
                with: key)
        } catch {
            preconditionFailure("a beacon of fixed short fields seals: \(error)")
        }
        var guardState = BeaconReplayGuard()
        // SplitMix64: random enough to forge with, and fast (no system call per word).
        var state = seed
        func nextWord() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var opened = 0
        var random = [UInt8](repeating: 0, count: Beacon.size)
        let start = ContinuousClock.now
        for index in 0..<count {
            let candidate: [UInt8]
            if index % 2 == 0 {
                for offset in stride(from: 0, to: random.count, by: 8) {
                    let word = nextWord()
                    for byte in 0..<8 { random[offset + byte] = UInt8(truncatingIfNeeded: word >> (8 * UInt64(byte))) }
                }
                candidate = random
            } else {
                // The same bit twice would give the valid beacon back: distinct bits only.
                var flipped = valid
                var bits: Set<Int> = []
                while bits.count < bitsFlipped.lowerBound + index / 2 % bitsFlipped.count { bits.insert(Int(nextWord() % UInt64(Beacon.size * 8))) }
                for bit in bits { flipped[bit / 8] ^= UInt8(1 << (bit % 8)) }
                candidate = flipped
            }
            if let content = Beacon.open(candidate, with: [key]) {
                opened += 1
                _ = guardState.admit(content)
            }
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Outcome(offered: count, opened: opened, guardEntries: guardState.count, seconds: seconds)
    }
}
