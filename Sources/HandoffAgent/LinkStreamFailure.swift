import Foundation
import HandoffWire
import Synchronization

/// Why writing to a continuation stream failed.
package struct LinkStreamFailure: Error, Sendable, Hashable, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}
