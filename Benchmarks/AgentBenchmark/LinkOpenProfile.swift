// A profiling aid, not a benchmark with targets: opens links between two identities in this
// process over loopback, as an agent does (TLS 1.3 with shown certificates, the membership
// proof each way, hello), `count` times, and prints the median next to the bare TLS baseline
// made in this process too. Run it under `perf record` to see where a link's opening goes.
//   AgentBenchmark link-open [COUNT]
import BenchmarkReport
import Foundation
import HandoffAgent
import HandoffWire
import NIOCore
import NIOPosix

func profileLinkOpen(count: Int) async throws {
    let a = try DeviceIdentity.generate(name: "a")
    let b = try DeviceIdentity.generate(name: "b")
    let key = [UInt8](repeating: 7, count: 32)
    a.links.useAccountKeys([key])
    b.links.useAccountKeys([key])
    let pins: Set<String> = [a.fingerprint, b.fingerprint]
    let listener = try await LinkListener(identity: a, trust: .members({ pins.contains($0) })) { frame, _ in
        if case .hello? = try? LinkMessage(frame: frame) { return LinkMessage.hello(version: LinkMessage.version, device: a.id).frame }
        return nil
    }
    var samples: [Double] = []
    for index in 0..<(count + 20) {
        let start = now()
        let connection = try await TLSLink.open(host: "127.0.0.1", port: listener.port, identity: b, pins: { pins })
        if index >= 20 { samples.append(milliseconds(now() - start)) }
        connection.close()
    }
    samples.sort()
    print("link open (TLS, proof each way, hello), in process over loopback: p50 \(samples[samples.count / 2]) ms over \(count)")
    await listener.close()
}
