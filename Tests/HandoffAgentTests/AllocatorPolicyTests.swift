import Foundation
import HandoffWire
import Testing

@testable import HandoffAgent

#if canImport(Glibc)
import Glibc
#endif

/// What the agent's allocator policy is for: a stream's window of chunks, allocated and freed
/// again and again, reuses the same memory instead of taking fresh pages each time.
@Suite("The agent's allocator while it works")
struct AllocatorPolicyTests {
    /// Minor page faults this thread took while running `body`.
    static func faults(_ body: () -> Void) -> Int {
        var before = rusage()
        var after = rusage()
        // RUSAGE_THREAD (1): other tests running meanwhile do not count.
        getrusage(__rusage_who_t(1), &before)
        body()
        getrusage(__rusage_who_t(1), &after)
        return after.ru_minflt - before.ru_minflt
    }

    /// Four chunks of a stream's largest size (512 KiB: 2 MiB in flight, a window each way),
    /// written, then freed; `rounds` times.
    static func churn(rounds: Int) {
        let size = LinkMessage.maximumStreamChunk
        for _ in 0..<rounds {
            let chunks = (0..<4).map { _ in UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16) }
            for chunk in chunks { memset(chunk, 0x5A, size) }
            for chunk in chunks.reversed() { chunk.deallocate() }
        }
    }

    @Test("With the policy, a stream's window of 512 KiB chunks freed and allocated again takes no fresh pages (with glibc's defaults, about 128 faults a chunk)")
    func windowReusesMemory() throws {
        #if os(Linux)
        try #require(AllocatorPolicy.keepWorkingMemory(), "mallopt is not available")
        Self.churn(rounds: 2)  // the heap grows to the window once
        let faults = Self.faults { Self.churn(rounds: 50) }
        // 50 rounds of 4 chunks of 128 pages would be 25,600 faults if each chunk took fresh pages.
        #expect(faults < 500, "\(faults) page faults for 50 rounds of the window")
        #endif
    }
}
