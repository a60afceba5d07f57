import Foundation
import HandoffLocalAPI
import HandoffWire

/// System activities (docs/system-activities.md): the activities of apps that never link
/// Handoff, which the graphical session's service publishes (as any local client publishes an
/// activity) and, continued here, opens. The agent fetches one as any other, puts its file URLs
/// in this device's containers, and delivers it to the session that handles its type.
extension Agent {
    /// A session that opens system activities continued here.
    struct SystemHandler {
        let peer: LocalPeer
        let types: Set<String>
        /// What it offers now, or why not, as it last said.
        var status: String?
    }

    func handleSystemActivities(_ types: [String], from session: Session) -> LocalReply {
        let unknown = types.filter { !SystemActivityType.all.contains($0) }
        guard !types.isEmpty, unknown.isEmpty else {
            return .failure(LocalError(
                .badRequest, "give the system activity types this session opens, of \(SystemActivityType.all.sorted().joined(separator: ", "))\(unknown.isEmpty ? "" : "; not \(unknown.joined(separator: ", "))")"))
        }
        let off = types.filter { !isSystemActivityOn($0) }
        guard off.isEmpty else {
            return .failure(LocalError(.notAllowed, "\(Set(off.compactMap(SystemActivityType.kind(of:))).sorted().joined(separator: ", ")) are off on this device (--system-activities)"))
        }
        systemHandlers[session.id] = SystemHandler(peer: session.peer, types: Set(types))
        var reply = LocalReply()
        reply.containers = configuration.containers.map { LocalContainer(identifier: $0.identifier, folder: $0.folder.path) }
        return reply
    }

    func systemActivityStatus(_ status: String, from session: Session) -> LocalReply {
        guard systemHandlers[session.id] != nil else {
            return .failure(LocalError(.notAllowed, "only a session that handles system activities (handleSystemActivities) says what it offers"))
        }
        guard !status.isEmpty, status.count <= 300, !status.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            return .failure(LocalError(.badRequest, "'status' says what the session offers in 1 to 300 characters on one line"))
        }
        systemHandlers[session.id]?.status = status
        return LocalReply()
    }

    /// Documents and media: on or off, which session service offers and opens them, and what
    /// it offers now or why not (docs/system-activities.md).
    func systemActivityChecks() -> [LocalCheck] {
        var checks: [LocalCheck] = []
        for (kind, type) in [("documents", SystemActivityType.document), ("media", SystemActivityType.media)] {
            guard configuration.systemActivities.contains(kind) else {
                checks.append(LocalCheck(area: "system activities", subject: kind, status: .ok, finding: "\(kind) are off on this device (--system-activities)"))
                continue
            }
            let handlers = systemHandlers.values.filter { $0.types.contains(type) }
            guard !handlers.isEmpty else {
                let bus = kind == "media" ? ", with the session bus (DBUS_SESSION_BUS_ADDRESS) in its environment" : ""
                checks.append(LocalCheck(
                    area: "system activities", subject: kind, status: .warning,
                    finding: "no session service offers or opens \(kind): apps that never link Handoff are not continued to or from this device",
                    advice: "run handoff-session in your graphical session\(bus) (docs/system-activities.md)"))
                continue
            }
            for handler in handlers {
                checks.append(LocalCheck(
                    area: "system activities", subject: kind, status: .ok,
                    finding: "the session service offers and opens \(kind)\(handler.status.map { ": \($0)" } ?? "")"))
            }
        }
        return checks
    }

    /// Whether `type`'s kind is on here (`--system-activities`).
    nonisolated func isSystemActivityOn(_ type: String) -> Bool {
        SystemActivityType.kind(of: type).map(configuration.systemActivities.contains) ?? false
    }

    /// Where a system activity would go here, as listings show it.
    func systemRoute(_ activityType: String) -> (handler: String?, reason: String) {
        guard let kind = SystemActivityType.kind(of: activityType) else {
            return (nil, "'\(activityType)' is a system activity this version of Handoff does not know")
        }
        if !isSystemActivityOn(activityType) {
            return (nil, "\(kind) are off on this device (--system-activities)")
        }
        if systemHandlers.values.contains(where: { $0.types.contains(activityType) }) {
            return ("system", "the session service opens it")
        }
        return (nil, "no session service here opens '\(activityType)' (run handoff-session in the graphical session)")
    }

    /// How long a session service may take to say whether it opened a system activity: its
    /// app starting, or a D-Bus activated app answering.
    static let deliveryDeadline: Duration = .seconds(20)

    /// Continues a system activity: fetched from the origin (its session service saves it), its
    /// file URLs put in this device's containers, and delivered to the session here that opens
    /// its type. Once that session says it opened it, the origin hears it was continued; if
    /// it says it did not, the person hears why.
    func continueSystemActivity(
        _ offer: ActivityAnnouncement, _ announced: ActivityAnnouncement, from device: NearbyDevice, started: ContinuousClock.Instant, logger: ContinuationLog
    ) async -> LocalReply {
        guard isSystemActivityOn(offer.activityType), let handler = systemHandlers.first(where: { $0.value.types.contains(offer.activityType) }) else {
            return .failure(LocalError(.notFound, "nothing on this device can continue it: \(systemRoute(offer.activityType).reason)"))
        }
        let origin = memberName(device.sender)
        let wire: FetchedActivity
        switch await fetch(offer.id, from: device) {
        case .success(let fetched): wire = fetched
        case .failure(let failure):
            logger.notice("the continuation failed: \(failure)")
            return .failure(LocalError(.continuation, code: failure.code, failure.message))
        }
        var record: ActivityRecord
        switch translated(wire, from: origin) {
        case .success(let translated): record = translated
        case .failure(let error): return .failure(error)
        }
        record.activity.activityType = offer.activityType
        let continuation = UUID.random()
        let opened = FirstOutcome<LocalError?>()
        systemDeliveries[continuation] = (handler.key, opened)
        defer { systemDeliveries[continuation] = nil }
        handler.value.peer.send(.deliver(continuation: continuation, record: record, origin: LocalOrigin(device: device.sender, deviceName: origin, activity: offer.id)))
        let deadline = Self.deliveryDeadline
        let timer = LoopTimer(after: deadline) {
            opened.settle(LocalError(.failed, "the session service did not say within \(deadline) whether it opened it (an older handoff-session: restart it)"))
        }
        let refused = await opened.value()
        timer.cancel()
        if let refused {
            logger.notice("the session service did not open it: \(refused.message)")
            return .failure(LocalError(.failed, "not opened on '\(deviceName)': \(refused.message)"))
        }
        // Only now is the origin told (a player there pauses): what it offered plays here.
        link(to: device)?.send(.continued(activityID: offer.id))
        let seconds = (ContinuousClock.now - started).seconds
        logger.notice("continued in the session service", metadata: ["ms": "\(Int(seconds * 1000))"])
        return LocalReply(continued: LocalContinued(continuation: continuation, device: origin, activity: announced, app: "system", webpageURL: nil, seconds: seconds))
    }
}
