import Foundation
import Handoff
import HandoffAgent
import HandoffApp
import Synchronization

/// Several devices in one process, each a real Handoff agent (`HandoffAgent.Agent`) on an
/// in-memory network: for an app developer's tests and ours.
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
/// Devices added with the same account pair into it as real devices do (an invitation and a
/// join), see each other's current activities through sealed beacons, and continue them over
/// pinned links with the agent's own continuation logic; a device of another account sees
/// nothing of them. Apps run in the test's process, each with its own `ActivityCenter`
/// speaking the local API to its device's agent.
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
    /// The network the devices' agents share.
    let network = InMemoryNetwork()
    /// The agents' state folders, removed when the fabric goes.
    let root: URL
    private let devices = Mutex<[String: SimulatedDevice]>([:])
    /// The devices of each account, in the order they were added.
    private let accounts = Mutex<[String: [SimulatedDevice]]>([:])

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        root = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-fabric-\(UUID().uuidString.prefix(8))", isDirectory: true)
        FabricFolders.add(root.path)
    }

    deinit {
        // The agents stop (their timers and links with them) and their folders go.
        let devices = devices.withLock { Array($0.values) }
        let root = root
        Task {
            for device in devices { await device.shutDown() }
            try? FileManager.default.removeItem(at: root)
            FabricFolders.remove(root.path)
        }
    }

    /// Adds a device to the fabric: its agent starts, and it joins the account (the first
    /// device of an account makes it). Device names are unique; adding a name twice returns
    /// the device that has it.
    @discardableResult
    public func addDevice(_ name: String, account: String = "default") -> SimulatedDevice {
        devices.withLock { devices in
            if let existing = devices[name] { return existing }
            let members = accounts.withLock { $0[account] ?? [] }
            let device = SimulatedDevice(name: name, account: account, number: devices.count + 1, fabric: self, members: members)
            devices[name] = device
            accounts.withLock { $0[account, default: []].append(device) }
            return device
        }
    }

    /// The device with this name, if any.
    public func device(named name: String) -> SimulatedDevice? {
        devices.withLock { $0[name] }
    }
}

/// An activity another device of the account offers.
public struct NearbyActivity: Sendable, Hashable {
    /// The device offering it.
    public var device: String
    /// What its beacon says of it: id, type, title, team, and whether it has a web page or
    /// supports streams.
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
    /// The device cannot be reached: new fetches and streams to it fail with 4609, and a fetch
    /// under way ends with 4608, as when a device vanishes in the middle of an answer.
    case unreachable
    /// The app with this bundle identifier never finishes saving: fetches end with 4610.
    case appStallsOnSave(bundleIdentifier: String)
}

/// The fabrics' state folders still on disk: those of fabrics alive when the process exits
/// are removed then.
enum FabricFolders {
    private static let folders = Mutex<(paths: Set<String>, registered: Bool)>(([], false))

    static func add(_ path: String) {
        let register = folders.withLock { folders in
            folders.paths.insert(path)
            defer { folders.registered = true }
            return !folders.registered
        }
        if register {
            atexit {
                for path in FabricFolders.folders.withLock({ $0.paths }) {
                    try? FileManager.default.removeItem(atPath: path)
                }
            }
        }
    }

    static func remove(_ path: String) {
        _ = folders.withLock { $0.paths.remove(path) }
    }
}
