// The continuation streams benchmark (Benchmarks/streams.sh): 1 GiB from one app to another
// through a stream pair, through both agents and their TLS link, against a raw TLS 1.3 stream
// between two processes, in the same run on this machine (loopback). Both are checksummed
// (SHA-256 at the receiver, sent back and compared). The agents' resident memory is sampled
// during the transfer.
//
// The apps are this executable, installed on both devices: the origin (`stream-origin`,
// started by the benchmark on A) offers an activity that supports streams and reads what
// comes; the receiver is started by B's agent for the continuation, opens the streams and
// writes.
import Crypto
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

/// The SHA-256 of `streamTotal` bytes of `streamBlock` repeated.
func expectedDigest() -> [UInt8] {
    var hash = SHA256()
    var left = streamTotal
    while left > 0 {
        let count = min(left, streamBlock.count)
        hash.update(data: streamBlock[..<count])
        left -= count
    }
    return Array(hash.finalize())
}

// MARK: The origin app

/// Reads everything that comes, hashing it, then answers the digest and closes.
final class DigestingOrigin: UserActivityDelegate, Sendable {
    nonisolated init() {}

    func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream) {
        let streams = BenchStreams(input: inputStream, output: outputStream)
        Thread.detachNewThread {
            streams.input.open()
            streams.output.open()
            var hash = SHA256()
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            while true {
                let n = buffer.withUnsafeMutableBufferPointer { streams.input.read($0.baseAddress!, maxLength: $0.count) }
                if n <= 0 { break }
                buffer.withUnsafeBytes { hash.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
            let digest = Array(hash.finalize())
            _ = digest.withUnsafeBufferPointer { streams.output.write($0.baseAddress!, maxLength: $0.count) }
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
    let delegate = DigestingOrigin()
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
                var digest: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 64)
                while true {
                    let n = buffer.withUnsafeMutableBufferPointer { streams.input.read($0.baseAddress!, maxLength: $0.count) }
                    if n <= 0 { break }
                    digest.append(contentsOf: buffer[..<n])
                }
                let end = now()
                streams.input.close()
                let matches = digest == expectedDigest()
                try? "\(failed ? "write-failed" : (matches ? "ok" : "digest-mismatch")) \(start) \(end)\n".write(toFile: log, atomically: true, encoding: .utf8)
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

/// TLS 1.3 with both device certificates, each side accepting only the other's: what a link
/// does, with no framing and no agents.
func rawTLSContext(_ identity: DeviceIdentity) throws -> NIOSSLContext {
    let certificate = try NIOSSLCertificate(bytes: identity.certificateDER, format: .der)
    let key = try NIOSSLPrivateKey(bytes: Array(identity.privateKey.pemRepresentation.utf8), format: .pem)
    var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(certificate)], privateKey: .privateKey(key))
    configuration.minimumTLSVersion = .tlsv13
    configuration.maximumTLSVersion = .tlsv13
    configuration.certificateVerification = .noHostnameVerification
    return try NIOSSLContext(configuration: configuration)
}

func pinned(_ fingerprint: String) -> NIOSSLCustomVerificationCallback {
    { certificates, promise in
        guard let der = try? certificates.first?.toDERBytes() else { return promise.succeed(.failed) }
        promise.succeed(DeviceIdentity.fingerprint(ofCertificate: der) == fingerprint ? .certificateVerified : .failed)
    }
}

/// The receiving end: hashes every byte (unless `hashing` is off: then it only counts, for the
/// bare TLS throughput), and at `streamTotal` answers the digest (32 zero bytes unhashed).
final class DigestHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var hash = SHA256()
    private var count = 0
    private let hashing: Bool

    init(hashing: Bool) { self.hashing = hashing }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        if hashing { buffer.withUnsafeReadableBytes { hash.update(bufferPointer: $0) } }
        count += buffer.readableBytes
        if count == streamTotal {
            let digest = hashing ? Array(hash.finalize()) : [UInt8](repeating: 0, count: 32)
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(bytes: digest)), promise: nil)
        }
    }
}

func runTLSSink(folder: String, port: Int, hashing: Bool) async throws -> Never {
    let (server, client) = try identities(folder)
    let context = try rawTLSContext(server)
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context, customVerificationCallback: pinned(client.fingerprint)))
                try channel.pipeline.syncOperations.addHandler(DigestHandler(hashing: hashing))
            }
        }
        .bind(host: "127.0.0.1", port: port).get()
    print("listening \(channel.localAddress?.port ?? port)")
    fflush(nil)
    while true { try await Task.sleep(for: .seconds(3600)) }
}

/// The sending end: writes `streamTotal` bytes as fast as the connection takes them, then
/// reads the digest. Prints "ok|digest-mismatch START END".
func runTLSSource(folder: String, port: Int, hashing: Bool) async throws {
    let (server, client) = try identities(folder)
    let context = try rawTLSContext(client)
    let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .connect(host: "127.0.0.1", port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(
                    NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: pinned(server.fingerprint)))
                return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
            }
        }
    let start = now()
    let expected = hashing ? expectedDigest() : [UInt8](repeating: 0, count: 32)
    try await channel.executeThenClose { inbound, outbound in
        var left = streamTotal
        let block = ByteBuffer(bytes: streamBlock)
        while left > 0 {
            let count = min(left, streamBlock.count)
            try await outbound.write(count == block.readableBytes ? block : block.getSlice(at: 0, length: count)!)
            left -= count
        }
        var digest: [UInt8] = []
        for try await buffer in inbound {
            digest.append(contentsOf: buffer.readableBytesView)
            if digest.count >= 32 { break }
        }
        print("\(digest == expected ? "ok" : "digest-mismatch") \(start) \(now())")
    }
}

// MARK: The orchestrator

func streamBenchmark() async throws {
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let base = Int.random(in: 20_000..<40_000)
    let a = Host(name: "a", namespace: nil, address: "127.0.0.1", port: base)
    let b = Host(name: "b", namespace: nil, address: "127.0.0.1", port: base + 2)
    var processes: [Process] = []
    defer {
        for process in processes where process.isRunning { process.terminate(); process.waitUntilExit() }
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for pid in pids.compactMap(Int32.init) {
            if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"), exe.hasPrefix(root) { kill(pid, SIGTERM) }
        }
        try? FileManager.default.removeItem(atPath: root)
    }
    let megabytes = Double(streamTotal) / Double(1 << 20)

    // The baselines first: a raw TLS 1.3 stream between two processes, bare (the receiver only
    // counts) and checksummed as the streams are (the receiver hashes on its event loop).
    let baselineFolder = "\(root)/tls"
    _ = try identities(baselineFolder)
    func baseline(hashing: Bool, port: Int) -> Double {
        let mode = hashing ? "hash" : "count"
        let sinkOutput = Pipe()
        let sink = start([CommandLine.arguments[0], "tls-sink", baselineFolder, String(port), mode], output: sinkOutput)
        _ = sinkOutput.fileHandleForReading.availableData
        let sourceOutput = Pipe()
        let source = start([CommandLine.arguments[0], "tls-source", baselineFolder, String(port), mode], output: sourceOutput)
        let sourceText = String(decoding: sourceOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        source.waitUntilExit()
        sink.terminate()
        sink.waitUntilExit()
        let parts = sourceText.split(whereSeparator: \.isWhitespace)
        guard parts.count == 3, parts[0] == "ok", let start = UInt64(parts[1]), let end = UInt64(parts[2]) else {
            fail("the raw TLS baseline (\(mode)) failed: \(sourceText)")
        }
        return Double(end - start) / 1e9
    }
    let bareSeconds = baseline(hashing: false, port: base + 50)
    let baselineSeconds = baseline(hashing: true, port: base + 51)

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
    let originProcess = Process()
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

    // Memory of both agents, before and (sampled every 50 ms) during the transfer.
    let agentPIDs = [processes[1].processIdentifier, processes[2].processIdentifier]
    let before = agentPIDs.map { usage($0).rssKB }
    let peaks = Mutex(before)
    let sampling = Task.detached {
        while !Task.isCancelled {
            let now = agentPIDs.map { usage($0).rssKB }
            peaks.withLock { peaks in for i in peaks.indices { peaks[i] = max(peaks[i], now[i]) } }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
    _ = await call(b, .continue(activity: offered))
    let log = "\(b.state)/data/\(streamBundle)/stream.log"
    await waitFor("the receiving app to send \(Int(megabytes)) MiB and get the digest back", seconds: 600) {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").hasSuffix("\n")
    }
    sampling.cancel()
    let after = agentPIDs.map { usage($0).rssKB }
    let parts = (try String(contentsOfFile: log, encoding: .utf8)).split(whereSeparator: \.isWhitespace)
    guard parts.count == 3, parts[0] == "ok", let streamStart = UInt64(parts[1]), let streamEnd = UInt64(parts[2]) else {
        fail("the stream transfer failed: \(parts.joined(separator: " "))")
    }
    let streamSeconds = Double(streamEnd - streamStart) / 1e9
    let peak = peaks.withLock { $0 }
    let handoffRate = megabytes / streamSeconds
    let baselineRate = megabytes / baselineSeconds
    let bareRate = megabytes / bareSeconds
    let fastest = max(bareRate, baselineRate)
    func mb(_ kb: Int) -> String { String(format: "%.1f MB", Double(kb) / 1024) }
    print("""
        Streams benchmark: \(Int(megabytes)) MiB, loopback, SHA-256 checked at the receiver on both paths. Same run, same machine \
        (\(ProcessInfo.processInfo.activeProcessorCount) cores).

        | measure | time | throughput | target |
        | --- | --- | --- | --- |
        | app to app through both agents and their TLS link, SHA-256 checked | \(String(format: "%.2f", streamSeconds)) s | \(String(format: "%.0f", handoffRate)) MiB/s | ≥ 50 % of baseline |
        | baseline: raw TLS 1.3 stream between two processes, bare (counted, not hashed) | \(String(format: "%.2f", bareSeconds)) s | \(String(format: "%.0f", bareRate)) MiB/s | |
        | baseline: raw TLS 1.3 stream, SHA-256 checked on the receiver's event loop | \(String(format: "%.2f", baselineSeconds)) s | \(String(format: "%.0f", baselineRate)) MiB/s | |
        | streams / the faster baseline | | \(String(format: "%.0f", handoffRate / fastest * 100)) % | ≥ 50 % |
        | agent A (origin side), resident memory before / peak / after | \(mb(before[0])) / \(mb(peak[0])) / \(mb(after[0])) | | bounded |
        | agent B (continuing side), resident memory before / peak / after | \(mb(before[1])) / \(mb(peak[1])) / \(mb(after[1])) | | bounded |
        """)
}
