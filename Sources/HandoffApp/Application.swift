import Foundation
import Handoff
import Logging
import Synchronization

/// A synced folder that exists on several devices, such as one kept in step by Syncthing or
/// Nextcloud. A document inside one gets an activity automatically, and its URL arrives on the
/// other device as that device's own path in its copy of the folder. The agent's containers
/// (`handoffd --container ID=PATH`) are the app's without it doing anything; an app may add
/// its own.
public struct SyncedContainer: Sendable, Hashable {
    /// The same on every device, e.g. `"documents"`.
    public var identifier: String
    /// Where the container lives on this device.
    public var folder: URL

    public init(identifier: String, folder: URL) {
        self.identifier = identifier
        self.folder = folder.standardizedFileURL
    }

    /// Whether `url` is a file inside the container.
    public func contains(_ url: URL) -> Bool {
        guard url.isFileURL else { return false }
        let base = folder.path.hasSuffix("/") ? folder.path : folder.path + "/"
        return url.standardizedFileURL.path.hasPrefix(base)
    }
}

/// The app, as UIKit's `UIApplication` and AppKit's `NSApplication` are: it receives continued
/// activities and hands them to its delegate on the main actor.
@MainActor
open class Application: ContinuationReceiver {
    /// The application the running code belongs to; `HandoffTesting` sets it per simulated app.
    @TaskLocal package static var current: Application?

    private static var processApplication: Application?

    /// The running app. In a normal process there is one; in a `HandoffTesting` fabric it is
    /// the simulated app whose code is running.
    public static var shared: Application {
        if let current { return current }
        if let processApplication { return processApplication }
        let made = Application(delegate: nil)
        processApplication = made
        return made
    }

    /// Receives the continuation calls. Held strongly, as an app's delegate lives as long as the app.
    open var delegate: (any ApplicationDelegate)?

    /// The app's manifest: its bundle and team identifiers, activity and document types.
    public let manifest: AppManifest?

    /// Synced folders on this device (see `SyncedContainer`), besides the agent's.
    public var syncedContainers: [SyncedContainer]

    /// The app's own containers and its agent's (the app's first, for an identifier in both).
    public var allSyncedContainers: [SyncedContainer] {
        let own = Set(syncedContainers.map(\.identifier))
        return syncedContainers + center.agentContainers.filter { !own.contains($0.identifier) }.map { SyncedContainer(identifier: $0.identifier, folder: $0.folder) }
    }

    /// The `Document` subclass the framework opens when a continued document activity is not
    /// handled by the delegate.
    public var documentClass: Document.Type = Document.self

    /// Documents this app has open.
    public internal(set) var openDocuments: [Document] = []

    package let center: ActivityCenter
    public nonisolated let logger: Logger
    private var continuations = ContinuationStateMachine<UserActivity>()

    /// UIKit's launch option keys; Handoff passes none.
    public struct LaunchOptionsKey: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public static let userActivityType = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsUserActivityTypeKey")
    }

    /// The scenes connected now (an app that uses scenes has one once it started).
    public internal(set) var connectedScenes: Set<Scene> = []
    /// The sessions of the connected scenes.
    public internal(set) var openSessions: Set<SceneSession> = []
    /// Whether the delegate heard `didFinishLaunchingWithOptions`.
    var launched = false
    /// The app was launched for a continuation: its scene connects when the activity arrives.
    var sceneAwaitsContinuation = false

    /// The app of this process, bound to its Handoff agent. It becomes `Application.shared`;
    /// a process has one (a second one takes over the continuations, with a warning).
    public convenience init(delegate: (any ApplicationDelegate)?) {
        // The app's manifest is the Info.plist (and entitlements) installed beside its executable.
        let folder = Bundle.main.executableURL?.resolvingSymlinksInPath().deletingLastPathComponent()
        let manifest = folder.flatMap { try? AppManifest(directory: $0) }
        self.init(center: ActivityCenter.forNewActivities, manifest: manifest, syncedContainers: [], delegate: delegate)
        if Application.current == nil {
            if Application.processApplication != nil {
                logger.warning("a second Application was made; continuations now go to the new one and its delegate")
            }
            Application.processApplication = self
        }
        // The agent names the continuation it started the app for.
        let launchedForContinuation = ProcessInfo.processInfo.environment["HANDOFF_CONTINUATION"].map { !$0.isEmpty } ?? false
        // Launching finishes once the main queue runs, after the code that made the app.
        DispatchQueue.main.async {
            MainActor.assumeIsolated { self.finishLaunching(awaitingContinuation: launchedForContinuation) }
        }
    }

    /// An app bound to a given link to its device.
    package init(center: ActivityCenter, manifest: AppManifest?, syncedContainers: [SyncedContainer], delegate: (any ApplicationDelegate)?) {
        self.center = center
        self.manifest = manifest
        self.syncedContainers = syncedContainers
        self.delegate = delegate
        self.logger = center.logger
        center.receiver = self
    }

    /// Runs code as this app: activities, documents and `Application.shared` inside belong to it.
    public func perform<T>(_ body: @MainActor () throws -> T) rethrows -> T {
        try Application.$current.withValue(self) {
            try ActivityCenter.$current.withValue(center) {
                try body()
            }
        }
    }

    // MARK: ContinuationReceiver

    package func willContinue(_ continuationID: UUID, activityType: String) async {
        run(continuations.willContinue(continuationID, activityType: activityType))
    }

    package func continueActivity(_ continuationID: UUID, _ activity: UserActivity) async {
        // Restores the app asked for during `continue` finish before the continuation counts
        // as delivered; later calls of the handler restore whenever they come.
        for restoration in run(continuations.deliver(continuationID, activity)) {
            await restoration.settle()
        }
    }

    package func didFailToContinue(_ continuationID: UUID, activityType: String, error: CocoaError) async {
        let failure = ContinuationFailure(code: error.code, message: error.handoffMessage)
        run(continuations.fail(continuationID, failure))
    }

    @discardableResult
    private func run(_ actions: [ContinuationStateMachine<UserActivity>.Action]) -> [RestorationHandler] {
        var restorations: [RestorationHandler] = []
        // The delegate hears that the app launched before any continuation.
        launchIfNeeded()
        perform {
            for action in actions {
                if usesScenes {
                    runInScene(action)
                    continue
                }
                switch action {
                case .willContinue(let type):
                    _ = delegate?.application(self, willContinueUserActivityWithType: type)
                case .continue(let activity):
                    restorations.append(deliver(activity))
                case .didFail(let type, let failure):
                    if let delegate {
                        delegate.application(self, didFailToContinueUserActivityWithType: type, error: failure.cocoaError)
                    } else {
                        logger.error("could not continue '\(type)': \(failure.message)")
                    }
                }
            }
        }
        return restorations
    }

    /// Hands the activity to the delegate and returns the restoration handler it was given.
    private func deliver(_ activity: UserActivity) -> RestorationHandler {
        let restoration = RestorationHandler(activity: activity, application: self)
        let handler: ([UserActivityRestoring]?) -> Void = { objects in restoration.restore(objects ?? []) }
        let handled = delegate?.application(self, continue: activity, restorationHandler: handler) ?? false
        if !handled, let url = activity.userInfo?[NSUserActivityDocumentURLKey] as? URL {
            if url.isFileURL, allSyncedContainers.contains(where: { $0.contains(url) }) {
                openDocument(at: url, restoring: activity)
            } else {
                // A peer's bytes choose this URL: open only files inside this device's containers.
                logger.warning("not opening the continued document \(url): it is not a file in a synced container on this device")
            }
        }
        return restoration
    }

    /// Opens a continued document and lets it restore the activity, as AppKit does when the
    /// delegate does not handle a document's activity.
    private func openDocument(at url: URL, restoring activity: UserActivity) {
        let document = openDocuments.first { $0.fileURL.standardizedFileURL == url.standardizedFileURL }
            ?? documentClass.init(fileURL: url)
        document.open()
        document.restoreUserActivityState(activity)
    }

    // MARK: Documents

    /// The activity type a document at `url` gets: its document type's
    /// `NSUbiquitousDocumentUserActivityType`, when the file lies in a synced container.
    func documentActivityType(for url: URL) -> String? {
        guard allSyncedContainers.contains(where: { $0.contains(url) }) else { return nil }
        return manifest?.documentActivityType(forContentType: url.pathExtension)
    }
}

/// The handler given to `application(_:continue:restorationHandler:)`. It may be called late,
/// from any thread, more than once, or never: each object restores once, on the main actor.
final class RestorationHandler: Sendable {
    private let activity: UserActivity
    private let application: Application
    private let state = Mutex<State>(State())

    private struct State {
        var restored: Set<ObjectIdentifier> = []
        var pending: [Task<Void, Never>] = []
    }

    init(activity: UserActivity, application: Application) {
        self.activity = activity
        self.application = application
    }

    private struct Objects: @unchecked Sendable {
        // @unchecked: the objects are main-actor-isolated; they are only touched there.
        let objects: [UserActivityRestoring]
    }

    /// Schedules the objects' restores on the main actor; safe from any thread.
    func restore(_ objects: [UserActivityRestoring]) {
        let box = Objects(objects: objects)
        let task = Task { @MainActor in self.restoreOnMain(box.objects) }
        state.withLock { $0.pending.append(task) }
    }

    /// Waits for the restores scheduled so far.
    func settle() async {
        for task in state.withLock({ $0.pending }) { await task.value }
    }

    /// Restores run as the app, however late they come: activities they make belong to it.
    @MainActor private func restoreOnMain(_ objects: [UserActivityRestoring]) {
        application.perform {
            for object in objects {
                let first = state.withLock { $0.restored.insert(ObjectIdentifier(object)).inserted }
                if first { object.restoreUserActivityState(activity) }
            }
        }
    }
}
