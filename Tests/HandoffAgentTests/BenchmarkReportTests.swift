import BenchmarkReport
import Foundation
import HandoffTesting
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the benchmarks read of the processes they measure.
@Suite("What the benchmarks read of the processes they measure")
struct BenchmarkReportTests {
    /// Once seen in about 25 runs of Benchmarks/agent.sh: the benchmark died of SIGILL, with no
    /// message, between the warm continuations and the command line's. It subtracted an agent's
    /// CPU time before them from its CPU time after them, both unsigned, and the second can be
    /// the smaller: a thread of the agent that ended in between took its time with it.
    @Test("A process's CPU time never goes back: a thread that used the processor and then ended still counts")
    func cpuTimeKeepsEndedThreads() async throws {
        let pid = getpid()
        let burned = Atomic<Bool>(false)
        let end = Atomic<Bool>(false)
        // The thread's own entry, "<pid>/task/<tid>".
        let entry = Mutex<String?>(nil)
        // A thread that uses 100 ms of the processor (its own CPU clock, however busy the
        // machine), then waits until told to end.
        let thread = Thread {
            entry.withLock { $0 = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") }
            var spin: UInt64 = 0
            while Self.threadCPU() < 100_000_000 { spin &+= 1 }
            withExtendedLifetime(spin) {}
            burned.store(true, ordering: .releasing)
            while !end.load(ordering: .acquiring) { usleep(1_000) }
        }
        thread.start()
        try #require(await eventually(within: .seconds(30)) { burned.load(ordering: .acquiring) }, "the thread did not use its 100 ms")
        let path = "/proc/" + (try #require(entry.withLock { $0 }))
        try #require(FileManager.default.fileExists(atPath: path))
        let before = try #require(cpuTime(of: pid))
        end.store(true, ordering: .releasing)
        // Until the thread has ended: its entry gone from /proc.
        try #require(await eventually { !FileManager.default.fileExists(atPath: path) }, "the thread did not end")
        let after = try #require(cpuTime(of: pid))
        #expect(after >= before, "CPU time went from \(before) ns to \(after) ns")
        // No process, no reading: a process id above the largest the kernel gives.
        let maximum = try #require(Int32(try String(contentsOfFile: "/proc/sys/kernel/pid_max", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(cpuTime(of: maximum + 1) == nil)
    }

    /// The calling thread's own CPU time, in nanoseconds.
    private static func threadCPU() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    @Test("A missed target fails the benchmark: exit status 1, and the verdict names it")
    func missedTargetFails() {
        let met = Targets()
        met.check("fast enough", true, "1 ms")
        #expect(met.status == 0)
        #expect(met.verdict == "All 1 targets met.")
        let missed = Targets()
        missed.check("fast enough", true, "1 ms")
        missed.check("small enough", false, "40 MB")
        #expect(missed.status == 1)
        #expect(missed.verdict.contains("1 of 2 targets missed: small enough"))
        #expect(missed.table.contains("| small enough | 40 MB | **MISSED** |"))
    }

    @Test("Runs agree when every measure's run medians lie within 10 % of their median, and say so when they do not")
    func runsAgree() {
        var runs = Runs(["a", "b"])
        runs.add(["a": [1.0, 1.0, 1.0], "b": [2.0]])
        runs.add(["a": [1.05], "b": [2.1]])
        #expect(!runs.agree(minimum: 3), "two runs are fewer than the minimum")
        runs.add(["a": [0.98], "b": [2.05]])
        #expect(runs.agree(minimum: 3))
        #expect(abs(runs.spread("a") - 0.07) < 1e-9)
        runs.add(["a": [1.2], "b": [2.0]])
        #expect(!runs.agree(minimum: 3), "a's medians now spread 21 %")
        #expect(runs.agreement(minimum: 3).contains("did NOT agree"))
        // A measure with no samples in a run cannot agree.
        var empty = Runs(["a"])
        for _ in 0..<3 { empty.add([:]) }
        #expect(!empty.agree(minimum: 3))
    }

    @Test("repeatRuns runs at least the minimum, stops once the runs agree, and gives up at the maximum")
    func repeatRunsStops() async {
        let steady = await repeatRuns(["x"], minimum: 3, maximum: 8) { _ in ["x": [1.0]] }
        #expect(steady.count == 3)
        let calls = Mutex(0)
        let noisy = await repeatRuns(["x"], minimum: 3, maximum: 8) { run in
            calls.withLock { $0 += 1 }
            return ["x": [Double(run)]]
        }
        #expect(noisy.count == 8)
        #expect(calls.withLock { $0 } == 8)
        #expect(noisy.agreement(minimum: 3).contains("did NOT agree"))
    }
}
