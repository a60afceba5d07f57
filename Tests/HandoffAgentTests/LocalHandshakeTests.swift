import Foundation
import HandoffLocalAPI
import Testing

@testable import HandoffAgent

/// The local handshake as a pure state machine: bytes in, with the writer the kernel names.
@Suite("Local handshake")
struct LocalHandshakeTests {
    let hello = LocalMessage.call(request: 1, .hello(version: LocalMessage.version, role: .app, bundleIdentifier: "com.example.notes")).frame
    let nonce = Data(repeating: 0xA5, count: 16)

    /// Feeds `frame` in reads of at most `wanted` bytes, as the acceptor does (so never past the
    /// frame); the last step. A refusal may come before the frame's end.
    func feed(_ handshake: inout LocalHandshake, _ frame: Frame, writer: Int32?, chunk: Int = 3) -> LocalHandshake.Step {
        var bytes = frame.encoded[...]
        var step = LocalHandshake.Step.needMore
        while !bytes.isEmpty {
            let count = min(chunk, handshake.wanted)
            #expect(count > 0)
            step = handshake.received(bytes.prefix(count), writtenBy: writer)
            bytes = bytes.dropFirst(count)
            if case .refuse = step { break }
            if step != .needMore { #expect(bytes.isEmpty, "the handshake stopped before the end of its frame"); break }
        }
        return step
    }

    @Test("Hello, then the nonce from the process that connected: served, starting with the hello")
    func proved() {
        var handshake = LocalHandshake(connectedPID: 100)
        #expect(feed(&handshake, hello, writer: nil) == .challenge(role: .app))
        handshake.challenged(nonce: nonce)
        #expect(feed(&handshake, LocalMessage.proof(nonce: nonce).frame, writer: 100) == .serve(first: hello))
    }

    @Test("A control client's hello is challenged too, and says so: the acceptor reads no executable for it")
    func controlClient() {
        var handshake = LocalHandshake(connectedPID: 100)
        let control = LocalMessage.call(request: 1, .hello(version: LocalMessage.version, role: .control, bundleIdentifier: nil)).frame
        #expect(feed(&handshake, control, writer: nil) == .challenge(role: .control))
        handshake.challenged(nonce: nonce)
        #expect(feed(&handshake, LocalMessage.proof(nonce: nonce).frame, writer: 100) == .serve(first: control))
    }

    @Test("S8: A proof written by another process is refused, whatever it says")
    func proofFromAnotherProcess() {
        var handshake = LocalHandshake(connectedPID: 100)
        #expect(feed(&handshake, hello, writer: 100) == .challenge(role: .app))
        handshake.challenged(nonce: nonce)
        guard case .refuse(let reason, 1) = feed(&handshake, LocalMessage.proof(nonce: nonce).frame, writer: 101) else {
            Issue.record("a proof from process 101 was not refused")
            return
        }
        #expect(reason.contains("process 101") && reason.contains("process 100"))
    }

    @Test("S8: A hello written by another process than the one that connected is refused at once")
    func helloFromAnotherProcess() {
        var handshake = LocalHandshake(connectedPID: 100)
        guard case .refuse = feed(&handshake, hello, writer: 7) else {
            Issue.record("a hello from process 7 was not refused")
            return
        }
    }

    @Test("S8: A proof with no sender, the wrong nonce, or another message is refused")
    func badProofs() {
        for (frame, writer) in [
            (LocalMessage.proof(nonce: nonce).frame, nil), (LocalMessage.proof(nonce: Data(repeating: 1, count: 16)).frame, 100),
            (LocalMessage.call(request: 2, .status).frame, 100), (Frame(kind: 0x44, payload: [1, 2]), 100),
        ] as [(Frame, Int32?)] {
            var handshake = LocalHandshake(connectedPID: 100)
            #expect(feed(&handshake, hello, writer: nil) == .challenge(role: .app))
            handshake.challenged(nonce: nonce)
            guard case .refuse = feed(&handshake, frame, writer: writer) else {
                Issue.record("\(frame) from \(String(describing: writer)) was not refused")
                continue
            }
        }
    }

    @Test("Stream connections and other first messages go to the server at once; so does another version's hello, which it refuses")
    func notHello() {
        let others = [
            LocalMessage.call(request: 1, .openStream(version: LocalMessage.version, continuation: UUID())).frame,
            LocalMessage.call(request: 1, .hello(version: 1, role: .control, bundleIdentifier: nil)).frame,
            Frame(kind: 0x4A, payload: Array("not json".utf8)),
        ]
        for frame in others {
            var handshake = LocalHandshake(connectedPID: 100)
            #expect(feed(&handshake, frame, writer: nil) == .serve(first: frame))
        }
    }

    @Test("A first message over the limit is refused from its header alone")
    func oversized() {
        var handshake = LocalHandshake(connectedPID: 100, maximumFrame: 1024)
        let step = handshake.received([0, 0, 0x10, 0, 0x4A], writtenBy: nil)
        guard case .refuse(let reason, _) = step else {
            Issue.record("an oversized first frame was not refused")
            return
        }
        #expect(reason.contains("4096"))
    }
}
