import Foundation
import HandoffWire
import Synchronization

/// What reaches one end of a continuation stream from the other device, in order.
package enum LinkStreamEvent: Sendable, Hashable {
    /// Bytes the other side wrote. Tell the stream when they are consumed (`consumed`), which
    /// lets the other side send more.
    case data([UInt8])
    /// The other side writes no more.
    case end
    /// The other side reads no more: writing now fails.
    case stop
    /// The stream failed both ways, and why (the other side reset it, or the link dropped).
    case failed(String)
}
