import ArgumentParser
import Foundation
import Handoff
import HandoffCommandLine
import HandoffDesktop
import HandoffLocalAPI
import Logging

/// The desktop notifications of `handoff watch --notify` (`NearbyNotifications`, as the
/// agent shows them); "Continue" continues the activity here through the agent.
struct Notifications {
    let nearby: NearbyNotifications
    let socket: String

    static func start(socket: String) async -> Notifications? {
        do {
            return Notifications(nearby: NearbyNotifications(notifier: try await DesktopNotifier.connect()), socket: socket)
        } catch {
            FileHandle.standardError.write(Data("handoff: no desktop notifications: \(error); watching goes on\n".utf8))
            return nil
        }
    }

    func show(_ offer: LocalNearbyActivity) async {
        let activity = offer.activity.id
        let socket = self.socket
        do {
            try await nearby.show(
                device: offer.device, deviceName: offer.deviceName, title: offer.activity.title ?? offer.activity.activityType, handler: offer.handler
            ) {
                Task {
                    guard let client = try? await LocalClient.connect(path: socket, role: .control) else { return }
                    defer { client.close() }
                    _ = try? await client.call(.continue(activity: activity))
                }
            }
        } catch {
            FileHandle.standardError.write(Data("handoff: a notification could not be shown: \(error)\n".utf8))
        }
    }

    func gone(_ device: UUID) async {
        await nearby.gone(device: device)
    }
}
