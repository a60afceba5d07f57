import Foundation
import HandoffLocalAPI
import Synchronization

/// A pair of continuation streams carried by a stream connection to the agent
/// (`LocalStreamSocket`): what the other app writes arrives through a bounded pipe that one
/// reader thread fills, so a slow reader here stops that thread, the socket fills, and the
/// agents stop granting the other app credit; writes go straight to the socket and block
/// while the agent is behind.
package final class SocketStreams: Sendable {
    private let socket: LocalStreamSocket
    private let incoming = StreamPipe(capacity: 256 * 1024)
    private let state = Mutex(State())
    /// Where an end (`E`, `S`) waits when a write is blocked on a full socket, so that closing a
    /// stream never blocks the caller; ends go in the order they were made, after the data.
    private let ends = DispatchQueue(label: "handoff.continuation-stream.ends")

    private struct State {
        var inputClosed = false
        var outputClosed = false
        /// Why writing fails now: the other side stopped reading, or the stream failed.
        var writeFailure: CocoaError?
        /// Told when writing starts failing (the output stream's events).
        var onFailure: (@Sendable () -> Void)?
        /// Ends queued behind a blocked write.
        var endsWaiting = 0
    }

    private init(socket: LocalStreamSocket) {
        self.socket = socket
    }

    /// The streams of `socket`, with a reader thread started for them.
    package static func pair(_ socket: LocalStreamSocket) -> StreamPair {
        let streams = SocketStreams(socket: socket)
        let thread = Thread { streams.readLoop() }
        thread.name = "handoff-continuation-stream"
        thread.start()
        return StreamPair(
            input: PipeInputStream(streams.incoming) { streams.closeInput() },
            output: SocketOutputStream(streams))
    }

    /// Opens the streams of a continuation this app received, through the agent at `path`.
    /// Returns once the originating app took them.
    package static func open(path: String, continuation: UUID) async throws(ContinuationFailure) -> StreamPair {
        let socket = try await connect(path: path, .openStream(version: LocalMessage.version, continuation: continuation))
        return pair(socket)
    }

    /// Connects on a thread of its own: the answer waits for the other device's app.
    static func connect(path: String, _ call: LocalCall) async throws(ContinuationFailure) -> LocalStreamSocket {
        let result: Result<LocalStreamSocket, LocalError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                do throws(LocalError) {
                    continuation.resume(returning: .success(try LocalStreamSocket.open(path: path, call: call)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
            thread.name = "handoff-stream-connect"
            thread.start()
        }
        switch result {
        case .success(let socket):
            return socket
        case .failure(let error):
            if let code = error.code { throw ContinuationFailure(code: CocoaError.Code(rawValue: code), message: error.message) }
            if error.kind == .notFound && error.message.contains("no Handoff agent") { throw .connectionUnavailable(error.message) }
            throw .handoffFailed(error.message)
        }
    }

    private func readLoop() {
        defer {
            incoming.closeWriter(failure: CocoaError.handoff(.userActivityConnectionUnavailable, "the connection to the Handoff agent ended before the stream did"))
            fail(CocoaError.handoff(.userActivityConnectionUnavailable, "the connection to the Handoff agent ended"))
            socket.close()
        }
        while true {
            let kind: UInt8
            let length: Int
            do {
                guard let header = try socket.readHeader() else { return }
                (kind, length) = header
                // Data goes from the socket straight into the pipe, as room is made in it.
                if kind == LocalStreamFrame.data {
                    try receiveData(length)
                    continue
                }
            } catch {
                incoming.closeWriter(failure: CocoaError.handoff(.userActivityConnectionUnavailable, error.message))
                return
            }
            let payload: [UInt8]
            do {
                payload = try socket.readPayload(length)
            } catch {
                incoming.closeWriter(failure: CocoaError.handoff(.userActivityConnectionUnavailable, error.message))
                return
            }
            switch kind {
            case LocalStreamFrame.end:
                incoming.closeWriter()
            case LocalStreamFrame.stop:
                fail(CocoaError.handoff(.userActivityHandoffFailed, "the app on the other device closed its input stream"))
            case LocalStreamFrame.failed:
                let reason = String(decoding: payload, as: UTF8.self)
                let error = CocoaError.handoff(.userActivityConnectionUnavailable, reason)
                incoming.closeWriter(failure: error)
                fail(error)
            default:
                continue
            }
        }
    }

    /// Reads `length` bytes of data into the pipe as the app makes room; once the app closed
    /// its input, the rest is read and dropped.
    private func receiveData(_ length: Int) throws(LocalError) {
        var left = length
        var failure: LocalError?
        while left > 0 {
            var read = 0
            let filled = incoming.fill(upTo: left) { free in
                do throws(LocalError) {
                    read = try socket.readSome(into: free)
                } catch {
                    failure = error
                }
                return read
            }
            if let failure { throw failure }
            left -= read
            if filled < 0 {
                _ = try socket.readPayload(left)
                return
            }
        }
    }

    private func fail(_ error: CocoaError) {
        let tell = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.writeFailure == nil else { return nil }
            state.writeFailure = error
            return state.onFailure
        }
        tell?()
    }

    func observeFailure(_ change: @escaping @Sendable () -> Void) {
        state.withLock { $0.onFailure = change }
    }

    var writeFailure: CocoaError? { state.withLock { $0.writeFailure } }

    func write(_ bytes: UnsafeRawBufferPointer) -> CocoaError? {
        if let failure = writeFailure { return failure }
        var offset = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, LocalStreamFrame.maximumData)
            do {
                try socket.write(kind: LocalStreamFrame.data, bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]))
            } catch {
                let failure = writeFailure ?? CocoaError.handoff(.userActivityConnectionUnavailable, error.message)
                fail(failure)
                return failure
            }
            offset += count
        }
        return nil
    }

    func closeInput() {
        let (first, both) = state.withLock { state in
            defer { state.inputClosed = true }
            return (!state.inputClosed, state.outputClosed)
        }
        guard first else { return }
        sendEnd(LocalStreamFrame.stop, last: both)
    }

    func closeOutput() {
        let (first, both) = state.withLock { state in
            defer { state.outputClosed = true }
            return (!state.outputClosed, state.inputClosed)
        }
        guard first else { return }
        sendEnd(LocalStreamFrame.end, last: both)
    }

    /// Sends an end at once when nothing blocks the socket, else in the background; after the
    /// last one, the connection is shut down (the reader thread then releases it).
    private func sendEnd(_ kind: UInt8, last: Bool) {
        // At once when no write is blocked and no end waits (so an app that exits right after
        // closing has sent it); else after them, in order.
        let sentNow = state.withLock { state -> Bool in
            guard state.endsWaiting == 0, socket.writeIfIdle(kind: kind) else {
                state.endsWaiting += 1
                return false
            }
            return true
        }
        if sentNow {
            if last { socket.shutdown() }
            return
        }
        ends.async { [self] in
            try? socket.write(kind: kind)
            if last { socket.shutdown() }
            state.withLock { $0.endsWaiting -= 1 }
        }
    }
}

/// The writing end of a continuation stream, as a Foundation `OutputStream`: `write` blocks
/// while the other side is behind, and fails once it closed its input or the stream failed.
package final class SocketOutputStream: OutputStream {
    private let streams: SocketStreams?
    private let status = Mutex<Stream.Status>(.notOpen)
    private let events: StreamEvents

    init(_ streams: SocketStreams) {
        self.streams = streams
        events = StreamEvents { [weak streams] in streams?.writeFailure == nil ? .hasSpaceAvailable : .errorOccurred }
        super.init(toMemory: ())
        events.attach(self)
        streams.observeFailure { [events] in events.signal() }
    }

    /// A stream let go of without `close` is closed, as Foundation's are.
    deinit {
        streams?.closeOutput()
    }

    /// Foundation requires this initializer; a stream made this way is not connected, so
    /// every write fails.
    package required init(toMemory: ()) {
        streams = nil
        events = StreamEvents { nil }
        super.init(toMemory: ())
    }

    override package var delegate: (any StreamDelegate)? {
        get { events.delegate }
        set { events.delegate = newValue }
    }

    override package func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.schedule(in: aRunLoop, forMode: mode)
    }

    override package func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.remove(from: aRunLoop, forMode: mode)
    }

    private func setState(_ new: Stream.Status) {
        status.withLock { if $0 != .closed { $0 = new } }
    }

    override package func open() {
        setState(.open)
        events.opened()
    }

    override package func close() {
        events.closed()
        streams?.closeOutput()
        status.withLock { $0 = .closed }
    }

    override package var streamStatus: Stream.Status {
        status.withLock { $0 }
    }

    override package var streamError: (any Error)? { streams?.writeFailure }

    override package var hasSpaceAvailable: Bool { streams.map { $0.writeFailure == nil } ?? false }

    override package func write(_ buffer: UnsafePointer<UInt8>, maxLength len: Int) -> Int {
        guard len > 0 else { return 0 }
        guard let streams, streamStatus != .closed else { return -1 }
        defer { events.used() }
        if streams.write(UnsafeRawBufferPointer(start: buffer, count: len)) != nil {
            setState(.error)
            return -1
        }
        return len
    }
}
