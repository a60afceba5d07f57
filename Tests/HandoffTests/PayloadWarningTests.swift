import Foundation
import Logging
import Synchronization
import Testing

@testable import Handoff

/// Keeps what is logged, for a test to read.
struct RecordingLogHandler: LogHandler {
    final class Store: Sendable {
        let messages = Mutex<[(Logger.Level, String)]>([])
    }

    let store: Store
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        store.messages.withLock { $0.append((event.level, "\(event.message)")) }
    }
}

@Suite("Payload size advice")
struct PayloadWarningTests {
    func center(logging store: RecordingLogHandler.Store) -> ActivityCenter {
        ActivityCenter(
            connection: RecordingConnection(), bundleIdentifier: "com.example.app", teamIdentifier: "TEAM",
            deviceName: "test", logger: Logger(label: "test") { _ in RecordingLogHandler(store: store) })
    }

    @Test("A userInfo over 3 KB is sent with a warning on the originating device")
    func warnsAboveAdvice() async throws {
        let store = RecordingLogHandler.Store()
        let center = center(logging: store)
        let activity = ActivityCenter.$current.withValue(center) { UserActivity(activityType: "com.example.app.big") }
        activity.userInfo = ["blob": Data(count: 4000)]
        activity.becomeCurrent()
        _ = try await center.save(activityID: activity.id).get()
        let warnings = store.messages.withLock { $0.filter { $0.0 == .warning }.map(\.1) }
        #expect(warnings.contains { $0.contains("keep it under 3072 bytes") })
    }

    @Test("A userInfo under 3 KB is sent without a warning")
    func quietBelowAdvice() async throws {
        let store = RecordingLogHandler.Store()
        let center = center(logging: store)
        let activity = ActivityCenter.$current.withValue(center) { UserActivity(activityType: "com.example.app.small") }
        activity.userInfo = ["note": "short"]
        activity.becomeCurrent()
        _ = try await center.save(activityID: activity.id).get()
        #expect(store.messages.withLock { $0.filter { $0.0 == .warning } }.isEmpty)
    }
}
