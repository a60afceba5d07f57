import Foundation
import Handoff
import HandoffApp
import Synchronization

/// Several simulated devices in one process, with no network: the semantics of Handoff's agent,
/// for an app developer's tests and ours.
///
/// ```swift
/// let fabric = HandoffFabric()
/// let mac = fabric.addDevice("mac")
/// let phone = fabric.addDevice("phone")
/// let editor = await mac.launch(manifest, delegate: MacDelegate())
/// await editor.perform { shapeActivity.becomeCurrent() }
/// let offer = try await phone.nearbyActivity(ofType: "com.example.shapes.create")
/// let outcome = await phone.continueActivity(offer)
/// ```
/// Devices added with the same account see each other's current activities; a device of
/// another account sees nothing of them.
public final class HandoffFabric: Sendable {
    /// Limits and deadlines, the same knobs the real agent has.
    public struct Configuration: Sendable {
        /// An encoded `userInfo` larger than this fails the continuation with 4611.
        public var payloadLimit: Int
        /// How long the originating app has to save before the continuation fails with 4610.
        public var saveDeadline: Duration
        /// How long a test waits for an expected event before failing instead of hanging.
        public var waitLimit: Duration

        public init(payloadLimit: Int = userInfoDefaultLimit, saveDeadline: Duration = .seconds(5), waitLimit: Duration = .seconds(10)) {
            self.payloadLimit = payloadLimit
            self.saveDeadline = saveDeadline
            self.waitLimit = waitLimit
        }
    }

    public let configuration: Configuration
    private let devices = Mutex<[String: SimulatedDevice]>([:])

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Adds a device to the fabric. Device names are unique; adding a name twice returns the
    /// device that has it.
    @discardableResult
    public func addDevice(_ name: String, account: String = "default") -> SimulatedDevice {
        devices.withLock { devices in
            if let existing = devices[name] { return existing }
            let device = SimulatedDevice(name: name, account: account, fabric: self)
            let peers = devices.values.filter { $0.account == account }
            devices[name] = device
            // The others tell the newcomer what they offer, as their next beacon would.
            Task {
                for peer in peers { await peer.introduce(to: device) }
            }
            return device
        }
    }

    /// The device with this name, if any.
    public func device(named name: String) -> SimulatedDevice? {
        devices.withLock { $0[name] }
    }

    /// The other devices of the same account as `device`.
    func peers(of device: SimulatedDevice) -> [SimulatedDevice] {
        devices.withLock { devices in
            devices.values.filter { $0 !== device && $0.account == device.account }
        }
    }
}

/// An activity another device of the account offers.
public struct NearbyActivity: Sendable, Hashable {
    /// The device offering it.
    public var device: String
    public var announcement: ActivityAnnouncement

    public var activityType: String { announcement.activityType }
    public var title: String? { announcement.title }
}

/// How a continuation ended, as the continuing device sees it.
public enum ContinuationOutcome: Sendable, Hashable {
    /// The app with this bundle identifier received the activity.
    case continued(bundleIdentifier: String)
    /// No app took it; its web page was opened in the browser.
    case openedInBrowser(URL)
    /// The continuing app was told `didFailToContinue` with this error.
    case failed(ContinuationFailure)
    /// Nothing on this device can continue it, and why.
    case notContinued(reason: String)
}

/// A failure a test injects into a device.
public enum InjectedFault: Sendable, Hashable {
    /// The device cannot be reached: fetches and streams to it fail with 4609.
    case unreachable
    /// The app with this bundle identifier never finishes saving: fetches end with 4610.
    case appStallsOnSave(bundleIdentifier: String)
}
