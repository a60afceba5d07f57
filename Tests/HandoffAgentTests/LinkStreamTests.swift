import Foundation
import HandoffLocalAPI
import HandoffWire
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

/// Two stream multiplexers wired back to back, as the two ends of one link.
final class MuxPair: Sendable {
    let opener: LinkStreamMux
    let acceptor: LinkStreamMux
    private let wires: Wires

    private final class Wires: Sendable {
        let sent = Mutex<[LinkMessage]>([])
        let ends = Mutex<(opener: LinkStreamMux?, acceptor: LinkStreamMux?)>((nil, nil))
    }

    init(window: UInt32 = 64 * 1024, accept: @escaping LinkStreamMux.Acceptor) {
        let wires = Wires()
        opener = LinkStreamMux(window: window) { message in
            wires.sent.withLock { $0.append(message) }
            wires.ends.withLock { $0.acceptor }?.received(message)
        }
        acceptor = LinkStreamMux(window: window, acceptor: accept) { message in
            wires.ends.withLock { $0.opener }?.received(message)
        }
        self.wires = wires
        let ends = (opener, acceptor)
        wires.ends.withLock { $0 = ends }
    }

    /// What the opener sent, in order.
    var fromOpener: [LinkMessage] { wires.sent.withLock { $0 } }
}

@Suite("Link streams")
struct LinkStreamTests {
    @Test("A writer never sends more than the window until the reader consumes; consuming lets the rest through")
    func creditBoundsTheWriter() async throws {
        let accepted = Mutex<LinkStream?>(nil)
        let pair = MuxPair { _, stream in
            stream.accept()
            accepted.withLock { $0 = stream }
            return nil
        }
        let stream = try await pair.opener.open(.activity(UUID()), deadline: .seconds(5)).get()
        let other = try #require(accepted.withLock { $0 })
        let writer = Task { try await stream.write([UInt8](repeating: 7, count: 256 * 1024)) }
        // Once the writer waits for credit, it has sent all it may.
        #expect(await eventually { stream.hasWaitingWriter })
        let inFlight = pair.fromOpener.reduce(0) { if case .streamData(_, let bytes) = $1 { $0 + bytes.count } else { $0 } }
        #expect(inFlight == 64 * 1024, "the opener sent \(inFlight) bytes against a 64 KiB window")
        var received = 0
        for await event in other.events {
            guard case .data(let bytes) = event else { continue }
            received += bytes.count
            other.consumed(bytes.count)
            if received == 256 * 1024 { break }
        }
        try await writer.value
        #expect(received == 256 * 1024)
    }

    @Test("A large write goes in chunks of 512 KiB: each fits a link frame, and two fit the default window, so one is consumed while the next travels")
    func chunksFitFramesAndWindow() async throws {
        let chunk = LinkMessage.maximumStreamChunk
        #expect(chunk == 512 * 1024)
        #expect(2 * chunk <= Int(LinkStreamMux.defaultWindow), "a chunk as large as the window would let no chunk travel while the last one is consumed")
        #expect(LocalStreamFrame.maximumData <= LocalMessage.maximumFrame)
        let largest = LinkMessage.streamData(stream: .max, bytes: [UInt8](repeating: 1, count: chunk)).frame
        #expect(largest.payload.count <= LinkMessage.maximumFrame, "a full chunk on stream \(UInt64.max) is a \(largest.payload.count)-byte frame")

        let accepted = Mutex<LinkStream?>(nil)
        let pair = MuxPair(window: LinkStreamMux.defaultWindow) { _, stream in
            stream.accept()
            accepted.withLock { $0 = stream }
            return nil
        }
        let stream = try await pair.opener.open(.activity(UUID()), deadline: .seconds(5)).get()
        let other = try #require(accepted.withLock { $0 })
        let total = 3 * chunk + 100
        let writer = Task { try await stream.write([UInt8](repeating: 7, count: total)) }
        var received = 0
        for await event in other.events {
            guard case .data(let bytes) = event else { continue }
            received += bytes.count
            other.consumed(bytes.count)
            if received == total { break }
        }
        try await writer.value
        let sizes = pair.fromOpener.compactMap { message -> Int? in if case .streamData(_, let bytes) = message { bytes.count } else { nil } }
        #expect(sizes.reduce(0, +) == total)
        #expect(sizes.allSatisfy { $0 <= chunk }, "chunks of \(sizes)")
        #expect(Array(sizes.prefix(2)) == [chunk, chunk], "the first two chunks, sent on the window alone: \(sizes)")
    }

    @Test("Bytes past the window reset the stream; a close before the end resets it for the other side")
    func violationsAndCloses() async throws {
        let accepted = Mutex<LinkStream?>(nil)
        let pair = MuxPair { _, stream in
            stream.accept()
            accepted.withLock { $0 = stream }
            return nil
        }
        let stream = try await pair.opener.open(.activity(UUID()), deadline: .seconds(5)).get()
        let other = try #require(accepted.withLock { $0 })
        // A peer that ignores the window.
        pair.acceptor.received(.streamData(stream: stream.id, bytes: [UInt8](repeating: 1, count: 64 * 1024 + 1)))
        var sawFailure = false
        for await event in other.events { if case .failed = event { sawFailure = true } }
        #expect(sawFailure)

        let second = try await pair.opener.open(.activity(UUID()), deadline: .seconds(5)).get()
        let secondOther = try #require(accepted.withLock { $0 })
        second.close()
        var ending: LinkStreamEvent?
        for await event in secondOther.events { ending = event }
        guard case .failed(let reason)? = ending else {
            Issue.record("the other side saw \(String(describing: ending)), not a failure")
            return
        }
        #expect(reason.contains("let go of its streams before ending them"))
        #expect(pair.opener.openStreams == 0)
    }

    @Test("A refusal, a link that drops, and no answer in time each end the open with one outcome")
    func openOutcomes() async throws {
        let refusing = MuxPair { _, _ in ContinuationFailure(code: 4608, message: "no delegate") }
        #expect(await refusing.opener.open(.activity(UUID()), deadline: .seconds(5)).failureCode == 4608)

        // Acceptors that hold the open until the test lets them go, and say when they have it.
        let (held, hold) = AsyncStream<Void>.makeStream()
        let (arrived, arrival) = AsyncStream<Void>.makeStream()
        let holding: LinkStreamMux.Acceptor = { _, _ in
            arrival.yield()
            for await _ in held {}
            return nil
        }
        defer { hold.finish() }
        let silent = MuxPair(accept: holding)
        let timedOut = await silent.opener.open(.activity(UUID()), deadline: .milliseconds(200))
        #expect(timedOut.failureCode == 4610)

        let dropping = MuxPair(accept: holding)
        async let pending = dropping.opener.open(.activity(UUID()), deadline: .seconds(10))
        var arrivals = arrived.makeAsyncIterator()
        _ = await arrivals.next()  // the silent pair's open
        _ = await arrivals.next()  // this one's: the opener waits for its answer
        dropping.opener.linkEnded("the peer went away")
        #expect(await pending.failureCode == 4609)
        #expect(await dropping.opener.open(.activity(UUID()), deadline: .seconds(1)).failureCode == 4609)
    }
}

extension Result where Failure == ContinuationFailure {
    var failureCode: Int? {
        if case .failure(let failure) = self { return failure.code }
        return nil
    }
}
