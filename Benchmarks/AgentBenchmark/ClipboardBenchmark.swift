// Benchmarks/clipboard.sh: the account's clipboard between two handoffd processes on loopback.
// A copy on A until B's agent tells a watching client (what a session service hears); a paste
// on B of 1 KB A copied, from the request to the last byte, against a request and its answer of
// the same size on a raw TLS connection kept open; a paste of 64 MiB against a raw TLS stream.
import BenchmarkReport
import Foundation
import HandoffLocalAPI
import Synchronization

#if canImport(Glibc)
import Glibc
import HandoffProcess
#endif

/// Blocking local-socket work, on a thread of its own.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

struct ClipboardFailure: Error, CustomStringConvertible {
    let description: String
}

/// Copies `bytes` as `type` through the agent at `socket`, as `handoff copy` does.
func clipboardCopy(_ socket: String, _ bytes: [UInt8], type: String) throws {
    let connection = try LocalStreamSocket.open(path: socket, call: .copy(version: LocalMessage.version, clipboardType: type))
    defer { connection.close() }
    var offset = 0
    repeat {
        let end = min(bytes.count, offset + LocalStreamFrame.maximumData)
        if end > offset { try connection.write(kind: LocalStreamFrame.data, Array(bytes[offset..<end])) }
        offset = end
    } while offset < bytes.count
    try connection.write(kind: LocalStreamFrame.end)
    guard let answer = try connection.readFrame(), answer.kind == LocalStreamFrame.end else { throw ClipboardFailure(description: "the copy was not offered") }
}

/// Pastes through the agent at `socket`, as `handoff paste` does: the bytes and the time from
/// the request to the end.
func clipboardPaste(_ socket: String) throws -> (count: Int, nanoseconds: UInt64) {
    let start = now()
    let (connection, _) = try LocalStreamSocket.opened(path: socket, call: .paste(version: LocalMessage.version, clipboardType: nil))
    defer { connection.close() }
    var count = 0
    while let frame = try connection.readFrame() {
        switch frame.kind {
        case LocalStreamFrame.data: count += frame.payload.count
        case LocalStreamFrame.end: return (count, now() - start)
        default: throw ClipboardFailure(description: "the paste failed: \(String(decoding: frame.payload, as: UTF8.self))")
        }
    }
    throw ClipboardFailure(description: "the paste ended early")
}

func clipboardBenchmark() async throws -> Targets {
    try? FileManager.default.removeItem(atPath: root)
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let hosts = TwoHosts(prefix: "hc", subnet: "10.80.0")
    let (a, b, interface, useNamespaces, base) = (hosts.a, hosts.b, hosts.interface, hosts.namespaces, hosts.base)
    var processes: [ChildProcess] = []
    defer {
        for process in processes { stop(process) }
        hosts.remove()
    }
    let offers = Int(ProcessInfo.processInfo.environment["OFFERS"] ?? "") ?? 30
    let pastes = Int(ProcessInfo.processInfo.environment["PASTES"] ?? "") ?? 100
    let megabytes = Double(streamTotal) / Double(1 << 20)

    let discoveryPort = String(Int.random(in: 20_000..<40_000))
    for host in [a, b] {
        processes.append(start(host.command([
            binaries.appendingPathComponent("handoffd").path, "--name", host.name == "a" ? "alpha" : "beta", "--state-dir", host.state,
            "--socket", host.socket, "--listen", "\(host.address):\(host.port)", "--interface", interface, "--discovery-port", discoveryPort,
            "--dns-sd", "off", "--log-level", "error", "--clipboard-expiry", "1h",
        ])))
    }
    await pair(a, b)

    // What a session service on B hears: each clipboard B's agent tells it of, by generation.
    let heard = Mutex<[UInt64: UInt64]>([:])
    let watcher = try LocalClient(path: b.socket, role: .control) { message in
        guard case .clipboardChanged(let clipboard?) = message else { return }
        let at = now()
        heard.withLock { if $0[clipboard.generation] == nil { $0[clipboard.generation] = at } }
    }
    defer { watcher.close() }
    _ = try await watcher.call(.watchClipboard(session: nil))

    /// One copy of 1 KB on A: its milliseconds until B's watcher hears of it.
    let text = [UInt8](repeating: 0x61, count: 1024)
    func offerOnce() async throws -> Double {
        let start = now()
        try await onOwnThread { try clipboardCopy(a.socket, text, type: "text/plain;charset=utf-8") }
        guard let generation = await call(a, .status).status?.clipboard?.generation else { fail("A shows no copy") }
        await waitFor("B to hear the copy") { heard.withLock { $0[generation] != nil } }
        return milliseconds(heard.withLock { $0[generation]! } - start)
    }

    // The baselines' processes: a TLS echo server for the exchange, a sink for the stream.
    let baselineFolder = "\(root)/tls"
    try makeBareTLSIdentities(in: baselineFolder)
    let echoPort = base + 40
    let echoOutput = Pipe()
    // The server on A, the client on B: the paste's path.
    processes.append(start(a.command([CommandLine.arguments[0], "tls-server", baselineFolder, a.address, String(echoPort)]), output: echoOutput))
    _ = echoOutput.fileHandleForReading.availableData
    func warmExchanges() -> [Double] {
        let output = Pipe()
        let client = start(b.command([CommandLine.arguments[0], "tls-warm-client", baselineFolder, a.address, String(echoPort), String(pastes), "1024"]), output: output)
        let values = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").compactMap { Double($0) }
        client.waitUntilExit()
        guard values.count == pastes else { fail("the warm TLS exchange measured \(values.count) of \(pastes)") }
        return values
    }
    // The raw stream's steady rate: 512 MiB a run, so that its handshake and first round trips
    // (which a 64 MiB transfer of its own would count, making it slower than it can be) weigh nothing.
    let rawBytes = 512 << 20
    var streamPort = base + 60
    func rawStream() -> Double {
        streamPort += 1
        let sinkOutput = Pipe()
        // The sink on B, the source on A: the large paste's direction.
        let sink = start(
            b.command(["env", "STREAM_BYTES=\(rawBytes)", "STREAM_HOST=\(b.address)", CommandLine.arguments[0], "tls-sink", baselineFolder, String(streamPort), "count"]),
            output: sinkOutput)
        _ = sinkOutput.fileHandleForReading.availableData
        let sourceOutput = Pipe()
        let source = start(
            a.command(["env", "STREAM_BYTES=\(rawBytes)", "STREAM_HOST=\(b.address)", CommandLine.arguments[0], "tls-source", baselineFolder, String(streamPort), "count"]),
            output: sourceOutput)
        let sourceText = String(decoding: sourceOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        source.waitUntilExit()
        stop(sink)
        let parts = sourceText.split(whereSeparator: \.isWhitespace)
        guard parts.count == 3, parts[0] == "ok", let start = UInt64(parts[1]), let end = UInt64(parts[2]) else { fail("the raw TLS stream failed: \(sourceText)") }
        return Double(rawBytes >> 20) / (Double(end - start) / 1e9)
    }
    /// The independent one: OpenSSL through Python's ssl (Benchmarks/tls_stream.py), 512 MiB, both
    /// ends in one process on loopback (the faster path: no veth).
    func openSSL() -> Double { openSSLStream(folder: baselineFolder, bytes: rawBytes) }
    var picture = [UInt8](repeating: 0, count: streamTotal)
    for index in picture.indices { picture[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13) }
    let large = picture

    let names = ["offer visible", "paste 1 KB", "TLS exchange 1 KB", "paste 64 MiB", "NIO TLS stream", "OpenSSL TLS stream"]
    let runs = try await repeatRuns(names) { _ in
        var run: [String: [Double]] = [:]
        for _ in 0..<offers {
            run["offer visible", default: []].append(try await offerOnce())
            // Copies a person makes, not a burst: each its own beacon.
            try await Task.sleep(for: .milliseconds(20))
        }
        // The link is open after the first paste; the measured ones follow it.
        for index in 0..<(pastes + 5) {
            let (count, nanoseconds) = try await onOwnThread { try clipboardPaste(b.socket) }
            guard count == text.count else { fail("a paste brought \(count) bytes of \(text.count)") }
            if index >= 5 { run["paste 1 KB", default: []].append(milliseconds(nanoseconds)) }
        }
        run["TLS exchange 1 KB"] = warmExchanges()
        try await onOwnThread { try clipboardCopy(a.socket, large, type: "image/png") }
        guard let generation = await call(a, .status).status?.clipboard?.generation else { fail("A shows no copy") }
        await waitFor("B to hear the picture") { heard.withLock { $0[generation] != nil } }
        let (count, nanoseconds) = try await onOwnThread { try clipboardPaste(b.socket) }
        guard count == large.count else { fail("the large paste brought \(count) bytes of \(large.count)") }
        run["paste 64 MiB"] = [megabytes / (Double(nanoseconds) / 1e9)]
        run["NIO TLS stream"] = [rawStream()]
        run["OpenSSL TLS stream"] = [openSSL()]
        return run
    }
    func fastest(_ run: Int) -> Double { max(runs.samples["NIO TLS stream"]![run][0], runs.samples["OpenSSL TLS stream"]![run][0]) }
    let ratios = (0..<runs.count).map { runs.samples["paste 64 MiB"]![$0][0] / fastest($0) }
    let offerP50 = runs.percentile("offer visible", 0.5)
    let pasteP50 = runs.percentile("paste 1 KB", 0.5)
    let exchangeP50 = runs.percentile("TLS exchange 1 KB", 0.5)
    print("""
        Clipboard benchmark. Machine: \(machineDescription()).
        Two handoffd processes \(useNamespaces ? "in two network namespaces on one bridge (veth)" : "on loopback (not root: no namespaces)") \
        (release build, static Swift runtime), paired. Offer: a copy of 1 KB on A through its \
        local socket until B's agent tells a client watching its clipboard (\(offers) copies a run, 20 ms apart). Paste: 1 KB A \
        copied, pasted on B through its local socket, from the request to the last byte, the link open (\(pastes) a run, after 5), \
        against the same size asked and answered on a raw TLS 1.3 connection kept open between two processes (both certificates, \
        NIO, server on A, client on B). Large: \(Int(megabytes)) MiB A copied, pasted on B, against the steady rate of a raw TLS 1.3 \
        stream (512 MiB: NIO from A to B writing 256 KiB slices, the receiver counting; and OpenSSL through Python's ssl in one \
        process on loopback, Benchmarks/tls_stream.py).
        \(runs.agreement(minimum: 3))

        \(runs.table(unit: ""))

        | run | paste \(Int(megabytes)) MiB | NIO TLS stream | OpenSSL TLS stream | paste / the faster |
        | --- | --- | --- | --- | --- |
        \((0..<runs.count).map { run in
            "| \(run + 1) | \(format(runs.samples["paste 64 MiB"]![run][0], 0)) MiB/s | \(format(runs.samples["NIO TLS stream"]![run][0], 0)) MiB/s | "
                + "\(format(runs.samples["OpenSSL TLS stream"]![run][0], 0)) MiB/s | \(format(ratios[run] * 100, 0)) % |"
        }.joined(separator: "\n"))

        """)
    let targets = Targets()
    targets.check("a copy visible on the other device, p50 ≤ 10 ms", offerP50 <= 10, "\(format(offerP50, 3)) ms")
    targets.check(
        "a paste of 1 KB with the link open, p50 ≤ 5 ms", pasteP50 <= 5,
        "\(format(pasteP50, 3)) ms (\(format(pasteP50 / exchangeP50, 1))× the raw TLS exchange, \(format(exchangeP50, 3)) ms)")
    targets.check("a \(Int(megabytes)) MiB paste ≥ 50 % of the faster raw TLS stream, every run", ratios.allSatisfy { $0 >= 0.5 }, "lowest \(format((ratios.min() ?? 0) * 100, 0)) %")
    print(targets.table)
    return targets
}
