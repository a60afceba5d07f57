import Foundation
import HandoffDesktop
import HandoffLocalAPI
import HandoffModel
import HandoffSession
import Synchronization

/// The desktop's Handoff icon: a StatusNotifierItem (the tray of KDE Plasma, and of GNOME with
/// the AppIndicator extension), shown while another device of the account offers an activity,
/// with that activity's app icon; its menu (com.canonical.dbusmenu) lists each nearby activity by
/// device and title, and choosing one continues it here. Nothing is shown when nothing is
/// offered: the item's bus name is given up, so the tray drops it. See docs/system-activities.md.
final class Tray: Sendable {
    let service: ClipboardService
    let bus: DBusConnection
    let client: LocalClient
    let environment: [String: String]
    private let state = Mutex(State())
    private let inputs: AsyncStream<Input>.Continuation
    private let stream: AsyncStream<Input>

    static let itemPath = "/StatusNotifierItem"
    static let menuPath = "/MenuBar"
    static let item = "org.kde.StatusNotifierItem"
    static let watcher = "org.kde.StatusNotifierWatcher"
    static let menu = "com.canonical.dbusmenu"

    enum Input: Sendable {
        case nearby([LocalNearbyActivity])
        case event(LocalEvent)
        case watcherAppeared
    }

    /// One line of the menu: an activity of a device nearby.
    struct Entry: Sendable {
        let id: Int32
        let activity: LocalNearbyActivity
        let icon: String
    }

    struct State: Sendable {
        /// Each device's activity, by device.
        var nearby: [UUID: LocalNearbyActivity] = [:]
        /// The menu now, newest first.
        var entries: [Entry] = []
        var revision: UInt32 = 1
        var nextID: Int32 = 1
        /// Each activity's menu id, kept while it is nearby: a click on a menu drawn before a
        /// rebuild still finds its entry.
        var ids: [UUID: Int32] = [:]
        /// The bus name the item has while it is shown.
        var shownAs: String?
        var shownCount = 0
        var toldNoWatcher = false
    }

    init(service: ClipboardService, client: LocalClient, bus: DBusConnection, environment: [String: String]) {
        self.service = service
        self.client = client
        self.bus = bus
        self.environment = environment
        (stream, inputs) = AsyncStream.makeStream(of: Input.self)
    }

    /// Serves the item's objects, watches for a tray, and shows what is nearby.
    func start() async throws {
        bus.onCall { [self] call in answer(call) }
        bus.onSignal { [inputs] signal in
            guard signal.sender == "org.freedesktop.DBus", signal.member == "NameOwnerChanged", signal.body.count == 3,
                signal.body[0].string == Tray.watcher, signal.body[2].string?.isEmpty == false
            else { return }
            inputs.yield(.watcherAppeared)
        }
        try await bus.addMatch("type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0='\(Self.watcher)'")
        // The inputs, one after the other, in order.
        Task { [self] in
            for await input in stream { await take(input) }
        }
        let reply = try await client.call(.watch)
        if let error = reply.error { throw error }
        inputs.yield(.nearby(reply.activities ?? []))
    }

    /// The agent's messages: what appears, changes and goes nearby.
    func handle(_ message: LocalMessage) {
        if case .event(let event) = message { inputs.yield(.event(event)) }
    }

    private func take(_ input: Input) async {
        switch input {
        case .nearby(let activities):
            state.withLock { state in
                state.nearby = [:]
                for activity in activities { state.nearby[activity.device] = activity }
            }
        case .event(let event):
            state.withLock { state in
                if event.change == .gone { state.nearby[event.device] = nil } else if let activity = event.activity { state.nearby[event.device] = activity }
            }
        case .watcherAppeared:
            // A tray that started after the item: the item registers with it.
            if let name = state.withLock({ $0.shownAs }) { await register(name) }
            return
        }
        await update()
    }

    /// Rebuilds the menu and shows, updates or takes away the item.
    private func update() async {
        let applications = DesktopApplications(environment: environment)
        let (show, hide, changed) = state.withLock { state -> (String?, String?, Bool) in
            let sorted = state.nearby.values.sorted { $0.age < $1.age }
            var ids: [UUID: Int32] = [:]
            state.entries = sorted.map { activity in
                let id = state.ids[activity.activity.id] ?? {
                    defer { state.nextID = state.nextID == Int32.max ? 1 : state.nextID + 1 }
                    return state.nextID
                }()
                ids[activity.activity.id] = id
                return Entry(id: id, activity: activity, icon: Self.icon(for: activity, applications))
            }
            state.ids = ids
            state.revision &+= 1
            if state.entries.isEmpty {
                defer { state.shownAs = nil }
                return (nil, state.shownAs, false)
            }
            if state.shownAs == nil {
                state.shownCount += 1
                state.shownAs = "\(Self.item)-\(getpid())-\(state.shownCount)"
                return (state.shownAs, nil, false)
            }
            return (nil, nil, true)
        }
        if let hide {
            try? await bus.releaseName(hide)
            service.log("tray: nothing nearby; the item is taken away")
        }
        if let show {
            do {
                guard try await bus.requestName(show) else { throw DBusError("the name \(show) is taken") }
                await register(show)
            } catch {
                service.log("tray: the item is not shown: \(error)")
            }
        }
        if changed { emitChanged() }
    }

    /// Tells the tray (the StatusNotifierWatcher) of the item; without one, says so once.
    private func register(_ name: String) async {
        do {
            _ = try await bus.call(
                DBusMessage(kind: .methodCall, path: "/StatusNotifierWatcher", interface: Self.watcher, member: "RegisterStatusNotifierItem", destination: Self.watcher, body: [.string(name)]),
                timeout: .seconds(5))
            let shown = state.withLock { $0.entries.first.map { "\($0.activity.deviceName): \($0.activity.activity.title ?? "")" } ?? "" }
            service.log("tray: showing \(shown)")
        } catch {
            let first = state.withLock { state in
                defer { state.toldNoWatcher = true }
                return !state.toldNoWatcher
            }
            if first { service.log("tray: this desktop shows no tray items (no \(Self.watcher): \(error)); desktop notifications stay the way to see activities") }
        }
    }

    /// The tray re-reads the item's icon, tooltip and menu.
    private func emitChanged() {
        let revision = state.withLock { $0.revision }
        for member in ["NewIcon", "NewToolTip", "NewTitle"] {
            try? bus.send(DBusMessage(kind: .signal, path: Self.itemPath, interface: Self.item, member: member))
        }
        try? bus.send(DBusMessage(kind: .signal, path: Self.menuPath, interface: Self.menu, member: "LayoutUpdated", body: [.uint32(revision), .int32(0)]))
    }

    /// The icon of the app that would continue `activity` here: its desktop entry's (an app's
    /// desktop file ID is its bundle identifier), the browser's, or its kind's.
    static func icon(for activity: LocalNearbyActivity, _ applications: DesktopApplications) -> String {
        switch activity.handler {
        case "browser"?: return "web-browser"
        case "system"?:
            return activity.activity.activityType == SystemActivityType.media ? "audio-x-generic" : "x-office-document"
        case let bundle?:
            return applications.entry(id: bundle + ".desktop")?.icon ?? "application-x-executable"
        case nil:
            return "dialog-question"
        }
    }

    /// Continues an activity of the menu here, as `handoff continue` does.
    private func continueActivity(_ entry: Entry) {
        let label = "\(entry.activity.deviceName): \(entry.activity.activity.title ?? "")"
        // Continued on a task: the bus's calls keep being answered meanwhile.
        Task { [self] in
            let reply = await ClipboardService.call(client, .continue(activity: entry.activity.activity.id))
            if let error = reply.error {
                service.tell("Handoff could not continue \(label)", error.message, environment: environment)
            } else {
                service.log("tray: continued \(label)")
            }
        }
    }

    // MARK: The objects on the bus

    /// Answers a method call to the item or its menu (on the bus's reader thread: state only).
    private func answer(_ call: DBusMessage) {
        guard let member = call.member else { return }
        let reply: DBusMessage
        switch (call.path, call.interface, member) {
        case (_, "org.freedesktop.DBus.Introspectable"?, "Introspect"):
            reply = .reply(to: call, [.string(call.path == Self.menuPath ? Self.menuXML : call.path == Self.itemPath ? Self.itemXML : "<node/>")])
        case (_, "org.freedesktop.DBus.Peer"?, "Ping"):
            reply = .reply(to: call)
        case (Self.itemPath?, DBusConnection.properties?, _), (Self.menuPath?, DBusConnection.properties?, _):
            let properties = call.path == Self.itemPath ? itemProperties() : menuProperties()
            switch member {
            case "GetAll": reply = .reply(to: call, [.dictionary(properties)])
            case "Get":
                guard call.body.count == 2, let name = call.body[1].string, let value = properties[name] else {
                    reply = .error(to: call, "org.freedesktop.DBus.Error.UnknownProperty", "no such property")
                    break
                }
                reply = .reply(to: call, [.variant(value)])
            default: reply = .error(to: call, "org.freedesktop.DBus.Error.PropertyReadOnly", "the item's properties are read-only")
            }
        case (Self.itemPath?, _, "Activate"):
            // The Dock icon's click: the newest activity nearby continues here.
            if let newest = state.withLock({ $0.entries.first }) { continueActivity(newest) }
            reply = .reply(to: call)
        case (Self.itemPath?, _, "SecondaryActivate"), (Self.itemPath?, _, "ContextMenu"), (Self.itemPath?, _, "Scroll"):
            reply = .reply(to: call)
        case (Self.menuPath?, _, "GetLayout"):
            let parent = call.body.first.flatMap { $0.integer } ?? 0
            let (revision, layout) = state.withLock { ($0.revision, Self.layout($0.entries, parent: Int32(truncatingIfNeeded: parent))) }
            reply = .reply(to: call, [.uint32(revision), layout])
        case (Self.menuPath?, _, "GetGroupProperties"):
            let ids = Set((call.body.first?.elements ?? []).compactMap { $0.integer.map { Int32(truncatingIfNeeded: $0) } })
            let entries = state.withLock { $0.entries }
            let found = entries.filter { ids.isEmpty || ids.contains($0.id) }.map { DBusValue.structure([.int32($0.id), .dictionary(Self.properties(of: $0))]) }
            reply = .reply(to: call, [.array(element: "(ia{sv})", found)])
        case (Self.menuPath?, _, "GetProperty"):
            let id = call.body.first.flatMap { $0.integer } ?? -1
            let name = call.body.count > 1 ? call.body[1].string ?? "" : ""
            guard let entry = state.withLock({ $0.entries.first { Int64($0.id) == id } }), let value = Self.properties(of: entry)[name] else {
                reply = .error(to: call, "org.freedesktop.DBus.Error.InvalidArgs", "no menu item \(id) with the property '\(name)'")
                break
            }
            reply = .reply(to: call, [.variant(value)])
        case (Self.menuPath?, _, "Event"):
            if call.body.count >= 2, call.body[1].string == "clicked", let id = call.body[0].integer {
                if let entry = state.withLock({ $0.entries.first { Int64($0.id) == id } }), entry.activity.handler != nil { continueActivity(entry) }
            }
            reply = .reply(to: call)
        case (Self.menuPath?, _, "EventGroup"):
            for event in call.body.first?.elements ?? [] {
                guard case .structure(let fields) = event, fields.count == 4, fields[1].string == "clicked", let id = fields[0].integer,
                    let entry = state.withLock({ $0.entries.first { Int64($0.id) == id } }), entry.activity.handler != nil
                else { continue }
                continueActivity(entry)
            }
            reply = .reply(to: call, [.array(element: "i", [])])
        case (Self.menuPath?, _, "AboutToShow"):
            reply = .reply(to: call, [.boolean(false)])
        case (Self.menuPath?, _, "AboutToShowGroup"):
            reply = .reply(to: call, [.array(element: "i", []), .array(element: "i", [])])
        default:
            guard !call.noReplyExpected else { return }
            reply = .error(to: call, "org.freedesktop.DBus.Error.UnknownMethod", "no method \(member) at \(call.path ?? "")")
        }
        guard !call.noReplyExpected else { return }
        try? bus.send(reply)
    }

    /// The item's properties (StatusNotifierItem): the newest activity's icon, a tooltip listing
    /// them all, and its menu.
    private func itemProperties() -> [String: DBusValue] {
        let entries = state.withLock { $0.entries }
        let icon = entries.first?.icon ?? "document-send"
        let lines = entries.map { "\($0.activity.deviceName): \($0.activity.activity.title ?? "")" }.joined(separator: "\n")
        let noPixmaps = DBusValue.array(element: "(iiay)", [])
        return [
            "Category": .string("ApplicationStatus"), "Id": .string("handoff"), "Title": .string("Handoff"),
            "Status": .string(entries.isEmpty ? "Passive" : "Active"), "WindowId": .int32(0), "IconName": .string(icon), "IconThemePath": .string(""),
            "IconPixmap": noPixmaps, "OverlayIconName": .string(""), "OverlayIconPixmap": noPixmaps, "AttentionIconName": .string(""),
            "AttentionIconPixmap": noPixmaps, "AttentionMovieName": .string(""),
            "ToolTip": .structure([.string(icon), noPixmaps, .string("Handoff"), .string(lines)]),
            "ItemIsMenu": .boolean(true), "Menu": .objectPath(Self.menuPath),
        ]
    }

    private func menuProperties() -> [String: DBusValue] {
        ["Version": .uint32(3), "TextDirection": .string("ltr"), "Status": .string("normal"), "IconThemePath": .strings([])]
    }

    /// A menu item's properties: "device: title" (underscores doubled: one marks a mnemonic),
    /// the app's icon; one that nothing here can continue is shown but cannot be chosen.
    static func properties(of entry: Entry) -> [String: DBusValue] {
        let label = "\(entry.activity.deviceName): \(entry.activity.activity.title ?? entry.activity.activity.activityType)"
        var properties: [String: DBusValue] = [
            "label": .string(label.replacingOccurrences(of: "_", with: "__")), "icon-name": .string(entry.icon), "visible": .boolean(true),
        ]
        properties["enabled"] = .boolean(entry.activity.handler != nil)
        return properties
    }

    /// The menu's layout under `parent` (`(ia{sv}av)`): the root holds one item per activity.
    static func layout(_ entries: [Entry], parent: Int32) -> DBusValue {
        if parent != 0, let entry = entries.first(where: { $0.id == parent }) {
            return .structure([.int32(entry.id), .dictionary(properties(of: entry)), .array(element: "v", [])])
        }
        let children = entries.map { entry in
            DBusValue.variant(.structure([.int32(entry.id), .dictionary(properties(of: entry)), .array(element: "v", [])]))
        }
        return .structure([.int32(0), .dictionary(["children-display": .string("submenu")]), .array(element: "v", children)])
    }

    static let itemXML = """
        <node><interface name="org.kde.StatusNotifierItem">
        <property name="Category" type="s" access="read"/><property name="Id" type="s" access="read"/><property name="Title" type="s" access="read"/>
        <property name="Status" type="s" access="read"/><property name="WindowId" type="i" access="read"/><property name="IconName" type="s" access="read"/>
        <property name="IconThemePath" type="s" access="read"/><property name="IconPixmap" type="a(iiay)" access="read"/>
        <property name="OverlayIconName" type="s" access="read"/><property name="OverlayIconPixmap" type="a(iiay)" access="read"/>
        <property name="AttentionIconName" type="s" access="read"/><property name="AttentionIconPixmap" type="a(iiay)" access="read"/>
        <property name="AttentionMovieName" type="s" access="read"/><property name="ToolTip" type="(sa(iiay)ss)" access="read"/>
        <property name="ItemIsMenu" type="b" access="read"/><property name="Menu" type="o" access="read"/>
        <method name="Activate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
        <method name="SecondaryActivate"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
        <method name="ContextMenu"><arg name="x" type="i" direction="in"/><arg name="y" type="i" direction="in"/></method>
        <method name="Scroll"><arg name="delta" type="i" direction="in"/><arg name="orientation" type="s" direction="in"/></method>
        <signal name="NewTitle"/><signal name="NewIcon"/><signal name="NewAttentionIcon"/><signal name="NewOverlayIcon"/><signal name="NewToolTip"/>
        <signal name="NewStatus"><arg name="status" type="s"/></signal>
        </interface></node>
        """

    static let menuXML = """
        <node><interface name="com.canonical.dbusmenu">
        <property name="Version" type="u" access="read"/><property name="TextDirection" type="s" access="read"/>
        <property name="Status" type="s" access="read"/><property name="IconThemePath" type="as" access="read"/>
        <method name="GetLayout"><arg type="i" direction="in"/><arg type="i" direction="in"/><arg type="as" direction="in"/>
        <arg type="u" direction="out"/><arg type="(ia{sv}av)" direction="out"/></method>
        <method name="GetGroupProperties"><arg type="ai" direction="in"/><arg type="as" direction="in"/><arg type="a(ia{sv})" direction="out"/></method>
        <method name="GetProperty"><arg type="i" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="out"/></method>
        <method name="Event"><arg type="i" direction="in"/><arg type="s" direction="in"/><arg type="v" direction="in"/><arg type="u" direction="in"/></method>
        <method name="EventGroup"><arg type="a(isvu)" direction="in"/><arg type="ai" direction="out"/></method>
        <method name="AboutToShow"><arg type="i" direction="in"/><arg type="b" direction="out"/></method>
        <method name="AboutToShowGroup"><arg type="ai" direction="in"/><arg type="ai" direction="out"/><arg type="ai" direction="out"/></method>
        <signal name="ItemsPropertiesUpdated"><arg type="a(ia{sv})"/><arg type="a(ias)"/></signal>
        <signal name="LayoutUpdated"><arg type="u"/><arg type="i"/></signal>
        <signal name="ItemActivationRequested"><arg type="i"/><arg type="u"/></signal>
        </interface></node>
        """
}
