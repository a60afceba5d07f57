/// Requests sent and not yet answered, by number: the one way every connection of Handoff
/// matches an answer to its question (a link's requests, the local socket's calls on both the
/// app's and a tool's side, an app's saves, the desktop bus's method calls).
///
/// A value: it numbers each request (counting up from `first`), keeps whoever waits for its
/// answer, hands that waiter back exactly once (to the answer, the deadline, or the end), and
/// after `close` takes no more. Sending and waiting are the owner's.
public struct PendingRequests<Waiter> {
    /// The number the next request gets.
    public private(set) var next: UInt64
    private var waiting: [UInt64: Waiter] = [:]
    /// Whether `close` was called: no request is taken after it.
    public private(set) var isClosed = false

    public init(first: UInt64 = 1) {
        next = first
    }

    /// Numbers a request and keeps `waiter` for its answer. Nil once closed (the waiter is
    /// then the caller's to tell).
    public mutating func issue(_ waiter: Waiter) -> UInt64? {
        guard !isClosed else { return nil }
        let number = takeNumber()
        waiting[number] = waiter
        return number
    }

    /// A number for a message that expects no answer (it still counts, as on a bus whose
    /// serials number every message).
    public mutating func takeNumber() -> UInt64 {
        defer { next &+= 1 }
        return next
    }

    /// The waiter of `request`, once: nil for a number never issued or already settled.
    public mutating func settle(_ request: UInt64) -> Waiter? {
        waiting.removeValue(forKey: request)
    }

    /// The waiter of `request` without settling it.
    public func waiter(of request: UInt64) -> Waiter? {
        waiting[request]
    }

    /// Settles every request `matching`, in the order they were issued.
    public mutating func settleAll(where matching: (Waiter) -> Bool = { _ in true }) -> [(request: UInt64, waiter: Waiter)] {
        let settled = waiting.filter { matching($0.value) }.sorted { $0.key < $1.key }
        for (request, _) in settled { waiting[request] = nil }
        return settled.map { ($0.key, $0.value) }
    }

    /// Takes no more requests and hands back every waiter, in the order they were issued.
    public mutating func close() -> [Waiter] {
        isClosed = true
        return settleAll().map(\.waiter)
    }

    /// How many requests wait for an answer.
    public var count: Int { waiting.count }

    public var isEmpty: Bool { waiting.isEmpty }
}

extension PendingRequests: Sendable where Waiter: Sendable {}
