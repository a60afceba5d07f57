import Foundation
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore

/// The account's clipboard (docs/clipboard.md): a copy here is offered in this device's
/// beacons (its types and sizes, never its bytes); a paste here of another device's offer
/// opens a stream on the link to it, which sends the bytes then. `ClipboardBoard` decides
/// which offer is the clipboard here.
extension Agent {
    /// A session service that watches the clipboard, and which clipboard it serves.
    struct ClipboardWatcher {
        let peer: LocalPeer
        let session: String?
    }

    /// Where copies made with `copy` keep their bytes while they are offered.
    nonisolated var clipboardFolder: URL {
        configuration.stateDirectory.appendingPathComponent("clipboard", isDirectory: true)
    }

    /// What a paste reads: this device's own copy (a file the agent keeps, or what its
    /// provider sends), or a stream from the device that copied it.
    enum PasteSource: Sendable {
        case file(FileHandle)
        /// Made here: the list of another device's copied files, naming this device's paths.
        case bytes([UInt8])
        case provided(session: UUID)
        case stream(LinkStream)
    }

    /// Where the bytes of a paste go, as they come, and how it ends (nil: whole; else why not).
    /// `finish` is called once.
    struct ClipboardSink: Sendable {
        let write: @Sendable ([UInt8]) async throws -> Void
        let finish: @Sendable (_ failure: String?) async -> Void
    }

    /// A paste waiting for this device's clipboard provider (`clipboardRequest`).
    struct ClipboardRead: Sendable {
        let session: UUID
        let type: ClipboardType
        let sink: ClipboardSink
        let deadline: LoopTimer
    }

    /// How long the provider has to begin sending a type's bytes, or refuse.
    static let providerDeadline: Duration = .seconds(2)

    // MARK: Copying here

    /// Serves a connection that opens with `copy`: its data frames, up to the end, become this
    /// device's clipboard, offered as `type`. The end is answered with an end once the offer
    /// is out; anything wrong (the clipboard off, a bad type, more than the size limit, the
    /// client gone before its end) offers nothing and leaves no file behind.
    nonisolated func serveCopy(
        _ client: LocalStreamClient, version: Int, type: String, _ inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator,
        _ outbound: NIOAsyncChannelOutboundWriter<Frame>
    ) async {
        let refusal: LocalError?
        if version != LocalMessage.version {
            refusal = LocalError(.badRequest, "this agent speaks local API version \(LocalMessage.version), the client \(version)")
        } else if !configuration.clipboard {
            refusal = Self.clipboardOff
        } else if !ClipboardOffer.isValidTypeName(type) {
            refusal = LocalError(.badRequest, "'\(type)' is not a clipboard type: give 1 to \(ClipboardOffer.maximumTypeNameBytes) bytes of printable ASCII, such as text/plain;charset=utf-8 or image/png")
        } else {
            refusal = nil
        }
        if let refusal {
            try? await outbound.write(LocalMessage.reply(request: client.request, .failure(refusal)).frame)
            return
        }
        let file = clipboardFolder.appendingPathComponent("copy-\(UUID.random().uuidString)")
        let handle: FileHandle
        do {
            try FileManager.default.createDirectory(at: clipboardFolder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw AgentError("cannot create \(file.path)")
            }
            handle = try FileHandle(forWritingTo: file)
        } catch {
            try? await outbound.write(LocalMessage.reply(request: client.request, .failure(LocalError(.failed, "cannot keep the copy in \(clipboardFolder.path): \(error)"))).frame)
            return
        }
        var kept = false
        defer {
            try? handle.close()
            if !kept { try? FileManager.default.removeItem(at: file) }
        }
        guard (try? await outbound.write(LocalMessage.reply(request: client.request, LocalReply()).frame)) != nil else { return }
        let limit = configuration.clipboardSizeLimit
        var size: UInt64 = 0
        var ended = false
        do {
            reading: while let frame = try await inbound.next() {
                switch frame.kind {
                case LocalStreamFrame.data:
                    size += UInt64(frame.payload.count)
                    guard size <= limit else {
                        try? await outbound.write(Self.failedFrame("the copy is over this device's clipboard size limit of \(limit) bytes (--clipboard-size-limit); nothing was offered"))
                        return
                    }
                    try handle.write(contentsOf: frame.payload)
                case LocalStreamFrame.end:
                    ended = true
                    break reading
                default:
                    try? await outbound.write(Self.failedFrame("a copy carries data frames and an end, not frames of kind \(frame.kind); nothing was offered"))
                    return
                }
            }
        } catch {
            // The client went away, or the file could not be written: nothing is offered.
            logger.notice("a copy ended before its end: nothing offered (\(error))")
            return
        }
        // Without its end frame, the client went away mid-copy: nothing is offered.
        guard ended else { return }
        kept = await copied([ClipboardType(name: type, size: size)], content: .held([type: file])) != nil
        if kept {
            try? await outbound.write(Frame(kind: LocalStreamFrame.end, payload: []))
        } else {
            try? await outbound.write(Self.failedFrame(Self.clipboardOff.message))
        }
        await Self.awaitClose(&inbound)
    }

    static var clipboardOff: LocalError {
        LocalError(.notAllowed, "the clipboard is off on this device: start handoffd with --clipboard on (or 'clipboard = on' in its configuration file)")
    }

    static func failedFrame(_ reason: String) -> Frame {
        Frame(kind: LocalStreamFrame.failed, payload: Array(reason.utf8))
    }

    /// A copy here: it is this device's clipboard from now on, offered to the account until it
    /// expires. Nil when the clipboard is off.
    func copied(_ types: [ClipboardType], content: LocalClipboardContent) async -> ClipboardOffer? {
        busy()
        guard configuration.clipboard else { return nil }
        var offered = types.filter { ClipboardOffer.isValidTypeName($0.name) }
        if offered.count > ClipboardOffer.maximumTypes {
            logger.notice("a copy offered \(offered.count) types: the first \(ClipboardOffer.maximumTypes) are offered to the account's devices")
            offered = Array(offered.prefix(ClipboardOffer.maximumTypes))
        }
        let (offer, replaced) = clipboardBoard.copied(offered, content: content, at: Date(), lifetime: configuration.clipboardLifetime, now: .now)
        removeClipboardContent(replaced)
        logger.info("offering the clipboard", metadata: ["types": "\(offered.map { "\($0.name) (\($0.size) bytes)" }.joined(separator: ", "))"])
        clipboardChanged()
        await announceClipboard()
        return offer
    }

    /// Beacons carry this device's copy as it is now (nothing once it expired or went): a
    /// change made while an earlier announcement waited is never overwritten by it.
    func announceClipboard() async {
        try? await discovery?.announce(clipboard: clipboardBoard.localOffer(now: .now))
    }

    nonisolated func removeClipboardContent(_ content: LocalClipboardContent?) {
        guard case .held(let files) = content else { return }
        for file in Set(files.values) { try? FileManager.default.removeItem(at: file) }
    }

    // MARK: The session service's copies

    /// The person copied in their session: `session` (the session service) offers `types`
    /// and gives each type's bytes when a device pastes it.
    func offerClipboard(_ types: [LocalClipboardType], from session: Session) async -> LocalReply {
        guard configuration.clipboard else { return .failure(Self.clipboardOff) }
        // No types: what this provider offered is withdrawn (what was copied must not be offered).
        guard !types.isEmpty else {
            if case .provided(session: session.id)? = clipboardBoard.local?.content {
                _ = clipboardBoard.dropLocal()
                logger.info("the clipboard's provider withdrew its copy")
                clipboardChanged()
                await announceClipboard()
            }
            return LocalReply()
        }
        if let bad = types.first(where: { !ClipboardOffer.isValidTypeName($0.name) || $0.size > ClipboardOffer.maximumSize }) {
            return .failure(LocalError(.badRequest, "'\(bad.name)' (\(bad.size) bytes) is not a clipboard type: give 1 to \(ClipboardOffer.maximumTypeNameBytes) bytes of printable ASCII, and a size below 2^53"))
        }
        guard Set(types.map(\.name)).count == types.count else {
            return .failure(LocalError(.badRequest, "a type is offered twice"))
        }
        if let large = types.first(where: { $0.size > configuration.clipboardSizeLimit }) {
            return .failure(LocalError(.notAllowed, "'\(large.name)' is \(large.size) bytes, over this device's clipboard size limit of \(configuration.clipboardSizeLimit) bytes (--clipboard-size-limit)"))
        }
        guard let offer = await copied(types.map { ClipboardType(name: $0.name, size: $0.size) }, content: .provided(session: session.id)) else {
            return .failure(Self.clipboardOff)
        }
        var reply = LocalReply()
        reply.clipboard = localClipboard(.local(offer))
        return reply
    }

    /// Asks the provider `session` for `type`'s bytes, which go to `sink`; it has
    /// `providerDeadline` to begin, or the paste fails.
    func readProvided(_ session: UUID, _ type: ClipboardType, into sink: ClipboardSink) async {
        guard let peer = sessions[session]?.peer else {
            return await sink.finish("the clipboard's provider on '\(deviceName)' went away")
        }
        let read = UUID.random()
        let deadline = Self.providerDeadline
        let timer = LoopTimer(after: deadline) { [weak self] in
            self?.tasks.start("clipboard read deadline") {
                await self?.endRead(read, failure: "the clipboard's provider on '\(self?.deviceName ?? "the other device")' did not answer within \(deadline)")
            }
        }
        clipboardReads[read] = ClipboardRead(session: session, type: type, sink: sink, deadline: timer)
        peer.send(.clipboardRequest(read: read, clipboardType: type.name, size: type.size))
    }

    /// Ends a read that has not begun, with `failure`.
    func endRead(_ read: UUID, failure: String) async {
        guard let pending = clipboardReads.removeValue(forKey: read) else { return }
        pending.deadline.cancel()
        logger.notice("a paste of this device's clipboard failed: \(failure)")
        await pending.sink.finish(failure)
    }

    /// The provider's connection for `read` arrived: the read is its, if it comes from the
    /// provider's process.
    func takeRead(_ read: UUID, pid: Int32) -> Result<ClipboardRead, LocalError> {
        guard let pending = clipboardReads[read], let session = sessions[pending.session] else {
            return .failure(LocalError(.notFound, "no paste \(read) waits for this provider: it was answered, refused, or timed out"))
        }
        guard session.peer.pid == pid else {
            return .failure(LocalError(.notAllowed, "process \(pid) is not the clipboard's provider (process \(session.peer.pid))"))
        }
        clipboardReads[read] = nil
        pending.deadline.cancel()
        return .success(pending)
    }

    /// A session ended: if it provided this device's copy, the copy is no longer offered, and
    /// the pastes waiting for it fail.
    func clipboardSessionEnded(_ session: UUID) {
        clipboardWatchers[session] = nil
        for (read, pending) in clipboardReads where pending.session == session {
            tasks.start("clipboard provider gone") { await self.endRead(read, failure: "the clipboard's provider on '\(self.deviceName)' went away") }
        }
        guard case .provided(session: session)? = clipboardBoard.local?.content else { return }
        _ = clipboardBoard.dropLocal()
        logger.info("the clipboard's provider went away: the copy is no longer offered")
        clipboardChanged()
        tasks.start("clipboard withdrawn") { await self.announceClipboard() }
    }

    /// Serves a connection that opens with `provideClipboard`: its data frames are the bytes
    /// the read asked for, held to the size offered, then its end.
    nonisolated func serveProvided(
        _ client: LocalStreamClient, version: Int, read: UUID, _ inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator,
        _ outbound: NIOAsyncChannelOutboundWriter<Frame>
    ) async {
        guard version == LocalMessage.version else {
            try? await outbound.write(LocalMessage.reply(request: client.request, .failure(LocalError(.badRequest, "this agent speaks local API version \(LocalMessage.version), the client \(version)"))).frame)
            return
        }
        let pending: ClipboardRead
        switch await takeRead(read, pid: client.pid) {
        case .failure(let error):
            try? await outbound.write(LocalMessage.reply(request: client.request, .failure(error)).frame)
            return
        case .success(let taken):
            pending = taken
        }
        guard (try? await outbound.write(LocalMessage.reply(request: client.request, LocalReply()).frame)) != nil else {
            return await pending.sink.finish("the clipboard's provider went away")
        }
        await relaying(+1)
        await Self.relay(pending, from: &inbound, answering: outbound)
        await relaying(-1)
    }

    /// Carries what the provider sends to the paste's sink, held to the size offered.
    static func relay(
        _ pending: ClipboardRead, from inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator, answering outbound: NIOAsyncChannelOutboundWriter<Frame>
    ) async {
        let size = pending.type.size
        var sent: UInt64 = 0
        do {
            while let frame = try await inbound.next() {
                switch frame.kind {
                case LocalStreamFrame.data:
                    sent += UInt64(frame.payload.count)
                    guard sent <= size else {
                        try? await outbound.write(failedFrame("more than the \(size) bytes offered"))
                        return await pending.sink.finish("the clipboard's provider sent more than the \(size) bytes it offered")
                    }
                    do {
                        try await pending.sink.write(frame.payload)
                    } catch {
                        // The paste ended on the other side: the provider hears it.
                        try? await outbound.write(failedFrame("the paste ended: \(error)"))
                        return await pending.sink.finish("the paste ended: \(error)")
                    }
                case LocalStreamFrame.end:
                    guard sent == size else {
                        return await pending.sink.finish("the clipboard's provider sent \(sent) of the \(size) bytes it offered")
                    }
                    await pending.sink.finish(nil)
                    try? await outbound.write(Frame(kind: LocalStreamFrame.end, payload: []))
                    return await awaitClose(&inbound)
                default:
                    return await pending.sink.finish("the clipboard's provider sent a frame of kind \(frame.kind)")
                }
            }
        } catch {}
        await pending.sink.finish("the clipboard's provider closed its connection before the end")
    }

    // MARK: Offers of the account's devices

    /// A beacon of `device` said what it offers (or that it offers nothing).
    func clipboardHeard(_ device: NearbyDevice) {
        guard memberFingerprints[device.sender] != nil else { return }
        let offer = configuration.clipboard ? device.clipboard : nil
        guard clipboardBoard.heard(device.sender, offer: offer, sent: device.sent, now: .now) else { return }
        if let offer {
            logger.info("'\(memberName(device.sender))' offers its clipboard", metadata: ["types": "\(offer.types.map(\.name).joined(separator: ", "))"])
        }
        clipboardChanged()
    }

    func clipboardGone(_ device: UUID) {
        if clipboardBoard.gone(device) { clipboardChanged() }
    }

    /// The clipboard here may have changed: its watchers hear of a change, and the timer looks
    /// again when the next offer expires.
    func clipboardChanged() {
        let current = configuration.clipboard ? clipboardBoard.current(now: .now, me: identity.id) : nil
        if current != clipboardTold {
            clipboardTold = current
            let told = current.map(localClipboard)
            for watcher in clipboardWatchers.values { watcher.peer.send(.clipboardChanged(told)) }
        }
        clipboardTimer?.cancel()
        clipboardTimer = nil
        let now = ContinuousClock.now
        guard let next = clipboardBoard.nextExpiry(now: now) else { return }
        clipboardTimer = LoopTimer(after: next - now + .milliseconds(1)) { [weak self] in
            self?.tasks.start("clipboard expiry") { await self?.clipboardExpired() }
        }
    }

    /// An offer expired: this device's own copy is dropped, and its beacons stop carrying it.
    func clipboardExpired() async {
        if clipboardBoard.local != nil, clipboardBoard.localOffer(now: .now) == nil {
            removeClipboardContent(clipboardBoard.dropLocal())
            logger.info("the clipboard's offer expired")
            await announceClipboard()
        }
        clipboardChanged()
    }

    /// The clipboard a paste here would paste, as the local API shows it.
    func localClipboard() -> LocalClipboard? {
        guard configuration.clipboard, let current = clipboardBoard.current(now: .now, me: identity.id) else { return nil }
        return localClipboard(current)
    }

    func localClipboard(_ current: ClipboardBoard.Current) -> LocalClipboard {
        let offer = current.offer
        let now = ContinuousClock.now
        let device: UUID
        let expires: ContinuousClock.Instant
        switch current {
        case .local:
            device = identity.id
            expires = clipboardBoard.local?.expires ?? now
        case .remote(let remote):
            device = remote.device
            expires = remote.expires
        }
        let local = device == identity.id
        return LocalClipboard(
            device: device, deviceName: local ? deviceName : memberName(device), local: local, generation: offer.generation,
            copiedAt: offer.copiedAt, expires: Date().addingTimeInterval((expires - now).seconds),
            types: offer.types.map { LocalClipboardType(name: $0.name, size: $0.size) })
    }

    // MARK: Pasting here

    /// Serves a connection that opens with `paste`: the reply names the clipboard and the type
    /// pasted, then its bytes follow and an end. Bytes past the size the type was offered with,
    /// or fewer, end the paste with a failure instead of its end: a client writes what it got
    /// only once the end came.
    nonisolated func servePaste(
        _ client: LocalStreamClient, version: Int, type: String?, _ inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator,
        _ outbound: NIOAsyncChannelOutboundWriter<Frame>
    ) async {
        guard version == LocalMessage.version else {
            try? await outbound.write(LocalMessage.reply(request: client.request, .failure(LocalError(.badRequest, "this agent speaks local API version \(LocalMessage.version), the client \(version)"))).frame)
            return
        }
        let prepared = await preparePaste(type)
        guard case .success(let (clipboard, pasting, source)) = prepared else {
            if case .failure(let error) = prepared { try? await outbound.write(LocalMessage.reply(request: client.request, .failure(error)).frame) }
            return
        }
        var reply = LocalReply()
        reply.clipboard = clipboard
        reply.pasting = LocalClipboardType(name: pasting.name, size: pasting.size)
        guard (try? await outbound.write(LocalMessage.reply(request: client.request, reply).frame)) != nil else {
            if case .stream(let stream) = source { stream.close() }
            if case .file(let handle) = source { try? handle.close() }
            return
        }
        await relaying(+1)
        switch source {
        case .file(let handle):
            await Self.paste(from: handle, size: pasting.size, to: outbound)
        case .bytes(let bytes):
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + LocalStreamFrame.maximumData)
                guard (try? await outbound.write(Frame(kind: LocalStreamFrame.data, payload: Array(bytes[offset..<end])))) != nil else { break }
                offset = end
            }
            if offset == bytes.count { try? await outbound.write(Frame(kind: LocalStreamFrame.end, payload: [])) }
        case .provided(let session):
            // The provider's connection writes the bytes here, as they come.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let sink = ClipboardSink(
                    write: { bytes in try await outbound.write(Frame(kind: LocalStreamFrame.data, payload: bytes)) },
                    finish: { failure in
                        try? await outbound.write(failure.map(Self.failedFrame) ?? Frame(kind: LocalStreamFrame.end, payload: []))
                        done.resume()
                    })
                // A stopping agent starts nothing: the paste ends without its end.
                if !tasks.start("paste what the provider sends", { await self.readProvided(session, pasting, into: sink) }) { done.resume() }
            }
        case .stream(let stream):
            await Self.paste(from: stream, size: pasting.size, device: clipboard.deviceName) { try await outbound.write($0) }
        }
        await relaying(-1)
        await Self.awaitClose(&inbound)
    }

    /// Waits for the client to close its connection, having read the last frame: closing
    /// from this side first would drop what the socket has not taken yet.
    static func awaitClose(_ inbound: inout NIOAsyncChannelInboundStream<Frame>.AsyncIterator) async {
        while (try? await inbound.next()) != nil {}
    }

    /// What a paste of `wanted` (nil: the first text type) pastes, and from where.
    func preparePaste(_ wanted: String?) async -> Result<(LocalClipboard, ClipboardType, PasteSource), LocalError> {
        busy()
        guard configuration.clipboard else { return .failure(Self.clipboardOff) }
        let now = ContinuousClock.now
        guard let current = clipboardBoard.current(now: now, me: identity.id) else {
            return .failure(LocalError(.notFound, "nothing to paste: no device of the account offers a copy (a copy is offered for \(configuration.clipboardLifetime) after it is made)"))
        }
        let clipboard = localClipboard(current)
        guard let type = ClipboardBoard.pasteType(wanted, in: current.offer) else {
            return .failure(LocalError(.notFound, "the copy made on '\(clipboard.deviceName)' has no type '\(wanted ?? "")'; it has \(current.offer.types.map { "'\($0.name)'" }.joined(separator: ", "))"))
        }
        guard type.size <= configuration.clipboardSizeLimit else {
            return .failure(LocalError(
                .notAllowed, "the copy made on '\(clipboard.deviceName)' is \(type.size) bytes as '\(type.name)', over this device's clipboard size limit of \(configuration.clipboardSizeLimit) bytes (--clipboard-size-limit)"))
        }
        switch current {
        case .local(let offer):
            switch clipboardBoard.servable(generation: offer.generation, type: type.name, now: now) {
            case .failure(let refusal):
                return .failure(LocalError(.notFound, "this device's copy cannot be pasted: \(refusal)"))
            case .success(let (_, .provided(session))):
                return .success((clipboard, type, .provided(session: session)))
            case .success(let (_, .held(files))):
                guard let file = files[type.name] else { return .failure(LocalError(.notFound, "this device's copy has no type '\(type.name)'")) }
                do {
                    return .success((clipboard, type, .file(try FileHandle(forReadingFrom: file))))
                } catch {
                    return .failure(LocalError(.failed, "cannot read this device's copy at \(file.path): \(error)"))
                }
            }
        case .remote(let remote):
            let name = memberName(remote.device)
            guard let device = await discovery?.nearby.first(where: { $0.sender == remote.device }) else {
                return .failure(LocalError(.continuation, code: ContinuationFailure.Code.connectionUnavailable, "'\(name)', which offered the copy, is no longer nearby"))
            }
            // A link kept open since an earlier use may have ended unseen (`againIfEnded`): a
            // paste that fails on it because it ended is made once more, on a new link.
            let kept = openLinkNow(to: device)
            let pasted = await pasteRemote(remote, as: type, of: clipboard, from: device, name: name)
            if case .failure = pasted, let kept, !kept.isOpen {
                logger.info("the link to '\(name)' had ended; pasting again on another")
                return await pasteRemote(remote, as: type, of: clipboard, from: device, name: name)
            }
            return pasted
        }
    }

    /// A paste of `type` of another device's copy, on the device's link (open, or opened).
    private func pasteRemote(
        _ remote: ClipboardBoard.Remote, as type: ClipboardType, of clipboard: LocalClipboard, from device: NearbyDevice, name: String
    ) async -> Result<(LocalClipboard, ClipboardType, PasteSource), LocalError> {
        let link: any OutgoingLink
        switch await openLink(to: device) {
        case .success(let open): link = open
        case .failure(let failure): return .failure(LocalError(.continuation, code: failure.code, failure.message))
        }
        if ClipboardFiles.listTypes.contains(type.name) {
            return await pasteFiles(of: remote.offer.generation, as: type.name, from: link, name: name).map { bytes in
                (clipboard, ClipboardType(name: type.name, size: UInt64(bytes.count)), .bytes(bytes))
            }
        }
        switch await link.openStream(.clipboard(generation: remote.offer.generation, type: type.name), deadline: configuration.fetchDeadline) {
        case .success(let stream):
            // This side sends nothing on a paste's stream.
            stream.finish()
            logger.info("pasting the clipboard of '\(name)'", metadata: ["type": "\(type.name)", "bytes": "\(type.size)"])
            return .success((clipboard, type, .stream(stream)))
        case .failure(let failure):
            logger.notice("'\(name)' did not give its clipboard: \(failure.message)")
            return .failure(LocalError(.continuation, code: failure.code, "'\(name)' did not give its clipboard: \(failure.message)"))
        }
    }

    /// Sends this device's copy to a paste here.
    static func paste(from handle: FileHandle, size: UInt64, to outbound: NIOAsyncChannelOutboundWriter<Frame>) async {
        defer { try? handle.close() }
        var sent: UInt64 = 0
        do {
            while let chunk = try handle.read(upToCount: LocalStreamFrame.maximumData), !chunk.isEmpty {
                sent += UInt64(chunk.count)
                try await outbound.write(Frame(kind: LocalStreamFrame.data, payload: Array(chunk)))
            }
        } catch {
            try? await outbound.write(failedFrame("the copy could not be read: \(error)"))
            return
        }
        guard sent == size else {
            try? await outbound.write(failedFrame("the copy holds \(sent) bytes, not the \(size) it was offered with"))
            return
        }
        try? await outbound.write(Frame(kind: LocalStreamFrame.end, payload: []))
    }

    /// Relays another device's copy to a paste here, holding it to the size it was offered with.
    static func paste(from stream: LinkStream, size: UInt64, device: String, to write: (Frame) async throws -> Void) async {
        defer { stream.close() }
        var received: UInt64 = 0
        for await event in stream.events {
            switch event {
            case .data(let bytes):
                received += UInt64(bytes.count)
                guard received <= size else {
                    stream.reset("more bytes than the \(size) offered")
                    try? await write(failedFrame("'\(device)' sent more than the \(size) bytes it offered: the paste is dropped"))
                    return
                }
                do {
                    try await write(Frame(kind: LocalStreamFrame.data, payload: bytes))
                } catch {
                    stream.reset("the paste's client went away")
                    return
                }
                stream.consumed(bytes.count)
            case .end:
                guard received == size else {
                    try? await write(failedFrame("'\(device)' sent \(received) of the \(size) bytes it offered: the paste is dropped"))
                    return
                }
                try? await write(Frame(kind: LocalStreamFrame.end, payload: []))
                return
            case .stop:
                continue
            case .failed(let reason):
                try? await write(failedFrame("the paste from '\(device)' failed: \(reason)"))
                return
            }
        }
        try? await write(failedFrame("the paste from '\(device)' ended early"))
    }

    // MARK: Serving another device's paste

    /// A device of the account pastes type `type` of this device's copy `generation`: the
    /// bytes go on `stream`, then its end. Nil when they do; else why not.
    func acceptPaste(generation: UInt64, type: String, _ stream: LinkStream, from peer: LinkPeer) async -> ContinuationFailure? {
        busy()
        if configuration.clipboard, type == ClipboardFiles.manifestType || ClipboardFiles.fileIndex(type) != nil {
            return await acceptFilesPaste(generation: generation, type: type, stream)
        }
        let refusal: ClipboardRefusal
        if configuration.clipboard {
            switch clipboardBoard.servable(generation: generation, type: type, now: .now) {
            case .success(let (offered, .provided(session))):
                stream.accept()
                logger.info("sending the clipboard from its provider", metadata: ["type": "\(type)", "bytes": "\(offered.size)"])
                let sink = ClipboardSink(
                    write: { bytes in try await stream.write(bytes) },
                    finish: { failure in
                        if let failure { stream.reset(failure) } else { stream.finish() }
                    })
                await readProvided(session, offered, into: sink)
                return nil
            case .success(let (offered, .held(files))):
                guard let file = files[type] else { refusal = .typeNotOffered(type, offered: []); break }
                let handle: FileHandle
                do {
                    handle = try FileHandle(forReadingFrom: file)
                } catch {
                    return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "'\(deviceName)' cannot read its copy: \(error)")
                }
                logger.info("sending the clipboard", metadata: ["type": "\(type)", "bytes": "\(offered.size)"])
                return acceptSending(handle, on: stream)
            case .failure(let why):
                refusal = why
            }
        } else {
            refusal = .off
        }
        logger.notice("a paste was refused: \(refusal)")
        return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "'\(deviceName)' did not give its clipboard: \(refusal)")
    }

    /// Accepts `stream` and sends the file on it in a task of its own (reset if the agent is
    /// stopping and starts nothing).
    func acceptSending(_ handle: FileHandle, on stream: LinkStream) -> ContinuationFailure? {
        stream.accept()
        relaying(+1)
        let started = tasks.start("send a file of the clipboard") {
            await Self.send(handle, on: stream)
            self.relaying(-1)
        }
        if !started {
            try? handle.close()
            relaying(-1)
            stream.reset("'\(deviceName)' is stopping")
        }
        return nil
    }

    /// Writes the file on the stream, as the reader's credit allows, then ends it.
    static func send(_ handle: FileHandle, on stream: LinkStream) async {
        defer { try? handle.close() }
        do {
            while let chunk = try handle.read(upToCount: LinkMessage.maximumStreamChunk), !chunk.isEmpty {
                try await stream.write(Array(chunk))
            }
            stream.finish()
        } catch {
            stream.reset("the copy could not be read or sent: \(error)")
        }
    }
}
