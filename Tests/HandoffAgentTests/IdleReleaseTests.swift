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
}
