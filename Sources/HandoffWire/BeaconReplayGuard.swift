import Foundation

/// Decides whether an opened beacon is new: its sequence must be greater than the last one
/// accepted from its sender, and its time within `window` of the receiver's clock. Only
/// beacons that opened reach it, so forged bytes never change it.
///
/// It remembers at most `capacity` senders, dropping the one heard from longest ago, so that
/// its memory is bounded whatever arrives.
public struct BeaconReplayGuard: Sendable {
    /// What the guard decided about a beacon.
    public enum Verdict: Sendable, Hashable {
        case accepted
        /// Its sequence is not newer than one already accepted from the sender.
        case replayed
        /// Sealed longer ago than the window allows.
        case stale
        /// Sealed further in the future than the window allows: a clock far off, or a forgery.
        case fromTheFuture
    }

    public let window: TimeInterval
    public let capacity: Int
    private var latest: [UUID: (sequence: UInt64, heard: UInt64)] = [:]
    private var tick: UInt64 = 0

    public init(window: TimeInterval = 30, capacity: Int = 4096) {
        precondition(window > 0 && capacity > 0)
        self.window = window
        self.capacity = capacity
    }

    /// The number of senders remembered.
    public var count: Int { latest.count }

    public mutating func admit(_ content: BeaconContent, now: Date = Date()) -> Verdict {
        let age = now.timeIntervalSince(content.timestamp)
        if age > window { return .stale }
        if age < -window { return .fromTheFuture }
        if let last = latest[content.sender], content.sequence <= last.sequence { return .replayed }
        tick += 1
        if latest[content.sender] == nil && latest.count >= capacity {
            // Forget the sender heard from longest ago; its old beacons are stale soon anyway.
            if let oldest = latest.min(by: { $0.value.heard < $1.value.heard })?.key {
                latest[oldest] = nil
            }
        }
        latest[content.sender] = (content.sequence, tick)
        return .accepted
    }
}
