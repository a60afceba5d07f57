import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffModel
import HandoffSession
import Synchronization

/// Documents as system activities (docs/system-activities.md): the newest document of the
/// recently-used list that lies in a synced container is this device's activity; one continued
/// here from another device opens at this device's own path, in the app the list named (if it is
/// installed here) or the default app for its type. Runs beside the clipboard, on threads of its
/// own; the agent's messages reach it through `handle`.
final class Documents: Sendable {
    let service: ClipboardService
    let environment: [String: String]
    /// The synced containers' folders here, as the agent gave them.
    let containers: [URL]
    /// The session bus, for apps started over D-Bus.
    let bus: DBusConnection?
    private let published = Mutex<Published?>(nil)
    private let lastReport = Mutex("")

    /// The document offered now: its activity and what a fetch of it answers.
    struct Published: Sendable {
        let activity: ActivityAnnouncement
        let record: ActivityRecord
        let url: URL
        let used: Date
    }

    /// A document used longer ago than this when the service starts is not offered then.
    static let freshAtStart: TimeInterval = 15 * 60

    init(service: ClipboardService, containers: [LocalContainer], bus: DBusConnection?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.service = service
        self.bus = bus
        self.environment = environment
        self.containers = containers.map { URL(fileURLWithPath: $0.folder, isDirectory: true) }
    }

    var dataHome: URL { DesktopApplications(environment: environment).dataHome }
    var listFile: URL { dataHome.appendingPathComponent("recently-used.xbel") }
    var kdeFolder: URL { dataHome.appendingPathComponent("RecentDocuments", isDirectory: true) }

    /// Offers the newest synced document if it is fresh, then watches the lists.
    func start() {
        refresh(startingUp: true)
        Thread.detachNewThread { [self] in watch() }
    }

    // MARK: Publishing

    /// Reads both lists and offers the newest document inside a container, if it changed.
    func refresh(startingUp: Bool = false) {
        var documents: [RecentDocument] = []
        if let data = FileManager.default.contents(atPath: listFile.path) {
            do throws(RecentlyUsed.ReadError) {
                documents += try RecentlyUsed.documents(xbel: data)
            } catch {
                service.log("the recently-used list is not read: \(error)")
            }
        }
        let links = ((try? FileManager.default.contentsOfDirectory(at: kdeFolder, includingPropertiesForKeys: [.contentModificationDateKey])) ?? [])
            .filter { $0.pathExtension == "desktop" }.prefix(1000)
        documents += RecentlyUsed.documents(kdeLinks: links.compactMap { link in
            guard let text = try? String(contentsOf: link, encoding: .utf8) else { return nil }
            return (text, (try? link.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate) ?? .distantPast)
        })
        documents.sort { $0.used > $1.used }
        guard let newest = RecentlyUsed.newest(documents, inside: containers) else {
            return report("no recently used document lies in a synced container")
        }
        if startingUp, Date().timeIntervalSince(newest.used) > Self.freshAtStart {
            return report("the newest synced document, \(newest.url.lastPathComponent), was used over \(Int(Self.freshAtStart / 60)) minutes before the service started: not offered")
        }
        let current = published.withLock { $0 }
        guard current?.url != newest.url || current?.used != newest.used else { return }
        publish(newest, replacing: current)
    }

    private func publish(_ document: RecentDocument, replacing previous: Published?) {
        let activity = ActivityAnnouncement(id: UUID(), activityType: SystemActivityType.document, title: document.url.lastPathComponent)
        var entries: [UserInfoValue: UserInfoValue] = [.string("url"): .url(document.url)]
        if let mimeType = document.mimeType { entries[.string("mimeType")] = .string(mimeType) }
        if let application = document.application {
            entries[.string("application")] = .string(application.name)
            if let exec = application.exec { entries[.string("exec")] = .string(exec) }
        }
        guard let userInfo = try? UserInfoCoding.encode(UserInfoValue.dictionary(entries)) else { return }
        let record = ActivityRecord(activity: activity, userInfo: userInfo)
        published.withLock { $0 = Published(activity: activity, record: record, url: document.url, used: document.used) }
        do {
            try service.client.send(.becameCurrent(activity))
            if let previous { try service.client.send(.invalidated(activity: previous.activity.id)) }
            service.log("offering the document \(document.url.path)")
            report("offering \(document.url.lastPathComponent)")
        } catch {
            service.log("the agent did not take the document: \(error)")
        }
    }

    /// Says what is offered now, or why nothing is, when that changed.
    private func report(_ status: String) {
        guard lastReport.withLock({ last in defer { last = status }; return last != status }) else { return }
        service.report(status, on: service.client)
    }

    /// Watches the lists' folder (inotify): GLib replaces the list by renaming a new one over it.
    private func watch() {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { return service.log("cannot watch the recently-used list: \(String(cString: strerror(errno)))") }
        try? FileManager.default.createDirectory(at: dataHome, withIntermediateDirectories: true)
        let mask = UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO) | UInt32(IN_CREATE) | UInt32(IN_DELETE)
        guard inotify_add_watch(fd, dataHome.path, mask) >= 0 else {
            return service.log("cannot watch \(dataHome.path): \(String(cString: strerror(errno)))")
        }
        _ = inotify_add_watch(fd, kdeFolder.path, mask)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let got = read(fd, &buffer, buffer.count)
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return service.log("the watch of the recently-used list ended") }
            // Several events come for one write: read what follows within a moment, then once.
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while poll(&ready, 1, 100) > 0 { _ = read(fd, &buffer, buffer.count) }
            refresh()
        }
    }

    /// A document continued here was not opened: the log says why, and so does a desktop
    /// notification (the person asked for it on this device, and waits for it to open).
    private func notOpened(_ document: String, from device: String, _ reason: String, _ answer: DeliveryAnswer) {
        answer(notOpened: "\(document): \(reason)")
        service.tell("Handoff could not open the document from '\(device)'", "\(document): \(reason)", environment: environment)
    }

    // MARK: The agent's messages

    /// A fetch of the document offered, or a document from another device to open here.
    func handle(_ message: LocalMessage) {
        switch message {
        case .save(let request, let activity):
            guard let current = published.withLock({ $0 }), current.activity.id == activity else {
                try? service.client.send(.saveFailed(request: request, LocalError(.notFound, "that document is no longer this device's activity")))
                return
            }
            try? service.client.send(.saved(request: request, current.record))
        case .deliver(let continuation, let record, let origin) where record.activity.activityType == SystemActivityType.document:
            open(record, from: origin.deviceName, answer: DeliveryAnswer(continuation, to: service.client))
        default:
            break
        }
    }

    /// Opens a document continued here: its file at this device's path, in the app the list
    /// named if it is installed here, else the default for its type; never through a shell.
    func open(_ record: ActivityRecord, from device: String, answer: DeliveryAnswer) {
        guard let bytes = record.userInfo, case .dictionary(let entries)? = try? UserInfoCoding.decode(bytes),
            case .url(let url)? = entries[.string("url")], url.isFileURL
        else { return notOpened("a document", from: device, "it came without its file", answer) }
        guard !(record.untranslatedFileURLs ?? []).contains(url.absoluteString) else {
            return notOpened(url.lastPathComponent, from: device, "it is not in a container synced here: not opened", answer)
        }
        var mimeType: String?
        if case .string(let type)? = entries[.string("mimeType")] { mimeType = type }
        var application: RecentApplication?
        if case .string(let name)? = entries[.string("application")] {
            var exec: String?
            if case .string(let command)? = entries[.string("exec")] { exec = command }
            application = RecentApplication(name: name, exec: exec)
        }
        let applications = DesktopApplications(environment: environment)
        guard let entry = applications.opener(for: url, mimeType: mimeType, application: application) else {
            return notOpened(url.lastPathComponent, from: device, "no app here opens \(mimeType ?? "files of its type"): not opened", answer)
        }
        // Started on a task: the agent's messages keep coming meanwhile.
        Task { [self] in
            do {
                _ = try await Launcher.open([url], with: entry, environment: environment, bus: bus, folder: url.deletingLastPathComponent())
                answer()
                service.log("opened \(url.path) from '\(device)' with \(entry.id)")
            } catch {
                notOpened(url.lastPathComponent, from: device, "\(error): not opened", answer)
            }
        }
    }
}
