import Foundation
import HandoffWire
import Testing

@testable import HandoffAgent

/// The opening side of a link, each transition on its own: no socket, no clock. A request's
/// waiter is its name.
@Suite("Link state machine")
struct LinkStateMachineTests {
    typealias Machine = LinkStateMachine<String>

    let start = ContinuousClock.now
    let device = UUID()
    let activity = UUID()

    func machine(idle: Duration? = nil) -> Machine {
        var machine = Machine(host: "192.0.2.7", port: 47171, idle: idle, now: start)
        _ = machine.greeted(LinkMessage.hello(version: LinkMessage.version, device: device).frame, now: start)
        return machine
    }

    func fetch(_ number: UInt64) -> LinkMessage { .fetch(request: number, activityID: activity) }

    func fetched(_ number: UInt64) -> LinkMessage {
        .fetched(request: number, FetchedActivity(ActivityRecord(activity: ActivityAnnouncement(id: activity, activityType: "com.example.viewing"))))
    }

    func lines(_ actions: [Machine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .write(let message):
                if case .fetch(let number, _) = message { "write fetch #\(number)" } else { "write" }
            case .schedule(let deadline, let after): "schedule \(name(deadline)) in \(after)"
            case .cancel(let deadline): "cancel \(name(deadline))"
            case .answer(let waiter, let answer): "answer \(waiter) \(name(answer))"
            case .applyKeepalive: "keepalive"
            case .close: "close"
            }
        }
    }

    func name(_ deadline: LinkDeadline) -> String {
        switch deadline {
        case .request(let number): "#\(number)"
        case .quiet: "quiet"
        }
    }

    func name(_ answer: LinkAnswer) -> String {
        switch answer {
        case .answered(.fetched(let number, _)): "fetched #\(number)"
        case .answered: "answered"
        case .ended(let reason): "ended (\(reason))"
        case .timedOut: "timedOut"
        }
    }

    // MARK: Greeting

    @Test("A hello of this version opens the link to its device; another version, or anything else first, closes it with the reason")
    func greeting() {
        var opened = Machine(host: "h", port: 1, idle: nil, now: start)
        #expect(opened.greeted(LinkMessage.hello(version: LinkMessage.version, device: device).frame, now: start) == .success(device))
        #expect(opened.state == .open(device: device))
        #expect(opened.greeted(LinkMessage.hello(version: LinkMessage.version, device: device).frame, now: start).failureValue?.code == ContinuationFailure.Code.connectionUnavailable)

        var old = Machine(host: "h", port: 1, idle: nil, now: start)
        let version = old.greeted(LinkMessage.hello(version: LinkMessage.version + 1, device: device).frame, now: start)
        #expect(version.failureValue?.code == ContinuationFailure.Code.handoffFailed)
        #expect(version.failureValue?.message.contains("update Handoff on both devices") == true)
        #expect(!old.isOpen)

        var rude = Machine(host: "h", port: 1, idle: nil, now: start)
        #expect(rude.greeted(fetch(1).frame, now: start).failureValue?.message.contains("did not say hello") == true)
        #expect(!rude.isOpen)
    }

    @Test("A request before the peer's hello goes with this side's and waits for its answer (ending with a link that never opens); after the end one is answered at once that the link ended")
    func requestWhenNotOpen() {
        var greeting = Machine(host: "h", port: 1, idle: nil, now: start)
        #expect(lines(greeting.request("a", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)).first == "write fetch #1")
        #expect(greeting.requestsWaiting == 1)
        _ = greeting.greeted(Frame(kind: 0x7F, payload: []), now: start)
        #expect(lines(greeting.ended("no hello")).contains("answer a ended (no hello)"))
        var machine = machine()
        _ = machine.ended("closed by the peer")
        #expect(lines(machine.request("b", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)) == ["answer b ended (the link had ended)"])
    }

    // MARK: Requests

    @Test("Requests are numbered from 1, written first, then their deadline set; each answer resolves its own request and cancels its deadline")
    func requests() {
        var machine = machine()
        #expect(lines(machine.request("a", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)) == ["write fetch #1", "schedule #1 in 5.0 seconds"])
        #expect(lines(machine.request("b", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)) == ["write fetch #2", "schedule #2 in 5.0 seconds"])
        #expect(machine.requestsWaiting == 2)
        #expect(lines(machine.received(fetched(2), now: start, streamsOpen: 0)) == ["cancel #2", "answer b fetched #2"])
        #expect(lines(machine.received(fetched(2), now: start, streamsOpen: 0)) == [])
        #expect(lines(machine.received(fetched(9), now: start, streamsOpen: 0)) == [])
        #expect(lines(machine.received(.fetchFailed(request: 1, code: 4610, message: "late"), now: start, streamsOpen: 0)) == ["cancel #1", "answer a answered"])
        #expect(machine.requestsWaiting == 0)
    }

    @Test("A request past its deadline times out; its late answer changes nothing")
    func deadline() {
        var machine = machine()
        _ = machine.request("a", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)
        #expect(lines(machine.deadlinePassed(.request(1), now: start + .seconds(5), streamsOpen: 0)) == ["answer a timedOut"])
        #expect(lines(machine.deadlinePassed(.request(1), now: start + .seconds(5), streamsOpen: 0)) == [])
        #expect(lines(machine.received(fetched(1), now: start, streamsOpen: 0)) == [])
    }

    @Test("The end of the link ends every request waiting, in order, with its reason; the first reason stays")
    func end() {
        var machine = machine()
        for waiter in ["a", "b", "c"] { _ = machine.request(waiter, deadline: .seconds(5), now: start, streamsOpen: 0, fetch) }
        _ = machine.received(fetched(2), now: start, streamsOpen: 0)
        #expect(lines(machine.ended("went away")) == ["cancel #1", "answer a ended (went away)", "cancel #3", "answer c ended (went away)"])
        #expect(lines(machine.ended("closed by this device")) == [])
        #expect(machine.state == .closed(reason: "went away"))
    }

    // MARK: Idle

    @Test("An idle link closes once nothing went over it for its idle time and nothing waits on it; a link without an idle time never does")
    func idle() {
        var machine = machine(idle: .seconds(30))
        #expect(lines(machine.idleCheck(now: start + .seconds(29), streamsOpen: 0)) == [])
        _ = machine.request("a", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)
        #expect(lines(machine.idleCheck(now: start + .seconds(31), streamsOpen: 0)) == [], "a request waits")
        _ = machine.received(fetched(1), now: start + .seconds(1), streamsOpen: 0)
        #expect(lines(machine.idleCheck(now: start + .seconds(31), streamsOpen: 1)) == [], "a stream is open")
        machine.used(now: start + .seconds(20))
        #expect(lines(machine.idleCheck(now: start + .seconds(49), streamsOpen: 0)) == [], "used 29 s ago")
        // The keepalive check armed by the answer goes with it.
        #expect(lines(machine.idleCheck(now: start + .seconds(50), streamsOpen: 0)) == ["cancel quiet", "close"])
        #expect(!machine.isOpen)

        var kept = self.machine()
        #expect(lines(kept.idleCheck(now: start + .seconds(3600), streamsOpen: 0)) == [])
    }

    // MARK: Keepalive

    @Test("Keepalive on a link that closes when idle: off at once when nothing waits, on with a request, off again once the link was quiet for the linger, looked at again if used meanwhile")
    func keepalive() {
        var machine = machine(idle: .seconds(30))
        #expect(lines(machine.busyChanged(now: start, streamsOpen: 0, immediately: true)) == ["keepalive"])
        #expect(!machine.watching)
        #expect(lines(machine.request("a", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)) == ["write fetch #1", "schedule #1 in 5.0 seconds", "keepalive"])
        #expect(machine.watching)
        #expect(lines(machine.received(fetched(1), now: start, streamsOpen: 0)) == ["cancel #1", "answer a fetched #1", "schedule quiet in 2.0 seconds"])
        #expect(machine.watching, "on until the link was quiet a moment")
        machine.used(now: start + .seconds(1))
        #expect(lines(machine.deadlinePassed(.quiet, now: start + .seconds(2), streamsOpen: 0)) == ["schedule quiet in 1.0 seconds"])
        #expect(lines(machine.deadlinePassed(.quiet, now: start + .seconds(3), streamsOpen: 0)) == ["keepalive"])
        #expect(!machine.watching)
        #expect(lines(machine.busyChanged(now: start, streamsOpen: 0, starting: true)) == ["keepalive"], "a stream starting")
    }

    @Test("Twenty requests in quick succession switch keepalive on once, and off once after the last")
    func keepaliveLingers() {
        var machine = machine(idle: .seconds(30))
        _ = machine.busyChanged(now: start, streamsOpen: 0, immediately: true)
        let before = machine.keepaliveChanges
        var quietChecks = 0
        var now = start
        for number in 1...20 {
            now += .milliseconds(10)
            _ = machine.request("\(number)", deadline: .seconds(5), now: now, streamsOpen: 0, fetch)
            now += .milliseconds(1)
            quietChecks += lines(machine.received(fetched(UInt64(number)), now: now, streamsOpen: 0)).filter { $0.hasPrefix("schedule quiet") }.count
        }
        #expect(machine.keepaliveChanges - before == 1)
        #expect(quietChecks == 1, "one quiet check is armed at a time")
        _ = machine.deadlinePassed(.quiet, now: now + .seconds(2), streamsOpen: 0)
        #expect(machine.keepaliveChanges - before == 2)
    }

    @Test("A link that stays open (no idle time) leaves keepalive on, whatever waits")
    func keepaliveAlwaysOn() {
        var machine = machine()
        #expect(lines(machine.busyChanged(now: start, streamsOpen: 0, immediately: true)) == [])
        _ = machine.request("a", deadline: .seconds(5), now: start, streamsOpen: 0, fetch)
        #expect(lines(machine.received(fetched(1), now: start, streamsOpen: 0)) == ["cancel #1", "answer a fetched #1"])
        #expect(machine.watching)
    }

    // MARK: Any order

    @Test("Any interleaving of requests, answers (right, wrong, repeated), deadlines and the end: every request is answered exactly once, and none of its deadlines outlives it")
    func anyOrder() {
        var generator = SeededGenerator(seed: 0x11_4E)
        for _ in 0..<300 {
            var machine = machine(idle: .seconds(30))
            var now = start
            var answered: [String: Int] = [:]
            var asked = 0
            var scheduled: Set<LinkDeadline> = []

            func apply(_ actions: [Machine.Action]) {
                for action in actions {
                    switch action {
                    case .schedule(let deadline, _): scheduled.insert(deadline)
                    case .cancel(let deadline): scheduled.remove(deadline)
                    case .answer(let waiter, _): answered[waiter, default: 0] += 1
                    case .write, .applyKeepalive, .close: break
                    }
                }
            }

            for _ in 0..<40 {
                now += .milliseconds(Int64.random(in: 0...3000, using: &generator))
                switch Int.random(in: 0..<6, using: &generator) {
                case 0, 1:
                    asked += 1
                    apply(machine.request("\(asked)", deadline: .seconds(5), now: now, streamsOpen: 0, fetch))
                case 2, 3:
                    apply(machine.received(fetched(UInt64.random(in: 1...UInt64(max(asked, 1)), using: &generator)), now: now, streamsOpen: 0))
                case 4:
                    if let deadline = scheduled.randomElement(using: &generator) {
                        scheduled.remove(deadline)
                        apply(machine.deadlinePassed(deadline, now: now, streamsOpen: 0))
                    }
                default:
                    if Int.random(in: 0..<4, using: &generator) == 0 {
                        apply(machine.ended("went away"))
                    } else {
                        apply(machine.idleCheck(now: now, streamsOpen: 0))
                    }
                }
            }
            apply(machine.ended("closed by this device"))
            for number in 0..<asked {
                #expect(answered["\(number + 1)"] == 1, "request \(number + 1) answered \(answered["\(number + 1)"] ?? 0) times")
            }
            #expect(scheduled.filter { if case .request = $0 { true } else { false } }.isEmpty, "request deadlines left: \(scheduled)")
        }
    }
}
