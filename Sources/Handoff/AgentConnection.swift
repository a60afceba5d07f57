import Foundation
import HandoffModel
import Logging
import Synchronization

/// What an app's activities tell its device's agent, in order.
package enum AppEvent: Sendable, Hashable {
    /// The app's current activity, new or changed.
    case becameCurrent(ActivityAnnouncement)
    /// The activity is no longer current but may become current again.
    case resigned(UUID)
    /// The activity is gone for good.
    case invalidated(UUID)
}

/// Where an app's events go: the device's agent. The in-process devices of `HandoffTesting`
/// and (later) the local socket to `handoffd` implement it.
package protocol AgentConnection: Sendable {
    /// Delivers one event; events arrive in the order the app caused them.
    func send(_ event: AppEvent) async
    /// Opens a pair of streams from a continued activity back to the originating app.
    func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair
    /// Called once by the center this connection serves, at the end of its init.
    func attach(_ center: ActivityCenter)
    /// Called once when the center this connection serves has gone away.
    func detach()
}

extension AgentConnection {
    package func attach(_ center: ActivityCenter) {}
    package func detach() {}
}

/// Where a continued activity came from, for opening streams back to it.
package struct ContinuationContext: Sendable, Hashable {
    package var continuationID: UUID
    package var originActivityID: UUID
    package var originDevice: String

    package init(continuationID: UUID, originActivityID: UUID, originDevice: String) {
        self.continuationID = continuationID
        self.originActivityID = originActivityID
        self.originDevice = originDevice
    }
}

/// The two ends of a continuation stream pair that one side uses.
package struct StreamPair: @unchecked Sendable {
    // @unchecked: a pair is made by one task and handed over whole to the one side that uses
    // it; the streams themselves are thread-safe (`PipeInputStream`, `PipeOutputStream`).
    package let input: InputStream
    package let output: OutputStream

    package init(input: InputStream, output: OutputStream) {
        self.input = input
        self.output = output
    }
}

/// Used when no agent runs: activities stay on this device, and the app keeps working.
package struct LocalOnlyConnection: AgentConnection {
    private static let hasWarned = Mutex(false)

    let logger: Logger

    package init(logger: Logger) { self.logger = logger }

    package func send(_ event: AppEvent) async {
        let first = Self.hasWarned.withLock { warned in
            defer { warned = true }
            return !warned
        }
        if first {
            logger.notice("no Handoff agent is running on this device: activities stay local until handoffd is started")
        }
    }

    package func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        throw .connectionUnavailable("no Handoff agent is running on this device, so no streams can be opened")
    }
}
