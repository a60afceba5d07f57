import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// The fingerprints (`DeviceIdentity.fingerprint`) of the account's current members' long-term
/// certificates: the only members a link accepts. Read at every membership proof and before
/// every frame, so a removed member is refused at once.
package typealias LinkPins = @Sendable () -> Set<String>
