import Synchronization

/// The first of several racing outcomes, awaited by one task; later ones are ignored.
package final class FirstOutcome<Value: Sendable>: Sendable {
    private enum State {
        case empty
        case waiting(CheckedContinuation<Value, Never>)
        case settled(Value)
    }

    private let state = Mutex<State>(.empty)

    package init() {}

    /// Sets the outcome if none was set yet.
    package func settle(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, Never>? in
            switch state {
            case .settled:
                return nil
            case .empty:
                state = .settled(value)
                return nil
            case .waiting(let continuation):
                state = .settled(value)
                return continuation
            }
        }
        waiter?.resume(returning: value)
    }

    /// The outcome, if it is set already (read without waiting).
    package var settled: Value? {
        state.withLock { state in
            if case .settled(let value) = state { return value }
            return nil
        }
    }

    package func value() async -> Value {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Value? in
                if case .settled(let value) = state { return value }
                state = .waiting(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
