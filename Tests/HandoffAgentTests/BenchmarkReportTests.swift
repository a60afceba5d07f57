import BenchmarkReport
import Foundation
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
        // A thread that uses 50 ms of the processor, then waits until told to end.
        let thread = Thread {
            entry.withLock { $0 = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self") }
            let start = now()
            var spin: UInt64 = 0
            while now() - start < 50_000_000 { spin &+= 1 }
            withExtendedLifetime(spin) {}
            burned.store(true, ordering: .releasing)
            while !end.load(ordering: .acquiring) { usleep(1_000) }
        }
        thread.start()
        while !burned.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(1)) }
        let before = cpuTime(of: pid)
        end.store(true, ordering: .releasing)
        // Until the thread has ended: its entry gone from /proc.
        let path = "/proc/" + (try #require(entry.withLock { $0 }))
        #expect(FileManager.default.fileExists(atPath: path))
        let deadline = now() + 5_000_000_000
        while FileManager.default.fileExists(atPath: path), now() < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(!FileManager.default.fileExists(atPath: path), "the thread did not end")
        let after = cpuTime(of: pid)
        #expect(after >= before, "CPU time went from \(before) ns to \(after) ns")
        #expect(before >= 50_000_000)
    }
}
