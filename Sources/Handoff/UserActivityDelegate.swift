import Foundation

/// What a user activity tells the object that manages it. Every method is optional.
///
/// Handoff calls these on the main actor, where the app's view controllers and documents live,
/// so a main-actor class conforms without ceremony.
@MainActor
public protocol UserActivityDelegate: AnyObject {
    /// The activity is about to be sent to another device: bring its `userInfo`, `title` and
    /// other properties up to date. Called only when `needsSave` is true; `needsSave` is
    /// false during the call, and setting it again here asks for another save later.
    func userActivityWillSave(_ userActivity: UserActivity)

    /// The activity was continued on another device: the app may close what it showed.
    func userActivityWasContinued(_ userActivity: UserActivity)

    /// The continuing app opened streams back to this activity: read requests from
    /// `inputStream` and answer on `outputStream`.
    func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream)
}

extension UserActivityDelegate {
    public func userActivityWillSave(_ userActivity: UserActivity) {}
    public func userActivityWasContinued(_ userActivity: UserActivity) {}
    public func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream) {
        // Nobody will use them: close both so the continuing side sees the end at once.
        inputStream.close()
        outputStream.close()
    }
}
