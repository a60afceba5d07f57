/// Lets other main-actor work run (a main-queue block, a restore, a delegate call) until
/// `condition` holds. Returns false if it still does not after many turns, so that a test
/// fails an expectation instead of hanging. It waits on work, not on a clock.
@MainActor
public func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<100_000 {
        if condition() { return true }
        await Task.yield()
    }
    return condition()
}
