import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// TLS for links between the account's devices: TLS 1.3 only, and both sides present a
/// certificate: the one shown for the period (`LinkCertificates`), which names no one. Who is
/// at the other end is decided by the link's `LinkTrust`: for members, by the membership proof
/// inside the link (`LinkProofHandler`); for pairing, by the shown certificate's fingerprint,
/// checked in the handshake. No certificate authority and no host name is trusted, and a
/// stranger learns nothing that names the device.
package enum LinkTLS {
    static func context(showing shown: LinkCertificates.Shown) throws -> NIOSSLContext {
        try NIOSSLContext(configuration: configuration(showing: shown))
    }

    /// The configuration both ends of a link use. Every connection has a context of its own
    /// from it (`LinkCertificates.context(for:)`, made ahead): a TLS context keeps the keys of
    /// the session tickets it issues (and a cache of sessions), and a resumed session skips the
    /// certificate check. A context that lives for one connection can resume nothing, so every
    /// handshake presents and checks a certificate, and every link between members proves
    /// membership anew.
    static func configuration(showing shown: LinkCertificates.Shown) throws -> TLSConfiguration {
        let tls = try shown.tls.get()
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(tls.certificate)], privateKey: .privateKey(tls.key))
        configuration.minimumTLSVersion = .tlsv13
        configuration.maximumTLSVersion = .tlsv13
        // Ask for (and send) certificates; who is accepted is decided by the link's trust.
        configuration.certificateVerification = .noHostnameVerification
        // No authority is trusted, so the system's store is never loaded: loading it costs a
        // context tens of milliseconds.
        configuration.trustRoots = .certificates([])
        return configuration
    }

    /// A link notices a peer that vanished without closing (its network dropped, its machine
    /// froze): keepalive probes after `silence` seconds of silence, every 2 s, 3 unanswered
    /// end it; data unacknowledged for 15 s ends it. Requests and streams on it then fail
    /// instead of waiting.
    ///
    /// The device that opened a link probes after 5 s, but only while something waits on the
    /// link (`TLSLink`): an idle link sends nothing from it until it closes the link
    /// (`--link-idle`, an hour by default). The device that accepted it probes after 5 minutes
    /// of silence: it learns of a peer that vanished from an idle link, and a quiet link
    /// carries one probe and its answer every 5 minutes.
    static let acceptedSilence = 300

    static func watchForDeadPeers(_ channel: any Channel, silence: Int = 5) throws {
        guard let options = channel.syncOptions else { return }
        try options.setOption(.socketOption(.so_keepalive), value: 1)
        #if os(Linux)
        let tcp = NIOBSDSocket.OptionLevel(rawValue: CInt(IPPROTO_TCP))
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_KEEPIDLE))), value: silence)
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_KEEPINTVL))), value: 2)
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_KEEPCNT))), value: 3)
        try options.setOption(ChannelOptions.Types.SocketOption(level: tcp, name: NIOBSDSocket.Option(rawValue: CInt(TCP_USER_TIMEOUT))), value: 15_000)
        #endif
    }

    /// What the handshake accepts: for members, any well-formed certificate valid now (the
    /// membership proof decides); for pairing, the certificate `trust` approves.
    static func verifier(_ trust: LinkTrust) -> NIOSSLCustomVerificationCallback {
        { certificates, promise in
            guard let leaf = certificates.first, let der = try? leaf.toDERBytes() else {
                promise.succeed(.failed)
                return
            }
            promise.succeed(acceptsShown(der, trust) ? .certificateVerified : .failed)
        }
    }

    /// Whether the handshake accepts the shown certificate `der` under `trust`.
    package static func acceptsShown(_ der: [UInt8], _ trust: LinkTrust, now: Date = Date()) -> Bool {
        guard let presented = ReadCertificates.shown.read(der), presented.isValid(now: now) else { return false }
        switch trust {
        case .members: return true
        case .shown(let accepts): return accepts(DeviceIdentity.fingerprint(ofCertificate: der))
        }
    }

    package static func isValidNow(_ certificate: Certificate, now: Date = Date()) -> Bool {
        isValid(from: certificate.notValidBefore, until: certificate.notValidAfter, now: now)
    }

    /// Whether `now` lies in a certificate's validity period, both ends included.
    static func isValid(from notValidBefore: Date, until notValidAfter: Date, now: Date) -> Bool {
        notValidBefore <= now && now <= notValidAfter
    }

    /// The handlers after TLS that decide who the peer is, for a link under `trust`: a
    /// `LinkProofHandler` for members (returned, to learn the peer from), nothing for pairing.
    static func addProof(
        to channel: any Channel, _ role: LinkProof.Role, trust: LinkTrust, identity: DeviceIdentity, shown: LinkCertificates.Shown, maximumFrame: Int,
        deadline: TimeAmount = .seconds(10), target: String? = nil, readsEarly: Bool = true,
        earlyCount: EarlyFrameCount? = nil, connection: UInt64? = nil
    ) throws -> LinkProofHandler? {
        guard case .members(let accepts) = trust else { return nil }
        let handler = LinkProofHandler(
            role, identity: identity, shown: shown.certificateDER, accepting: accepts, maximumFrame: maximumFrame, deadline: deadline,
            target: target, readsEarly: readsEarly, earlyCount: earlyCount, connection: connection, eventLoop: channel.eventLoop)
        do {
            try channel.pipeline.syncOperations.addHandler(handler)
        } catch {
            handler.peer.fail(error)
            throw error
        }
        return handler
    }
}
