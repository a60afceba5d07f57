import Synchronization

/// A value shared between tasks, under a lock.
final class LockedValue<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    var value: Value {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    /// Changes the value in one step (`value += 1` would read and write in two).
    func update(_ change: (inout Value) -> Void) {
        storage.withLock { change(&$0) }
    }

    /// Sets `new` and returns what it replaced, in one step.
    func exchange(_ new: Value) -> Value {
        storage.withLock { value in
            defer { value = new }
            return value
        }
    }
}
