import Foundation

/// Why a continuation failed: Foundation's error code, which the continuing app receives (as a
/// `CocoaError`), and a sentence for the person. The same value whether the failure happened
/// in the agent, on a link (`fetchFailed`) or in the app library.
public struct ContinuationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// Foundation's codes for continuations, as apps written for Apple platforms match on them.
    /// Every layer uses these; none writes the numbers.
    public enum Code {
        /// 4608: the activity could not be continued.
        public static let handoffFailed = CocoaError.Code.userActivityHandoffFailed.rawValue
        /// 4609: the other device could not be reached, or went away.
        public static let connectionUnavailable = CocoaError.Code.userActivityConnectionUnavailable.rawValue
        /// 4610: the app on the other device did not answer in time.
        public static let remoteAppTimedOut = CocoaError.Code.userActivityRemoteApplicationTimedOut.rawValue
        /// 4611: the activity's `userInfo` is over the limit.
        public static let userInfoTooLarge = CocoaError.Code.userActivityHandoffUserInfoTooLarge.rawValue
        /// 3072: a newer continuation took its place, or the person cancelled.
        public static let cancelled = CocoaError.Code.userCancelled.rawValue
    }

    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    public init(code: CocoaError.Code, message: String) {
        self.init(code: code.rawValue, message: message)
    }

    public static func handoffFailed(_ message: String) -> Self { .init(code: Code.handoffFailed, message: message) }
    public static func connectionUnavailable(_ message: String) -> Self { .init(code: Code.connectionUnavailable, message: message) }
    public static func remoteAppTimedOut(_ message: String) -> Self { .init(code: Code.remoteAppTimedOut, message: message) }
    public static func userInfoTooLarge(_ message: String) -> Self { .init(code: Code.userInfoTooLarge, message: message) }
    public static func cancelled(_ message: String) -> Self { .init(code: Code.cancelled, message: message) }

    public var description: String { "error \(code): \(message)" }
}
