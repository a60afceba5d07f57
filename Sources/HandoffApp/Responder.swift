import Foundation
import Handoff

/// An object of the app's user interface that manages an activity, as UIKit's `UIResponder`
/// and AppKit's `NSResponder` do (view controllers are responders there).
///
/// Set `userActivity` and mark the activity's `needsSave` when the state changes; before the
/// activity is sent, the framework clears its `userInfo` and asks every responder sharing it
/// for its part through `updateUserActivityState(_:)`. When the last responder lets go of an
/// activity, the framework invalidates it.
@MainActor
open class Responder: UserActivityRestoring {
    public init() {}

    isolated deinit {
        if let activity = userActivityStorage {
            ManagedActivities.shared.remove(self, from: activity)
        }
    }

    private var userActivityStorage: UserActivity?

    /// The activity this responder manages, if any.
    open var userActivity: UserActivity? {
        get { userActivityStorage }
        set {
            guard newValue !== userActivityStorage else { return }
            let old = userActivityStorage
            userActivityStorage = newValue
            if let newValue { ManagedActivities.shared.add(self, to: newValue) }
            if let old { ManagedActivities.shared.remove(self, from: old) }
        }
    }

    /// Add this responder's state to `activity` (with `addUserInfoEntries(from:)`).
    open func updateUserActivityState(_ activity: UserActivity) {}

    /// Restore this responder's state from a continued activity.
    open func restoreUserActivityState(_ activity: UserActivity) {}
}

/// UIKit's (and AppKit's, as `NSResponder`) name for a responder. Its `init()` is required, so
/// that the framework can make a delegate class it knows by name: an app delegate marked
/// `@main`, a scene delegate named in the Info.plist. A subclass with initializers of its own
/// keeps `init()` too (`required init() { … }`), or subclasses `Responder` instead.
@MainActor
open class UIResponder: Responder {
    public required override init() {
        super.init()
    }
}

/// Which responders and documents share each framework-managed activity.
@MainActor
final class ManagedActivities {
    static let shared = ManagedActivities()

    private struct Participants {
        var activity: UserActivity
        var members: [WeakResponder] = []
    }

    private struct WeakResponder {
        weak var responder: Responder?
    }

    private var byActivity: [ObjectIdentifier: Participants] = [:]

    func add(_ responder: Responder, to activity: UserActivity) {
        let key = ObjectIdentifier(activity)
        var entry = byActivity[key] ?? Participants(activity: activity)
        entry.members.removeAll { $0.responder == nil || $0.responder === responder }
        entry.members.append(WeakResponder(responder: responder))
        byActivity[key] = entry
        activity.saveHandler = { activity in ManagedActivities.shared.update(activity) }
    }

    func remove(_ responder: Responder, from activity: UserActivity) {
        let key = ObjectIdentifier(activity)
        guard var entry = byActivity[key] else { return }
        entry.members.removeAll { $0.responder == nil || $0.responder === responder }
        if entry.members.isEmpty {
            byActivity[key] = nil
            activity.saveHandler = nil
            activity.invalidate()
        } else {
            byActivity[key] = entry
        }
    }

    /// The framework's save: clear `userInfo`, ask every responder, then tell the app delegate.
    func update(_ activity: UserActivity) {
        guard let entry = byActivity[ObjectIdentifier(activity)] else { return }
        activity.userInfo = [:]
        for member in entry.members {
            member.responder?.updateUserActivityState(activity)
        }
        guard let application = activity.center.receiver as? Application else { return }
        application.perform {
            if application.usesScenes {
                // The scene that manages the activity, else the one continuations reach.
                let scene = entry.members.lazy.compactMap { $0.responder as? Scene }.first ?? application.activeScene
                if let scene { scene.delegate?.scene(scene, didUpdate: activity) }
            } else {
                application.delegate?.application(application, didUpdate: activity)
            }
        }
    }

    /// The responders sharing an activity, for tests.
    func responders(of activity: UserActivity) -> [Responder] {
        byActivity[ObjectIdentifier(activity)]?.members.compactMap(\.responder) ?? []
    }
}
