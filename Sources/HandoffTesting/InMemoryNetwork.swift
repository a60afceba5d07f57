import Foundation
import HandoffAgent
import HandoffWire
import Synchronization

/// Devices in one process with no sockets: links are calls into the other agent's answer,
/// with the same pinning as TLS (each side accepts only the certificates it pins, asked again
/// before every frame), and beacons go over a `BeaconBus`, sealed as on the wire. For running
/// several agents' own logic in one test process.
package final class InMemoryNetwork: AgentNetwork {
    package let beaconBus: BeaconBus? = BeaconBus()
    private let listeners = Mutex<[String: Listener]>([:])
    private let nextPort = Mutex(40_000)
    /// Addresses that refuse every link, as a firewall or a dead device would.
    private let unreachable = Mutex<Set<String>>([])
    /// The links open to each address, ended when it becomes unreachable.
    private let openLinks = Mutex<[ObjectIdentifier: (host: String, end: @Sendable () -> Void)]>([:])

    package init() {}

    struct Listener: Sendable {
        let identity: DeviceIdentity
        let trust: LinkTrust
        let answer: @Sendable (Frame, LinkPeer) async -> Frame?

        var accepts: @Sendable (String) -> Bool { trust.accepts }
    }

    final class Registration: LinkListening {
        let port: Int
        let key: String
        let network: InMemoryNetwork

        init(port: Int, key: String, network: InMemoryNetwork) {
            self.port = port
            self.key = key
            self.network = network
        }

        func close() async {
            _ = network.listeners.withLock { $0.removeValue(forKey: key) }
        }
    }

    /// Makes `host` unreachable (true) or reachable again. Links open to it end at once, as
    /// when a device vanishes in the middle of an answer.
    package func setUnreachable(_ host: String, _ cut: Bool) {
        unreachable.withLock { set in
            if cut { set.insert(host) } else { set.remove(host) }
        }
        guard cut else { return }
        let ended = openLinks.withLock { links in
            let ending = links.filter { $0.value.host == host }
            for id in ending.keys { links[id] = nil }
            return ending.values.map(\.end)
        }
        for end in ended { end() }
    }

    fileprivate func register(_ link: InMemoryLink) {
        let host = link.host
        openLinks.withLock { $0[ObjectIdentifier(link)] = (host, { [weak link] in link?.end("went away") }) }
        if unreachable.withLock({ $0.contains(host) }) { link.end("went away") }
    }

    fileprivate func unregister(_ link: InMemoryLink) {
        _ = openLinks.withLock { $0.removeValue(forKey: ObjectIdentifier(link)) }
    }

    /// Streams are not carried: in-memory devices (`HandoffTesting`) connect their apps'
    /// streams directly.
    package func listen(
        identity: DeviceIdentity, trust: LinkTrust, host: String, port: Int,
        whenAccepted: @escaping @Sendable (UInt64) -> Void,
        acceptStream: @escaping @Sendable (LinkStreamTarget, LinkStream, LinkPeer) async -> ContinuationFailure?,
        answer: @escaping @Sendable (Frame, LinkPeer) async -> Frame?
    ) async throws -> any LinkListening {
        let chosen = port != 0 ? port : nextPort.withLock { next in
            defer { next += 1 }
            return next
        }
        let key = "\(host):\(chosen)"
        try listeners.withLock { listeners in
            guard listeners[key] == nil else { throw AgentError("\(key) is already taken on the in-memory network") }
            listeners[key] = Listener(identity: identity, trust: trust, answer: answer)
        }
        return Registration(port: chosen, key: key, network: self)
    }

    /// In memory a link costs nothing while idle: `idle` is not applied.
    package func open(
        host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins, deadline: Duration, idle: Duration?,
        first: LinkFirstFetch?
    ) async throws(ContinuationFailure) -> any OutgoingLink {
        let key = "\(host):\(port)"
        let unavailable = { (why: String) in ContinuationFailure(code: ContinuationFailure.Code.connectionUnavailable, message: "the device at \(key) \(why)") }
        guard !unreachable.withLock({ $0.contains(host) }), let listener = listeners.withLock({ $0[key] }) else {
            throw unavailable("cannot be reached")
        }
        // What TLS and the membership proof decide, both ways.
        guard let me = Self.handshake(identity, listener, trust: .members({ pins().contains($0) })) else {
            throw unavailable("refused the link or is not a member of this account")
        }
        // The same machine as a TLS link's decides on the hello, the requests and the end.
        let driver = LinkDriver(host: host, port: port, idle: nil)
        let hello = await listener.answer(LinkMessage.hello(version: LinkMessage.version, device: identity.id).frame, me) ?? Frame(kind: 0, payload: [])
        let device = try driver.greeted(hello).get()
        let link = InMemoryLink(device: device, host: host, port: port, me: me, network: self, key: key, driver: driver)
        register(link)
        if let first { link.fetch(first.activityID, deadline: first.deadline, then: first.done) }
        return link
    }

    package func converse(
        _ first: Frame, host: String, port: Int, identity: DeviceIdentity, accepting accepts: @escaping @Sendable (String) -> Bool,
        next: @escaping @Sendable (Frame) -> Frame?
    ) async throws -> [Frame] {
        let key = "\(host):\(port)"
        guard !unreachable.withLock({ $0.contains(host) }), let listener = listeners.withLock({ $0[key] }) else {
            throw LinkError.ended(answers: 0, reason: "nothing listens at \(key)")
        }
        guard let me = Self.handshake(identity, listener, trust: .shown(accepts)) else {
            throw LinkError.ended(answers: 0, reason: "the link was refused")
        }
        var answers: [Frame] = []
        var frame: Frame? = first
        while let sent = frame {
            guard let answer = await listener.answer(sent, me) else { throw LinkError.ended(answers: answers.count, reason: "closed by the peer") }
            answers.append(answer)
            frame = next(answer)
        }
        return answers
    }

    /// What a TLS handshake and a membership proof between `identity` (connecting, under
    /// `trust`) and `listener` decide: the client as the listener sees it, or nil when either
    /// side refuses the other. Between members, each side must accept the other's long-term
    /// certificate and both must hold one account key; on a pairing link, each must accept the
    /// certificate the other shows.
    private static func handshake(_ identity: DeviceIdentity, _ listener: Listener, trust: LinkTrust) -> LinkPeer? {
        let shown = identity.links.current().certificateDER
        let listenerShown = listener.identity.links.current().certificateDER
        switch (trust, listener.trust) {
        case (.members(let accepts), .members(let listenerAccepts)):
            // The connecting side seals with its keys; the listener opens with its own and its
            // retired ones.
            let mine = identity.links.accountKeys, theirs = listener.identity.links.accountKeys
            let theirRetired = listener.identity.links.retiredKeys
            guard mine.contains(where: { key in theirs.contains { $0 == key } || theirRetired.contains { $0 == key } }),
                LinkTLS.isValidNow(identity.certificate), LinkTLS.isValidNow(listener.identity.certificate),
                listenerAccepts(identity.fingerprint), accepts(listener.identity.fingerprint)
            else {
                return nil
            }
            return LinkPeer(fingerprint: identity.fingerprint, certificate: identity.certificateDER, presented: shown)
        case (.shown(let accepts), .shown):
            guard LinkTLS.acceptsShown(listenerShown, .shown(accepts)), LinkTLS.acceptsShown(shown, listener.trust) else { return nil }
            return LinkPeer(fingerprint: DeviceIdentity.fingerprint(ofCertificate: shown), certificate: shown)
        default:
            return nil
        }
    }

    /// The listener at `key`, if it is there, reachable, and still accepts `peer`.
    fileprivate func listener(_ key: String, host: String, for peer: LinkPeer) -> Listener? {
        guard !unreachable.withLock({ $0.contains(host) }), let listener = listeners.withLock({ $0[key] }), listener.accepts(peer.fingerprint) else {
            return nil
        }
        return listener
    }
}

/// A link of an `InMemoryNetwork`: each request is a call into the other agent's answer,
/// decided by the same `LinkStateMachine` as a TLS link (numbers, deadlines, the end).
final class InMemoryLink: OutgoingLink {
    let device: UUID
    let host: String
    let port: Int
    private let me: LinkPeer
    private let network: InMemoryNetwork
    private let key: String
    private let driver: LinkDriver

    init(device: UUID, host: String, port: Int, me: LinkPeer, network: InMemoryNetwork, key: String, driver: LinkDriver) {
        self.device = device
        self.host = host
        self.port = port
        self.me = me
        self.network = network
        self.key = key
        self.driver = driver
        // Writing a request is calling the other agent; its answer comes back as a TLS link's
        // would, or the link ends when the device went away meanwhile.
        driver.attach(
            LinkDriver.IO(write: { [weak network, weak driver] message in
                guard let driver else { return }
                guard let network, let listener = network.listener(key, host: host, for: me) else {
                    return driver.ended("went away")
                }
                Task {
                    let reply = await listener.answer(message.frame, me)
                    guard network.listener(key, host: host, for: me) != nil else { return driver.ended("went away") }
                    guard let answer = reply.flatMap({ try? LinkMessage(frame: $0) }) else { return driver.ended("no answer") }
                    driver.received(answer, streamsOpen: 0)
                }
            }))
    }

    var isOpen: Bool { driver.isOpen && network.listener(key, host: host, for: me) != nil }

    func fetch(_ activityID: UUID, deadline: Duration) async -> Result<FetchedActivity, ContinuationFailure> {
        await withCheckedContinuation { continuation in
            fetch(activityID, deadline: deadline) { continuation.resume(returning: $0) }
        }
    }

    func fetch(_ activityID: UUID, deadline: Duration, then done: @escaping @Sendable (Result<FetchedActivity, ContinuationFailure>) -> Void) {
        let (host, port) = (self.host, self.port)
        driver.request(deadline: deadline, streamsOpen: 0, { .fetch(request: $0, activityID: activityID) }) { answer in
            done(LinkDriver.Machine.result(of: answer, for: activityID, host: host, port: port, deadline: deadline))
        }
    }

    func openStream(_ target: LinkStreamTarget, deadline: Duration) async -> Result<LinkStream, ContinuationFailure> {
        .failure(ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "an in-memory network carries no continuation streams; devices in one process connect them directly"))
    }

    func send(_ message: LinkMessage) {
        guard driver.isOpen, let listener = network.listener(key, host: host, for: me) else { return }
        driver.used()
        let me = self.me
        Task { _ = await listener.answer(message.frame, me) }
    }

    func end(_ reason: String) {
        driver.ended(reason)
    }

    func close() {
        driver.ended("closed by this device")
        network.unregister(self)
    }
}
