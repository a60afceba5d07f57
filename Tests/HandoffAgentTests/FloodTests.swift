import Foundation
import Handoff
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOPosix
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection from `source` (a loopback address) to `port` on 127.0.0.1 that sends
/// nothing; its descriptor, for the test to close. It does not wait for the connection to be
/// made (a listener that is full would hold up the thread, one of the few async code shares).
func silentConnection(from source: String, to port: Int) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
    var local = sockaddr_in()
    local.sin_family = sa_family_t(AF_INET)
    local.sin_addr.s_addr = inet_addr(source)
    var target = local
    target.sin_addr.s_addr = inet_addr("127.0.0.1")
    target.sin_port = in_port_t(UInt16(port).bigEndian)
    _ = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    _ = withUnsafePointer(to: &target) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    return fd
}

/// Keeps what is logged, for a test to read.
final class LogLines: Sendable {
    let lines = Mutex<[(Logger.Level, String)]>([])
    var logger: Logger { Logger(label: "test") { _ in Handler(store: self) } }
    func count(_ text: String, at level: Logger.Level? = nil) -> Int {
        lines.withLock { $0.filter { (level == nil || $0.0 == level) && $0.1.contains(text) }.count }
    }

    struct Handler: LogHandler {
        let store: LogLines
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { store.lines.withLock { $0.append((event.level, "\(event.message)")) } }
    }
}

@Suite("Floods", .serialized)
struct FloodTests {
    @Test("S10: A flood is logged once when it starts and once when it stops, however many refusals it brings; the next flood is logged again")
    func watchLogsOnce() async throws {
        let log = LogLines()
        let watch = FloodWatch(what: "beacons", threshold: 100, quiet: .milliseconds(300), logger: log.logger)
        for _ in 0..<50 { watch.refused(from: "10.0.0.9", reason: "did not open") }
        #expect(log.count("flood") == 0, "50 in a second is not a flood")
        for index in 0..<100_000 { watch.refused(from: "10.0.0.\(index % 300)", reason: index % 2 == 0 ? "did not open" : "replayed") }
        #expect(log.count("a flood of beacons", at: .warning) == 1)
        #expect(watch.isFlooding)
        // The end is noticed once 300 ms pass without a refusal (waited for boundedly, and
        // generously: in one full run of the suite on two cores the watch's timer woke only
        // after more than 10 s).
        #expect(await eventually(within: .seconds(30)) { !watch.isFlooding })
        #expect(log.count("the flood of beacons stopped", at: .notice) == 1)
        for _ in 0..<200 { watch.refused(from: "10.0.0.7", reason: "replayed") }
        #expect(log.count("a flood of beacons", at: .warning) == 2)
        #expect(watch.floods == 2)
        #expect(log.lines.withLock { $0.count } == 3)
    }

    @Test("S10: A per-address budget admits its number a second from each address, and no more; other addresses keep theirs")
    func budget() {
        let budget = SourceBudget(perSecond: 200, capacity: 4)
        #expect((0..<1_000).filter { _ in budget.spend("10.0.0.1") }.count == 200)
        #expect(budget.spend("10.0.0.2"))
        _ = budget.spend("10.0.0.3")
        _ = budget.spend("10.0.0.4")
        // More addresses than it remembers share one budget: memory stays bounded, and a
        // flood of new addresses gets one address's worth, not one each.
        #expect((5..<505).filter { budget.spend("10.0.0.\($0)") }.count == 200)
        #expect(budget.spend("10.0.0.2"), "an address it remembers keeps its own budget")
    }

    @Test("S10: A member's address keeps its own budget through 120 s of 6,000 spoofed addresses at 6,000 a second, beaconing every 15 s")
    func memberKeepsItsBudget() {
        let budget = SourceBudget(perSecond: 200)
        let start = ContinuousClock.now
        budget.trust("192.0.2.10", now: start)
        var heard = 0
        for tick in 0..<(120 * 100) {
            let now = start + .milliseconds(tick * 10)
            for spoofed in 0..<60 { _ = budget.spend("10.1.\((tick * 60 + spoofed) % 6000 / 250).\((tick * 60 + spoofed) % 250)", now: now) }
            if tick % 1500 == 0 {
                if budget.spend("192.0.2.10", now: now) {
                    heard += 1
                    budget.trust("192.0.2.10", now: now)
                }
            }
        }
        #expect(heard == 8, "the member's beacons were heard \(heard) times of 8")
        #expect(!budget.spend("10.9.9.9", now: start + .seconds(120)), "a new stranger shares the spent overflow budget")
    }

    @Test("S10: 6,000 spoofed sources at 6,000 a second do not starve a member's beacons: B stays listed on A and continues throughout")
    func spoofedSources() async throws {
        // Each agent on event loops of its own, as a handoffd process has: the flood must be
        // weathered by the agent's own loop, not by loops that other tests' transfers of
        // megabytes keep busy for seconds at a time in this process.
        let loopsA = MultiThreadedEventLoopGroup(numberOfThreads: 1), loopsB = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer {
            loopsA.shutdownGracefully { _ in }
            loopsB.shutdownGracefully { _ in }
        }
        try await withHarness { harness in
            // Beacons every second, gone after 10 s unheard: the flood need not last long to tell.
            // (4 s and then 6 s left too little room: the in-process agents' tasks share Swift's
            // two pool threads with every other test of the suite, which stalled them for 3–6 s
            // at a time on 2 cores; a handoffd runs its tasks on its own loops.)
            // Both beacon every 3 s (on loopback they share the address 127.0.0.1, and A hears
            // its own beacons): quiet for more than a second at a time, B's address would be
            // forgotten by A's per-address budget and share the strangers' budget, unheard,
            // unless A trusts it for having been a member's (`SourceBudget.trust`).
            let a = try await harness.start("alpha", eventLoopGroup: loopsA) { $0.refreshInterval = .seconds(3); $0.expiry = .seconds(10) }
            let b = try await harness.start("beta", eventLoopGroup: loopsB) { $0.refreshInterval = .seconds(3); $0.expiry = .seconds(10) }
            try await harness.pair([a, b])
            try await harness.installMapViewer(on: a)
            let activity = mapActivity()
            let record = ActivityRecord(activity: activity, userInfo: try UserInfoCoding.encode(["latitude": 37.79] as [AnyHashable: Any]))
            let origin = try await b.offer(activity, answering: .answer(record), seenBy: a)
            defer { origin.client.close() }
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Scripts/spoof-flood.py").standardizedFileURL.path
            let seconds = 14
            let flood = try RunningCommand(
                URL(fileURLWithPath: "/usr/bin/env"),
                ["python3", script, "239.255.71.68", "\(harness.discoveryPort)", "6000", "6000", "\(seconds)", "\(Beacon.size)"])
            // Past the 10 s expiry (so only beacons heard during the flood keep it there), B's
            // activity must still be listed every time A is asked, and continue. The flood is
            // no longer than before: its load is felt by the whole suite.
            // Every refusal of B's address by A's per-address budget is counted: on loopback B
            // (and A itself) send from 127.0.0.1.
            let budget = try #require(await a.agent?.discovery?.budget)
            budget.countRefusals(of: "127.0.0.1")
            let started = ContinuousClock.now
            var missing: [Int] = []
            var continued = 0
            while flood.isRunning, ContinuousClock.now - started < .seconds(seconds - 1) {
                // Period: the flood is sampled once a second.
                try await Task.sleep(for: .seconds(1))
                let second = Int((ContinuousClock.now - started).components.seconds)
                guard second >= 11 else { continue }
                if (try? await a.nearby().contains { $0.activity.id == activity.id }) != true {
                    missing.append(second)
                } else if continued == 0, try await a.attempt(.continue(activity: activity.id)).error == nil {
                    continued += 1
                }
            }
            // The listing is what a person sees, but in this process it also waits on Swift's
            // two pool threads, which the rest of the suite keeps busy: one check of the three
            // may miss (seen once in CI, at second 13). The budget's count below is the proof.
            #expect(missing.count <= 1, "A lost B's activity at seconds \(missing) of the flood")
            #expect(continued == 1, "B's activity did not continue on A during the flood")
            try #require(await eventually(within: .seconds(30)) { !flood.isRunning })
            // The listing alone outlasts a few unheard beacons (10 s), so the budget says
            // itself whether it refused B: never, with the trust A gives a member's address
            // (without it, A heard 1 of B's 4 beacons in each of 3 runs, and the listing held).
            #expect(budget.refusals(of: "127.0.0.1") == 0, "A's budget refused B's address \(budget.refusals(of: "127.0.0.1")) times during the flood")
            #expect(flood.output.contains("SENT"), "the flood did not run: \(flood.output)")
        }
    }

    @Test("Item 5: 200 strangers' beacons a second are read a few at a time by a real socket, not each with a wake of its own")
    func strangersAreReadInBatches() async throws {
        // A loop of its own, as a handoffd has: one busy with other tests would batch them anyway.
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { loops.shutdownGracefully { _ in } }
        try await withHarness { harness in
            let a = try await harness.start("alpha", eventLoopGroup: loops) { $0.refreshInterval = .seconds(1) }
            try await a.call(.createAccount(name: "home"))
            let reads = try #require(await a.agent?.discovery?.beaconReads)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Scripts/spoof-flood.py").standardizedFileURL.path
            let before = reads.now
            let flood = try RunningCommand(
                URL(fileURLWithPath: "/usr/bin/env"), ["python3", script, "239.255.71.68", "\(harness.discoveryPort)", "200", "200", "3", "\(Beacon.size)"])
            try #require(await eventually(within: .seconds(30)) { !flood.isRunning })
            let after = reads.now
            let datagrams = after.datagrams - before.datagrams, wakes = after.reads - before.reads
            // 600 strangers' and about 3 of A's own (it hears itself on loopback). Read one by
            // one, each is a wake; coalesced, about 4 come with each.
            #expect(datagrams >= 590, "A read \(datagrams) datagrams of the 600 sent: \(flood.output)")
            #expect(wakes * 2 <= datagrams, "\(datagrams) datagrams took \(wakes) reads (\(after.holds - before.holds) held)")
        }
    }

    @Test("S10: 40 addresses holding 16 silent connections each fill no slot a member needs: its new link gets through at once")
    func manyAddressesFillTheCap() async throws {
        let a = try DeviceIdentity.generate(name: "a"), b = try DeviceIdentity.generate(name: "b")
        shareAccountKey(a, b)
        let pins: Set<String> = [a.fingerprint, b.fingerprint]
        let listener = try await LinkListener(identity: a, trust: .members({ pins.contains($0) }), logger: LogLines().logger) { frame, _ in frame }
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for address in 2..<42 {
            for _ in 0..<16 { held.append(silentConnection(from: "127.0.0.\(address)", to: listener.port)) }
        }
        // Every slot is taken (256 of the 640 got in).
        try #require(await eventually { listener.connections.value.withLock { $0 } >= 256 }, "the silent connections did not fill the listener")
        for attempt in 0..<3 {
            let answer = try await LinkClient.exchange(Frame(kind: 1, payload: [UInt8(attempt)]), host: "127.0.0.1", port: listener.port, identity: b, pins: { pins })
            #expect(answer.payload == [UInt8(attempt)])
        }
        await listener.close()
    }

    @Test("S10: Silent connections from one address are held to 16 and the flood is logged once; a member from another address still links at once")
    func connectionFlood() async throws {
        let a = try DeviceIdentity.generate(name: "a"), b = try DeviceIdentity.generate(name: "b")
        shareAccountKey(a, b)
        let pins: Set<String> = [a.fingerprint, b.fingerprint]
        let log = LogLines()
        let listener = try await LinkListener(identity: a, trust: .members({ pins.contains($0) }), logger: log.logger) { frame, _ in frame }
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<300 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var source = sockaddr_in()
            source.sin_family = sa_family_t(AF_INET)
            source.sin_addr.s_addr = inet_addr("127.0.0.2")
            var target = source
            target.sin_addr.s_addr = inet_addr("127.0.0.1")
            target.sin_port = in_port_t(UInt16(listener.port).bigEndian)
            _ = withUnsafePointer(to: &source) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            _ = withUnsafePointer(to: &target) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            held.append(fd)
        }
        let answer = try await LinkClient.exchange(Frame(kind: 1, payload: [7]), host: "127.0.0.1", port: listener.port, identity: b, pins: { pins })
        #expect(answer.payload == [7])
        let pending = { listener.connections.pending.withLock { $0["127.0.0.2"] ?? 0 } }
        #expect(await eventually(within: .seconds(2)) { pending() == 16 }, "\(pending()) silent connections from one address are waiting for their first frame")
        #expect(await eventually(within: .seconds(2)) { log.count("a flood of link connections", at: .warning) == 1 })
        #expect(listener.floodWatch.floods == 1)
        await listener.close()
    }
}

@Suite("Listener shutdown", .serialized)
struct ListenerShutdownTests {
    /// NIO hands each accepted connection to the serving loop through a buffer; one still in that
    /// buffer (or still being set up) when the listener closes was dropped with its writer
    /// unfinished, which NIO treats as a programming error and stops the process. An agent
    /// stopping, or rebinding its port on a change of address, while peers connect must not.
    @Test("A listener closed while a burst of connections arrives stops cleanly, 5 times over, and closes every connection")
    func closeDuringBurst() async throws {
        let a = try DeviceIdentity.generate(name: "a")
        // Loops of its own: each connection costs a TLS context on a loop, and the other
        // suites running meanwhile share the singleton's.
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { loops.shutdownGracefully { _ in } }
        for _ in 0..<5 {
            let listener = try await LinkListener(
                identity: a, trust: .members({ _ in true }), eventLoopGroup: loops, logger: LogLines().logger) { frame, _ in frame }
            var held: [Int32] = []
            for index in 0..<64 { held.append(silentConnection(from: "127.0.0.\(2 + index % 6)", to: listener.port)) }
            await listener.close()
            // Every connection the listener took is closed by it: a read on each ends (0 or an
            // error), never blocks past the deadline. Those the kernel had not yet handed over
            // are reset when the listening socket closes.
            // Polled without blocking a thread of the test pool: the closing runs on it too.
            var open = held
            let closed = await eventually {
                open.removeAll { fd in
                    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    return poll(&poller, 1, 0) == 1
                }
                return open.isEmpty
            }
            #expect(closed, "\(open.count) connections stayed open 10 s after the listener closed")
            for fd in held { close(fd) }
        }
    }
}
