import Foundation
import HandoffLocalAPI
import Synchronization

struct ClipboardServiceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The session's side of the account's clipboard: it offers what apps here copy (read once, at
/// the copy, and kept: the snapshot that answers a paste, also after the app went away) and asks
/// the agent for another device's copy when an app here pastes it. See docs/clipboard.md.
final class ClipboardService: Sendable {
    let socket: String
    let sizeLimit: UInt64
    let verbose: Bool
    private let snapshot = Mutex<[String: [UInt8]]>([:])
    private let connection = Mutex<LocalClient?>(nil)
    /// Where the agent's other messages go (system activities: fetches and deliveries).
    let others = Mutex<(@Sendable (LocalMessage) -> Void)?>(nil)

    init(socket: String, sizeLimit: UInt64, verbose: Bool) {
        self.socket = socket
        self.sizeLimit = sizeLimit
        self.verbose = verbose
    }

    var client: LocalClient {
        guard let client = connection.withLock({ $0 }) else { exit("not connected to the agent") }
        return client
    }

    /// Connects to the agent and hears of its clipboard; what it says goes to `changed`.
    /// `session` names the clipboard served, for the agent's doctor; nil serves no clipboard
    /// (the connection then carries the documents' messages only).
    func connect(session: String?, _ changed: @escaping @Sendable (LocalClipboard?) -> Void) throws {
        let client = try LocalClient(
            path: socket, role: .control,
            onMessage: { [self] message in
                switch message {
                case .clipboardChanged(let clipboard): changed(clipboard)
                case .clipboardRequest(let read, let type, let size): serve(read, type: type, size: size)
                default: others.withLock { $0 }?(message)
                }
            },
            onClose: { [self] reason in exit("the agent closed the connection: \(reason)") })
        connection.withLock { $0 = client }
        guard let session else { return }
        let current = blocking { await Self.call(client, .watchClipboard(session: session)) }
        if let error = current.error { throw ClipboardServiceError(error.message) }
        changed(current.clipboard)
    }

    /// How long an app that copied has to answer each read: then it is taken as not answering.
    static let readTimeout: Int32 = 1000

    /// What reading one type of an app's copy gave.
    enum Read {
        case read([UInt8])
        case refused
        case timedOut
        case overLimit

        /// What a backend's read gave: its result (0 read, 2 timed out, 3 over the limit, else
        /// refused) and, when read, the bytes (freed by the caller).
        init(result: Int32, bytes: UnsafeMutablePointer<UInt8>?, length: Int) {
            switch result {
            case 0: self = .read(bytes.map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? [])
            case 2: self = .timedOut
            case 3: self = .overLimit
            default: self = .refused
            }
        }
    }

    /// An app here copied, offering `targets` (nil: it did not say within the read timeout):
    /// reads the chosen types with `read` and offers them to the account; never what a password
    /// manager marks secret.
    func copied(targets: [String]?, read: (_ type: String, _ limit: Int) -> Read) {
        guard let targets else {
            log("the app that copied did not say what it offers within \(Self.readTimeout) ms: nothing is offered")
            return withdraw()
        }
        if let hint = ClipboardTypes.secretHint(in: targets) {
            var secret = true
            if hint == ClipboardTypes.kdeHint, case .read(let value) = read(hint, 4096) {
                secret = String(decoding: value, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "secret"
            }
            if secret {
                log("the copy is marked secret (\(hint)): it is not offered")
                return withdraw()
            }
        }
        var snapshot = Snapshot(types: [])
        for (name, offeredAs) in ClipboardTypes.chosen(from: targets) {
            switch read(name, Int(sizeLimit)) {
            case .read(let bytes): snapshot.types.append((offeredAs, bytes))
            case .timedOut: log("the app that copied did not give '\(name)' within \(Self.readTimeout) ms: it is not offered")
            case .overLimit: log("'\(name)' is over the size limit: it is not offered")
            case .refused: log("the app that copied refused '\(name)': it is not offered")
            }
        }
        guard !snapshot.types.isEmpty else { return withdraw() }
        offer(snapshot)
    }

    /// Whether another device's copy is to become this session's clipboard: a copy not held yet,
    /// made after an app here last copied (an older one would replace what the person copied
    /// since, a password say).
    func shouldHold(_ clipboard: LocalClipboard, holding owned: LocalClipboard?, lastLocalCopy: Date) -> Bool {
        guard clipboard.generation != owned?.generation || clipboard.device != owned?.device else { return false }
        guard clipboard.copiedAt > lastLocalCopy else {
            log("not holding the copy made on '\(clipboard.deviceName)': an app here copied since")
            return false
        }
        return true
    }

    /// What was read from the app that copied: each type's bytes.
    struct Snapshot: Sendable {
        var types: [(name: String, bytes: [UInt8])]
    }

    /// Offers what an app here copied.
    func offer(_ copied: Snapshot) {
        snapshot.withLock { held in
            held = [:]
            for (name, bytes) in copied.types { held[name] = bytes }
        }
        let types = copied.types.map { LocalClipboardType(name: $0.name, size: UInt64($0.bytes.count)) }
        let reply = blocking { [client] in await Self.call(client, .offerClipboard(types: types)) }
        if let error = reply.error {
            log("the agent did not take the copy: \(error.message)")
        } else {
            log("offered a copy: \(types.map { "\($0.name) (\($0.size) bytes)" }.joined(separator: ", "))")
        }
    }

    /// What was copied here is not to be offered (a secret, or nothing readable).
    func withdraw() {
        snapshot.withLock { $0 = [:] }
        _ = blocking { [client] in await Self.call(client, .offerClipboard(types: [])) }
    }

    /// Sends a type of the snapshot to a device that pastes it.
    private func serve(_ read: UUID, type: String, size: UInt64) {
        let bytes = snapshot.withLock { $0[type] }
        guard let bytes, UInt64(bytes.count) == size else {
            try? client.send(.clipboardRefused(read: read, error: LocalError(.notFound, "the copy of '\(type)' is gone")))
            return
        }
        let socket = socket
        // Sent from a thread of its own: the agent's messages keep coming meanwhile.
        Thread.detachNewThread {
            guard let stream = try? LocalStreamSocket.open(path: socket, call: .provideClipboard(version: LocalMessage.version, read: read)) else { return }
            defer { stream.close() }
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + LocalStreamFrame.maximumData)
                guard (try? stream.write(kind: LocalStreamFrame.data, Array(bytes[offset..<end]))) != nil else { return }
                offset = end
            }
            try? stream.write(kind: LocalStreamFrame.end)
            _ = try? stream.readFrame()
        }
    }

    /// Another device's copy as `type`, fetched through the agent now.
    func paste(_ type: String) -> Result<[UInt8], LocalError> {
        do throws(LocalError) {
            let (stream, _) = try LocalStreamSocket.opened(path: socket, call: .paste(version: LocalMessage.version, clipboardType: type))
            defer { stream.close() }
            var bytes: [UInt8] = []
            while let frame = try stream.readFrame() {
                switch frame.kind {
                case LocalStreamFrame.data: bytes += frame.payload
                case LocalStreamFrame.end: return .success(bytes)
                case LocalStreamFrame.failed: return .failure(LocalError(.failed, String(decoding: frame.payload, as: UTF8.self)))
                default: continue
                }
            }
            return .failure(LocalError(.failed, "the paste ended early"))
        } catch {
            return .failure(error)
        }
    }

    static func call(_ client: LocalClient, _ call: LocalCall) async -> LocalReply {
        do {
            return try await client.call(call)
        } catch {
            return .failure(error)
        }
    }

    func log(_ message: String) {
        if verbose { FileHandle.standardError.write(Data("handoff-session: \(message)\n".utf8)) }
    }

    func exit(_ message: String) -> Never {
        FileHandle.standardError.write(Data("handoff-session: \(message)\n".utf8))
        Foundation.exit(1)
    }

    /// Runs `body` and waits for it here: the X thread answers apps in order.
    private func blocking(_ body: @escaping @Sendable () async -> LocalReply) -> LocalReply {
        let result = Mutex<LocalReply?>(nil)
        let done = DispatchSemaphore(value: 0)
        // Waited for just below.
        Task {
            let reply = await body()
            result.withLock { $0 = reply }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 } ?? .failure(LocalError(.failed, "no reply"))
    }
}
