import Foundation

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

/// Why a continuation could not deliver an activity: carried between devices as a code and
/// a message, and handed to the app as a `CocoaError`.
public struct ContinuationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var message: String

    public init(code: CocoaError.Code, message: String) {
        self.code = code.rawValue
        self.message = message
    }

    public static func handoffFailed(_ message: String) -> Self { .init(code: .userActivityHandoffFailed, message: message) }
    public static func connectionUnavailable(_ message: String) -> Self { .init(code: .userActivityConnectionUnavailable, message: message) }
    public static func remoteAppTimedOut(_ message: String) -> Self { .init(code: .userActivityRemoteApplicationTimedOut, message: message) }
    public static func userInfoTooLarge(_ message: String) -> Self { .init(code: .userActivityHandoffUserInfoTooLarge, message: message) }
    public static func cancelled(_ message: String) -> Self { .init(code: .userCancelled, message: message) }

    /// The Foundation error an app receives.
    public var cocoaError: CocoaError { .handoff(CocoaError.Code(rawValue: code), message) }

    public var description: String { "error \(code): \(message)" }
}
