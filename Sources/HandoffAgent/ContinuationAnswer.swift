import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

/// The answer to whoever asked for a continuation, and what to tell the origin after it.
struct ContinuationAnswer: Sendable {
    var reply: LocalReply
    var notice: (@Sendable () -> Void)?
}
