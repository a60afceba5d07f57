import Crypto
import Foundation
import Handoff
import HandoffApp
import HandoffLocalAPI
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

let streamingType = "com.example.streams.transfer"

/// Foundation streams handed between threads: each is used by one thread at a time.
struct StreamBox: @unchecked Sendable {
    let input: InputStream
    let output: OutputStream
}

/// Reads `input` to its end (or error) on the calling thread; returns the bytes and the error.
func readAll(_ input: InputStream, chunk: Int = 64 * 1024) -> (bytes: [UInt8], error: (any Error)?) {
    input.open()
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: chunk)
    while true {
        let n = buffer.withUnsafeMutableBufferPointer { input.read($0.baseAddress!, maxLength: chunk) }
        if n > 0 {
            bytes.append(contentsOf: buffer[..<n])
        } else {
            return (bytes, n < 0 ? (input.streamError ?? CocoaError(.fileReadUnknown)) : nil)
        }
    }
}

/// Writes all of `bytes`; false when a write failed.
@discardableResult
func writeAll(_ output: OutputStream, _ bytes: [UInt8], chunk: Int = 64 * 1024) -> Bool {
    output.open()
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBufferPointer { output.write($0.baseAddress! + offset, maxLength: min(chunk, bytes.count - offset)) }
        if n <= 0 { return false }
        offset += n
    }
    return true
}

/// What the origin app does with the streams it is given.
enum OriginBehaviour: Sendable {
    /// Sends back every byte it reads, then ends its output.
    case echo
    /// Writes `count` bytes and ends, counting how many the stream has taken so far.
    case send(count: Int)
    /// Closes its input at once, then waits.
    case closeInput
    /// Answers a request the Cocoa way: stream delegates on a run loop of a thread of its own,
    /// reading the request to its end, then writing it back reversed.
    case runLoopEcho
}

/// A stream delegate that reads its input to the end, then writes `answer(request)` and
/// closes, driven by stream events alone.
final class RunLoopStreams: NSObject, StreamDelegate, @unchecked Sendable {
    // @unchecked: used only on the run loop its streams are scheduled on.
    let input: InputStream
    let output: OutputStream
    let answer: ([UInt8]) -> [UInt8]
    var request: [UInt8] = []
    var reply: [UInt8]?
    var written = 0
    var events: [Stream.Event] = []
    var done = false

    init(input: InputStream, output: OutputStream, answer: @escaping ([UInt8]) -> [UInt8]) {
        self.input = input
        self.output = output
        self.answer = answer
    }

    func start(on runLoop: RunLoop) {
        for stream in [input, output] as [Stream] {
            stream.delegate = self
            stream.schedule(in: runLoop, forMode: .default)
            stream.open()
        }
    }

    func stream(_ stream: Stream, handle event: Stream.Event) {
        events.append(event)
        if stream === input {
            switch event {
            case .hasBytesAvailable:
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = buffer.withUnsafeMutableBufferPointer { input.read($0.baseAddress!, maxLength: $0.count) }
                if n > 0 { request += buffer[..<n] }
            case .endEncountered:
                reply = answer(request)
                input.close()
                writeMore()
            case .errorOccurred:
                done = true
            default:
                break
            }
        } else if event == .hasSpaceAvailable {
            writeMore()
        }
    }

    private func writeMore() {
        guard let reply, !done else { return }
        if written < reply.count {
            let n = reply.withUnsafeBufferPointer { output.write($0.baseAddress! + written, maxLength: min(1000, reply.count - written)) }
            if n > 0 { written += n }
        }
        if written == reply.count {
            output.close()
            done = true
        }
    }
}

/// The originating app's activity delegate: it takes continuation streams as `behaviour` says,
/// each on a thread of its own.
final class StreamOrigin: UserActivityDelegate, Sendable {
    let behaviour: OriginBehaviour
    private let counts = Mutex((received: 0, written: 0, finished: 0))

    nonisolated init(_ behaviour: OriginBehaviour) { self.behaviour = behaviour }

    nonisolated var received: Int { counts.withLock { $0.received } }
    nonisolated var written: Int { counts.withLock { $0.written } }
    nonisolated var finished: Int { counts.withLock { $0.finished } }

    func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream) {
        counts.withLock { $0.received += 1 }
        let box = StreamBox(input: inputStream, output: outputStream)
        let behaviour = self.behaviour
        Thread.detachNewThread { [self] in
            switch behaviour {
            case .echo:
                box.input.open()
                box.output.open()
                var buffer = [UInt8](repeating: 0, count: 64 * 1024)
                while true {
                    let n = buffer.withUnsafeMutableBufferPointer { box.input.read($0.baseAddress!, maxLength: $0.count) }
                    if n <= 0 { break }
                    if !writeAll(box.output, Array(buffer[..<n])) { break }
                }
                box.output.close()
                box.input.close()
            case .send(let count):
                box.output.open()
                let chunk = [UInt8](repeating: 0x5A, count: 16 * 1024)
                var sent = 0
                while sent < count {
                    let n = chunk.withUnsafeBufferPointer { box.output.write($0.baseAddress!, maxLength: min(chunk.count, count - sent)) }
                    if n <= 0 { break }
                    sent += n
                    counts.withLock { $0.written = sent }
                }
                box.output.close()
                box.input.close()
            case .closeInput:
                box.input.close()
                // Its output stays open a moment after its input closes, so that the other side
                // sees the stop while it still writes.
                Thread.sleep(forTimeInterval: 0.5)
                box.output.close()
            case .runLoopEcho:
                let streams = RunLoopStreams(input: box.input, output: box.output) { Array($0.reversed()) }
                streams.start(on: RunLoop.current)
                while !streams.done { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05)) }
            }
            counts.withLock { $0.finished += 1 }
        }
    }
}

/// The continuing app's delegate: it keeps the activities it is given.
@MainActor
final class StreamReceiver: ApplicationDelegate {
    var continued: [UserActivity] = []
    var failures: [Int] = []

    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        continued.append(userActivity)
        return true
    }

    func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        failures.append((error as? CocoaError)?.code.rawValue ?? -1)
    }
}

/// Two agents on loopback with real TLS between them, and an app in this process on each:
/// the origin on A offers a streaming activity, the receiver on B continues it.
struct StreamScene {
    let harness: AgentHarness
    let a: TestDevice
    let b: TestDevice
    let origin: StreamOrigin
    let originCenter: ActivityCenter
    let activity: UserActivity
    let receiver: StreamReceiver
    let receivingApp: Application

    static let bundle = "com.example.streams"

    static func make(_ harness: AgentHarness, behaviour: OriginBehaviour, supportsStreams: Bool = true) async throws -> StreamScene {
        let a = try await harness.start("alpha")
        let b = try await harness.start("beta")
        try await harness.pair([a, b])
        let agentA = try #require(a.agent)
        let agentB = try #require(b.agent)
        let manifest = AppManifest(bundleIdentifier: bundle, teamIdentifier: "STREAMTEAM", activityTypes: [streamingType])
        await agentA.installInProcess(manifest)
        await agentB.installInProcess(manifest)

        let origin = StreamOrigin(behaviour)
        let originCenter = ActivityCenter(
            connection: InProcessAgentConnection(agent: agentA, bundleIdentifier: bundle), bundleIdentifier: bundle,
            teamIdentifier: "STREAMTEAM", deviceName: "alpha")
        let activity = ActivityCenter.$current.withValue(originCenter) { UserActivity(activityType: streamingType) }
        activity.title = "A transfer"
        activity.supportsContinuationStreams = supportsStreams
        activity.delegate = origin
        await MainActor.run { ActivityCenter.$current.withValue(originCenter) { activity.becomeCurrent() } }

        let receiver = await MainActor.run { StreamReceiver() }
        let receivingCenter = ActivityCenter(
            connection: InProcessAgentConnection(agent: agentB, bundleIdentifier: bundle), bundleIdentifier: bundle,
            teamIdentifier: "STREAMTEAM", deviceName: "beta")
        let receivingApp = await MainActor.run { Application(center: receivingCenter, manifest: manifest, syncedContainers: [], delegate: receiver) }
        try #require(await eventually { (try? await b.nearby().first?.activity.activityType) == streamingType }, "beta never listed alpha's activity")
        return StreamScene(
            harness: harness, a: a, b: b, origin: origin, originCenter: originCenter, activity: activity, receiver: receiver,
            receivingApp: receivingApp)
    }

    /// Continues the activity on B and returns the activity the receiving app got.
    func continueOnB() async throws -> UserActivity {
        let offer = try #require(try await b.nearby().first)
        try await b.call(.continue(activity: offer.activity.id))
        try #require(await eventually { await MainActor.run { !receiver.continued.isEmpty } }, "the receiving app never got the activity")
        return await MainActor.run { receiver.continued[0] }
    }
}

@Suite("Continuation streams", .serialized)
struct StreamTests {
    @Test("Streams through both agents and a TLS link: 8 MiB each way, checksummed, and each end reaches the other side")
    func echoThroughAgents() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .echo)
            let continued = try await scene.continueOnB()
            let (input, output) = try await continued.continuationStreams()
            #expect(await eventually { scene.origin.received == 1 })

            var payload = [UInt8](repeating: 0, count: 8 << 20)
            for i in payload.indices { payload[i] = UInt8(truncatingIfNeeded: i &* 2_654_435_761 >> 13) }
            let box = StreamBox(input: input, output: output)
            let sent = payload
            // Writing and reading at once: the echo holds no more than the windows allow.
            async let wrote: Bool = onThread {
                let ok = writeAll(box.output, sent)
                box.output.close()
                return ok
            }
            let read = try await onThread { readAll(box.input) }
            #expect(try await wrote)
            #expect(read.error == nil)
            #expect(read.bytes.count == payload.count)
            #expect(SHA256.hash(data: read.bytes) == SHA256.hash(data: payload))
            input.close()
            #expect(await eventually { scene.origin.finished == 1 })
        }
    }

    @Test("A slow reader slows the writer: what the origin can write ahead of the reader stays bounded, then all of it arrives")
    func flowControl() async throws {
        try await withHarness { harness in
            let total = 64 << 20
            let scene = try await StreamScene.make(harness, behaviour: .send(count: total))
            let continued = try await scene.continueOnB()
            let (input, output) = try await continued.continuationStreams()
            output.close()
            // Nobody reads for a while: the origin stops once the windows and buffers are full.
            try await Task.sleep(for: .seconds(1))
            let ahead = scene.origin.written
            #expect(ahead < 16 << 20, "the origin wrote \(ahead) bytes with nobody reading")
            // Half a second more of nobody reading: what is observed is that nothing moves.
            try await Task.sleep(for: .milliseconds(500))
            #expect(scene.origin.written - ahead < 1 << 20, "the origin kept writing with nobody reading")
            let box = StreamBox(input: input, output: output)
            let read = try await onThread { readAll(box.input) }
            #expect(read.error == nil)
            #expect(read.bytes.count == total)
            #expect(scene.origin.written == total)
        }
    }

    @Test("A reader that pauses for longer than the local socket's frame deadline (10 s) still gets every byte: the writer's agent, holding reads back mid-frame, does not cut the writer off")
    func pauseLongerThanTheFrameDeadline() async throws {
        try await withHarness { harness in
            // More than the windows and buffers hold, so that the writer's agent stops reading.
            let total = 16 << 20
            let scene = try await StreamScene.make(harness, behaviour: .send(count: total))
            let continued = try await scene.continueOnB()
            let (input, output) = try await continued.continuationStreams()
            output.close()
            // The behaviour under test: a reader away longer than the 10 s frame deadline.
            try await Task.sleep(for: .seconds(12))
            let box = StreamBox(input: input, output: output)
            let read = try await onThread { readAll(box.input) }
            #expect(read.error == nil, "\(read.error.map { "\($0)" } ?? "")")
            #expect(read.bytes.count == total)
            #expect(scene.origin.written == total)
        }
    }

    @Test("The async byte-stream API: writes suspend instead of blocking, and the chunks come back in order to the end")
    func asyncByteStreams() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .echo)
            let continued = try await scene.continueOnB()
            let streams = try await continued.continuationByteStreams()
            let payload = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) }
            async let sent: Void = {
                for start in stride(from: 0, to: payload.count, by: 100_000) {
                    try await streams.write(Array(payload[start..<min(start + 100_000, payload.count)]))
                }
                streams.finish()
            }()
            var received: [UInt8] = []
            for try await chunk in streams.incoming { received += chunk }
            try await sent
            #expect(received == payload)
            streams.close()
        }
    }

    @Test("Cocoa-style streams: delegates scheduled on run loops (the main one on the continuing side, a thread's on the origin) get open, bytes, space and end events, and a request gets its answer")
    func runLoopDelegates() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .runLoopEcho)
            let continued = try await scene.continueOnB()
            let (input, output) = try await continued.continuationStreams()
            let box = StreamBox(input: input, output: output)
            let request = Array("please send the attachment".utf8) + [UInt8](repeating: 7, count: 20_000)
            let client = await MainActor.run { () -> RunLoopStreams in
                // The continuing app writes its request, then reads the answer to the end.
                let client = RunLoopStreams(input: box.input, output: box.output) { _ in [] }
                client.reply = request
                client.start(on: RunLoop.main)
                return client
            }
            #expect(await eventually { await MainActor.run { client.events.filter { $0 == .endEncountered }.count == 1 } })
            let (answer, events) = await MainActor.run { (client.request, client.events) }
            #expect(answer.count == request.count)
            #expect(answer == Array(request.reversed()), "the answer differs from the request reversed")
            #expect(events.first == .openCompleted)
            #expect(events.contains(.hasSpaceAvailable) && events.contains(.hasBytesAvailable))
            // The origin counts its end after it closed, which the other side may read first.
            #expect(await eventually { scene.origin.finished == 1 }, "the origin finished \(scene.origin.finished) times")
        }
    }

    @Test("Several pairs at once on one continuation, each with its own bytes")
    func severalPairs() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .echo)
            let continued = try await scene.continueOnB()
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        let (input, output) = try await continued.continuationStreams()
                        let box = StreamBox(input: input, output: output)
                        let payload = [UInt8](repeating: UInt8(index + 1), count: 512 * 1024 + index)
                        async let wrote: Bool = onThread {
                            let ok = writeAll(box.output, payload)
                            box.output.close()
                            return ok
                        }
                        let read = try await onThread { readAll(box.input) }
                        box.input.close()
                        return try await wrote && read.error == nil && read.bytes == payload
                    }
                }
                for try await ok in group { #expect(ok) }
            }
            #expect(scene.origin.received == 4)
        }
    }

    @Test("A close on either side reaches the other: the origin closing its input fails the receiver's writes")
    func closeReachesTheOtherSide() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .closeInput)
            let continued = try await scene.continueOnB()
            let (input, output) = try await continued.continuationStreams()
            let box = StreamBox(input: input, output: output)
            // Writes fail once the stop arrives; until then they may be taken.
            let failed = try await onThread { () -> Bool in
                box.output.open()
                let chunk = [UInt8](repeating: 1, count: 64 * 1024)
                for _ in 0..<1000 {
                    let n = chunk.withUnsafeBufferPointer { box.output.write($0.baseAddress!, maxLength: $0.count) }
                    if n < 0 { return true }
                    // A paced writer, so that the close arrives while it still writes.
                    Thread.sleep(forTimeInterval: 0.005)
                }
                return false
            }
            #expect(failed)
            #expect(output.streamError != nil)
            // The origin then closes its output: the receiver reads the end, no error.
            let read = try await onThread { readAll(box.input) }
            #expect(read.bytes.isEmpty)
            #expect(read.error == nil)
        }
    }

    @Test("Streams for an activity that does not support them: a clear error, and the origin's delegate is never called")
    func unsupported() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .echo, supportsStreams: false)
            let continued = try await scene.continueOnB()
            await #expect(throws: CocoaError.self) { try await continued.continuationStreams() }
            // Past the library's own check, the agent refuses too: a raw stream connection for the continuation.
            let continuation = try #require(continued.continuation)
            let refused = try await onThread { () -> LocalError? in
                do throws(LocalError) {
                    _ = try LocalStreamSocket.open(path: scene.b.socket, call: .openStream(version: LocalMessage.version, continuation: continuation.continuationID))
                    return nil
                } catch {
                    return error
                }
            }
            #expect(refused?.message.contains("does not support continuation streams") == true)
            #expect(scene.origin.received == 0)
        }
    }

    @Test("Outside a continuation: the library refuses, and the agent refuses a continuation it never delivered")
    func outsideAContinuation() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .echo)
            await #expect(throws: CocoaError.self) { try await scene.activity.continuationStreams() }
            let refused = try await onThread { () -> LocalError? in
                do throws(LocalError) {
                    _ = try LocalStreamSocket.open(path: scene.b.socket, call: .openStream(version: LocalMessage.version, continuation: UUID()))
                    return nil
                } catch {
                    return error
                }
            }
            #expect(refused?.kind == .notFound)
            #expect(scene.origin.received == 0)
        }
    }

    @Test("The origin's agent stops during a stream: both ends see the stream end with an error, and nothing hangs")
    func linkDropsDuringAStream() async throws {
        try await withHarness { harness in
            let scene = try await StreamScene.make(harness, behaviour: .send(count: 1 << 30))
            let continued = try await scene.continueOnB()
            let (input, output) = try await continued.continuationStreams()
            let box = StreamBox(input: input, output: output)
            try #require(await eventually { scene.origin.written > 1 << 20 })
            async let read = onThread { readAll(box.input) }
            await scene.a.agent?.stop()
            let outcome = try await read
            #expect(outcome.error != nil, "the receiver read \(outcome.bytes.count) bytes and a clean end")
            #expect(await eventually { scene.origin.finished == 1 }, "the origin's writer never stopped")
            #expect(scene.origin.written < 1 << 30)
        }
    }
}
