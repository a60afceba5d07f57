import HandoffAgent

/// Waits until `condition` holds, for at most `limit`, and returns whether it did: a test that
/// waits for something fails an expectation instead of hanging.
///
/// It runs on the caller's actor (a main-actor test's condition reads main-actor state), lets
/// other work run between checks (a main-queue block, a delegate call, an agent's answer),
/// first by yielding, then by pausing a little longer each time, up to 20 ms. This is the one
/// way tests in this package wait for a condition; an event that can be awaited is awaited
/// instead (`withTimeLimit`).
public func eventually(
    within limit: Duration = .seconds(10),
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    var turns = 0
    var pause = Duration.milliseconds(1)
    while clock.now < deadline {
        if try await condition() { return true }
        turns += 1
        if turns < 1_000 {
            await Task.yield()
        } else {
            // Waiting for work elsewhere (another process, a timer): a pause between checks.
            try? await Task.sleep(for: pause, clock: clock)
            pause = min(pause * 2, .milliseconds(20))
        }
    }
    return try await condition()
}

/// What `operation` returns, or nil if it has not returned within `limit` (it is then
/// cancelled, and not waited for: an operation that ignores cancellation does not hold the
/// test): how a test awaits an event (the next event of a stream, an answer) without hanging
/// when the event never comes.
public func withTimeLimit<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async -> T?) async -> T? {
    let outcome = FirstOutcome<T?>()
    let work = Task { outcome.settle(await operation()) }
    let timer = Task {
        // The limit itself: the one clock a test's awaited event races.
        guard (try? await Task.sleep(for: limit)) != nil else { return }
        outcome.settle(nil)
    }
    let result = await outcome.value()
    work.cancel()
    timer.cancel()
    return result
}
