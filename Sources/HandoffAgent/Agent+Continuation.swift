import Foundation
import HandoffCore
import HandoffDesktop
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import X509

/// Continuing another device's activity, and what this device reports of those nearby.
extension Agent {
    // MARK: Continuing another device's activity

    /// Continues the activity `wanted` (else the newest offered nearby) on this device. When an
    /// app here takes it, `notice` is set to tell the origin so (`continued`, which the origin's
    /// app hears as `userActivityWasContinued`): the caller sends it after its reply, as the
    /// one who asked waits for the reply and the origin for nothing.
    func continueActivity(_ wanted: UUID?, logger: Logger, notice: inout (@Sendable () -> Void)?) async -> LocalReply {
        let started = ContinuousClock.now
        HopTrace.stamp("continuation begins")
        // The newest continuation asked for wins over any still starting or fetching.
        let ticket = continuations.ask()
        let nearby = await discovery?.nearby ?? []
        let candidates = nearby.filter { $0.activity != nil }
        let chosen: NearbyDevice?
        if let wanted {
            chosen = candidates.first { $0.activity?.id == wanted }
        } else {
            chosen = candidates.max { $0.lastHeard < $1.lastHeard }
        }
        guard let device = chosen, let offer = device.activity else {
            let what = wanted.map { "activity \($0) is not offered by any device nearby" } ?? "no device nearby offers an activity"
            return .failure(LocalError(.notFound, "\(what); 'handoff list' shows what is offered"))
        }
        let origin = memberName(device.sender)
        let announced = ActivityAnnouncement(
            id: offer.id, activityType: offer.activityType, title: offer.title, teamIdentifier: offer.teamIdentifier,
            hasWebpageURL: offer.hasWebpageURL, supportsContinuationStreams: offer.supportsContinuationStreams)
        let logger = ContinuationLog(logger: logger, origin: origin, activityType: offer.activityType)

        if offer.activityType.hasPrefix(SystemActivityType.prefix) {
            return await continueSystemActivity(offer, announced, from: device, started: started, logger: logger)
        }
        var route = await routeContinuation(offer, webpageURL: nil, originBundleIdentifier: nil)
        var prefetched: FetchedActivity?
        if case .app = route {
        } else if offer.hasWebpageURL || offer.activityType == NSUserActivityTypeBrowsingWeb {
            // Whether a browser or an app the site approves takes it depends on the page: fetch it first.
            switch await fetch(offer.id, from: device) {
            case .failure(let failure):
                logger.notice("the continuation failed: \(failure)")
                return .failure(LocalError(.continuation, code: failure.code, failure.message))
            case .success(let record):
                prefetched = record
                route = await routeContinuation(
                    offer, webpageURL: record.record.webpageURL.flatMap(URL.init(string:)), originBundleIdentifier: record.record.activity.bundleIdentifier)
            }
        }
        switch route {
        case .nowhere(let reason):
            return .failure(LocalError(.notFound, "nothing on this device can continue it: \(reason)"))
        case .webBrowser:
            guard let page = prefetched?.record.webpageURL else {
                return .failure(LocalError(.continuation, code: ContinuationFailure.Code.handoffFailed, "the activity arrived without its web page"))
            }
            // The page comes from another device: only an http or https URL with a host is opened.
            guard let url = URL(string: page), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
                url.host?.isEmpty == false, !page.hasPrefix("-")
            else {
                return .failure(LocalError(.continuation, code: ContinuationFailure.Code.handoffFailed, "the activity's web page is not an http or https URL, so it is not opened"))
            }
            link(to: device)?.send(.continued(activityID: offer.id))
            do {
                try await launcher.openWebPage(url, browserCommand: configuration.browserCommand)
            } catch {
                return .failure(LocalError(.failed, error.message))
            }
            logger.notice("opened the activity's web page", metadata: ["url": "\(page)"])
            return LocalReply(continued: LocalContinued(continuation: UUID.random(), device: origin, activity: announced, app: nil, webpageURL: page, seconds: (ContinuousClock.now - started).seconds))
        case .app(let manifest, let reason):
            logger.info("continuing in '\(manifest.bundleIdentifier)': \(reason)")
            // A web page continued in an app the site approves carries its URL and nothing of the
            // browser's state; the default browser gets the whole activity.
            if offer.activityType == NSUserActivityTypeBrowsingWeb, manifest.bundleIdentifier != installed.defaultBrowser {
                prefetched?.record.userInfo = nil
            }
            return await continueInApp(
                manifest.bundleIdentifier, offer, from: device, prefetched: prefetched, ticket: ticket, started: started, logger: logger, notice: &notice)
        }
    }

    /// Gives the activity to the app: `willContinue`, the fetch, then exactly one `deliver` or
    /// `fail` (`ContinuationStateMachine` decides which; `run` carries it out). A newer
    /// continuation on this device ends this one with 3072: before the app hears of it if the
    /// newer one came while the app was starting, with a `fail` after.
    func continueInApp(
        _ bundleIdentifier: String, _ offer: ActivityAnnouncement, from device: NearbyDevice, prefetched: FetchedActivity?,
        ticket: UInt64, started: ContinuousClock.Instant, logger: ContinuationLog, notice: inout (@Sendable () -> Void)?
    ) async -> LocalReply {
        let id = UUID.random()
        let answer = await withCheckedContinuation { waiter in
            // The fetch starts first, before the machine decides anything: on an open link the
            // request is on its way before `willContinue` (which wakes the app here while the
            // origin should have the processor), and it runs while the app starts if it must.
            // Its answer reaches the machine after `begin`, since it comes through this actor.
            // None for a continuation the machine will refuse (stopped, or a newer one asked
            // for meanwhile): the origin's app would save for nothing.
            if prefetched == nil, !continuations.isStopped, ticket == continuations.asked {
                if let link = openLinkNow(to: device) {
                    // The answer is read on the event loop: it reaches the actor from there.
                    link.fetch(offer.id, deadline: configuration.fetchDeadline) { [weak self] result in
                        guard let self else { return }
                        tasks.startImmediate("fetched") { await self.fetched(id, await self.againIfEnded(result, on: link, activityID: offer.id, from: device)) }
                    }
                } else {
                    // The new link's connection starts here, before the actor goes on to tell
                    // the app `willContinue`; the rest of its opening is waited for off the actor.
                    let fetch = newLinkFetch(offer.id, from: device)
                    let started = tasks.startConcurrent("fetch") {
                        let result = await fetch.run(self)
                        await self.fetched(id, result)
                    }
                    if !started { fetch.opening.started.abandon() }
                }
            }
            let context = ReceivingContinuation(
                id: id, waiter: waiter, offer: offer, device: device, app: bundleIdentifier, started: started, logger: logger)
            run(continuations.begin(
                id, ticket: ticket, app: bundleIdentifier, context: context, running: newestSession(of: bundleIdentifier)?.id,
                fetched: prefetched.map { .success($0) }))
        }
        notice = answer.notice
        return answer.reply
    }

    func fetched(_ continuation: UUID, _ result: Result<FetchedActivity, ContinuationFailure>) {
        run(continuations.fetched(continuation, result))
    }

    /// How many continuations this device was asked for so far.
    package var continuationsAsked: UInt64 { continuations.asked }

    /// Carries out what `ContinuationStateMachine` decided.
    func run(_ actions: [ContinuationStateMachine<ReceivingContinuation, AwaitedSave>.Action]) {
        for action in actions {
            switch action {
            case .launch(let app, let continuation, let attempt):
                tasks.start("launch") { await self.launch(app, continuation: continuation, attempt: attempt) }
            case .schedule(let deadline, let after):
                schedule(.continuation(deadline), after: after)
            case .cancel(let deadline):
                deadlines.removeValue(forKey: .continuation(deadline))?.cancel()
            case .willContinue(let continuation, let session):
                sessions[session]?.peer.send(.willContinue(continuation: continuation.id, activityType: continuation.offer.activityType))
            case .deliver(let continuation, let session, let record):
                deliver(continuation, to: session, record)
            case .failInApp(let continuation, let session, let failure):
                fail(continuation, in: session, error(failure, continuation))
            case .fail(let continuation, let failure):
                let error = error(failure, continuation)
                if failure != .superseded { continuation.logger.notice("the continuation failed: \(error.message)") }
                continuation.waiter.resume(returning: ContinuationAnswer(reply: .failure(error)))
            case .askToSave(let request, let session, let activity):
                sessions[session]?.peer.send(.save(request: request, activity: activity))
            case .answerSave(let save, let outcome):
                let result: Result<ActivityRecord, LocalError>
                switch outcome {
                case .saved(let record): result = .success(record)
                case .failed(let error): result = .failure(error)
                case .timedOut(let deadline):
                    result = .failure(LocalError(.continuation, code: ContinuationFailure.Code.remoteAppTimedOut, "'\(save.app)' on '\(deviceName)' did not save the activity within \(deadline)"))
                case .appQuit:
                    result = .failure(LocalError(.continuation, code: ContinuationFailure.Code.handoffFailed, "the app quit before it saved the activity"))
                case .agentStopped:
                    result = .failure(LocalError(.continuation, code: ContinuationFailure.Code.handoffFailed, "the agent stopped"))
                }
                save.waiter.resume(returning: result)
            }
        }
    }

    /// What the one who asked for a continuation is told of a failure.
    func error(_ failure: ContinuationStateMachine<ReceivingContinuation, AwaitedSave>.Failure, _ continuation: ReceivingContinuation) -> LocalError {
        let app = continuation.app
        switch failure {
        case .superseded:
            return LocalError(.continuation, code: ContinuationFailure.Code.cancelled, "a newer continuation replaced this one")
        case .appQuit:
            return LocalError(.continuation, code: ContinuationFailure.Code.handoffFailed, "'\(app)' quit before the activity arrived")
        case .launchFailed(let reason):
            return LocalError(.failed, reason)
        case .endedBeforeConnecting(let how):
            return LocalError(.failed, "'\(app)' ended before it connected to the agent: \(how)")
        case .didNotConnect(let deadline):
            return LocalError(.failed, "'\(app)' started but did not connect to the agent within \(deadline); does it make an Application?")
        case .fetch(let failure):
            return LocalError(.continuation, code: failure.code, failure.message)
        case .agentStopped:
            return LocalError(.continuation, code: ContinuationFailure.Code.handoffFailed, "the agent stopped")
        }
    }

    /// Tells the app the continuation failed, then the one who asked.
    func fail(_ continuation: ReceivingContinuation, in session: UUID, _ error: LocalError) {
        sessions[session]?.peer.send(.fail(continuation: continuation.id, activityType: continuation.offer.activityType, error: error))
        if error.code != ContinuationFailure.Code.cancelled { continuation.logger.notice("the continuation failed: \(error.message)") }
        continuation.waiter.resume(returning: ContinuationAnswer(reply: .failure(error)))
    }

    /// A fetched activity as this device gives it to an app: within this device's size limit,
    /// checked as the app will read it, its file URLs in this device's containers where the
    /// origin's were (the rest listed as untranslated).
    func translated(_ wire: FetchedActivity, from origin: String) -> Result<ActivityRecord, LocalError> {
        var record = wire.record
        guard let bytes = record.userInfo else { return .success(record) }
        // This device's limit holds whatever the other device allows.
        guard bytes.count <= configuration.maximumPayload else {
            return .failure(LocalError(
                .continuation, code: ContinuationFailure.Code.userInfoTooLarge,
                "the activity's userInfo is \(bytes.count) bytes, over the limit of \(configuration.maximumPayload) bytes; move bulk data to continuation streams"))
        }
        do {
            // Checked as the app will read it; the model is built only when it holds file URLs.
            var hasFileURL = false
            let value = try UserInfoCoding.checkForApp(bytes)
            if let value { ContainerTranslation.visitFileURLs(value) { _ in hasFileURL = true } }
            if let value, hasFileURL {
                let (translated, untranslated) = ContainerTranslation.translate(value, references: wire.fileReferences, containers: configuration.containers)
                record.userInfo = try UserInfoCoding.encode(translated)
                record.untranslatedFileURLs = untranslated.isEmpty ? nil : untranslated
            }
        } catch {
            return .failure(LocalError(.continuation, code: ContinuationFailure.Code.handoffFailed, "the activity from '\(origin)' could not be read: \(error)"))
        }
        return .success(record)
    }

    /// Gives the fetched activity to the app told `willContinue` (its file URLs into this
    /// device's containers), and tells the origin it was continued once the asker has its reply.
    func deliver(_ continuation: ReceivingContinuation, to session: UUID, _ wire: FetchedActivity) {
        let offer = continuation.offer, device = continuation.device
        let origin = memberName(device.sender)
        var record: ActivityRecord
        switch translated(wire, from: origin) {
        case .success(let translated): record = translated
        case .failure(let error): return fail(continuation, in: session, error)
        }
        // The type the app was told in willContinue is the one it gets.
        record.activity.activityType = offer.activityType
        rememberStreamSource(
            continuation.id,
            StreamSource(
                session: session, device: device, activityID: offer.id, activityType: offer.activityType,
                supportsStreams: record.activity.supportsContinuationStreams))
        sessions[session]?.peer.send(
            .deliver(continuation: continuation.id, record: record, origin: LocalOrigin(device: device.sender, deviceName: origin, activity: offer.id)))
        HopTrace.stamp("delivered")
        let link = link(to: device), activityID = offer.id
        let seconds = (ContinuousClock.now - continuation.started).seconds
        continuation.logger.notice("continued", metadata: ["app": "\(continuation.app)", "ms": "\(Int(seconds * 1000))"])
        continuation.waiter.resume(
            returning: ContinuationAnswer(
                reply: LocalReply(
                    continued: LocalContinued(
                        continuation: continuation.id, device: origin, activity: record.activity, app: continuation.app, webpageURL: nil, seconds: seconds)),
                notice: { link?.send(.continued(activityID: activityID)) }))
    }

    /// Where a continuation goes: with the page known, an app the page's site approves may take it.
    func routeContinuation(_ offer: ActivityAnnouncement, webpageURL: URL?, originBundleIdentifier: String?) async -> ActivityRoute {
        var approved: Set<String> = []
        if let host = webpageURL?.host?.lowercased() {
            // Only a site an installed app claims is asked: a page never makes the agent
            // contact a host no app here names.
            let candidates = Set(installed.all.compactMap { app -> String? in
                guard let team = app.manifest.teamIdentifier,
                    app.manifest.associatedDomains.contains(where: { $0.service == "activitycontinuation" && $0.matches(host: host) })
                else { return nil }
                return "\(team).\(app.manifest.bundleIdentifier)"
            })
            if !candidates.isEmpty {
                approved = await siteAssociations.approved(candidates, forHost: host, port: webpageURL?.port)
            }
        }
        let approvedHost = webpageURL?.host?.lowercased()
        return ActivityRouter.route(
            IncomingActivity(
                teamIdentifier: offer.teamIdentifier, activityType: offer.activityType, webpageURL: webpageURL,
                originBundleIdentifier: originBundleIdentifier),
            installed: installed.manifests, defaultBrowser: installed.defaultBrowser,
            siteApproves: { host, app in host.lowercased() == approvedHost && approved.contains(app) })
    }

    /// Where an offer would go, as listings show it (the page itself is not known yet).
    func route(_ offer: ActivityAnnouncement, webpageURL: URL?) -> ActivityRoute {
        ActivityRouter.route(
            IncomingActivity(teamIdentifier: offer.teamIdentifier, activityType: offer.activityType, webpageURL: webpageURL),
            installed: installed.manifests, defaultBrowser: installed.defaultBrowser)
    }

    func fetch(_ activityID: UUID, from device: NearbyDevice) async -> Result<FetchedActivity, ContinuationFailure> {
        if let link = openLinkNow(to: device) {
            return await againIfEnded(await link.fetch(activityID, deadline: configuration.fetchDeadline), on: link, activityID: activityID, from: device)
        }
        return await newLinkFetch(activityID, from: device).run(self)
    }

    /// A fetch on a link that was already open, which ended before it answered, is asked once
    /// more: on the device's link opened since, if another continuation opened one, or else
    /// on a new one. A link looks open until something is sent on it: one whose other end
    /// forgot it unseen (that device restarted, or dropped the link while this one slept, its
    /// reset lost) is found dead only by the fetch, and its `reset` is the whole answer. A
    /// second fetch of the same activity only asks the origin's app to save again.
    func againIfEnded(
        _ result: Result<FetchedActivity, ContinuationFailure>, on link: any OutgoingLink, activityID: UUID, from device: NearbyDevice
    ) async -> Result<FetchedActivity, ContinuationFailure> {
        guard case .failure(let failure) = result, !link.isOpen else { return result }
        logger.info("the link to '\(memberName(device.sender))' had ended (\(failure.message)); fetching again on another")
        if let open = openLinkNow(to: device), open !== link { return await open.fetch(activityID, deadline: configuration.fetchDeadline) }
        return await newLinkFetch(activityID, from: device).run(self)
    }

    /// The fetch of `activityID` on a new link to `device`, made ready here (the old link
    /// closed, what the opening needs read) and made by `run` wherever it is called. On the
    /// new link the request leaves with `hello`, inside the membership proof, for the member it
    /// is meant for alone (by the fingerprint of its pinned certificate).
    func newLinkFetch(_ activityID: UUID, from device: NearbyDevice) -> NewLinkFetch {
        let deadline = configuration.fetchDeadline
        let early = FirstOutcome<Result<FetchedActivity, ContinuationFailure>>()
        let target = memberFingerprints[device.sender]
        let first = target.map {
            LinkFirstFetch(activityID: activityID, target: $0, deadline: deadline) {
                HopTrace.stamp("answer read")
                early.settle($0)
            }
        }
        return NewLinkFetch(opening: linkOpening(to: device, first: first), activityID: activityID, deadline: deadline, early: early)
    }

    /// A fetch on a link that is not open yet (`newLinkFetch`).
    struct NewLinkFetch: Sendable {
        let opening: LinkOpening
        let activityID: UUID
        let deadline: Duration
        let early: FirstOutcome<Result<FetchedActivity, ContinuationFailure>>

        /// Opens the link, has `agent` keep it, and fetches (the answer to the request sent with
        /// `hello`, if it was).
        func run(_ agent: Agent) async -> Result<FetchedActivity, ContinuationFailure> {
            switch await agent.keep(opening.open(), opening) {
            case .success(let link): return opening.first != nil ? await early.value() : await link.fetch(activityID, deadline: deadline)
            case .failure(let failure): return .failure(failure)
            }
        }
    }

    /// The open link to a nearby device, if there is one.
    func openLinkNow(to device: NearbyDevice) -> (any OutgoingLink)? {
        guard let existing = links[device.sender], existing.isOpen, existing.host == device.address, existing.port == Int(device.linkPort) else {
            return nil
        }
        return existing
    }

    /// The link to a nearby device: the open one, or a new one.
    func openLink(to device: NearbyDevice) async -> Result<any OutgoingLink, ContinuationFailure> {
        if let existing = openLinkNow(to: device) { return .success(existing) }
        let opening = linkOpening(to: device, first: nil)
        return await keep(opening.open(), opening)
    }

    /// A new link to `device`, begun on the actor (the old link closed, the connection to an
    /// address started: `AgentNetwork.start`) and finished by `open` wherever it is called;
    /// `keep` then keeps it, on the actor.
    struct LinkOpening: Sendable {
        let device: NearbyDevice
        let name: String
        /// A fetch sent with `hello` (`AgentNetwork.open`): on a link that turns out to be
        /// another member's, it ends with the link, having been asked of that member.
        let first: LinkFirstFetch?
        let started: LinkStart<any OutgoingLink>

        func open() async -> Result<any OutgoingLink, ContinuationFailure> {
            do {
                return .success(try await started.finish())
            } catch {
                return .failure(ContinuationFailure(code: error.code, message: "'\(name)': \(error.message)"))
            }
        }
    }

    func linkOpening(to device: NearbyDevice, first: LinkFirstFetch?) -> LinkOpening {
        links[device.sender]?.close()
        links[device.sender] = nil
        let started = network.start(
            host: device.address, port: Int(device.linkPort), identity: identity, pins: { [pins] in pins.value },
            deadline: configuration.fetchDeadline, idle: configuration.linkIdle, first: first)
        return LinkOpening(device: device, name: memberName(device.sender), first: first, started: started)
    }

    /// Keeps a link `opening` opened, if it is the device's it was opened to; one that turns
    /// out to be another member's is closed and refused.
    func keep(_ opened: Result<any OutgoingLink, ContinuationFailure>, _ opening: LinkOpening) -> Result<any OutgoingLink, ContinuationFailure> {
        guard case .success(let link) = opened else { return opened }
        let device = opening.device
        guard link.device == device.sender else {
            link.close()
            return .failure(ContinuationFailure(code: ContinuationFailure.Code.connectionUnavailable, message: "the device at \(device.address):\(device.linkPort) is not '\(opening.name)'"))
        }
        links[device.sender] = link
        return .success(link)
    }

    /// Closes the links that went out from an address this machine no longer has (it was
    /// renumbered, its lease ended, a VPN went down): nothing sent on them arrives, and a
    /// request would wait out its deadline and blame the other device. The next request opens
    /// a link from an address this machine has.
    func closeLinks(notFrom addresses: Set<String>) {
        for (member, link) in links {
            guard let local = link.localAddress, !addresses.contains(local) else { continue }
            logger.notice("closed the link to '\(memberName(member))': this device's address \(local) went away; the next request opens a new one")
            link.close()
            links[member] = nil
        }
    }

    func link(to device: NearbyDevice) -> (any OutgoingLink)? {
        links[device.sender].flatMap { $0.isOpen ? $0 : nil }
    }

    /// Starts `bundleIdentifier` for a continuation; tells the machine how the start went,
    /// and when the process ends before it connects.
    func launch(_ bundleIdentifier: String, continuation: UUID, attempt: UInt64) async {
        guard let app = installed.app(bundleIdentifier) else {
            return run(continuations.launchFailed(bundleIdentifier, attempt: attempt, reason: "the app '\(bundleIdentifier)' is not installed"))
        }
        guard app.executableIntact else {
            logger.warning("did not start '\(bundleIdentifier)': its executable \(app.executable.path) changed since it was installed")
            return run(continuations.launchFailed(bundleIdentifier, attempt: attempt, reason: Self.changedExecutable(app)))
        }
        let data = configuration.stateDirectory.appendingPathComponent("data/\(bundleIdentifier)", isDirectory: true)
        try? FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // What the app prints goes to its log beside the agent's state, not to the agent's terminal.
        let logs = configuration.stateDirectory.appendingPathComponent("logs", isDirectory: true)
        try? FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let launched: any LaunchedApp
        do {
            launched = try await launcher.launch(
                AppLaunch(
                    app: app, continuation: continuation, socketPath: configuration.socketPath, dataDirectory: data,
                    logFile: logs.appendingPathComponent("\(bundleIdentifier).log")))
        } catch {
            return run(continuations.launchFailed(bundleIdentifier, attempt: attempt, reason: error.message))
        }
        logger.info("started '\(bundleIdentifier)' for a continuation")
        run(continuations.launched(bundleIdentifier, attempt: attempt))
        launched.whenEnded { [weak self] in
            self?.tasks.start("app ended") { await self?.appEnded(bundleIdentifier, attempt: attempt, how: launched.ended ?? "it ended") }
        }
    }

    func appEnded(_ bundleIdentifier: String, attempt: UInt64, how: String) {
        run(continuations.appEnded(bundleIdentifier, attempt: attempt, how: how))
    }

    func newestSession(of bundleIdentifier: String) -> Session? {
        sessions.values.filter { $0.app?.manifest.bundleIdentifier == bundleIdentifier }.max { $0.connected < $1.connected }
    }

    // MARK: What is nearby

    func discovered(_ change: DiscoveryEvent) async {
        let events: [LocalEvent]
        switch change {
        case .heard(let device):
            if let joined = joinedUnheard.removeValue(forKey: device.sender) { joined.heard.settle(()) }
            clipboardHeard(device)
            let name = memberName(device.sender)
            switch nearbyWatch.heard(device.sender, activity: device.activity) {
            case .appeared(let now): events = [LocalEvent(change: .appeared, device: device.sender, deviceName: name, activity: nearbyActivity(device, now))]
            case .changed(let now): events = [LocalEvent(change: .changed, device: device.sender, deviceName: name, activity: nearbyActivity(device, now))]
            case .gone: events = [LocalEvent(change: .gone, device: device.sender, deviceName: name, activity: nil)]
            case nil: events = []
            }
        case .gone(let sender):
            clipboardGone(sender)
            events = nearbyWatch.gone(sender) == nil ? [] : [LocalEvent(change: .gone, device: sender, deviceName: memberName(sender), activity: nil)]
        case .stale(let device):
            tasks.start("catch up") { await self.catchUp(device.sender, address: device.address, linkPort: device.linkPort, revision: device.accountRevision) }
            return
        case .localAddresses(let addresses):
            closeLinks(notFrom: addresses)
            return
        }
        if case .heard(let device) = change, device.accountRevision < (account?.revision ?? 0) {
            tasks.start("catch up") { await self.catchUp(device.sender, address: device.address, linkPort: device.linkPort, revision: device.accountRevision) }
        }
        for event in events {
            for watcher in nearbyWatch.watchers.values { watcher.send(.event(event)) }
            await notify(event)
        }
    }

    /// Shows an activity that appeared or changed nearby as a desktop notification, whose
    /// Continue button continues it here; takes it away when the activity goes.
    func notify(_ event: LocalEvent) async {
        guard let desktop = await desktopNotifier() else { return }
        if let offer = event.activity {
            let activity = offer.activity.id
            try? await desktop.show(
                device: event.device, deviceName: offer.deviceName, title: offer.activity.title ?? offer.activity.activityType, handler: offer.handler
            ) { [weak self] in
                self?.tasks.start("continue from a notification") {
                    var notice: (@Sendable () -> Void)?
                    _ = await self?.continueActivity(activity, logger: self?.logger ?? Logger(label: "handoffd"), notice: &notice)
                    notice?()
                }
            }
        } else {
            await desktop.gone(device: event.device)
        }
    }

    /// The session bus's notifications, connected on first use; nil without a desktop session
    /// (said once in the log) or when notifications are off.
    func desktopNotifier() async -> NearbyNotifications? {
        switch desktop {
        case .connected(let notifications): return notifications
        case .unavailable: return nil
        case .notTried: break
        }
        guard let address = configuration.desktopBus else { return nil }
        do {
            let notifications = NearbyNotifications(notifier: try await DesktopNotifier.connect(environment: ["DBUS_SESSION_BUS_ADDRESS": address]))
            desktop = .connected(notifications)
            return notifications
        } catch {
            desktop = .unavailable
            logger.info("no desktop notifications: \(error)")
            return nil
        }
    }

    func nearbyActivity(_ device: NearbyDevice, _ activity: ActivityAnnouncement) -> LocalNearbyActivity {
        var handler: String?
        var reason: String
        switch route(activity, webpageURL: activity.hasWebpageURL ? URL(string: "https://example.invalid/") : nil) {
        case _ where activity.activityType.hasPrefix(SystemActivityType.prefix):
            (handler, reason) = systemRoute(activity.activityType)
        case .app(let manifest, let why):
            handler = manifest.bundleIdentifier
            reason = why
        case .webBrowser(_, let why):
            handler = "browser"
            reason = why
        case .nowhere(let why):
            handler = nil
            reason = why
        }
        return LocalNearbyActivity(
            device: device.sender, deviceName: memberName(device.sender),
            activity: ActivityAnnouncement(
                id: activity.id, activityType: activity.activityType, title: activity.title, teamIdentifier: activity.teamIdentifier,
                hasWebpageURL: activity.hasWebpageURL, supportsContinuationStreams: activity.supportsContinuationStreams),
            age: Date().timeIntervalSince(device.lastHeard), handler: handler, reason: reason)
    }

    func nearbyActivities() async -> [LocalNearbyActivity] {
        let nearby = await discovery?.nearby ?? []
        return nearby.compactMap { device in device.activity.map { nearbyActivity(device, $0) } }.sorted { $0.age < $1.age }
    }

    func memberName(_ id: UUID) -> String {
        account?.members.first { $0.id == id }?.name ?? "an unnamed device"
    }

    var thisDevice: LocalDevice {
        LocalDevice(id: identity.id, name: deviceName, isThisDevice: true, isNearby: true, fingerprint: identity.fingerprint)
    }

    func devices() async -> [LocalDevice] {
        let nearby = await discovery?.nearby ?? []
        return (account?.members ?? []).map { member in
            if member.id == identity.id { return thisDevice }
            let heard = nearby.first { $0.sender == member.id }
            return LocalDevice(
                id: member.id, name: member.name, isThisDevice: false, isNearby: heard != nil, address: heard?.address,
                lastHeard: heard.map { Date().timeIntervalSince($0.lastHeard) },
                fingerprint: member.certificate.map { DeviceIdentity.fingerprint(ofCertificate: Array($0)) })
        }
    }

    /// Tries a link to `host:port`, telling a closed port from a device that refuses this one.
    func probe(host: String, port: Int) async -> LocalProbe {
        guard (1...65_535).contains(port) else {
            return LocalProbe(reachable: false, member: false, device: nil, message: "\(port) is not a port: ports are 1 to 65535")
        }
        do {
            let link = try await network.open(host: host, port: port, identity: identity, pins: { [pins] in pins.value }, deadline: .seconds(3))
            link.close()
            let name = memberName(link.device)
            return LocalProbe(reachable: true, member: true, device: name, message: "'\(name)' answers at \(host):\(port) and accepts this device")
        } catch {
            if error.message.contains("cannot be reached") || error.message.contains("did not answer") {
                return LocalProbe(reachable: false, member: false, device: nil, message: "nothing answers at \(host):\(port): \(error.message)")
            }
            return LocalProbe(reachable: true, member: false, device: nil, message: "something answers at \(host):\(port), but the link was refused: it is not a device of this account, or it does not accept this one")
        }
    }

    func status() async -> LocalStatus {
        let nearby = await discovery?.nearby ?? []
        let counters = await discovery?.statistics
        let rotations = await discovery?.nameRotations
        return LocalStatus(
            version: handoffVersion, device: thisDevice, account: account?.name, members: account?.members.count ?? 0, nearby: nearby.count,
            linkPort: linkPort, interfaces: await discovery?.interfaces.filter { $0.ipv4 != nil || $0.ipv6 }.map(\.name) ?? configuration.interfaces ?? Self.multicastInterfaces(),
            staticPeers: configuration.staticPeers.map(\.description), apps: installed.all.count, currentActivity: activities.offered,
            discovery: counters.map {
                LocalDiscoveryCounters(datagrams: $0.datagrams, unopened: $0.unopened, replayed: $0.replayed, outsideWindow: $0.outsideWindow, accepted: $0.accepted,
                    nameRotations: rotations)
            },
            removed: removal, clipboard: localClipboard(),
            clipboardOn: configuration.clipboard)
    }

    func localApp(_ app: InstalledApp) -> LocalApp {
        LocalApp(
            bundleIdentifier: app.manifest.bundleIdentifier, teamIdentifier: app.manifest.teamIdentifier, executable: app.executable.path,
            activityTypes: app.manifest.continuableActivityTypes.sorted(),
            running: sessions.values.filter { $0.app?.manifest.bundleIdentifier == app.manifest.bundleIdentifier }.count,
            signedBy: app.signedBy, teamSource: app.manifest.teamSource?.description, executableChanged: app.executableIntact ? nil : true)
    }
}

/// The agent's way to the person's desktop notifications: tried on first use, and not again
/// once it failed (said once in the log).
enum DesktopConnection: Sendable {
    case notTried
    case connected(NearbyNotifications)
    case unavailable
}
