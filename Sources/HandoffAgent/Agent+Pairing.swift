import Foundation
import HandoffCore
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import Synchronization
import X509

/// Accounts and pairing: invitations, joins, signed account changes, removal, catching up.
extension Agent {
    // MARK: Pairing

    /// Makes an invitation and opens the pairing listener for it.
    func invite(kind: Invitation.Kind, host: String?, lifetime: Double?) async -> LocalReply {
        guard let account else {
            return .failure(LocalError(.account, noAccount(else: "this device is in no account yet; make one with 'handoff account create --name NAME'")))
        }
        let lifetime = lifetime ?? 600
        guard lifetime > 0, lifetime <= 86_400 else {
            return .failure(LocalError(.badRequest, "an invitation lasts from 1 second to 24 hours"))
        }
        guard let address = host ?? invitationAddress() else {
            return .failure(LocalError(.badRequest, "this device has no address to put in the invitation; give one with --address"))
        }
        if endpoints.pairing.listener == nil {
            // One opening at a time: an invitation asked for meanwhile waits for the same one.
            let opening = endpoints.pairing.opening ?? Task { await self.openPairingListener() }
            endpoints.pairing.opening = opening
            let opened = await opening.value
            endpoints.pairing.opening = nil
            if case .failure(let error) = opened { return .failure(error) }
        }
        guard let listener = endpoints.pairing.listener else {
            return .failure(LocalError(.failed, "the listener for joining devices closed as it opened; ask again"))
        }
        let pinned = DeviceIdentity.fingerprint(ofCertificate: (endpoints.pairing.identity ?? identity).links.current().certificateDER)
        let invitation = Invitation.make(kind, host: address, port: listener.port, fingerprint: pinned)
        let id = UUID.random()
        let expires = Date().addingTimeInterval(lifetime)
        // Its expiry is a timer cancelled when the invitation ends sooner (used, withdrawn).
        run(pairing.issue(id, invitation, expires: expires, lifetime: .milliseconds(Int64(lifetime * 1000))))
        logger.notice("made an invitation to '\(account.name)'", metadata: ["kind": "\(kind)", "expires": "\(expires)"])
        var reply = LocalReply(
            invitation: LocalInvitation(
                id: id, code: invitation.code, kind: kind == .token ? "token" : "interactive", expires: expires, host: address, port: invitation.port))
        reply.warnings = endpoints.pairing.notice.map { [$0] }
        return reply
    }

    /// Where a joining device reaches this one: the listen address if it is one, else the
    /// first interface's IPv4 address, else an IPv6 address (a global one, or a link-local one
    /// with its interface: the joiner must reach it on an interface of the same name).
    func invitationAddress() -> String? {
        let listen = configuration.listen.host
        if listen != "0.0.0.0" && listen != "::" { return listen }
        let interfaces = configuration.interfaces ?? Self.multicastInterfaces(includingIPv6: true)
        let devices = (try? System.enumerateDevices()) ?? []
        for name in interfaces {
            if let device = devices.first(where: { $0.name == name && $0.address?.protocol == .inet }), let ip = device.address?.ipAddress {
                return ip
            }
        }
        guard listenHost == "::" else { return nil }
        for name in interfaces {
            let v6 = devices.filter { $0.name == name && $0.address?.protocol == .inet6 }.compactMap { $0.address?.ipAddress }
            if let global = v6.first(where: { !$0.lowercased().hasPrefix("fe80:") && $0 != "::1" }) { return global }
            if let local = v6.first(where: { $0.lowercased().hasPrefix("fe80:") }) { return "\(local)%\(name)" }
        }
        return nil
    }


    func expire(_ id: UUID) {
        run(pairing.expire(id))
    }

    /// Carries out what `PairingStateMachine` decided.
    func run(_ actions: [Pairing.Action]) {
        for action in actions {
            switch action {
            case .schedule(let deadline, let after):
                schedule(.pairing(deadline), after: after)
            case .cancel(let deadline):
                deadlines.removeValue(forKey: .pairing(deadline))?.cancel()
            case .resume(let waiter, let resumption):
                switch (waiter, resumption) {
                case (.candidate(let continuation), .candidate(let request)): continuation.resume(returning: request)
                case (.decision(let continuation), .decision(let accept)): continuation.resume(returning: accept)
                case (.joinResult(let continuation), .joinResult(let reply)): continuation.resume(returning: reply)
                case (.accountTurn(let continuation), .accountTurn): continuation.resume()
                default: preconditionFailure("the pairing machine resumed \(waiter) with \(resumption)")
                }
            case .closeListener:
                guard let listener = endpoints.pairing.listener else { continue }
                endpoints.pairing.listener = nil
                endpoints.pairing.identity = nil
                tasks.start("close the pairing listener") { await listener.close() }
            }
        }
    }

    func pairingDeadlinePassed(_ deadline: PairingDeadline) {
        if case .confirmation(let key, let token) = deadline { return dropUnconfirmedJoin(key, token: token) }
        run(pairing.deadlinePassed(deadline))
    }

    func awaitJoin(_ id: UUID) async -> LocalReply {
        guard pairing.invitations[id] != nil else {
            return .failure(LocalError(.notFound, "the invitation has expired or was used"))
        }
        let request: LocalJoinRequest? = await withCheckedContinuation { continuation in
            guard let actions = pairing.awaitCandidate(id, .candidate(continuation)) else { return continuation.resume(returning: nil) }
            run(actions)
        }
        let report = pairing.wrongCodeReport
        guard let request else {
            return .failure(LocalError(.notFound, "the invitation expired before a device asked to join" + (report.map { "; meanwhile \($0)" } ?? "")))
        }
        var reply = LocalReply(joinRequest: request)
        reply.warnings = report.map { [$0] }
        return reply
    }

    /// The person's decision on a device asking to join. Let in, the reply waits for the
    /// outcome: the device is in the account only once it confirmed it saved it (a device that
    /// stops or whose disk is full never does), so the person is never told of a member that
    /// is not one.
    func confirmJoin(_ id: UUID, accept: Bool) async -> LocalReply {
        let outcome = FirstOutcome<String?>()
        if accept { joinOutcomes[id] = (nil, nil, outcome) }
        guard let actions = pairing.decide(id, accept: accept) else {
            joinOutcomes[id] = nil
            return .failure(LocalError(.notFound, "no device is waiting to join with that invitation"))
        }
        run(actions)
        guard accept else { return LocalReply() }
        let notJoined = await outcome.value()
        let member = joinOutcomes[id]?.member
        joinOutcomes[id] = nil
        if let notJoined { return .failure(LocalError(.account, notJoined)) }
        // A device that joined is heard within moments (it beacons as it takes the account
        // up); one stopped after it confirmed, before it heard the end, never is.
        var reply = LocalReply()
        if let member, let unheard = joinedUnheard[member] {
            let timer = LoopTimer(after: Self.joinedHeardWait) { unheard.heard.settle(()) }
            await unheard.heard.value()
            timer.cancel()
            if joinedUnheard[member] != nil, let name = account?.members.first(where: { $0.id == member })?.name {
                reply.warnings = [Self.unheardSinceJoining(name)]
            }
        }
        return reply
    }

    /// How long the person letting a device in waits to hear it take the account up.
    static let joinedHeardWait: Duration = .seconds(5)

    static func unheardSinceJoining(_ name: String) -> String {
        "'\(name)' is in the account but has not been heard since it joined: if it was stopped while joining, it does not know it is (its 'handoff status' shows no account); then remove it here with 'handoff device remove \(name)' and invite it again"
    }

    /// Tells the person who let in the device answered under `key` how its join ended.
    private func joinEnded(key: String, _ notJoined: String?) {
        for entry in joinOutcomes.values where entry.key == key { entry.outcome.settle(notJoined) }
    }

    /// Answers a frame on the pairing listener: `joinRequest`, then `joinConfirmed`.
    ///
    /// A join is committed only when the joining device confirms it has the answer: a request
    /// whose answer is lost adds nobody. (If the last answer, after the commit, is lost, the
    /// device is a member that does not know it; it joins again with a new code and is
    /// answered as the member it is.)
    func answerJoin(_ frame: Frame, from peer: LinkPeer) async -> Frame? {
        switch try? LinkMessage(frame: frame) {
        case .joinRequest(let version, let name, let certificate, let proof)?:
            return await requestJoin(version: version, name: name, certificate: certificate, proof: proof, from: peer)
        case .joinConfirmed?:
            return await confirmJoin(from: peer)
        default:
            return LinkMessage.joinRefused(reason: "only a join request is answered here").frame
        }
    }

    /// How long a join answered waits for the joining device's confirmation.
    static var joinConfirmationDeadline: Duration { Pairing.confirmationDeadline }

    private func requestJoin(version: UInt8, name: String, certificate: [UInt8], proof: [UInt8], from peer: LinkPeer) async -> Frame? {
        let refuse = { (reason: String) -> Frame? in
            self.logger.warning("refused a device asking to join: \(reason)", metadata: ["name": "\(name)"])
            return LinkMessage.joinRefused(reason: reason).frame
        }
        guard version == LinkMessage.version else { return refuse("it speaks link protocol version \(version), this device \(LinkMessage.version)") }
        // Its membership proofs must be of the one size every proof has (`LinkProof`).
        guard certificate.count <= LinkProof.certificateRoom else {
            return refuse("its certificate is \(certificate.count) bytes, over the \(LinkProof.certificateRoom) a member's may have; give it a shorter name")
        }
        // The certificate it showed in the handshake is its long-term one (the key is its own).
        guard certificate == peer.presented else {
            return refuse("the certificate in the request is not the one it connected with")
        }
        // Guessing is slow and costs only the guesser (`PairingStateMachine`): five requests
        // a minute from one source are looked at, and a wrong code holds its source back.
        let id: UUID, invitation: Invitation
        switch pairing.requested(proof: proof, certificate: certificate, name: name, from: peer.address, now: .now, date: Date()) {
        case .held(let reason):
            // Refused unread, and not logged one by one: a flood would fill the log.
            return LinkMessage.joinRefused(reason: reason).frame
        case .refused(let reason):
            return refuse(reason)
        case .matched(let matched, let its):
            (id, invitation) = (matched, its)
        }
        guard let account else { return refuse("this device has left its account") }
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 64 else { return refuse("a device name has 1 to 64 bytes") }
        let fingerprint = DeviceIdentity.fingerprint(ofCertificate: certificate)
        let confirmation = DeviceIdentity.fingerprint(ofCertificate: peer.presented)
        if let member = account.members.first(where: { $0.certificate.map { DeviceIdentity.fingerprint(ofCertificate: Array($0)) } == fingerprint }) {
            // A member asking again with a valid code: it never heard that it joined.
            guard member.name == name else { return refuse("that device is already a member, named '\(member.name)'") }
            expire(id)
            let signed: SignedChange
            do {
                signed = try SignedAccount(account, by: identity)
            } catch {
                return refuse("this device could not sign the account: \(error)")
            }
            // Kept only until the deadline, as a new device's join is.
            let join = Pairing.AnsweredJoin(signed: signed, account: account, previous: account.members, name: name, isMember: true, token: UUID.random())
            run(pairing.answered(confirmation, join))
            logger.notice("'\(name)' asked to join again: it is a member that never heard it joined")
            return LinkMessage.joinAccepted(signed).frame
        }
        guard !account.members.contains(where: { $0.name == name }) else {
            return refuse("a device named '\(name)' is already in the account; start the new device's agent with another --name")
        }
        if invitation.kind == .interactive {
            let request = LocalJoinRequest(name: name, verification: invitation.verificationNumber(certificate: certificate), fingerprint: fingerprint)
            let accepted: Bool = await withCheckedContinuation { continuation in
                run(pairing.ask(id, request, decision: .decision(continuation)))
            }
            guard accepted else {
                expire(id)
                return refuse("the person on '\(deviceName)' did not confirm the join")
            }
        }
        expire(id)
        // Refused after the person let it in: they hear why.
        let refuseLetIn = { (reason: String) -> Frame? in
            self.joinOutcomes[id]?.outcome.settle("'\(name)' was not added: \(reason)")
            return refuse(reason)
        }
        guard let memberID = UUID(uuidString: peerID(certificate)) else {
            return refuseLetIn("its certificate does not name a device id")
        }
        // From the account as it is now: another change may have come while the person decided.
        guard var proposed = self.account else { return refuseLetIn("this device has left its account") }
        guard !proposed.members.contains(where: { $0.id == memberID || $0.name == name }) else {
            return refuseLetIn("a device with that id or name is already in the account")
        }
        let previous = proposed.members
        proposed.members.append(AccountState.Member(id: memberID, name: name, certificate: Data(certificate)))
        proposed.revision += 1
        let signed: SignedChange
        do {
            signed = try SignedAccount(proposed, by: identity)
        } catch {
            return refuseLetIn("this device could not sign the account: \(error)")
        }
        // Committed when the device confirms it has this answer, within the deadline.
        let join = Pairing.AnsweredJoin(signed: signed, account: proposed, previous: previous, name: name, isMember: false, token: UUID.random())
        joinOutcomes[id]?.key = confirmation
        joinOutcomes[id]?.member = memberID
        run(pairing.answered(confirmation, join))
        return LinkMessage.joinAccepted(signed).frame
    }

    private func dropUnconfirmedJoin(_ key: String, token: UUID) {
        guard let pending = pairing.confirmationDeadlinePassed(key, token: token) else { return }
        if pending.isMember {
            logger.info("'\(pending.name)', a member asking to join again, did not confirm within \(Self.joinConfirmationDeadline); it stays a member")
        } else {
            logger.warning("'\(pending.name)' did not confirm its join within \(Self.joinConfirmationDeadline); it was not added")
            joinEnded(
                key: key,
                "'\(pending.name)' did not confirm within \(Self.joinConfirmationDeadline) that it saved the account (it stopped, or could not save: its screen says which), so it was not added; invite it again"
            )
        }
    }

    private func confirmJoin(from peer: LinkPeer) async -> Frame? {
        let key = DeviceIdentity.fingerprint(ofCertificate: peer.presented)
        guard let pending = pairing.confirmed(key) else {
            return LinkMessage.joinRefused(reason: "no join waits for this device's confirmation (more than \(Self.joinConfirmationDeadline) passed?); join again with a new code").frame
        }
        if pending.isMember { return LinkMessage.joinAccepted(pending.signed).frame }
        let committed: PairingError? = await changingAccount {
            guard let account = self.account, account.revision + 1 == pending.account.revision, account.members.map(\.id) == pending.previous.map(\.id) else {
                return PairingError("the account changed while the device joined; join again with a new code")
            }
            do {
                try store.save(pending.account, to: AccountState.fileName)
            } catch {
                return PairingError("this device could not save the account: \(error)")
            }
            self.account = pending.account
            updatePins()
            record(pending.signed, revision: pending.account.revision)
            await discovery?.setAccountRevision(pending.account.revision)
            return nil
        }
        if let committed {
            logger.warning("refused a device asking to join: \(committed.message)", metadata: ["name": "\(pending.name)"])
            joinEnded(key: key, "'\(pending.name)' was not added: \(committed.message)")
            return LinkMessage.joinRefused(reason: committed.message).frame
        }
        logger.notice("'\(pending.name)' joined the account")
        if let joined = pending.account.members.last, !pending.previous.contains(where: { $0.id == joined.id }) {
            joinedUnheard[joined.id] = (Date(), FirstOutcome())
        }
        joinEnded(key: key, nil)
        // The answer goes first; the other members hear of the new device meanwhile, and the
        // new device hears this one at once, not at the next refresh.
        let pinned = pins.value
        tasks.start("push the new member") {
            await self.push([pending.signed], to: pending.previous, pins: pinned)
            try? await self.discovery?.announce(self.activities.offered)
        }
        return LinkMessage.joinAccepted(pending.signed).frame
    }

    /// The device id a certificate names (its organizational unit), as `DeviceIdentity.generate` writes it.
    func peerID(_ certificate: [UInt8]) -> String {
        guard let parsed = try? Certificate(derEncoded: certificate) else { return "" }
        for rdn in parsed.subject {
            for attribute in rdn where attribute.type == .RDNAttributeType.organizationalUnitName {
                return String(describing: attribute.value)
            }
        }
        return ""
    }

    /// Starts joining with an invitation code.
    func join(_ code: String) -> LocalReply {
        if let account {
            return .failure(LocalError(.account, "this device is already in the account '\(account.name)'"))
        }
        let invitation: Invitation
        do {
            invitation = try Invitation(parsing: code)
        } catch {
            return .failure(LocalError(.badRequest, error.message))
        }
        guard pairing.startJoin() else {
            return .failure(LocalError(.account, "a join is already under way"))
        }
        let certificate = identity.certificateDER
        let name = deviceName
        let request = LinkMessage.joinRequest(version: LinkMessage.version, name: name, certificate: certificate, proof: invitation.proof(certificate: certificate, name: name))
        let deadline: Duration = invitation.kind == .interactive ? .seconds(600) : .seconds(30)
        tasks.start("join") { [identity, network, store] in
            let answers: [Frame]
            // The first answer accepted is confirmed, once, after the account it carries is on
            // disk here; the second is the commit. Why it was not confirmed, if it was not.
            let confirmed = Mutex(false)
            let unsaved = Mutex<String?>(nil)
            // However the join ends, the answered account is the real one or nothing.
            defer { try? FileManager.default.removeItem(at: store.url(AccountState.joiningFileName)) }
            // Whether a device answered at the address with a certificate the code does not pin.
            let unpinned = Mutex(false)
            do {
                answers = try await withDeadline(deadline) {
                    try await network.converse(
                        request.frame, host: invitation.host, port: invitation.port, identity: identity!.showingLongTermCertificate(),
                        accepting: { fingerprint in
                            let matches = invitation.matches(fingerprint: fingerprint)
                            if !matches { unpinned.withLock { $0 = true } }
                            return matches
                        }
                    ) { answer in
                        guard case .joinAccepted(let change)? = try? LinkMessage(frame: answer), !confirmed.withLock({ $0 }) else { return nil }
                        // Saved before the confirmation: a device that cannot keep the account
                        // (a full disk) never confirms, so the inviting device adds nobody.
                        do {
                            try store.save(try change.account(), to: AccountState.joiningFileName)
                        } catch {
                            unsaved.withLock { $0 = "\(error)" }
                            return nil
                        }
                        confirmed.withLock { $0 = true }
                        return LinkMessage.joinConfirmed.frame
                    }
                }
            } catch LinkError.ended(let answered, _) where answered == 1 {
                guard confirmed.withLock({ $0 }) else {
                    return self.joinEnded(.failure(LocalError(.failed, "the inviting device answered but the join was not completed (the link ended); nothing changed, join again with a new code")))
                }
                return self.joinEnded(.failure(LocalError(.failed, "the link to the inviting device ended after this device confirmed, before the join's end was heard: the inviting device may have added this device. If 'handoff devices' there lists it, remove it there; then join again with a new code")))
            } catch where unpinned.withLock({ $0 }) {
                return self.joinEnded(.failure(LocalError(.failed, "the device at \(invitation.host):\(invitation.port) is not the one that made the code, so nothing was sent to it; check the code, or make a new one on the inviting device")))
            } catch {
                return self.joinEnded(.failure(LocalError(.failed, "cannot reach the inviting device at \(invitation.host):\(invitation.port), or it is not the device that made the code: \(error)")))
            }
            if let reason = unsaved.withLock({ $0 }) {
                return self.joinEnded(.failure(LocalError(.failed, "this device could not save the account it was let into (\(reason)), so it did not confirm, and the inviting device added nobody; free some space here and join again with a new code")))
            }
            guard let answer = answers.last else {
                return self.joinEnded(.failure(LocalError(.failed, "the inviting device did not answer")))
            }
            self.joinEnded(await self.joined(answer))
        }
        return LocalReply(verification: invitation.kind == .interactive ? invitation.verificationNumber(certificate: certificate) : nil)
    }

    func joinEnded(_ reply: LocalReply) {
        run(pairing.joinEnded(reply))
    }

    /// How this device's join ended: when it does, or at once if it has.
    func awaitJoinResult() async -> LocalReply {
        await withCheckedContinuation { continuation in
            guard let actions = pairing.awaitJoinResult(.joinResult(continuation)) else {
                return continuation.resume(returning: .failure(LocalError(.notFound, "no join is under way; start one with 'handoff join CODE'")))
            }
            run(actions)
        }
    }

    func joined(_ answer: Frame) async -> LocalReply {
        switch try? LinkMessage(frame: answer) {
        case .joinAccepted(let change)?:
            let account: AccountState
            do {
                account = try change.account()
            } catch {
                return .failure(LocalError(.failed, error.message))
            }
            guard account.members.contains(where: { $0.certificate.map(Array.init) == identity.certificateDER }) else {
                return .failure(LocalError(.failed, "the inviting device answered with an account that does not list this device"))
            }
            let adopted: AgentError? = await changingAccount {
                guard self.account == nil else { return AgentError("this device joined another account meanwhile") }
                do throws(AgentError) {
                    try await adopt(account)
                } catch {
                    return error
                }
                record(change, revision: account.revision)
                return nil
            }
            if let adopted { return .failure(LocalError(.failed, adopted.message)) }
            logger.notice("joined the account '\(account.name)'", metadata: ["devices": "\(account.members.count)"])
            return LocalReply(account: account.name)
        case .joinRefused(let reason)?:
            return .failure(LocalError(.account, "the inviting device refused: \(reason)"))
        default:
            return .failure(LocalError(.failed, "the inviting device answered with something other than a join result"))
        }
    }

    /// Removes a member: a signed change with a new beacon key, taken up here first, then sent
    /// to every member nearby (the removed one too, so it knows).
    func removeDevice(named name: String) async -> LocalReply {
        let pinned = pins.value
        // Who is nearby now: a new key starts discovery afresh, with nobody heard yet.
        let nearby = await discovery?.nearby ?? []
        let made: Result<(SignedChange, AccountState, [AccountState.Member]), LocalError> = await changingAccount {
            guard var account = self.account else { return .failure(LocalError(.account, self.noAccount(else: "this device is in no account"))) }
            guard let member = account.members.first(where: { $0.name == name }) else {
                return .failure(LocalError(.notFound, "no device named '\(name)' is in the account; 'handoff devices' lists them"))
            }
            guard member.id != identity.id else {
                return .failure(LocalError(.notAllowed, "this device cannot remove itself; remove it from another device of the account"))
            }
            let previous = account.members
            account.members.removeAll { $0.id == member.id }
            // The old keys are kept only to find members that were away (see Discovery.stale).
            account.retiredBeaconKeys = Array((account.beaconKeys + (account.retiredBeaconKeys ?? [])).prefix(4))
            account.beaconKeys = [Data(BeaconKey.generate().rawRepresentation)]
            account.revision += 1
            let signed: SignedChange
            do {
                signed = try SignedAccount(account, by: identity)
                try await adopt(account)
            } catch let error as PairingError {
                return .failure(LocalError(.failed, error.message))
            } catch {
                return .failure(LocalError(.failed, "\(error)"))
            }
            record(signed, revision: account.revision)
            links.removeValue(forKey: member.id)?.close()
            return .success((signed, account, previous))
        }
        switch made {
        case .failure(let error):
            return .failure(error)
        case .success(let (signed, account, previous)):
            let removed = previous.filter { member in !account.members.contains { $0.id == member.id } }
            await push([signed], to: previous.filter { member in account.members.contains { $0.id == member.id } }, pins: pinned, nearby: nearby)
            // The removed device is told with a notice that holds no keys, pinned as before.
            if let notice = removalNotice() {
                for member in removed {
                    guard let device = nearby.first(where: { $0.sender == member.id }) else { continue }
                    await send(.removed(notice), to: device, pins: pinned)
                }
            }
            logger.notice("removed '\(name)' from the account and rotated the beacon key")
            return LocalReply(account: account.name)
        }
    }

    /// Sends signed changes to every member in `members` heard nearby, but this device, each on
    /// a connection of its own pinned to `pins`. Those away learn of them when they are heard
    /// again (`catchUp`).
    func push(_ signed: [SignedChange], to members: [AccountState.Member], pins: Set<String>, nearby known: [NearbyDevice]? = nil) async {
        var nearby = known ?? []
        if known == nil { nearby = await discovery?.nearby ?? [] }
        for member in members where member.id != identity.id {
            guard let device = nearby.first(where: { $0.sender == member.id }) else {
                logger.info("'\(member.name)' is not nearby: it learns of the change when it is heard again")
                continue
            }
            await send(.accountUpdate(signed), to: device, pins: pins)
        }
    }

    /// Sends one message on a connection of its own (never one of the reused links, which a
    /// stranger's replayed beacon must not be able to replace), then closes it. Its proof is
    /// sealed with the retired keys too: these messages (account changes, removal notices) go to
    /// devices that may hold only the key that was current before the change.
    func send(_ message: LinkMessage, to device: NearbyDevice, pins: Set<String>) async {
        do {
            let link = try await network.open(
                host: device.address, port: Int(device.linkPort), identity: identity.sealingWithRetiredKeys(), pins: { pins }, deadline: .seconds(5))
            guard link.device == device.sender else {
                link.close()
                logger.warning("the device at \(device.address):\(device.linkPort) is not '\(memberName(device.sender))'")
                return
            }
            link.send(message)
            link.close()
        } catch {
            logger.info("could not reach '\(memberName(device.sender))': \(error.message)")
        }
    }

    /// Keeps a change for members that were away: the last `keptChanges`, on disk only.
    func record(_ change: SignedChange, revision: UInt64) {
        let recorded = RecordedChange(revision: revision, signer: change.signer, state: Data(change.state), signature: Data(change.signature))
        do {
            try store.save(AccountHistory.recording(recorded, in: keptChanges(), keeping: Self.keptChanges), to: AccountState.changesFileName)
        } catch {
            logger.warning("could not keep the account's changes for members that are away: \(error)")
        }
    }

    /// The account changes kept for members that were away, oldest first, read from disk (none
    /// if they cannot be read, which is said).
    func keptChanges() -> [RecordedChange] {
        do {
            return try store.load([RecordedChange].self, from: AccountState.changesFileName) ?? []
        } catch {
            logger.warning("could not read the account's changes kept for members that are away: \(error)")
            return []
        }
    }

    /// Sends a member that is behind (heard with an older revision, or under a retired key)
    /// the changes it missed, at most every 5 seconds.
    ///
    /// A device removed while it was away is sent the changes up to the one that removed it,
    /// over a link pinned to the certificate it had, so that it leaves the account instead of
    /// keeping it forever.
    func catchUp(_ member: UUID, address: String, linkPort: UInt16, revision: UInt64) async {
        guard let account, revision < account.revision, member != identity.id else { return }
        let now = ContinuousClock.now
        guard history.mayCatchUp(member, now: now) else { return }
        guard account.members.contains(where: { $0.id == member }) else {
            // A device removed while it was away: told with a notice that holds no keys (never
            // the changes, which carry the new beacon key), over a link pinned to its old
            // certificate.
            let states = keptChanges().compactMap { try? $0.change.account() }
            guard let certificate = states.reversed().lazy.compactMap({ $0.members.first { $0.id == member }?.certificate }).first,
                let notice = removalNotice()
            else { return }
            history.caughtUp(member, at: now)
            logger.notice("a device removed from the account while it was away is back; telling it it was removed", metadata: ["device": "\(member)"])
            let device = NearbyDevice(sender: member, address: address, linkPort: linkPort, activity: nil, lastHeard: Date(), accountRevision: revision)
            await send(.removed(notice), to: device, pins: [DeviceIdentity.fingerprint(ofCertificate: Array(certificate))])
            return
        }
        let missed = AccountHistory.missed(after: revision, in: keptChanges())
        history.caughtUp(member, at: now)
        guard let first = missed.first, first.revision == revision + 1 else {
            logger.warning("'\(memberName(member))' is too many changes behind to catch up; remove it and pair it again", metadata: ["its revision": "\(revision)"])
            return
        }
        let device = NearbyDevice(sender: member, address: address, linkPort: linkPort, activity: nil, lastHeard: Date(), accountRevision: revision)
        logger.info("sending '\(memberName(member))' the \(missed.count) account change(s) it missed")
        await send(.accountUpdate(missed.map(\.change)), to: device, pins: pins.value)
    }

    /// The account as it is, without its keys, signed by this device: what tells a removed
    /// device it was removed (`LinkMessage.removed`).
    func removalNotice() -> SignedChange? {
        guard var account else { return nil }
        account.beaconKeys = []
        account.retiredBeaconKeys = nil
        return try? SignedAccount(account, by: identity)
    }

    /// A member says this device was removed: checked against the account it has (a member's
    /// signature, a newer revision, a list without this device), then the account is left. The
    /// notice is never taken up as the account.
    func removedNotice(_ notice: SignedChange) async {
        await changingAccount {
            guard let current = self.account, let updated = try? notice.verified(against: current),
                !updated.members.contains(where: { $0.id == self.identity.id })
            else { return }
            self.logger.notice("this device was removed from the account '\(current.name)' by '\(self.memberName(notice.signer))'")
            await self.leave(removedBy: self.memberName(notice.signer))
        }
    }

    /// Takes up changes another member sent, oldest first; each must be signed by a member of
    /// the account as the change before it left it. Ones already known are skipped.
    func apply(_ signed: [SignedChange], from peer: LinkPeer) async {
        await changingAccount { await applyInOrder(signed) }
    }

    func applyInOrder(_ signed: [SignedChange]) async {
        for change in signed.prefix(Self.keptChanges) {
            guard let current = account else { return }
            let updated: AccountState
            do {
                updated = try change.verified(against: current)
            } catch {
                if let revision = try? change.account().revision, revision <= current.revision { continue }
                logger.warning("ignored an account change: \(error.message)")
                return
            }
            let signer = memberName(change.signer)
            if !updated.members.contains(where: { $0.id == identity.id }) {
                logger.notice("this device was removed from the account '\(current.name)' by '\(signer)'")
                await leave(removedBy: signer)
                return
            }
            record(change, revision: updated.revision)
            do {
                try await adopt(updated)
            } catch {
                logger.error("could not take up an account change: \(error)")
                return
            }
            for (id, link) in links where !updated.members.contains(where: { $0.id == id }) {
                link.close()
                links[id] = nil
            }
            logger.notice("the account changed", metadata: ["by": "\(signer)", "devices": "\(updated.members.count)", "revision": "\(updated.revision)"])
        }
    }

    /// Where the record of this device's last removal is kept (`LocalStatus.removed`).
    static let removalFileName = "removed.json"

    /// The record of this device's last removal, while it is in no account since.
    var removal: LocalRemoval? {
        account == nil ? (try? store.load(LocalRemoval.self, from: Self.removalFileName)) ?? nil : nil
    }

    /// What to tell a person who asked for something that needs an account, when this device
    /// has none: that it was removed (from which account, by whom) and how to join again, or,
    /// if it never was in one since, `otherwise`.
    func noAccount(else otherwise: String) -> String {
        guard let removal else { return otherwise }
        return "this device was removed from the account '\(removal.account)' by '\(removal.by)'; to join it again, make a code on one of its devices with "
            + "'handoff device invite', then 'handoff join CODE' here"
    }

    /// Forgets the account: this device was removed.
    func leave(removedBy remover: String? = nil) async {
        if let remover, let name = account?.name {
            // Kept, so that the person is told why there is no account (`status`).
            do {
                try store.save(LocalRemoval(account: name, by: remover, at: Date()), to: Self.removalFileName)
            } catch {
                logger.warning("could not keep the record of this device's removal: \(error)")
            }
        }
        await discovery?.stop()
        discovery = nil
        account = nil
        updatePins()
        for link in links.values { link.close() }
        links = [:]
        try? FileManager.default.removeItem(at: store.url(AccountState.fileName))
        try? FileManager.default.removeItem(at: store.url(AccountState.changesFileName))
    }
}

extension Agent {
    /// Opens the listener joining devices connect to, unless one is open.
    fileprivate func openPairingListener() async -> Result<Void, LocalError> {
        guard endpoints.pairing.listener == nil else { return .success(()) }
        // On the link port plus one, so a firewall needs one more port; with a random link
        // port (tests), a random one.
        let port = configuration.listen.port == 0 ? 0 : configuration.listen.port + 1
        // Certificates of its own, pinned by the codes made while it listens: a stranger
        // who connects learns nothing of this device, and the next listener shows another.
        let shown = identity.showingOwnCertificates()
        endpoints.pairing.identity = shown
        endpoints.pairing.notice = nil
        let listen = { (port: Int) async throws -> any LinkListening in
            try await self.network.listen(
                identity: shown, trust: .shown({ _ in true }), host: self.listenHost, port: port, whenAccepted: { _ in },
                acceptStream: { _, _, _ in ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the pairing listener carries no streams") }
            ) { [weak self] frame, peer in
                await self?.answerJoin(frame, from: peer)
            }
        }
        do {
            endpoints.pairing.listener = try await listen(port)
            return .success(())
        } catch where port != 0 {
            // Another program holds the usual port (on a shared machine, another user's agent,
            // or a squatter): the code carries the port, so any free one serves.
            do {
                let listener = try await listen(0)
                endpoints.pairing.listener = listener
                guard (error as? IOError)?.errnoCode == EADDRINUSE else { throw error }
                let notice = "the pairing port \(port) is taken by another program on this machine (\(error)), so this invitation uses port \(listener.port); a firewall between the devices must let TCP port \(listener.port) through"
                endpoints.pairing.notice = notice
                logger.warning("\(notice)")
                return .success(())
            } catch {
                return .failure(LocalError(.failed, "cannot listen for joining devices on \(listenHost):\(port) or any other port: \(error)"))
            }
        } catch {
            return .failure(LocalError(.failed, "cannot listen for joining devices on \(listenHost):\(port): \(error)"))
        }
    }
}
