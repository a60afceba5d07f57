import Foundation
import HandoffLocalAPI
import HandoffWire
import Testing

@testable import HandoffAgent

/// The inviting device's decisions about joins, each transition on its own: no listener, no
/// link, and time given, not waited for.
@Suite("Pairing state machine")
struct PairingStateMachineTests {
    typealias Machine = PairingStateMachine<Int>
    let certificate: [UInt8] = Array("a joining device's certificate".utf8)
    let fingerprint = String(repeating: "ab", count: 32)
    let start = ContinuousClock.now
    let date = Date()

    func invitation(_ kind: Invitation.Kind = .token) -> Invitation {
        Invitation.make(kind, host: "192.0.2.1", port: 47171, fingerprint: fingerprint)
    }

    func join(_ name: String = "new", token: UUID = UUID()) -> Machine.AnsweredJoin {
        let account = AccountState(name: "home", members: [], beaconKeys: [])
        return Machine.AnsweredJoin(
            signed: SignedChange(signer: UUID(), state: [1], signature: [2]), account: account, previous: [], name: name, isMember: false, token: token)
    }

    @Test("The right code matches its invitation once: asking again with it is a wrong code")
    func oneUse() {
        var machine = Machine()
        let id = UUID(), made = invitation()
        machine.issue(id, made, expires: date + 60)
        let proof = made.proof(certificate: certificate, name: "new")
        let step1 = machine.requested(proof: proof, certificate: certificate, name: "new", from: "10.0.0.2", now: start, date: date)
        #expect(step1 == .matched(id, made))
        #expect(machine.invitations[id]?.used == true)
        let step2 = machine.requested(proof: proof, certificate: certificate, name: "new", from: "10.0.0.3", now: start, date: date)
        #expect(step2 == .refused(Machine.wrongCode))
        #expect(machine.wrongCodes == ["10.0.0.3": 1])
    }

    @Test("A code is bound to the certificate and name it was proven with, and to its expiry")
    func boundAndExpiring() {
        var machine = Machine()
        let id = UUID(), made = invitation()
        machine.issue(id, made, expires: date + 60)
        let proof = made.proof(certificate: certificate, name: "new")
        let step3 = machine.requested(proof: proof, certificate: certificate + [0], name: "new", from: "10.0.3.1", now: start, date: date)
        #expect(step3 == .refused(Machine.wrongCode))
        let step4 = machine.requested(proof: proof, certificate: certificate, name: "other", from: "10.0.3.2", now: start, date: date)
        #expect(step4 == .refused(Machine.wrongCode))
        let step5 = machine.requested(proof: proof, certificate: certificate, name: "new", from: "10.0.3.3", now: start, date: date + 61)
        #expect(step5 == .refused(Machine.wrongCode))
        let step6 = machine.requested(proof: proof, certificate: certificate, name: "new", from: "10.0.3.4", now: start, date: date + 59)
        #expect(step6 == .matched(id, made))
    }

    @Test("A second wrong code holds its source back 10 s, twice as long after each further one, and other sources not at all")
    func wrongCodeHoldsItsSource() {
        var machine = Machine()
        let id = UUID(), made = invitation()
        machine.issue(id, made, expires: date + 3_600)
        let proof = made.proof(certificate: certificate, name: "new")
        func ask(_ proof: [UInt8], from address: String, at second: Int) -> Machine.Request {
            machine.requested(proof: proof, certificate: certificate, name: "new", from: address, now: start + .seconds(second), date: date)
        }
        // The first wrong code is free: a person who typed an older code tries again at once.
        #expect(ask([0], from: "10.0.0.9", at: 0) == .refused(Machine.wrongCode))
        #expect(ask([1], from: "10.0.0.9", at: 1) == .refused(Machine.wrongCode))
        // Now even the right code is not looked at from there for 10 s.
        guard case .held(let reason) = ask(proof, from: "10.0.0.9", at: 5) else {
            Issue.record("the guessing source was not held back")
            return
        }
        #expect(reason.contains("wait 6 s"), "\(reason)")
        #expect(machine.invitations[id]?.used == false)
        #expect(ask([1], from: "10.0.0.8", at: 5) == .refused(Machine.wrongCode), "another source was held back")
        #expect(ask([2], from: "10.0.0.9", at: 12) == .refused(Machine.wrongCode))
        if case .held = ask(proof, from: "10.0.0.9", at: 31) {} else { Issue.record("the third wrong code did not hold its source for 20 s") }
        #expect(ask(proof, from: "10.0.0.9", at: 32) == .matched(id, made))
    }

    @Test("An IPv6 source is its address: another address of the same /64 (a LAN's, or link-local) is not held back; an IPv4-mapped peer is its IPv4 address")
    func ipv6SourceIsItsAddress() {
        var machine = Machine()
        machine.issue(UUID(), invitation(), expires: date + 3_600)
        func ask(from address: String) -> Machine.Request {
            machine.requested(proof: [0], certificate: certificate, name: "guess", from: address, now: start, date: date)
        }
        #expect(ask(from: "fe80::1%eth0") == .refused(Machine.wrongCode))
        #expect(ask(from: "fe80::1%eth0") == .refused(Machine.wrongCode))
        if case .held = ask(from: "fe80::1%eth0") {} else { Issue.record("the guessing address was not held back") }
        #expect(ask(from: "fe80::2%eth0") == .refused(Machine.wrongCode), "the real joiner on the same link was held back")
        #expect(Machine.source(of: "::ffff:10.0.0.1") == "10.0.0.1" && Machine.source(of: "10.0.0.1") == "10.0.0.1")
    }

    @Test("A flood from more sources than are kept costs bounded memory, and the newest guesser is still held back")
    func manySources() {
        var machine = Machine()
        machine.issue(UUID(), invitation(), expires: date + 86_400)
        for index in 0..<(Machine.sourcesKept + 100) {
            let address = "10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)"
            for _ in 0..<2 { _ = machine.requested(proof: [0], certificate: certificate, name: "guess", from: address, now: start, date: date) }
        }
        #expect(machine.penalties.count <= Machine.sourcesKept)
        #expect(machine.wrongCodes.count <= 65)
        if case .held = machine.requested(proof: [0], certificate: certificate, name: "guess", from: "10.0.16.99", now: start, date: date) {} else {
            Issue.record("the newest guesser was not held back")
        }
    }

    @Test("A source's wait doubles up to 10 minutes, and starts again once it sent no wrong code for 10 minutes")
    func penaltyDecays() {
        var machine = Machine()
        machine.issue(UUID(), invitation(), expires: date + 86_400)
        var now = start
        for expected in [0, 10, 20, 40, 80, 160, 320, 600, 600] {
            #expect(machine.requested(proof: [0], certificate: certificate, name: "guess", from: "10.0.0.9", now: now, date: date) == .refused(Machine.wrongCode))
            #expect(machine.penalties["10.0.0.9"].map { $0.until - now } == .seconds(expected))
            now += .seconds(expected)
        }
        now += .seconds(601)
        #expect(machine.requested(proof: [0], certificate: certificate, name: "guess", from: "10.0.0.9", now: now, date: date) == .refused(Machine.wrongCode))
        #expect(machine.penalties["10.0.0.9"].map { $0.until - now } == .seconds(0))
    }

    @Test("Wrong codes from any number of sources never withdraw an invitation: the right code still matches, and the person is told who guessed")
    func wrongCodesNeverWithdraw() {
        var machine = Machine()
        let first = UUID(), made = invitation()
        machine.issue(first, made, expires: date + 600)
        machine.issue(UUID(), invitation(.interactive), expires: date + 600)
        for guess in 0..<100 {
            let step = machine.requested(proof: [UInt8(guess)], certificate: certificate, name: "guess", from: "10.0.1.\(guess % 10)", now: start + .milliseconds(guess), date: date)
            switch step {
            case .refused(Machine.wrongCode), .held: break
            default: Issue.record("a guess came to \(step)")
            }
        }
        #expect(machine.invitations.count == 2)
        let right = machine.requested(
            proof: made.proof(certificate: certificate, name: "new"), certificate: certificate, name: "new", from: "10.0.2.1", now: start + .seconds(1), date: date)
        #expect(right == .matched(first, made))
        let report = machine.wrongCodeReport ?? ""
        #expect(report.hasPrefix("20 join requests with a wrong code were refused (10.0.1.0 sent 2, "), "\(report)")
        #expect(report.contains("and 5 more") && report.contains("the invitation stayed open"), "\(report)")
        // The listener closes a little after the last invitation ended; the report starts again.
        for id in Array(machine.invitations.keys) { _ = machine.expire(id) }
        #expect(lines(machine.deadlinePassed(.listenerIdle)) == ["closeListener"])
        #expect(machine.wrongCodeReport == nil)
    }

    @Test("An interactive invitation holds the device that asked until the person decides: those waiting for it are told who asked, the person's decision reaches it once; one gone meanwhile refuses at once")
    func askingThePerson() {
        var machine = Machine()
        let id = UUID()
        machine.issue(id, invitation(.interactive), expires: date + 600)
        #expect(machine.awaitCandidate(UUID(), 9) == nil, "no such invitation")
        #expect(lines(machine.awaitCandidate(id, 1)) == [])
        #expect(lines(machine.awaitCandidate(id, 2)) == [])
        let request = LocalJoinRequest(name: "new", verification: "123 456", fingerprint: "ff")
        #expect(lines(machine.ask(id, request, decision: 10)) == ["resume 1 candidate new", "resume 2 candidate new"])
        #expect(machine.invitations[id]?.candidate == request)
        // One who asks later is told at once.
        #expect(lines(machine.awaitCandidate(id, 3)) == ["resume 3 candidate new"])
        #expect(lines(machine.decide(id, accept: true)) == ["resume 10 decision true"])
        #expect(machine.decide(id, accept: false) == nil, "decided already")
        #expect(lines(machine.expire(id)) == ["cancel invitation", "schedule listenerIdle in 5.0 seconds"])
        #expect(lines(machine.expire(id)) == [])
        #expect(lines(machine.ask(id, request, decision: 11)) == ["resume 11 decision false"])
    }

    @Test("An invitation that expires tells whoever waits on it: no device, and no decision for the device that asked")
    func expiryTellsWaiters() {
        var machine = Machine()
        let waiting = UUID(), deciding = UUID()
        machine.issue(waiting, invitation(.interactive), expires: date + 600)
        machine.issue(deciding, invitation(.interactive), expires: date + 600)
        _ = machine.awaitCandidate(waiting, 1)
        _ = machine.ask(deciding, LocalJoinRequest(name: "new", verification: "1", fingerprint: "ff"), decision: 2)
        #expect(lines(machine.deadlinePassed(.invitation(waiting))) == ["cancel invitation", "resume 1 candidate none"])
        #expect(lines(machine.deadlinePassed(.invitation(deciding))) == ["cancel invitation", "resume 2 decision false", "schedule listenerIdle in 5.0 seconds"])
    }

    @Test("The pairing listener closes a little after the last invitation ends, unless one was made meanwhile; stopping ends them all")
    func listenerLingers() {
        var machine = Machine()
        let first = UUID(), second = UUID()
        #expect(lines(machine.issue(first, invitation(), expires: date + 600, lifetime: .seconds(600))) == ["cancel listenerIdle", "schedule invitation in 600.0 seconds"])
        #expect(lines(machine.expire(first)) == ["cancel invitation", "schedule listenerIdle in 5.0 seconds"])
        _ = machine.issue(second, invitation(), expires: date + 600, lifetime: .seconds(600))
        #expect(lines(machine.deadlinePassed(.listenerIdle)) == [], "an invitation was made meanwhile")
        #expect(lines(machine.expireAll()) == ["cancel invitation", "schedule listenerIdle in 5.0 seconds", "cancel listenerIdle"])
        #expect(machine.invitations.isEmpty)
    }

    @Test("This device's join: one at a time; those asking how it ended are told when it does; the result is then taken once")
    func joining() {
        var machine = Machine()
        #expect(machine.awaitJoinResult(1) == nil, "no join was made")
        let started = machine.startJoin(), again = machine.startJoin()
        #expect(started)
        #expect(!again, "one under way")
        #expect(lines(machine.awaitJoinResult(2)) == [])
        #expect(lines(machine.awaitJoinResult(3)) == [])
        #expect(lines(machine.joinEnded(LocalReply(account: "home"))) == ["resume 2 joined home", "resume 3 joined home"])
        #expect(lines(machine.joinEnded(LocalReply(account: "other"))) == [], "it ended once")
        #expect(lines(machine.awaitJoinResult(4)) == ["resume 4 joined home"])
        #expect(machine.awaitJoinResult(5) == nil, "taken")
        let startedAgain = machine.startJoin()
        #expect(startedAgain)
    }

    @Test("Changes to the account: one at a time, the others in the order they asked")
    func accountChanges() {
        var machine = Machine()
        #expect(lines(machine.beginAccountChange(1)) == ["resume 1 turn"])
        #expect(lines(machine.beginAccountChange(2)) == [])
        #expect(lines(machine.beginAccountChange(3)) == [])
        #expect(lines(machine.accountChangeEnded()) == ["resume 2 turn"])
        #expect(lines(machine.accountChangeEnded()) == ["resume 3 turn"])
        #expect(lines(machine.accountChangeEnded()) == [])
        #expect(lines(machine.beginAccountChange(4)) == ["resume 4 turn"], "none under way")
    }

    @Test("Any interleaving of account changes beginning and ending: never two at once, and each begins once, in order")
    func accountChangesAnyOrder() {
        var generator = SeededGenerator(seed: 0xACC7)
        for _ in 0..<200 {
            var machine = Machine()
            var asked = 0
            var turns: [Int] = []
            var holding = 0
            for _ in 0..<40 {
                if Bool.random(using: &generator) {
                    asked += 1
                    for case .resume(let waiter, .accountTurn) in machine.beginAccountChange(asked) {
                        turns.append(waiter)
                        holding += 1
                    }
                } else if holding > 0 {
                    holding -= 1
                    for case .resume(let waiter, .accountTurn) in machine.accountChangeEnded() {
                        turns.append(waiter)
                        holding += 1
                    }
                }
                #expect(holding <= 1, "two changes at once")
            }
            while holding > 0 {
                holding -= 1
                for case .resume(let waiter, .accountTurn) in machine.accountChangeEnded() {
                    turns.append(waiter)
                    holding += 1
                }
            }
            #expect(turns == Array(1...max(asked, 1)).prefix(asked).map { $0 })
        }
    }

    @Test("An answered join waits for its device's confirmation: confirmed once, or dropped by its own deadline, never by an earlier answer's")
    func answeredJoins() {
        var machine = Machine()
        let early = UUID(), late = UUID()
        #expect(lines(machine.answered("device", join(token: early))) == ["schedule confirmation in 10.0 seconds"])
        // The device asks again before confirming: a new answer replaces the first.
        _ = machine.answered("device", join(token: late))
        let step16 = machine.confirmationDeadlinePassed("device", token: early)
        #expect(step16 == nil)
        #expect(machine.answered.count == 1)
        let step17 = machine.confirmationDeadlinePassed("device", token: late)
        #expect(step17?.token == late)
        let step18 = machine.confirmed("device")
        #expect(step18 == nil)

        _ = machine.answered("other", join("other", token: early))
        let step19 = machine.confirmed("other")
        #expect(step19?.name == "other")
        let step20 = machine.confirmationDeadlinePassed("other", token: early)
        #expect(step20 == nil)
        #expect(machine.answered.isEmpty)
    }

    func lines(_ actions: [Machine.Action]?) -> [String] {
        (actions ?? []).map { action in
            switch action {
            case .schedule(let deadline, let after): "schedule \(name(deadline)) in \(after)"
            case .cancel(let deadline): "cancel \(name(deadline))"
            case .closeListener: "closeListener"
            case .resume(let waiter, .candidate(let request)): "resume \(waiter) candidate \(request?.name ?? "none")"
            case .resume(let waiter, .decision(let accept)): "resume \(waiter) decision \(accept)"
            case .resume(let waiter, .joinResult(let reply)): "resume \(waiter) joined \(reply.account ?? "?")"
            case .resume(let waiter, .accountTurn): "resume \(waiter) turn"
            }
        }
    }

    func name(_ deadline: PairingDeadline) -> String {
        switch deadline {
        case .invitation: "invitation"
        case .confirmation: "confirmation"
        case .listenerIdle: "listenerIdle"
        }
    }
}

extension PairingStateMachine {
    /// An invitation whose expiry timer the test does not look at.
    fileprivate mutating func issue(_ id: UUID, _ invitation: Invitation, expires: Date) {
        _ = issue(id, invitation, expires: expires, lifetime: .seconds(600))
    }
}
