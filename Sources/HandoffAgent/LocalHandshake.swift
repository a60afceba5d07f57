import Foundation
import HandoffLocalAPI

/// The first exchange on a local connection, before the connection is served: it binds the
/// client's identity to the process that connected, so that nothing that process does later
/// (forking, passing the socket on, running another executable) changes who the agent serves.
///
/// ```
///   readingFirst ──first frame is hello (this version)──▶ challenged ──proof, written by the
///        │                                                   │          connecting process──▶ done
///        └──any other first frame──────────────────────────────────────────────────────────▶ done
///   (a frame from another process, a wrong or missing proof, an oversized frame: refused)
/// ```
///
/// After an app's `hello` the agent reads the connecting process's executable and only then
/// sends a fresh nonce (to a control client, which is never taken for an app, at once) (`prove`); the client answers `proof` with it. The kernel names the process that
/// wrote each byte (`SCM_CREDENTIALS`), and the proof must come from the process that
/// connected. So the proof was written after the executable was read, by that process: if it
/// ran the installed app then, the app's own code wrote it. A process that connects and then
/// execs the app, keeping the socket in a child or passing it on, cannot answer: the app does
/// not, and any other process is not the one that connected.
///
/// Pure: the acceptor reads the bytes, sends `prove` and hands the connection on as told.
struct LocalHandshake: Sendable {
    enum State: Sendable, Equatable {
        case readingFirst
        case challenged(hello: Frame, request: UInt64, nonce: Data)
        case done
    }

    enum Step: Sendable, Equatable {
        /// Read `wanted` more bytes.
        case needMore
        /// The first frame is `hello` from a client in `role`: for an app, read the executable;
        /// then send `prove` with a nonce and call `challenged(nonce:)`.
        case challenge(role: LocalRole)
        /// Serve the connection, starting with `first`.
        case serve(first: Frame)
        /// Refuse the connection, answering request `request` (of hello) with `reason`.
        case refuse(reason: String, request: UInt64)
    }

    private(set) var state: State = .readingFirst
    /// The process that connected, from the socket's peer credentials.
    let connectedPID: Int32
    let maximumFrame: Int
    private var buffer: [UInt8] = []

    init(connectedPID: Int32, maximumFrame: Int = 64 * 1024) {
        self.connectedPID = connectedPID
        self.maximumFrame = maximumFrame
    }

    /// How many bytes to read next. Reads never go past the frame at hand, so whatever the
    /// client sent after it stays in the socket for the connection's own reader.
    var wanted: Int {
        guard buffer.count >= Frame.headerSize else { return Frame.headerSize - buffer.count }
        return Frame.headerSize + declaredLength - buffer.count
    }

    private var declaredLength: Int { (0..<4).reduce(0) { $0 << 8 | Int(buffer[$1]) } }

    /// Takes bytes read from the socket, with the process the kernel says wrote them (nil when
    /// the bytes carry no credentials: sent before the agent asked for them).
    mutating func received(_ bytes: some Collection<UInt8>, writtenBy writer: Int32?) -> Step {
        if case .done = state { return .needMore }
        var request: UInt64 = 1
        if case .challenged(_, let hello, _) = state {
            request = hello
            guard writer != nil else {
                state = .done
                return .refuse(reason: "the answer to the agent's challenge carried no sender; the connection is refused", request: request)
            }
        }
        if let writer, writer != connectedPID {
            state = .done
            return .refuse(
                reason: "process \(writer) wrote on a connection that process \(connectedPID) made; a connection to the agent cannot be handed to another process",
                request: request)
        }
        buffer.append(contentsOf: bytes)
        guard buffer.count >= Frame.headerSize else { return .needMore }
        guard declaredLength <= maximumFrame else {
            state = .done
            return .refuse(reason: "the first message declares \(declaredLength) bytes, over the \(maximumFrame) a first message may have", request: 0)
        }
        guard buffer.count == Frame.headerSize + declaredLength else { return .needMore }
        let frame = Frame(kind: buffer[4], payload: Array(buffer[Frame.headerSize...]))
        buffer = []
        switch state {
        case .readingFirst:
            guard frame.kind == LocalMessage.frameKind,
                case .call(let request, .hello(let version, let role, _))? = try? LocalMessage(frame: frame), version == LocalMessage.version
            else {
                // Stream connections, other versions and nonsense are for the server to answer.
                state = .done
                return .serve(first: frame)
            }
            state = .challenged(hello: frame, request: request, nonce: Data())
            return .challenge(role: role)
        case .challenged(let hello, _, let nonce):
            state = .done
            guard frame.kind == LocalMessage.frameKind, case .proof(let answered)? = try? LocalMessage(frame: frame) else {
                return .refuse(reason: "after hello the agent asked for 'proof' with its nonce (local API version \(LocalMessage.version)); the client sent something else", request: request)
            }
            guard !nonce.isEmpty, answered == nonce else {
                return .refuse(reason: "the proof does not carry the nonce the agent sent", request: request)
            }
            return .serve(first: hello)
        case .done:
            return .needMore
        }
    }

    /// The acceptor read the executable and sent `prove` with `nonce`.
    mutating func challenged(nonce: Data) {
        guard case .challenged(let hello, let request, _) = state else { return }
        state = .challenged(hello: hello, request: request, nonce: nonce)
    }
}
