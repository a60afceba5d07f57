// The continuation streams benchmark (Benchmarks/streams.sh): 1 GiB from one app to another
// through a stream pair, through both agents and their TLS link, against a raw TLS 1.3 stream
// between two processes, in the same run on this machine (loopback). The streams' receiver
// compares every byte with what was sent (`StreamCheck`) and answers the count; the raw TLS
// baselines count (and, in one of them, check the same way). The agents' resident memory is sampled
// during the transfer.
//
// The apps are this executable, installed on both devices: the origin (`stream-origin`,
// started by the benchmark on A) offers an activity that supports streams and reads what
// comes; the receiver is started by B's agent for the continuation, opens the streams and
// writes.
import BenchmarkReport
import Foundation
import Handoff
import HandoffAgent
import HandoffApp
import HandoffLocalAPI
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

let streamBundle = "com.example.bench.Streams"
let streamType = "com.example.bench.transfer"
let streamTotal = Int(ProcessInfo.processInfo.environment["STREAM_BYTES"] ?? "") ?? 1 << 30

/// The bytes sent: a 1 MiB block of pseudo-random bytes, repeated.
let streamBlock: [UInt8] = {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    return (0..<(1 << 20)).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}()

/// What a receiver checks: every byte it reads against the byte `streamBlock` holds at that
/// offset of the stream (one `memcmp` per read, about 0.05 CPU s per GiB here, where SHA-256
/// cost 0.7), and the count. The answer it sends back, 32 bytes: the count (8 bytes, little
/// endian), 1 if every byte matched, then zeros. The sender compares it with `expected`.
struct StreamCheck {
    private(set) var count = 0
    private var matched = true

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var done = 0
        streamBlock.withUnsafeBytes { block in
            while done < bytes.count {
                let offset = (count + done) % block.count
                let length = min(bytes.count - done, block.count - offset)
                if matched, memcmp(bytes.baseAddress! + done, block.baseAddress! + offset, length) != 0 { matched = false }
                done += length
            }
        }
        count += bytes.count
    }

    var answer: [UInt8] { Self.answer(count: count, matched: matched) }
    static var expected: [UInt8] { answer(count: streamTotal, matched: true) }

    private static func answer(count: Int, matched: Bool) -> [UInt8] {
        var bytes = withUnsafeBytes(of: UInt64(count).littleEndian) { Array($0) }
        bytes.append(matched ? 1 : 0)
        return bytes + [UInt8](repeating: 0, count: 32 - bytes.count)
    }
}

// MARK: The origin app

/// Reads everything that comes, checking it, then answers the check and closes.
final class CheckingOrigin: UserActivityDelegate, Sendable {
    nonisolated init() {}

    func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream) {
        let streams = BenchStreams(input: inputStream, output: outputStream)
        Thread.detachNewThread {
            streams.input.open()
            streams.output.open()
            var check = StreamCheck()
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBufferPointer { streams.input.read($0.baseAddress!, maxLength: $0.count) }
                if n <= 0 { break }
                buffer.withUnsafeBytes { check.update(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
            let answer = check.answer
            _ = answer.withUnsafeBufferPointer { streams.output.write($0.baseAddress!, maxLength: $0.count) }
            streams.output.close()
            streams.input.close()
        }
    }
}

struct BenchStreams: @unchecked Sendable {
    let input: InputStream
    let output: OutputStream
}

func runStreamOrigin() -> Never {
    let delegate = CheckingOrigin()
    MainActor.assumeIsolated {
        let activity = UserActivity(activityType: streamType)
        activity.title = "A large transfer"
        activity.supportsContinuationStreams = true
        activity.delegate = delegate
        activity.becomeCurrent()
        // Kept alive for the life of the process.
        StreamOriginHolder.activity = activity
    }
    dispatchMain()
}

@MainActor
enum StreamOriginHolder {
    static var activity: UserActivity?
}

// MARK: The receiving app

@MainActor
final class StreamSender: ApplicationDelegate {
    let log: String
    init(log: String) { self.log = log }

    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        let log = self.log
        userActivity.getContinuationStreams { input, output, error in
            guard let input, let output else {
                try? "error \(error.map { "\($0)" } ?? "none")\n".write(toFile: log, atomically: true, encoding: .utf8)
                return
            }
            let streams = BenchStreams(input: input, output: output)
            Thread.detachNewThread {
                let start = now()
                streams.output.open()
                streams.input.open()
                var left = streamTotal
                var failed = false
                while left > 0 && !failed {
                    let count = min(left, streamBlock.count)
                    var offset = 0
                    while offset < count {
                        let n = streamBlock.withUnsafeBufferPointer { streams.output.write($0.baseAddress! + offset, maxLength: count - offset) }
                        if n <= 0 {
                            failed = true
                            break
                        }
                        offset += n
                    }
                    left -= count
                }
                streams.output.close()
                var answer: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 64)
                while true {
                    let n = buffer.withUnsafeMutableBufferPointer { streams.input.read($0.baseAddress!, maxLength: $0.count) }
                    if n <= 0 { break }
                    answer.append(contentsOf: buffer[..<n])
                }
                let end = now()
                streams.input.close()
                let matches = answer == StreamCheck.expected
                try? "\(failed ? "write-failed" : (matches ? "ok" : "check-failed")) \(start) \(end)\n".write(toFile: log, atomically: true, encoding: .utf8)
            }
        }
        return true
    }
}

func runStreamReceiver() -> Never {
    let folder = ProcessInfo.processInfo.environment["HANDOFF_APP_DATA"] ?? "/tmp"
    MainActor.assumeIsolated {
        _ = Application(delegate: StreamSender(log: folder + "/stream.log"))
    }
    dispatchMain()
}

// MARK: The raw TLS baseline

// TLS 1.3 with both sides' certificates, each pinning the other's (`bareTLSContext`): what a
// link does, with no framing and no agents.

/// The receiving end: checks every byte as the streams' receiver does (unless `checking` is
/// off: then it only counts, for the bare TLS throughput), and at `streamTotal` answers (32 zero
/// bytes unchecked).
final class CheckHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: used only on its channel's event loop.
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var check = StreamCheck()
    private var count = 0
    private let checking: Bool

    init(checking: Bool) { self.checking = checking }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if checking { buffer.withUnsafeReadableBytes { check.update($0) } }
        count += buffer.readableBytes
        if count == streamTotal {
            let answer = checking ? check.answer : [UInt8](repeating: 0, count: 32)
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: answer)), promise: nil)
        }
    }
}

func runTLSSink(folder: String, port: Int, checking: Bool) async throws -> Never {
    let (context, verify) = try bareTLSContext(folder: folder, side: "server", peer: "client")
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        // Reads of up to 1 MiB: fewer, larger reads than the default's 64 KiB at most.
        .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64 * 1024, initial: 256 * 1024, maximum: 1 << 20))
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context, customVerificationCallback: verify))
                try channel.pipeline.syncOperations.addHandler(CheckHandler(checking: checking))
            }
        }
        .bind(host: ProcessInfo.processInfo.environment["STREAM_HOST"] ?? "127.0.0.1", port: port).get()
    print("listening \(channel.localAddress?.port ?? port)")
    fflush(nil)
    while true { try await Task.sleep(for: .seconds(3600)) }
}

/// The sending end, all on its event loop: writes `blastWrite` slices of the 1 MiB block (the
/// same bytes, never copied) whenever the channel is writable, until `streamTotal` bytes went, then reads the
/// receiver's answer. Nothing else is in the path: no task, no stream, no framing.
/// How much the raw TLS sender hands NIOSSL at once (BLAST_WRITE overrides it). 256 KiB: with
/// 1 MiB writes NIOSSL's outbound buffer grows into fresh memory for every write, and the
/// kernel zeroing those pages took two thirds of the sender's CPU (`perf record`), which made
/// this baseline 2.3× slower than it can be; 16 to 256 KiB all measure far faster, 256 KiB
/// the most steadily.
let blastWrite = Int(ProcessInfo.processInfo.environment["BLAST_WRITE"] ?? "") ?? 256 * 1024

final class BlastHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: used only on its channel's event loop.
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let block = ByteBuffer(bytes: streamBlock)
    private var left = streamTotal
    private var answer: [UInt8] = []
    private let done: EventLoopPromise<[UInt8]>
    private(set) var start: UInt64 = 0

    init(done: EventLoopPromise<[UInt8]>) { self.done = done }

    func channelActive(context: ChannelHandlerContext) {
        start = now()
        fill(context)
        context.fireChannelActive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        fill(context)
        context.fireChannelWritabilityChanged()
    }

    private func fill(_ context: ChannelHandlerContext) {
        var wrote = false
        while left > 0 && context.channel.isWritable {
            let offset = (streamTotal - left) % block.readableBytes
            let count = min(left, blastWrite, block.readableBytes - offset)
            context.write(wrapOutboundOut(count == block.readableBytes ? block : block.getSlice(at: offset, length: count)!), promise: nil)
            left -= count
            wrote = true
        }
        if wrote { context.flush() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        answer.append(contentsOf: unwrapInboundIn(data).readableBytesView)
        if answer.count >= 32 { done.succeed(Array(answer.prefix(32))) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        done.fail(error)
        context.close(promise: nil)
    }
}

/// Prints "ok|check-failed START END".
func runTLSSource(folder: String, port: Int, checking: Bool) throws {
    let (context, verify) = try bareTLSContext(folder: folder, side: "client", peer: "server")
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let done = group.next().makePromise(of: [UInt8].self)
    let blaster = BlastHandler(done: done)
    let expected = checking ? StreamCheck.expected : [UInt8](repeating: 0, count: 32)
    let channel = try ClientBootstrap(group: group)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: verify))
                try channel.pipeline.syncOperations.addHandler(blaster)
            }
        }
        .connect(host: ProcessInfo.processInfo.environment["STREAM_HOST"] ?? "127.0.0.1", port: port).wait()
    let answer = try done.futureResult.wait()
    let end = now()
    print("\(answer == expected ? "ok" : "check-failed") \(blaster.start) \(end)")
    try channel.close().wait()
}

// MARK: The orchestrator

/// A TLS stream of `bytes` through OpenSSL (Python's ssl module, Benchmarks/tls_stream.py),
/// with the identities in `folder`: its MiB/s. The independent baseline.
func openSSLStream(folder: String, bytes: Int) -> Double {
    let script = binaries.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Benchmarks/tls_stream.py").path
    let output = Pipe()
    let process = start(["python3", script, folder, String(bytes)], output: output)
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0, let rate = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        fail("the OpenSSL baseline (python3 Benchmarks/tls_stream.py) failed: \(text)")
    }
    return rate
}

/// Runs the benchmark and returns its targets, checked, once everything it started is gone.
func streamBenchmark() async throws -> Targets {
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let base = Int.random(in: 20_000..<40_000)
    let a = Host(name: "a", namespace: nil, address: "127.0.0.1", port: base)
    let b = Host(name: "b", namespace: nil, address: "127.0.0.1", port: base + 2)
    undoOnFailure.withLock { $0 = "" }
    var processes: [ChildProcess] = []
    defer {
        for process in processes { stop(process) }
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap(Int32.init) {
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root) { kill(pid, SIGTERM) }
        }
        try? FileManager.default.removeItem(atPath: root)
    }
    let megabytes = Double(streamTotal) / Double(1 << 20)

    // The baselines first: a raw TLS 1.3 stream between two processes, bare (the receiver only
    // counts) and checked as the streams are (the receiver compares every byte on its event loop).
    let baselineFolder = "\(root)/tls"
    try makeBareTLSIdentities(in: baselineFolder)
    func baseline(checking: Bool, port: Int) -> Double {
        let mode = checking ? "check" : "count"
        let sinkOutput = Pipe()
        let sink = start([CommandLine.arguments[0], "tls-sink", baselineFolder, String(port), mode], output: sinkOutput)
        _ = sinkOutput.fileHandleForReading.availableData
        let sourceOutput = Pipe()
        let source = start([CommandLine.arguments[0], "tls-source", baselineFolder, String(port), mode], output: sourceOutput)
        let sourceText = String(decoding: sourceOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        source.waitUntilExit()
        stop(sink)
        sink.waitUntilExit()
        let parts = sourceText.split(whereSeparator: \.isWhitespace)
        guard parts.count == 3, parts[0] == "ok", let start = UInt64(parts[1]), let end = UInt64(parts[2]) else {
            fail("the raw TLS baseline (\(mode)) failed: \(sourceText)")
        }
        return Double(end - start) / 1e9
    }

    // Two agents, paired, with the app installed on both.
    let discoveryPort = String(Int.random(in: 20_000..<40_000))
    for host in [a, b] {
        processes.append(start([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name == "a" ? "origin" : "receiver", "--state-dir", host.state,
            "--socket", host.socket, "--listen", "\(host.address):\(host.port)", "--interface", "lo", "--discovery-port", discoveryPort,
            "--dns-sd", "off", "--development-mode", "on", "--log-level", "error",
        ]))
    }
    await pair(a, b)
    let app = try appFolder("Streams", bundle: streamBundle, activityType: streamType)
    _ = await call(a, .installApp(directory: app))
    _ = await call(b, .installApp(directory: app))

    // The origin app on A, run from where A installed it (the agent checks its executable).
    let originProcess = ChildProcess()
    originProcess.executableURL = URL(fileURLWithPath: "\(a.state)/apps/\(streamBundle)/AgentBenchmark")
    originProcess.arguments = ["stream-origin"]
    var environment = ProcessInfo.processInfo.environment
    environment["HANDOFF_SOCKET"] = a.socket
    originProcess.environment = environment
    originProcess.standardOutput = FileHandle.nullDevice
    try originProcess.run()
    processes.append(originProcess)
    var offered: UUID?
    await waitFor("B to list the origin's activity") {
        offered = (await call(b, .nearby).activities ?? []).first { $0.activity.activityType == streamType }?.activity.id
        return offered != nil
    }

    // Memory of both agents, before and (sampled every 50 ms) during the transfers.
    let agentPIDs = [processes[0].processIdentifier, processes[1].processIdentifier]
    let before = agentPIDs.map { usage($0).rssKB }
    let peaks = Mutex(before)
    let sampling = Task.detached {
        while !Task.isCancelled {
            let now = agentPIDs.map { usage($0).rssKB }
            peaks.withLock { peaks in for i in peaks.indices { peaks[i] = max(peaks[i], now[i]) } }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
    /// One transfer through both agents: a continuation, whose app opens the streams, writes
    /// `streamTotal` bytes and reads back the receiver's answer. Its seconds.
    func throughAgents() async throws -> Double {
        let log = "\(b.state)/data/\(streamBundle)/stream.log"
        try? FileManager.default.removeItem(atPath: log)
        _ = await call(b, .continue(activity: offered))
        await waitFor("the receiving app to send \(Int(megabytes)) MiB and get the answer back", seconds: 600) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").hasSuffix("\n")
        }
        let parts = (try String(contentsOfFile: log, encoding: .utf8)).split(whereSeparator: \.isWhitespace)
        guard parts.count == 3, parts[0] == "ok", let streamStart = UInt64(parts[1]), let streamEnd = UInt64(parts[2]) else {
            fail("the stream transfer failed: \(parts.joined(separator: " "))")
        }
        return Double(streamEnd - streamStart) / 1e9
    }

    // Each run: the bare baseline, the checksummed baseline, and the streams, one after the
    // other on the same machine; runs repeat until their medians agree.
    /// The independent baseline: OpenSSL, through Python's ssl module (tls_stream.py).
    func openSSL() -> Double { openSSLStream(folder: baselineFolder, bytes: streamTotal) }
    // A profiling aid: STREAMS_ONLY=N runs N transfers through the agents and nothing else,
    // printing the agents' and apps' process ids first (for `perf record -p`).
    if let only = ProcessInfo.processInfo.environment["STREAMS_ONLY"].flatMap(Int.init) {
        print("agents \(agentPIDs.map(String.init).joined(separator: " ")), origin app \(originProcess.processIdentifier)")
        fflush(nil)
        let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
        for _ in 0..<only {
            let before = (agentPIDs + [originProcess.processIdentifier]).map { usage($0).ticks }
            let seconds = try await throughAgents()
            let after = (agentPIDs + [originProcess.processIdentifier]).map { usage($0).ticks }
            let perGiB = zip(before, after).map { Double($1 - $0) / tick / (megabytes / 1024) }
            print(String(format: "%.0f MiB/s; CPU s per GiB: agent A %.2f, agent B %.2f, origin app %.2f", megabytes / seconds, perGiB[0], perGiB[1], perGiB[2]))
            fflush(nil)
        }
        sampling.cancel()
        return Targets()
    }
    var port = base + 50
    let names = ["streams", "NIO TLS", "NIO TLS, checked", "OpenSSL TLS"]
    let runs = try await repeatRuns(names) { _ in
        port += 2
        let bare = megabytes / baseline(checking: false, port: port)
        let checked = megabytes / baseline(checking: true, port: port + 1)
        let independent = openSSL()
        let streams = megabytes / (try await throughAgents())
        return ["streams": [streams], "NIO TLS": [bare], "NIO TLS, checked": [checked], "OpenSSL TLS": [independent]]
    }
    sampling.cancel()
    let after = agentPIDs.map { usage($0).rssKB }
    let peak = peaks.withLock { $0 }
    let ratios = (0..<runs.count).map { run in runs.samples["streams"]![run][0] / names.dropFirst().map { runs.samples[$0]![run][0] }.max()! }
    func mb(_ kb: Int) -> String { String(format: "%.1f MB", Double(kb) / 1024) }
    func rate(_ name: String) -> String { "\(format(runs.percentile(name, 0.5), 0)) MiB/s" }
    print("""
        Streams benchmark. Machine: \(machineDescription()).
        \(Int(megabytes)) MiB a run, loopback, every byte compared with what was sent at the receiver through the agents (not hashed: SHA-256 there cost 0.7 CPU s per GiB that no baseline pays). Release build, static Swift runtime.
        Raw TLS 1.3 streams, one process per side, both certificates (P-256) presented and each side accepting only the other's: \
        NIO writing \(blastWrite / 1024) KiB slices of a 1 MiB block whenever the connection takes them, all on its event loop, the receiver counting (bare) or comparing every byte \
        on its event loop (checked, as the streams are); and OpenSSL through Python's ssl (Benchmarks/tls_stream.py, 1 MiB \
        sendall and recv_into), the independent one.
        \(runs.agreement(minimum: 3))

        | run | streams through both agents | NIO TLS | NIO TLS, checked | OpenSSL TLS | streams / the fastest baseline |
        | --- | --- | --- | --- | --- | --- |
        \((0..<runs.count).map { run in
            "| \(run + 1) | " + names.map { "\(format(runs.samples[$0]![run][0], 0)) MiB/s" }.joined(separator: " | ")
                + " | \(format(ratios[run] * 100, 0)) % |"
        }.joined(separator: "\n"))
        | median | \(names.map(rate).joined(separator: " | ")) | \(format(percentile(ratios, 0.5) * 100, 0)) % |

        | agent | resident memory before | peak | after |
        | --- | --- | --- | --- |
        | A (origin side) | \(mb(before[0])) | \(mb(peak[0])) | \(mb(after[0])) |
        | B (continuing side) | \(mb(before[1])) | \(mb(peak[1])) | \(mb(after[1])) |

        """)
    let targets = Targets()
    targets.check("streams ≥ 50 % of the fastest raw TLS baseline, every run", ratios.allSatisfy { $0 >= 0.5 }, "lowest \(format((ratios.min() ?? 0) * 100, 0)) %")
    for (name, index) in [("A", 0), ("B", 1)] {
        targets.check("agent \(name)'s peak resident memory during transfers < 64 MB", peak[index] < 64 * 1024, mb(peak[index]))
    }
    print(targets.table)
    return targets
}
