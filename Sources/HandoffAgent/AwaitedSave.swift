import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

/// Who waits for a save an app was asked for.
struct AwaitedSave: Sendable {
    let waiter: CheckedContinuation<Result<ActivityRecord, LocalError>, Never>
    /// The app, as messages name it.
    let app: String
}
