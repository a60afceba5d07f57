import Crypto
import HandoffWire
import Foundation
import X509

/// Why pairing failed; the message says what to do.
package struct PairingError: Error, Sendable, Hashable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}
