import Foundation
import Handoff
import HandoffApp
import HandoffTesting

let notesType = "com.example.notes.editing"

func notesManifest(team: String? = "TEAM1", bundle: String = "com.example.notes") -> AppManifest {
    AppManifest(bundleIdentifier: bundle, teamIdentifier: team, activityTypes: [notesType])
}

/// Records what an app delegate hears, in order.
@MainActor
final class RecordingAppDelegate: ApplicationDelegate {
    enum Event: Equatable {
        case willContinue(String)
        case continued(String)
        case failed(String, code: Int)
    }

    var events: [Event] = []
    var continued: [UserActivity] = []
    var errors: [CocoaError] = []
    /// Runs inside `continue`, e.g. to open streams.
    var onContinue: ((UserActivity) -> Void)?

    func application(_ application: Application, willContinueUserActivityWithType userActivityType: String) -> Bool {
        events.append(.willContinue(userActivityType))
        return true
    }

    func application(
        _ application: Application, continue userActivity: UserActivity,
        restorationHandler: @escaping ([UserActivityRestoring]?) -> Void
    ) -> Bool {
        events.append(.continued(userActivity.activityType))
        continued.append(userActivity)
        onContinue?(userActivity)
        return true
    }

    func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        let cocoa = error as? CocoaError
        events.append(.failed(userActivityType, code: cocoa?.code.rawValue ?? -1))
        if let cocoa { errors.append(cocoa) }
    }

    /// Whether every willContinue was followed by exactly one outcome of the same type.
    var outcomesAreWellFormed: Bool {
        var pending: String?
        for event in events {
            switch event {
            case .willContinue(let type):
                if pending != nil { return false }
                pending = type
            case .continued(let type), .failed(let type, _):
                if pending != type { return false }
                pending = nil
            }
        }
        return pending == nil
    }
}

/// Records what an originating activity's delegate hears.
@MainActor
final class RecordingActivityDelegate: UserActivityDelegate {
    var saves = 0
    var wasContinued = 0
    var streamsReceived = 0
    var onSave: ((UserActivity) -> Void)?
    var onStreams: ((InputStream, OutputStream) -> Void)?

    func userActivityWillSave(_ userActivity: UserActivity) {
        saves += 1
        onSave?(userActivity)
    }

    func userActivityWasContinued(_ userActivity: UserActivity) {
        wasContinued += 1
    }

    func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream) {
        streamsReceived += 1
        onStreams?(inputStream, outputStream)
    }
}

/// Two devices of one account with the notes app running on the first.
@MainActor
struct TwoDevices {
    let fabric: HandoffFabric
    let origin: SimulatedDevice
    let target: SimulatedDevice
    let originApp: Application
    let targetDelegate: RecordingAppDelegate

    init(configuration: HandoffFabric.Configuration = .init(), targetManifest: AppManifest? = notesManifest()) async throws {
        fabric = HandoffFabric(configuration: configuration)
        origin = fabric.addDevice("laptop")
        target = fabric.addDevice("desktop")
        originApp = try await origin.launch(notesManifest())
        let delegate = RecordingAppDelegate()
        targetDelegate = delegate
        if let targetManifest {
            try await target.install(targetManifest) { delegate }
        }
    }

    /// Makes an activity current in the origin app and returns it once the target sees it.
    func offer(_ configure: (UserActivity) -> Void = { _ in }, type: String = notesType) async throws -> (UserActivity, NearbyActivity) {
        let activity = originApp.perform { UserActivity(activityType: type) }
        configure(activity)
        activity.becomeCurrent()
        let nearby = try await target.nearbyActivity(ofType: type, from: "laptop")
        return (activity, nearby)
    }
}

/// Runs blocking stream I/O off the cooperative pool.
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}

extension InputStream {
    /// Reads until end of stream.
    func readToEnd() -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(&buffer, maxLength: buffer.count)
            if n <= 0 { return result }
            result.append(contentsOf: buffer[0..<n])
        }
    }
}

extension OutputStream {
    func writeAll(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBufferPointer { write($0.baseAddress!, maxLength: $0.count) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}

