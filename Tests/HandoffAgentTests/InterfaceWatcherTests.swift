import HandoffTesting
import Testing

@testable import HandoffAgent

@Suite("The kernel's news of interfaces")
struct InterfaceWatcherTests {
    @Test("The interface watcher's thread sleeps until news comes: over 3 s it wakes for nothing else (it used to look every second), and stop ends it")
    func sleepsUntilNews() async throws {
        let watcher = try #require(InterfaceWatcher.start {}, "no routing netlink socket here")
        // Period: three of the seconds at which the old thread woke to look whether it was stopped.
        try await Task.sleep(for: .seconds(3))
        let wakes = watcher.wakes
        // Other tests make namespaces and links meanwhile, and start processes: their news, and
        // the signals of their children's ends, wake it, and are counted apart.
        #expect(
            wakes.all - wakes.withNews - wakes.interrupted <= 1,
            "woke \(wakes.all) times, \(wakes.withNews) with news, \(wakes.interrupted) by a signal")
        watcher.stop()
        watcher.stop()
        #expect(await eventually(within: .seconds(5)) { watcher.wakes.ended }, "the thread did not end after stop")
    }
}
