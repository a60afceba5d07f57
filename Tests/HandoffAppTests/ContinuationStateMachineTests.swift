import Foundation
import Handoff
import Testing

@testable import HandoffApp

@Suite("The exactly-one-outcome rule")
struct ContinuationStateMachineTests {
    typealias Machine = ContinuationStateMachine<String>

    func describe(_ actions: [Machine.Action]) -> [String] {
        actions.map {
            switch $0 {
            case .willContinue(let type): return "will \(type)"
            case .continue(let activity): return "continue \(activity)"
            case .didFail(let type, let failure): return "fail \(type) \(failure.code)"
            }
        }
    }

    @Test("willContinue then delivery continues once")
    func plain() {
        var machine = Machine()
        let id = UUID()
        #expect(describe(machine.willContinue(id, activityType: "t")) == ["will t"])
        #expect(describe(machine.deliver(id, "a")) == ["continue a"])
        #expect(describe(machine.deliver(id, "a")).isEmpty)
        #expect(describe(machine.fail(id, .handoffFailed("late"))).isEmpty)
    }

    @Test("A newer continuation ends the pending one with 3072 first")
    func supersede() {
        var machine = Machine()
        let first = UUID(), second = UUID()
        _ = machine.willContinue(first, activityType: "a")
        #expect(describe(machine.willContinue(second, activityType: "b")) == ["fail a 3072", "will b"])
        #expect(describe(machine.deliver(first, "late")).isEmpty)
        #expect(describe(machine.deliver(second, "x")) == ["continue x"])
    }

    @Test("A failure after delivery, or for an unknown continuation, is dropped")
    func dropped() {
        var machine = Machine()
        let id = UUID()
        #expect(describe(machine.fail(UUID(), .handoffFailed("?"))).isEmpty)
        #expect(describe(machine.deliver(UUID(), "?")).isEmpty)
        _ = machine.willContinue(id, activityType: "t")
        _ = machine.fail(id, .remoteAppTimedOut("slow"))
        #expect(describe(machine.deliver(id, "late")).isEmpty)
    }

    @Test("A repeated willContinue is not announced twice, and an ended one not again")
    func repeated() {
        var machine = Machine()
        let id = UUID()
        _ = machine.willContinue(id, activityType: "t")
        #expect(describe(machine.willContinue(id, activityType: "t")).isEmpty)
        _ = machine.deliver(id, "a")
        #expect(describe(machine.willContinue(id, activityType: "t")).isEmpty)
    }

    @Test("A failure keeps the type of its willContinue")
    func sameType() {
        var machine = Machine()
        let id = UUID()
        _ = machine.willContinue(id, activityType: "com.example.a")
        #expect(describe(machine.fail(id, .connectionUnavailable("gone"))) == ["fail com.example.a 4609"])
    }
}
