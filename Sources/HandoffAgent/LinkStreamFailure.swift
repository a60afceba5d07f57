import Foundation
import HandoffWire
import Synchronization

/// Why writing to a continuation stream failed.
public struct LinkStreamFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
