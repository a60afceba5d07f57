import Foundation
import Testing

@testable import HandoffWire

@Suite("Sealed beacons")
struct BeaconTests {
    let key = BeaconKey.generate()
    let sender = UUID()
    let now = Date(timeIntervalSince1970: 1_795_000_000.123)

    func content(sequence: UInt64 = 1, activity: ActivityAnnouncement? = nil) -> BeaconContent {
        BeaconContent(sender: sender, sequence: sequence, timestamp: now, linkPort: 48_123, activity: activity)
    }

    var editing: ActivityAnnouncement {
        ActivityAnnouncement(
            id: UUID(), activityType: "com.example.notes.editing", title: "Groceries", teamIdentifier: "TEAM1",
            hasWebpageURL: true, supportsContinuationStreams: true)
    }

    @Test("A sealed beacon opens with the account's key to what was sealed")
    func roundTrip() throws {
        for activity in [nil, editing, ActivityAnnouncement(id: UUID(), activityType: "t")] {
            let sealed = try Beacon.seal(content(activity: activity), with: key)
            #expect(Beacon.open(sealed, with: [key]) == content(activity: activity))
        }
    }

    @Test("S2: Every beacon is the same size, whatever it carries")
    func oneSize() throws {
        var long = editing
        long.title = String(repeating: "a long title ", count: 100)
        let sizes = try [nil, editing, long, ActivityAnnouncement(id: UUID(), activityType: "t")].map {
            try Beacon.seal(content(activity: $0), with: key).count
        }
        #expect(Set(sizes) == [Beacon.size])
    }

    @Test("A beacon sealed with another account's key does not open")
    func otherAccount() throws {
        let sealed = try Beacon.seal(content(activity: editing), with: BeaconKey.generate())
        #expect(Beacon.open(sealed, with: [key]) == nil)
    }

    @Test("The previous key still opens beacons while a new key spreads")
    func previousKey() throws {
        let old = BeaconKey.generate()
        let sealed = try Beacon.seal(content(), with: old)
        #expect(Beacon.open(sealed, with: [key, old]) != nil)
    }

    @Test("S3: Flipping any bit of a beacon makes it fail to open")
    func everyBitFlip() throws {
        let sealed = try Beacon.seal(content(activity: editing), with: key)
        for index in sealed.indices {
            for bit in 0..<8 {
                var forged = sealed
                forged[index] ^= 1 << bit
                #expect(Beacon.open(forged, with: [key]) == nil, "byte \(index) bit \(bit)")
            }
        }
    }

    @Test("S3: Random bytes, and bytes of the wrong size, never open")
    func randomBytes() {
        // A short run here; the fuzzing script runs the 10^7 the security promise asks for.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            var bytes = [UInt8](repeating: 0, count: Beacon.size)
            for word in stride(from: 0, to: Beacon.size, by: 8) {
                withUnsafeBytes(of: generator.next() as UInt64) { bytes.replaceSubrange(word..<word + 8, with: $0) }
            }
            #expect(Beacon.open(bytes, with: [key]) == nil)
        }
        for size in [0, 1, 28, Beacon.size - 1, Beacon.size + 1, 4096] {
            #expect(Beacon.open([UInt8](repeating: 0, count: size), with: [key]) == nil)
        }
    }

    @Test("No byte position is the same across beacons of the same content")
    func nothingStable() throws {
        let sealed = try (0..<200).map { _ in try Beacon.seal(content(activity: editing), with: key) }
        for position in 0..<Beacon.size {
            let values = Set(sealed.map { $0[position] })
            #expect(values.count > 100, "position \(position) takes only \(values.count) values")
        }
    }

    @Test("A long title is shortened at a character boundary with an ellipsis")
    func longTitle() throws {
        var activity = editing
        activity.title = String(repeating: "é日", count: 200)
        let opened = try #require(Beacon.open(Beacon.seal(content(activity: activity), with: key), with: [key]))
        let title = try #require(opened.activity?.title)
        #expect(title.hasSuffix("…"))
        #expect(activity.title!.hasPrefix(String(title.dropLast())))
    }

    @Test("An activity type or team too long for a beacon is refused with the reason")
    func tooLong() {
        var activity = editing
        activity.activityType = String(repeating: "x", count: Beacon.maximumActivityTypeBytes + 1)
        #expect(throws: BeaconError.fieldTooLong(field: "type", bytes: Beacon.maximumActivityTypeBytes + 1, limit: Beacon.maximumActivityTypeBytes)) {
            try Beacon.seal(content(activity: activity), with: key)
        }
        activity = editing
        activity.teamIdentifier = String(repeating: "T", count: 65)
        #expect(throws: BeaconError.self) { try Beacon.seal(content(activity: activity), with: key) }
    }

    @Test("A sealed part with non-zero padding, an unknown version or kind is refused")
    func strictInside() throws {
        var plaintext = try Beacon.encode(content(activity: editing))
        plaintext[plaintext.count - 1] = 1
        #expect(Beacon.decode(plaintext) == nil)
        plaintext = try Beacon.encode(content())
        plaintext[0] = 3
        #expect(Beacon.decode(plaintext) == nil)
        // Options the version does not know.
        plaintext = try Beacon.encode(content())
        plaintext[46] = 4
        #expect(Beacon.decode(plaintext) == nil)
        plaintext = try Beacon.encode(content())
        plaintext[1] = 7
        #expect(Beacon.decode(plaintext) == nil)
    }

    @Test("Version 2 carries the refresh interval and the request for answers; a version 1 beacon still opens")
    func versions() throws {
        let editing = self.editing
        var withOptions = content(activity: editing)
        withOptions.refreshSeconds = 60
        withOptions.asksForAnswers = true
        withOptions.wantsIPv6 = true
        #expect(Beacon.decode(try Beacon.encode(withOptions)) == withOptions)
        // An option this version does not know makes the beacon unreadable, not misread.
        var unknown = try Beacon.encode(withOptions)
        unknown[46] |= 4
        #expect(Beacon.decode(unknown) == nil)
        // A version 1 sealed part: the same fields without the three bytes of version 2.
        var old = try Beacon.encode(content(activity: editing))
        old.removeSubrange(44..<47)
        old.append(contentsOf: [0, 0, 0])
        old[0] = 1
        let opened = try #require(Beacon.decode(old))
        #expect(opened.activity == editing && opened.refreshSeconds == nil && !opened.asksForAnswers)
    }

    @Test("S1: No byte of a sealed beacon is the same in every beacon: nothing in clear marks a sender, a version or a key")
    func nothingInClear() throws {
        let key = BeaconKey.generate()
        let beacons = try (0..<64).map { _ in try Beacon.seal(content(activity: nil), with: key) }
        for position in 0..<Beacon.size {
            let values = Set(beacons.map { $0[position] })
            #expect(values.count > 1, "byte \(position) is \(values.first!) in all 64 beacons")
        }
    }

    /// The byte positions of `beacons` (in the order sent) that look like a field in clear: a
    /// value that recurs in more than a tenth of them, or a step from one beacon to the next
    /// (modulo 256) that recurs in more than a tenth of the pairs. A constant, a sender's tag, a
    /// version, a counter in either byte order or a clock in seconds shows in one of the two;
    /// random bytes recur by chance in about 1 in 256.
    static func fieldsInClear(_ beacons: [[UInt8]]) -> [String] {
        guard let size = beacons.first?.count, beacons.count >= 100 else { return ["too few beacons to tell"] }
        let limit = beacons.count / 10
        var found: [String] = []
        for position in 0..<size {
            var values = [Int](repeating: 0, count: 256)
            var steps = [Int](repeating: 0, count: 256)
            for (index, beacon) in beacons.enumerated() {
                values[Int(beacon[position])] += 1
                if index > 0 { steps[Int(beacon[position] &- beacons[index - 1][position])] += 1 }
            }
            if let most = values.max(), most > limit { found.append("byte \(position) takes one value in \(most) of \(beacons.count) beacons") }
            if let most = steps.max(), most > limit { found.append("byte \(position) steps by one amount in \(most) of \(beacons.count - 1) pairs") }
        }
        return found
    }

    @Test("S1: Across 300 beacons of one sender, its sequence rising and its activity the same, no byte repeats or counts")
    func nothingCounts() throws {
        let activity = editing
        let beacons = try (1...300).map { sequence in
            try Beacon.seal(
                BeaconContent(sender: sender, sequence: UInt64(sequence), timestamp: now.addingTimeInterval(Double(sequence)), linkPort: 48_123, activity: activity), with: key)
        }
        #expect(Self.fieldsInClear(beacons).isEmpty, "\(Self.fieldsInClear(beacons).prefix(5))")
    }

    @Test("S1: The check above finds a 2-byte counter in clear, in either byte order, a clock in seconds, and a tag in half the beacons")
    func clearFieldsAreFound() throws {
        let sealed = try (1...300).map { sequence in try Beacon.seal(content(sequence: UInt64(sequence)), with: key) }
        // What a beacon leaking its sequence would look like: the sealed bytes with a
        // cleartext counter written over two of them.
        for (offset, bigEndian) in [(0, true), (0, false), (200, true), (510, false)] {
            let leaking = sealed.enumerated().map { index, beacon in
                var beacon = beacon
                let counter = UInt16(1000 + index)
                beacon[offset] = UInt8(bigEndian ? counter >> 8 : counter & 0xFF)
                beacon[offset + 1] = UInt8(bigEndian ? counter & 0xFF : counter >> 8)
                return beacon
            }
            #expect(!Self.fieldsInClear(leaking).isEmpty, "a counter at byte \(offset) went unseen")
        }
        let clock = sealed.enumerated().map { index, beacon in
            var beacon = beacon
            beacon[300] = UInt8(truncatingIfNeeded: (1_795_000_000 + index / 4))
            return beacon
        }
        #expect(!Self.fieldsInClear(clock).isEmpty, "a clock in seconds went unseen")
        let tagged = sealed.enumerated().map { index, beacon in
            var beacon = beacon
            if index % 2 == 0 { beacon[17] = 0xA5 }
            return beacon
        }
        #expect(!Self.fieldsInClear(tagged).isEmpty, "a tag in half the beacons went unseen")
    }

    @Test("A key of the wrong length is refused")
    func badKey() throws {
        #expect(throws: BeaconError.badKey(length: 16)) { try BeaconKey(rawRepresentation: [UInt8](repeating: 1, count: 16)) }
        #expect(try BeaconKey(rawRepresentation: key.rawRepresentation) == key)
    }
}

@Suite("Refusing replayed beacons")
struct BeaconReplayGuardTests {
    let sender = UUID()
    let now = Date(timeIntervalSince1970: 1_795_000_000)

    func beacon(_ sequence: UInt64, at time: Date? = nil, from sender: UUID? = nil) -> BeaconContent {
        BeaconContent(sender: sender ?? self.sender, sequence: sequence, timestamp: time ?? now, linkPort: 1, activity: nil)
    }

    @Test("Newer sequences are accepted, a repeated or older one is refused")
    func sequences() {
        var guardian = BeaconReplayGuard()
        #expect(guardian.admit(beacon(5), now: now) == .accepted)
        #expect(guardian.admit(beacon(5), now: now) == .replayed)
        #expect(guardian.admit(beacon(4), now: now) == .replayed)
        #expect(guardian.admit(beacon(6), now: now) == .accepted)
    }

    @Test("S4: A captured beacon replayed later is refused as stale")
    func stale() {
        var guardian = BeaconReplayGuard(window: 30)
        #expect(guardian.admit(beacon(1), now: now.addingTimeInterval(31)) == .stale)
        #expect(guardian.admit(beacon(1, at: now.addingTimeInterval(60)), now: now) == .fromTheFuture)
        #expect(guardian.count == 0)
    }

    @Test("Senders are tracked apart")
    func senders() {
        var guardian = BeaconReplayGuard()
        #expect(guardian.admit(beacon(9), now: now) == .accepted)
        #expect(guardian.admit(beacon(1, from: UUID()), now: now) == .accepted)
    }

    @Test("The guard remembers a bounded number of senders")
    func bounded() {
        var guardian = BeaconReplayGuard(capacity: 100)
        for _ in 0..<1_000 { _ = guardian.admit(beacon(1, from: UUID()), now: now) }
        #expect(guardian.count == 100)
    }
}
