import Crypto
import HandoffWire
import Foundation
import X509

/// Why pairing failed; the message says what to do.
public struct PairingError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
