import Foundation
import HandoffModel

extension CocoaError {
    /// A Foundation error in the user-activity range with a message a person can act on.
    ///
    /// Handoff reports failures with Foundation's own codes so that code written for Apple
    /// platforms can keep matching on them: 4608 handoff failed, 4609 connection unavailable,
    /// 4610 remote app timed out, 4611 userInfo too large, 3072 cancelled.
    package static func handoff(_ code: CocoaError.Code, _ message: String) -> CocoaError {
        CocoaError(code, userInfo: [
            NSLocalizedDescriptionKey: message,
            NSDebugDescriptionErrorKey: message,
        ])
    }

    /// The message a Handoff error was made with, or Foundation's generic text.
    public var handoffMessage: String {
        (userInfo[NSLocalizedDescriptionKey] as? String) ?? localizedDescription
    }
}

extension ContinuationFailure {
    /// The Foundation error an app receives.
    public var cocoaError: CocoaError { .handoff(CocoaError.Code(rawValue: code), message) }
}
