import Foundation
import HandoffLocalAPI
import HandoffWire
import Testing

@testable import HandoffAgent

/// The inviting device's decisions about joins, each transition on its own: no listener, no
/// link, and time given, not waited for.
@Suite("Pairing state machine")
struct PairingStateMachineTests {
    typealias Machine = PairingStateMachine
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
        #expect(machine.wrongCodes == 1)
    }

    @Test("A code is bound to the certificate and name it was proven with, and to its expiry")
    func boundAndExpiring() {
        var machine = Machine()
        let id = UUID(), made = invitation()
        machine.issue(id, made, expires: date + 60)
        let proof = made.proof(certificate: certificate, name: "new")
        let step3 = machine.requested(proof: proof, certificate: certificate + [0], name: "new", from: nil, now: start, date: date)
        #expect(step3 == .refused(Machine.wrongCode))
        let step4 = machine.requested(proof: proof, certificate: certificate, name: "other", from: nil, now: start, date: date)
        #expect(step4 == .refused(Machine.wrongCode))
        let step5 = machine.requested(proof: proof, certificate: certificate, name: "new", from: nil, now: start, date: date + 61)
        #expect(step5 == .refused(Machine.wrongCode))
        let step6 = machine.requested(proof: proof, certificate: certificate, name: "new", from: nil, now: start, date: date + 59)
        #expect(step6 == .matched(id, made))
    }

    @Test("Five requests a minute from one address are looked at; the sixth is refused unread, other addresses are not held back, and a minute later the address may try again")
    func attemptsPerAddress() {
        var machine = Machine()
        let id = UUID(), made = invitation()
        machine.issue(id, made, expires: date + 3_600)
        for second in 0..<5 {
            let step7 = machine.requested(proof: [0], certificate: certificate, name: "guess", from: "10.0.0.9", now: start + .seconds(second), date: date)
            #expect(step7 == .refused(Machine.wrongCode))
        }
        let proof = made.proof(certificate: certificate, name: "new")
        // Even the right code is not looked at from that address now.
        let step8 = machine.requested(proof: proof, certificate: certificate, name: "new", from: "10.0.0.9", now: start + .seconds(10), date: date)
        #expect(step8 == .refused("too many join attempts from this address; wait a minute and try again"))
        #expect(machine.wrongCodes == 5)
        #expect(machine.invitations[id]?.used == false)
        let elsewhere = machine.requested(proof: [0], certificate: certificate, name: "guess", from: "10.0.0.8", now: start + .seconds(10), date: date)
        #expect(elsewhere == .refused(Machine.wrongCode))
        let step9 = machine.requested(proof: proof, certificate: certificate, name: "new", from: "10.0.0.9", now: start + .seconds(61), date: date)
        #expect(step9 == .matched(id, made))
    }

    @Test("Ten wrong codes withdraw every open invitation, from however many addresses, and the count starts again")
    func wrongCodesWithdraw() {
        var machine = Machine()
        let first = UUID(), second = UUID()
        machine.issue(first, invitation(), expires: date + 600)
        machine.issue(second, invitation(.interactive), expires: date + 600)
        for guess in 0..<9 {
            let step10 = machine.requested(proof: [UInt8(guess)], certificate: certificate, name: "guess", from: "10.0.1.\(guess)", now: start, date: date)
            #expect(step10 == .refused(Machine.wrongCode))
        }
        guard case .withdraw(let ids, let refusal) = machine.requested(proof: [9], certificate: certificate, name: "guess", from: "10.0.1.9", now: start, date: date) else {
            Issue.record("the tenth wrong code withdrew nothing")
            return
        }
        #expect(Set(ids) == [first, second] && refusal == Machine.wrongCode)
        #expect(machine.wrongCodes == 0)
        for id in ids { _ = machine.expire(id) }
        // With nothing open, a wrong code only counts.
        let step11 = machine.requested(proof: [0], certificate: certificate, name: "guess", from: nil, now: start, date: date)
        #expect(step11 == .refused(Machine.wrongCode))
        machine.listenerClosed()
        #expect(machine.wrongCodes == 0)
    }

    @Test("An interactive invitation holds the device that asked until the person decides; one gone meanwhile takes no candidate")
    func askingThePerson() {
        var machine = Machine()
        let id = UUID()
        machine.issue(id, invitation(.interactive), expires: date + 600)
        let request = LocalJoinRequest(name: "new", verification: "123 456", fingerprint: "ff")
        let step12 = machine.ask(id, request)
        #expect(step12)
        #expect(machine.invitations[id]?.candidate == request)
        let step13 = machine.expire(id)
        #expect(step13 != nil)
        let step14 = machine.expire(id)
        #expect(step14 == nil)
        let step15 = machine.ask(id, request)
        #expect(!step15)
    }

    @Test("An answered join waits for its device's confirmation: confirmed once, or dropped by its own deadline, never by an earlier answer's")
    func answeredJoins() {
        var machine = Machine()
        let early = UUID(), late = UUID()
        machine.answered("device", join(token: early))
        // The device asks again before confirming: a new answer replaces the first.
        machine.answered("device", join(token: late))
        let step16 = machine.confirmationDeadlinePassed("device", token: early)
        #expect(step16 == nil)
        #expect(machine.answered.count == 1)
        let step17 = machine.confirmationDeadlinePassed("device", token: late)
        #expect(step17?.token == late)
        let step18 = machine.confirmed("device")
        #expect(step18 == nil)

        machine.answered("other", join("other", token: early))
        let step19 = machine.confirmed("other")
        #expect(step19?.name == "other")
        let step20 = machine.confirmationDeadlinePassed("other", token: early)
        #expect(step20 == nil)
        #expect(machine.answered.isEmpty)
    }
}
