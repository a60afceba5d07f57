import Foundation
import HandoffWire
import NIOCore
import NIOPosix
import NIOSSL

/// Why a fetch failed, with Foundation's code the continuing app receives: 4608 handoff
/// failed, 4609 connection unavailable, 4610 remote app timed out, 4611 too large.
public struct FetchFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    // Foundation's own codes, as apps match on them (4608 to 4611).
    public static let handoffFailed = CocoaError.Code.userActivityHandoffFailed.rawValue
    public static let connectionUnavailable = CocoaError.Code.userActivityConnectionUnavailable.rawValue
    public static let remoteAppTimedOut = CocoaError.Code.userActivityRemoteApplicationTimedOut.rawValue
    public static let userInfoTooLarge = CocoaError.Code.userActivityHandoffUserInfoTooLarge.rawValue

    public var description: String { "error \(code): \(message)" }
}
