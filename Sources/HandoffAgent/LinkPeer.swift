import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// The device at the other end of a link, as its membership proof (or, on a pairing link, its
/// shown certificate) says.
package struct LinkPeer: Sendable, Hashable {
    /// SHA-256 of its long-term certificate, as `DeviceIdentity.fingerprint` (on a pairing
    /// link, of the certificate it showed).
    package var fingerprint: String
    /// Its long-term certificate, DER (on a pairing link, the one it showed).
    package var certificate: [UInt8]
    /// The certificate it showed in the handshake, DER.
    package var presented: [UInt8]
    /// The address it connected from, where known.
    package var address: String?
    /// On a link it opened to this device's listener, which of the listener's connections it
    /// is (`LinkListener`'s `accepted`).
    package var connection: UInt64?

    package init(fingerprint: String, certificate: [UInt8], presented: [UInt8]? = nil, address: String? = nil, connection: UInt64? = nil) {
        self.fingerprint = fingerprint
        self.certificate = certificate
        self.presented = presented ?? certificate
        self.address = address
        self.connection = connection
    }
}
