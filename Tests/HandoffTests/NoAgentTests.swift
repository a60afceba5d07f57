import Foundation
import HandoffLocalAPI
import HandoffTesting
import Logging
import Testing

@testable import Handoff

@Suite("With no agent running")
struct NoAgentTests {
    @Test("The library says once that no agent runs, and the app's activities keep working locally")
    func noAgent() async throws {
        let store = RecordingLogHandler.Store()
        let logger = Logger(label: "test") { _ in RecordingLogHandler(store: store) }
        let path = "/tmp/handoff-none-\(UUID().uuidString.prefix(8)).sock"
        let connection = SocketAgentConnection(path: path, bundleIdentifier: "com.example.app", logger: logger)
        let center = ActivityCenter(connection: connection, bundleIdentifier: "com.example.app", teamIdentifier: "TEAM", deviceName: "test", logger: logger)
        let activity = ActivityCenter.$current.withValue(center) { UserActivity(activityType: "com.example.app.editing") }
        activity.userInfo = ["note": "groceries"]
        activity.becomeCurrent()
        #expect(center.currentActivity === activity)
        #expect(!connection.isConnected)

        // The notice names the socket and what it means, once, however long no agent comes.
        let told = await eventually(within: .seconds(3)) {
            store.messages.withLock { $0.contains { $0.0 == .notice && $0.1.contains("no Handoff agent is running at \(path)") } }
        }
        #expect(told)
        // The behaviour under test: a second retry (once a second) passes without a second notice.
        try await Task.sleep(for: .milliseconds(1_200))
        let notices = store.messages.withLock { $0.filter { $0.1.contains("no Handoff agent") }.count }
        #expect(notices == 1)
        #expect(store.messages.withLock { $0.first { $0.1.contains("no Handoff agent") }?.1.contains("activities stay on this device") } == true)

        // Saving still works: the app's state is there for when an agent comes.
        let record = try await center.save(activityID: activity.id).get()
        #expect(record.activity.activityType == "com.example.app.editing")
        withExtendedLifetime(center) {}
    }
}
