import Foundation
import Synchronization

/// Freedesktop notifications (`org.freedesktop.Notifications` on the session bus), each with a
/// "Continue" action. Without a session bus there are none, and nothing else changes.
public final class DesktopNotifier: Sendable {
    private let bus: DBusConnection
    /// Each notification's action, and the buttons pressed before `notify` learned the
    /// notification's id (the server's signal can overtake its reply), run once it is known.
    private let actions: Mutex<(byID: [UInt32: @Sendable () -> Void], early: Set<UInt32>)>

    static let service = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"

    private init(bus: DBusConnection) {
        self.bus = bus
        self.actions = Mutex(([:], []))
    }

    /// Connects to the session bus named by `DBUS_SESSION_BUS_ADDRESS`; throws why not (no
    /// desktop session, a bus that refuses us).
    public static func connect(environment: [String: String] = ProcessInfo.processInfo.environment) async throws -> DesktopNotifier {
        guard let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty else {
            throw DBusError("no desktop session (DBUS_SESSION_BUS_ADDRESS is not set)")
        }
        let box = ActionBox()
        let bus = try DBusConnection(address: address, signals: { signal in
            guard signal.interface == service, signal.member == "ActionInvoked", let id = signal.body.first?.uint32,
                let key = signal.body.dropFirst().first?.string, key == "continue" || key == "default"
            else { return }
            box.run(id)
        })
        _ = try await bus.hello()
        _ = try await bus.call(DBusMessage(
            kind: .methodCall, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "AddMatch",
            destination: "org.freedesktop.DBus", body: [.string("type='signal',interface='\(service)',member='ActionInvoked'")]))
        let notifier = DesktopNotifier(bus: bus)
        box.set(notifier)
        return notifier
    }

    /// Shows a notification (replacing `replacing`, if not 0) whose "Continue" action calls
    /// `onContinue`; returns its id.
    public func notify(summary: String, body: String, replacing: UInt32 = 0, onContinue: @escaping @Sendable () -> Void) async throws -> UInt32 {
        let reply = try await bus.call(DBusMessage(
            kind: .methodCall, path: Self.path, interface: Self.service, member: "Notify", destination: Self.service,
            body: [
                .string("Handoff"), .uint32(replacing), .string("document-send"), .string(summary), .string(body),
                .strings(["default", "Continue", "continue", "Continue"]), .emptyDictionary, .int32(-1),
            ]))
        let id = reply.body.first?.uint32 ?? 0
        let pressed = actions.withLock { actions in
            actions.byID[id] = onContinue
            return actions.early.remove(id) != nil
        }
        if pressed { onContinue() }
        return id
    }

    /// Shows a notification that only informs: no action.
    public func inform(summary: String, body: String) async throws -> UInt32 {
        let reply = try await bus.call(DBusMessage(
            kind: .methodCall, path: Self.path, interface: Self.service, member: "Notify", destination: Self.service,
            body: [.string("Handoff"), .uint32(0), .string("dialog-information"), .string(summary), .string(body), .strings([]), .emptyDictionary, .int32(-1)]))
        return reply.body.first?.uint32 ?? 0
    }

    /// Ends the notifier's connection to the bus (a notifier made for one message).
    public func close() { bus.close() }

    /// Takes a notification away.
    public func withdraw(_ id: UInt32) async {
        actions.withLock { _ = $0.byID.removeValue(forKey: id) }
        _ = try? await bus.call(DBusMessage(kind: .methodCall, path: Self.path, interface: Self.service, member: "CloseNotification", destination: Self.service, body: [.uint32(id)]))
    }

    fileprivate func press(_ id: UInt32) {
        let action = actions.withLock { actions -> (@Sendable () -> Void)? in
            if let action = actions.byID[id] { return action }
            if actions.early.count < 64 { actions.early.insert(id) }
            return nil
        }
        action?()
    }

    /// Holds the notifier for the signal handler, which exists before the notifier does.
    final class ActionBox: Sendable {
        private let notifier = Mutex<DesktopNotifier?>(nil)
        func set(_ value: DesktopNotifier) { notifier.withLock { $0 = value } }
        func run(_ id: UInt32) { notifier.withLock { $0 }?.press(id) }
    }
}
