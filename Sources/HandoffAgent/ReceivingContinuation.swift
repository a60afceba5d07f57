import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

/// What the agent keeps with a continuation asked for here, while `ContinuationStateMachine`
/// follows it: who waits for the answer, and what is continued from where.
struct ReceivingContinuation: Sendable {
    let id: UUID
    let waiter: CheckedContinuation<ContinuationAnswer, Never>
    let offer: ActivityAnnouncement
    let device: NearbyDevice
    let app: String
    let started: ContinuousClock.Instant
    let logger: ContinuationLog
}
