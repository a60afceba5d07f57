import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

/// The agent's logger for one continuation: the device it comes from and its type are added
/// to the lines written, when they are written. (Set on the logger itself, they were rendered
/// again for every continuation, whether anything was logged or not.)
struct ContinuationLog {
    let logger: Logger
    let origin: String
    let activityType: String

    private func with(_ extra: Logger.Metadata) -> Logger.Metadata {
        extra.merging(["from": "\(origin)", "type": "\(activityType)"]) { mine, _ in mine }
    }

    func info(_ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata = [:]) {
        logger.info(message(), metadata: with(metadata()))
    }

    func notice(_ message: @autoclosure () -> Logger.Message, metadata: @autoclosure () -> Logger.Metadata = [:]) {
        logger.notice(message(), metadata: with(metadata()))
    }
}
