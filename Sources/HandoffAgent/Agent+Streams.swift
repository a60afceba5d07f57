import Foundation
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore

/// Continuation streams: the continuing app's agent opens a stream on the link to the origin,
/// whose agent hands it to the app that offered the activity; each agent then relays between
/// its app's stream connection and the link. See `docs/local-api.md` and
/// `docs/wire-protocol.md`, Continuation streams.
extension Agent {
    /// What a delivered continuation needs to open streams back to its origin.
    struct StreamSource: Sendable {
        var session: UUID
        var device: NearbyDevice
        var activityID: UUID
        var activityType: String
        var supportsStreams: Bool
    }

    /// A stream another device opened, waiting for the app to take it.
    struct PendingStream {
        var stream: LinkStream
        var session: UUID
        var activityID: UUID
        var answer: CheckedContinuation<ContinuationFailure?, Never>
    }

    func rememberStreamSource(_ continuation: UUID, _ source: StreamSource) {
        streams.remember(continuation, source)
    }

    // MARK: The local socket's stream connections

    /// Serves a connection that opens with `openStream` or `acceptStream`: answers it, then
    /// relays between it and the link until both sides are done or either fails.
    nonisolated func serveStream(
        _ client: LocalStreamClient, _ inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator,
        _ outbound: NIOAsyncChannelOutboundWriter<Frame>
    ) async {
        switch client.call {
        case .copy(let version, let type):
            return await serveCopy(client, version: version, type: type, &inbound, outbound)
        case .paste(let version, let type):
            return await servePaste(client, version: version, type: type, &inbound, outbound)
        case .provideClipboard(let version, let read):
            return await serveProvided(client, version: version, read: read, &inbound, outbound)
        default:
            break
        }
        let prepared: Result<LinkStream, LocalError>
        switch client.call {
        case .openStream(let version, _) where version != LocalMessage.version, .acceptStream(let version, _) where version != LocalMessage.version:
            prepared = .failure(LocalError(.badRequest, "this agent speaks local API version \(LocalMessage.version), the client \(version)"))
        case .openStream(_, let continuation):
            prepared = await openStream(for: continuation, pid: client.pid)
        case .acceptStream(_, let token):
            prepared = await takeStream(token, pid: client.pid)
        default:
            prepared = .failure(LocalError(.badRequest, "a stream connection opens with 'openStream' or 'acceptStream'"))
        }
        let stream: LinkStream
        switch prepared {
        case .failure(let error):
            try? await outbound.write(LocalMessage.reply(request: client.request, .failure(error)).frame)
            return
        case .success(let opened):
            stream = opened
        }
        do {
            try await outbound.write(LocalMessage.reply(request: client.request, LocalReply()).frame)
        } catch {
            stream.close()
            return
        }
        await relaying(+1)
        await Self.relay(stream, &inbound, outbound, close: client.close)
        await relaying(-1)
    }

    /// Counts a relay starting (+1) or ending (-1): an agent relaying a stream is not idle.
    func relaying(_ change: Int) {
        idle.relays += change
        busy()
    }

    /// Carries bytes and ends both ways between an app's stream connection and a link stream.
    /// An app that closes its connection without ending its output resets the stream, so the
    /// other side never waits for bytes that will not come.
    static func relay(
        _ stream: LinkStream, _ inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator,
        _ outbound: NIOAsyncChannelOutboundWriter<Frame>, close: @escaping @Sendable () -> Void
    ) async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                // From the other device to the app: credit goes back once the app's socket took the bytes.
                for await event in stream.events {
                    switch event {
                    case .data(let bytes):
                        do {
                            try await outbound.write(Frame(kind: LocalStreamFrame.data, payload: bytes))
                        } catch {
                            stream.reset("the app's connection to its agent failed")
                            return
                        }
                        stream.consumed(bytes.count)
                    case .end:
                        try? await outbound.write(Frame(kind: LocalStreamFrame.end, payload: []))
                    case .stop:
                        try? await outbound.write(Frame(kind: LocalStreamFrame.stop, payload: []))
                    case .failed(let reason):
                        try? await outbound.write(Frame(kind: LocalStreamFrame.failed, payload: Array(reason.utf8)))
                        close()
                        return
                    }
                }
            }
            // From the app to the other device; writing waits for the other side's credit.
            do {
                reading: while let frame = try await inbound.next() {
                    switch frame.kind {
                    case LocalStreamFrame.data:
                        guard !frame.payload.isEmpty else { continue }
                        do {
                            try await stream.write(frame.payload)
                        } catch where stream.failure != nil {
                            // The stream failed: the app's connection closes now, rather than
                            // once the app has read up to the `X` queued behind unread bytes.
                            close()
                            break reading
                        } catch {
                            // The other app stopped reading: as on a socket, what is still
                            // written is dropped; the app learns it when it reads the `S`.
                        }
                    case LocalStreamFrame.end:
                        stream.finish()
                    case LocalStreamFrame.stop:
                        stream.stopReading()
                    default:
                        stream.reset("the app sent a stream frame of unknown kind \(frame.kind)")
                    }
                }
            } catch {}
            stream.close()
            group.cancelAll()
        }
    }

    // MARK: The continuing side

    /// Opens the streams of continuation `continuation` for the process `pid`, which must be
    /// the app it was delivered to.
    func openStream(for continuation: UUID, pid: Int32) async -> Result<LinkStream, LocalError> {
        busy()
        guard let source = streams.source(of: continuation), let session = sessions[source.session] else {
            return .failure(LocalError(
                .notFound,
                "no continuation \(continuation) was delivered on this device to a running app; streams are opened by the app that continued the activity, from its continuation"))
        }
        guard session.peer.pid == pid else {
            return .failure(LocalError(.notAllowed, "process \(pid) is not the app that continued the activity (process \(session.peer.pid)); only that app may open its streams"))
        }
        guard source.supportsStreams else {
            return .failure(LocalError(
                .continuation, code: ContinuationFailure.Code.handoffFailed,
                "activity '\(source.activityType)' does not support continuation streams: the originating app must set supportsContinuationStreams"))
        }
        let link: any OutgoingLink
        switch await openLink(to: source.device) {
        case .success(let open): link = open
        case .failure(let failure): return .failure(LocalError(.continuation, code: failure.code, failure.message))
        }
        switch await link.openStream(.activity(source.activityID), deadline: configuration.fetchDeadline) {
        case .success(let stream):
            logger.info("opened continuation streams", metadata: ["to": "\(memberName(source.device.sender))", "type": "\(source.activityType)"])
            return .success(stream)
        case .failure(let failure):
            logger.notice("continuation streams were not opened: \(failure.message)", metadata: ["to": "\(memberName(source.device.sender))"])
            return .failure(LocalError(.continuation, code: failure.code, "'\(memberName(source.device.sender))': \(failure.message)"))
        }
    }

    // MARK: The originating side

    /// A device of the account opens streams to activity `activityID`: the app that offers it
    /// is asked to take them (`streamRequest`), within the fetch deadline. Nil when it did.
    func acceptStream(_ activityID: UUID, _ stream: LinkStream, from peer: LinkPeer) async -> ContinuationFailure? {
        busy()
        guard let owner = activities.owner(of: activityID), let session = sessions[owner],
            let activity = activities.announcement(activityID, in: owner)
        else {
            return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the activity is no longer offered on '\(deviceName)': its app closed it or quit")
        }
        guard activity.supportsContinuationStreams else {
            return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "activity '\(activity.activityType)' on '\(deviceName)' does not support continuation streams")
        }
        let token = UUID.random()
        let deadline = configuration.fetchDeadline
        return await withCheckedContinuation { answer in
            streams.pending[token] = PendingStream(stream: stream, session: session.id, activityID: activityID, answer: answer)
            session.peer.send(.streamRequest(stream: token, activity: activityID))
            _ = LoopTimer(after: deadline) { [weak self] in
                self?.tasks.start("stream wait") { [weak self] in
                    await self?.settleStream(token, ContinuationFailure(code: ContinuationFailure.Code.remoteAppTimedOut, message: "the app on '\(self?.deviceName ?? "the other device")' did not take the streams within \(deadline)"))
                }
            }
        }
    }

    /// Ends the wait for the app to take stream `token`: taken (nil) or not, and why.
    func settleStream(_ token: UUID, _ failure: ContinuationFailure?) {
        streams.pending.removeValue(forKey: token)?.answer.resume(returning: failure)
    }

    /// The app's stream connection for `token` arrived: the stream is its.
    func takeStream(_ token: UUID, pid: Int32) async -> Result<LinkStream, LocalError> {
        busy()
        guard let pending = streams.pending[token], let session = sessions[pending.session] else {
            return .failure(LocalError(.notFound, "no streams \(token) wait for this app: they were taken, refused, or timed out"))
        }
        guard session.peer.pid == pid else {
            return .failure(LocalError(.notAllowed, "process \(pid) is not the app the streams were offered to (process \(session.peer.pid))"))
        }
        streams.pending[token] = nil
        pending.stream.accept()
        pending.answer.resume(returning: nil)
        return .success(pending.stream)
    }

    /// A session ended: its streams waiting to be taken are refused, and its continuations
    /// open no more streams.
    func endStreams(of session: UUID) {
        for token in streams.forget(session: session) {
            settleStream(token, ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "the app on '\(deviceName)' quit before it took the streams"))
        }
    }
}
