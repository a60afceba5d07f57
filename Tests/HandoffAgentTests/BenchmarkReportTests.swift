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
}
