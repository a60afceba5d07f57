import Foundation

/// The desktop notifications of activities nearby, one per device: shown when its activity
/// appears, replaced when it changes, taken away when it goes; the notification's "Continue"
/// runs what the caller gives. The agent (`--notifications on`) and `handoff watch --notify`
/// both show them this way.
public actor NearbyNotifications {
    public let notifier: DesktopNotifier
    /// The notification shown for each device.
    private var shown: [UUID: UInt32] = [:]

    public init(notifier: DesktopNotifier) {
        self.notifier = notifier
    }

    /// Shows `device`'s activity, replacing what was shown for it: "`deviceName`: `title`",
    /// continued "in `handler`" (`browser` for the web browser; nil when nothing here can).
    public func show(
        device: UUID, deviceName: String, title: String, handler: String?, onContinue: @escaping @Sendable () -> Void
    ) async throws {
        let whereTo = handler.map { $0 == "browser" ? "in the browser" : "in \($0)" } ?? "(no app here can)"
        shown[device] = try await notifier.notify(
            summary: "\(deviceName): \(title)", body: "Continue it on this device \(whereTo)", replacing: shown[device] ?? 0, onContinue: onContinue)
    }

    /// Takes `device`'s notification away: its activity went.
    public func gone(device: UUID) async {
        guard let id = shown.removeValue(forKey: device) else { return }
        await notifier.withdraw(id)
    }
}
