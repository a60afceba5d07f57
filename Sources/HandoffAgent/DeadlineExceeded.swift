import Foundation
import HandoffWire
import NIOCore
import NIOPosix
import NIOSSL

struct DeadlineExceeded: Error {}

/// Runs `body`, or throws `DeadlineExceeded` when `deadline` passes first (cancelling it).
func withDeadline<T: Sendable>(_ deadline: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await LoopTimer.sleep(for: deadline)
            throw DeadlineExceeded()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw DeadlineExceeded() }
        return first
    }
}
