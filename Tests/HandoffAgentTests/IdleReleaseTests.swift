import Foundation
import HandoffTesting
import Testing

@testable import HandoffAgent

/// `--idle-release` follows an idle spell with one deadline, not a poll.
@Suite("Idle release")
struct IdleReleaseTests {
    @Test("--idle-release is a deadline, set again while the agent stays busy: memory is given back once per idle spell, only after it, and nothing is set until the agent is busy again")
    func oneDeadlinePerSpell() async throws {
        try await withHarness(inMemory: true) { harness in
            let device = try await harness.start("alpha") { $0.idleRelease = .milliseconds(400) }
            let agent = try #require(device.agent)
            #expect(await agent.deadlines[.idleRelease] != nil, "set once the agent started")
            // Busy all along: the deadline passes and is set again for the rest of the spell.
            let busyUntil = ContinuousClock.now + .milliseconds(700)
            while ContinuousClock.now < busyUntil {
                await agent.busy()
                try await Task.sleep(for: .milliseconds(50))  // time observed: a busy agent, spread over the deadline
            }
            #expect(await agent.idle.releases == 0, "given back while busy")
            // Long enough for a test process whose pool of threads the rest of the suite keeps busy.
            #expect(await eventually(within: .seconds(30)) { await agent.idle.released })
            #expect(await agent.idle.releases == 1)
            #expect(await agent.deadlines[.idleRelease] == nil, "nothing is set until the agent is busy again")
            await agent.busy()
            #expect(await agent.idle.released == false)
            #expect(await agent.deadlines[.idleRelease] != nil)
        }
    }

    @Test("What starting touched is given back once, a set time after the start, while the agent stays busy; with the idle release off, never")
    func startupRelease() async throws {
        try await withHarness(inMemory: true) { harness in
            let device = try await harness.start("alpha") {
                $0.idleRelease = .seconds(600)
                $0.startupRelease = .milliseconds(300)
            }
            let agent = try #require(device.agent)
            #expect(await agent.deadlines[.startupRelease] != nil, "set once the agent started")
            var given = false
            let until = ContinuousClock.now + .seconds(30)
            while !given, ContinuousClock.now < until {
                await agent.busy()
                try await Task.sleep(for: .milliseconds(50))  // time observed: busy all along, past the start-up deadline
                given = await agent.idle.startupReleased
            }
            #expect(given, "never given back while busy")
            #expect(await agent.idle.releases == 0, "no idle spell happened")
            #expect(await agent.deadlines[.startupRelease] == nil, "once")

            // Far off, so that one set by mistake is still there to be seen.
            let off = try await harness.start("beta") {
                $0.idleRelease = nil
                $0.startupRelease = .seconds(600)
            }
            let quiet = try #require(off.agent)
            #expect(await quiet.deadlines[.startupRelease] == nil, "--idle-release off: nothing given back")
        }
    }

    @Test("The code mappings given back: a file's private, executable ones, also with pages dirty in the page cache (a file just written); never one holding a private copy of a page, resident or swapped out")
    func codeMappingsFromSmaps() {
        func mapping(_ range: String, _ permissions: String, _ path: String, dirty: Int = 0, anonymous: Int = 0, swap: Int = 0) -> String {
            """
            \(range) \(permissions) 00001000 fe:00 123 \(path)
            Size:               1024 kB
            Rss:                 512 kB
            Shared_Dirty:          \(dirty) kB
            Private_Dirty:         \(dirty) kB
            Anonymous:             \(anonymous) kB
            Swap:                  \(swap) kB
            VmFlags: rd ex mr mw me

            """
        }
        let smaps = [
            mapping("1000-2000", "r-xp", "/usr/bin/handoffd"),
            mapping("2000-3000", "r-xp", "/usr/bin/just written", dirty: 512),
            mapping("3000-4000", "r-xp", "/usr/lib/patched.so", anonymous: 4),
            mapping("4000-5000", "r-xp", "/usr/lib/swapped.so", swap: 4),
            mapping("5000-6000", "rw-p", "/usr/bin/handoffd"),
            mapping("6000-7000", "r-xp", "[vdso]"),
            mapping("7000-8000", "r-xs", "/dev/shm/shared"),
        ].joined()
        let found = IdleMemory.codeMappings(in: smaps)
        #expect(found.map(\.0) == [0x1000..<0x2000, 0x2000..<0x3000])
        #expect(found.map(\.1) == ["handoffd", "just written"])
    }

    @Test("The hot code stays mapped through a release: the head of the executable's code up to the marker, rounded up to a page; all of a mapping without the marker, or with it too far in (a build without the order)")
    func hotCodeKept() {
        let code: Range<UInt> = 0x40_0000..<0x200_0000
        #expect(IdleMemory.droppable(code, hotEnd: 0x50_0123) == 0x50_1000..<0x200_0000)
        #expect(IdleMemory.droppable(code, hotEnd: 0x50_0000) == 0x50_0000..<0x200_0000)
        #expect(IdleMemory.droppable(code, hotEnd: 0x40_0000 + IdleMemory.hotCodeLimit + 1) == code)
        #expect(IdleMemory.droppable(code, hotEnd: 0x300_0000) == code)
        #expect(IdleMemory.droppable(0x7f00_0000..<0x7f10_0000, hotEnd: 0x50_0123) == 0x7f00_0000..<0x7f10_0000)
        // The marker is a function of this program, so it lies in one of its code mappings.
        #expect(IdleMemory.hotCodeEnd != 0)
    }
}
