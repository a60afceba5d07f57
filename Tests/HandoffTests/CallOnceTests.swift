import Foundation
import HandoffLocalAPI
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `LocalSocketIO.callOnce` (what `handoff continue` uses, without Foundation) against a socket
/// that answers with canned messages: it must surface a refused `hello`, pass over what comes
/// before its reply, and say so when the agent hangs up, as the threaded client does.
@Suite("One call on one thread")
struct CallOnceTests {
    /// A Unix socket that accepts one connection and answers each frame it reads with the next
    /// entry of `script` (nil: close the connection there).
    final class ScriptedAgent: Sendable {
        let path: String
        private let listener: Int32
        private final class Received: Sendable {
            let frames = Mutex<[Frame]>([])
        }
        private let log = Received()

        /// What the client wrote, frame by frame.
        var received: [Frame] { log.frames.withLock { $0 } }

        /// `raw`: frames written as they are before the answers of the step they are keyed by.
        init(_ script: [[LocalMessage]?], raw: [Int: [Frame]] = [:]) throws {
            path = "/tmp/handoff-callonce-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
            listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: Array(path.utf8) + [0])
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(bound == 0 && listen(listener, 1) == 0)
            let server = listener
            let log = self.log
            Thread.detachNewThread {
                let fd = accept(server, nil, nil)
                defer { close(fd) }
                var decoder = FrameDecoder()
                var buffer = [UInt8](repeating: 0, count: 4096)
                for (step, answers) in script.enumerated() {
                    // Wait for the client's next frame.
                    while true {
                        if let frame = try? decoder.next() {
                            log.frames.withLock { $0.append(frame) }
                            break
                        }
                        let count = read(fd, &buffer, buffer.count)
                        if count <= 0 { return }
                        decoder.append(buffer[..<count])
                    }
                    guard let answers else { return }
                    for frame in (raw[step] ?? []) + answers.map(\.frame) {
                        let bytes = frame.encoded
                        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    }
                }
            }
        }

        deinit {
            close(listener)
            unlink(path)
        }
    }

    static let nonce = Data(repeating: 7, count: 16)
    /// A `hello` answer as an agent gives it, with fields the caller does not read.
    static let hello = LocalMessage.reply(
        request: 1,
        LocalReply(version: LocalMessage.version, device: LocalDevice(id: UUID(), name: "here", isThisDevice: true, isNearby: true), account: "home", containers: []))

    /// One `continue` call, its reply read as the threaded client reads it.
    static func callOnce(_ path: String) throws(LocalError) -> LocalReply {
        let payload = try LocalSocketIO.callOnce(path: path, call: LocalMessage.call(request: 2, .continue(activity: nil)).frame.payload)
        guard case .reply(2, let reply)? = try? LocalMessage(frame: Frame(kind: LocalMessage.frameKind, payload: payload)) else {
            throw LocalError(.failed, "not the call's reply: \(String(decoding: payload, as: UTF8.self))")
        }
        return reply
    }

    @Test("Hello, proof, then the call's reply, with an event before it passed over")
    func reply() throws {
        let continued = LocalContinued(
            continuation: UUID(), device: "there", activity: ActivityAnnouncement(id: UUID(), activityType: "com.example.edit"), app: "Editor", webpageURL: nil, seconds: 0.002)
        let agent = try ScriptedAgent([
            [.prove(nonce: Self.nonce)], [Self.hello],
            [.event(LocalEvent(change: .gone, device: UUID(), deviceName: "d", activity: nil)), .reply(request: 2, LocalReply(continued: continued))],
        ])
        let reply = try Self.callOnce(agent.path)
        #expect(reply.continued == continued && reply.error == nil)
        // What it said: hello as a control client of this version, the nonce back, the call.
        let said = try agent.received.map { try LocalMessage(frame: $0) }
        #expect(
            said == [
                .call(request: 1, .hello(version: LocalMessage.version, role: .control, bundleIdentifier: nil)), .proof(nonce: Self.nonce),
                .call(request: 2, .continue(activity: nil)),
            ])
    }

    @Test("Passes over messages it knows are not its reply (another request's reply, an unknown message), and returns one it cannot read instead of waiting past it")
    func passesOverOnlyWhatItCanRead() throws {
        let continued = LocalContinued(
            continuation: UUID(), device: "there", activity: ActivityAnnouncement(id: UUID(), activityType: "t"), app: "A", webpageURL: nil, seconds: 0.5)
        let other = LocalMessage.reply(request: 7, .failure(LocalError(.failed, "not yours")))
        let unknown = Frame(kind: LocalMessage.frameKind, payload: Array(#"{"type":"somethingNew","x":[1,{"y":null}]}"#.utf8))
        let agent = try ScriptedAgent([[.prove(nonce: Self.nonce)], [Self.hello], [other, .reply(request: 2, LocalReply(continued: continued))]], raw: [2: [unknown]])
        #expect(try Self.callOnce(agent.path).continued == continued)
        // A reply whose JSON this reader cannot read (more keys than it follows), then nothing:
        // returned, not waited past until the agent hangs up.
        let keys = (0..<70).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let unreadable = Frame(kind: LocalMessage.frameKind, payload: Array("{\(keys),\"ok\":true,\"request\":2,\"type\":\"reply\"}".utf8))
        let stuck = try ScriptedAgent([[.prove(nonce: Self.nonce)], [Self.hello], []], raw: [2: [unreadable]])
        let payload = try LocalSocketIO.callOnce(path: stuck.path, call: LocalMessage.call(request: 2, .continue(activity: nil)).frame.payload)
        #expect(payload == unreadable.payload)
    }

    @Test("A refused hello is thrown as the agent said it, whether it comes before the proof or after")
    func refusedHello() throws {
        let refusal = LocalError(.badRequest, "this agent speaks local API version 9, the client 2")
        for script: [[LocalMessage]?] in [
            [[.reply(request: 1, .failure(refusal))]],
            [[.prove(nonce: Self.nonce)], [.reply(request: 1, .failure(refusal))]],
        ] {
            let agent = try ScriptedAgent(script)
            #expect(throws: refusal) { try Self.callOnce(agent.path) }
        }
    }

    @Test("An agent that hangs up before its reply is an error naming the socket, at each step")
    func hangUp() throws {
        for script: [[LocalMessage]?] in [[nil], [[.prove(nonce: Self.nonce)], nil], [[.prove(nonce: Self.nonce)], [Self.hello], nil]] {
            let agent = try ScriptedAgent(script)
            do {
                _ = try Self.callOnce(agent.path)
                Issue.record("no error for \(script)")
            } catch {
                #expect(error.message.contains(agent.path), "\(error.message)")
            }
        }
    }

    @Test("A refusal of the call is returned in the reply, not thrown")
    func refusedCall() throws {
        let refusal = LocalError(.notFound, "no device nearby offers an activity")
        let agent = try ScriptedAgent([[.prove(nonce: Self.nonce)], [Self.hello], [.reply(request: 2, .failure(refusal))]])
        #expect(try Self.callOnce(agent.path).error == refusal)
    }
}
