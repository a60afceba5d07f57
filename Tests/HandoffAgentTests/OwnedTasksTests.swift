import Foundation
import HandoffTesting
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import HandoffAgent

/// `OwnedTasks`: the agent's tasks end with it.
@Suite struct OwnedTasksTests {
    let logger = Logger(label: "test.tasks")

    /// An actor that starts work the way the agent does, reading its own state in the body.
    actor Owner {
        let tasks: OwnedTasks
        var done = 0
        init(tasks: OwnedTasks) { self.tasks = tasks }

        func startCounting(_ times: Int) {
            for _ in 0..<times {
                // Isolated to the owner, as `Task {}` in an actor method is: no `await` needed.
                tasks.start("count") { self.done += 1 }
            }
        }
    }

    @Test("A task runs on its owner's actor and leaves the set when it returns")
    func runsAndLeaves() async {
        let tasks = OwnedTasks(logger: logger)
        let owner = Owner(tasks: tasks)
        await owner.startCounting(100)
        #expect(await eventually { await owner.done == 100 })
        #expect(await eventually { tasks.count == 0 }, "still listed: \(tasks.names)")
    }

    @Test("An immediate task runs on the caller's thread up to its first suspension, then as any other; it is listed while it runs and forgotten when it returns; none starts once ended")
    func immediate() async {
        let tasks = OwnedTasks(logger: logger)
        let steps = Shared<[String]>([])
        let gate = Gate()
        #expect(tasks.startImmediate("immediate") {
            steps.update { $0.append("began") }
            await gate.wait()
            steps.update { $0.append("resumed") }
        })
        // Before any other thread could have run it.
        #expect(steps.value == ["began"], "the body did not begin on the caller's thread")
        #expect(tasks.count == 1)
        gate.open()
        #expect(await eventually { steps.value == ["began", "resumed"] })
        #expect(await eventually { tasks.count == 0 }, "still listed: \(tasks.names)")
        // One that never suspends is over when startImmediate returns.
        #expect(tasks.startImmediate("at once") { steps.update { $0.append("at once") } })
        #expect(steps.value.last == "at once")
        #expect(await eventually { tasks.count == 0 })
        await tasks.end()
        #expect(!tasks.startImmediate("late") { steps.update { $0.append("late") } })
        #expect(steps.value.last == "at once")
    }

    @Test("Tasks that return at once, started from many threads, are all forgotten: none stays listed")
    func returnedBeforeRecorded() async {
        let tasks = OwnedTasks(logger: logger)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    for _ in 0..<500 { tasks.start("instant") {} }
                }
            }
        }
        #expect(await eventually { tasks.count == 0 }, "\(tasks.count) finished tasks still listed")
    }

    @Test("end() cancels the running tasks and returns once they have returned")
    func endCancelsAndAwaits() async {
        let tasks = OwnedTasks(logger: logger, endLimit: .seconds(30))
        let cleanedUp = Shared(0)
        let started = Shared(0)
        for _ in 0..<8 {
            tasks.start("waiting") {
                started.update { $0 += 1 }
                // Waits for its cancellation, as a link's read or a timer does.
                try? await Task.sleep(for: .seconds(3600))
                cleanedUp.update { $0 += 1 }
            }
        }
        #expect(await eventually { started.value == 8 })
        let began = ContinuousClock.now
        await tasks.end()
        #expect(cleanedUp.value == 8, "end() returned before its tasks did")
        #expect(ContinuousClock.now - began < .seconds(10), "the tasks were not cancelled: end() waited \(ContinuousClock.now - began)")
        #expect(tasks.count == 0)
    }

    @Test("Once ended, nothing more starts: work for a stopped owner is not done")
    func refusesAfterEnd() async {
        let tasks = OwnedTasks(logger: logger)
        await tasks.end()
        let ran = Shared(0)
        let accepted = tasks.start("late") { ran.update { $0 += 1 } }
        #expect(!accepted)
        try? await Task.sleep(for: .milliseconds(50))  // Observed: a body that would run, runs within this.
        #expect(ran.value == 0)
        #expect(tasks.hasEnded)
    }

    @Test("A task that ignores cancellation holds end() back only for the limit, and is named")
    func stuckTaskIsBounded() async {
        let tasks = OwnedTasks(logger: logger, endLimit: .milliseconds(200))
        let release = Gate()
        tasks.start("stubborn") { await release.wait() }
        await tasks.end()
        // It returned with the stubborn task still running: it did not wait for it.
        #expect(tasks.names == ["stubborn"])
        release.open()
        #expect(await eventually { tasks.count == 0 })
    }

    @Test("Stopping an agent whose join is under way ends the join: stop returns at once, and nothing the agent started still runs")
    func agentStopEndsItsJoin() async throws {
        // Where the code points: a host that takes the connection and never says a word, so
        // that the join waits (up to its 30 s deadline) until something ends it.
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(host: "127.0.0.1", port: 0).get()
        defer { silent.close(promise: nil) }
        let port = try #require(silent.localAddress?.port)
        try await withHarness { harness in
            let device = try await harness.start("alpha")
            let agent = try #require(device.agent)
            let code = Invitation.make(.token, host: "127.0.0.1", port: port, fingerprint: String(repeating: "ab", count: 32)).code
            let reply = try await device.attempt(.join(code: code))
            #expect(reply.error == nil, "\(String(describing: reply.error))")
            #expect(await eventually { agent.tasks.names.contains("join") }, "the join is not among the agent's tasks: \(agent.tasks.names)")
            await agent.stop()
            #expect(agent.tasks.hasEnded)
            // Had the join not been cancelled, stop would have given up on it after 5 s, and it would still run.
            #expect(agent.tasks.count == 0, "still running after stop: \(agent.tasks.names)")
        }
    }
}
