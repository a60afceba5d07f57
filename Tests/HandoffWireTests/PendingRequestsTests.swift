import HandoffModel
import Testing

/// `PendingRequests`, the one request/answer table of links, the local socket, saves and the
/// desktop bus.
@Suite struct PendingRequestsTests {
    @Test func eachWaiterIsHandedBackOnce() {
        var table = PendingRequests<String>(first: 2)
        let first = table.issue("a"), second = table.issue("b")
        #expect(first == 2 && second == 3)
        #expect(table.takeNumber() == 4, "a message with no answer still takes a number")
        #expect(table.issue("c") == 5)
        #expect(table.count == 3)
        #expect(table.waiter(of: 3) == "b")
        #expect(table.settle(3) == "b")
        #expect(table.settle(3) == nil, "settled once")
        #expect(table.settle(4) == nil, "never issued")
        #expect(table.settle(99) == nil)
        #expect(table.count == 2)
    }

    @Test func settleAllGoesInIssueOrder() {
        var table = PendingRequests<Int>()
        for waiter in [30, 10, 20, 11, 40] { _ = table.issue(waiter) }
        let odd = table.settleAll { $0 % 2 == 1 }
        #expect(odd.map(\.request) == [4] && odd.map(\.waiter) == [11])
        let rest = table.settleAll()
        #expect(rest.map(\.request) == [1, 2, 3, 5])
        #expect(table.isEmpty)
    }

    @Test func closedTakesNoMore() {
        var table = PendingRequests<String>()
        _ = table.issue("x")
        _ = table.issue("y")
        #expect(table.close() == ["x", "y"])
        #expect(table.isClosed)
        #expect(table.issue("z") == nil)
        #expect(table.isEmpty)
    }
}
