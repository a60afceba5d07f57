import Foundation
import HandoffModel
import HandoffTesting
import Testing

@testable import Handoff

/// An agent that only listens: it keeps the events an app sends, in order, for a test to read.
final class RecordingConnection: AgentConnection {
    private let events: AsyncStream<AppEvent>
    private let sink: AsyncStream<AppEvent>.Continuation

    init() {
        (events, sink) = AsyncStream.makeStream()
    }

    func send(_ event: AppEvent) async {
        sink.yield(event)
    }

    func openStreams(_ continuation: ContinuationContext) async throws(ContinuationFailure) -> StreamPair {
        throw .connectionUnavailable("a recording connection opens no streams")
    }

    /// The next `count` events in the order the app sent them; none, if they have not all
    /// arrived within `limit` (the test then fails on the comparison instead of hanging).
    func next(_ count: Int, within limit: Duration = .seconds(10)) async -> [AppEvent] {
        let events = self.events
        return await withTimeLimit(limit) {
            var received: [AppEvent] = []
            for await event in events {
                received.append(event)
                if received.count == count { break }
            }
            return received
        } ?? []
    }
}

/// One app of a test: its own center, speaking to a recording agent, so that tests running in
/// parallel never share a current activity.
struct AppUnderTest {
    let connection = RecordingConnection()
    let center: ActivityCenter

    init() {
        center = ActivityCenter(connection: connection, bundleIdentifier: "com.example.app", teamIdentifier: "TEAM", deviceName: "test")
    }

    /// An activity of this app, as the app's own code would make it.
    func activity(_ activityType: String = "com.example.app.editing") -> UserActivity {
        ActivityCenter.$current.withValue(center) { UserActivity(activityType: activityType) }
    }

    /// What the agent is told when `activity` becomes current as it is now.
    func announcement(of activity: UserActivity) -> ActivityAnnouncement {
        activity.announcement(bundleIdentifier: center.bundleIdentifier, teamIdentifier: center.teamIdentifier)
    }
}

/// A delegate that counts the saves it is asked for, and can act during one.
@MainActor
final class SaveRecorder: UserActivityDelegate {
    private(set) var saves = 0
    /// `needsSave` as the delegate saw it during each save.
    private(set) var needsSaveDuringSaves: [Bool] = []
    /// Runs inside each `userActivityWillSave(_:)`.
    var duringSave: (UserActivity) -> Void = { _ in }

    func userActivityWillSave(_ userActivity: UserActivity) {
        saves += 1
        needsSaveDuringSaves.append(userActivity.needsSave)
        duringSave(userActivity)
    }
}
