import Foundation
import HandoffLocalAPI
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent
import HandoffProcess

/// Whether avahi (daemon and tools) and a D-Bus daemon are installed, for the interop tests.
let hasAvahi = ["/usr/sbin/avahi-daemon", "/usr/bin/avahi-browse", "/usr/bin/avahi-publish", "/usr/bin/dbus-daemon"]
    .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

/// avahi running inside one namespace of a segment, on a private D-Bus system bus of its own,
/// with its own `/run` (so that it never meets a host's avahi): started by the test, stopped
/// with it.
final class NamespaceAvahi: Sendable {
    let bus: String
    private let processes: Mutex<[ChildProcess]>
    let namespace: String

    init(segment: Segment, host: String) async throws {
        namespace = "\(segment.prefix)\(host)"
        let folder = segment.harness.root.appendingPathComponent("avahi-\(host)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        bus = folder.appendingPathComponent("bus").path
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(bus)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """.write(to: folder.appendingPathComponent("bus.conf"), atomically: true, encoding: .utf8)
        try """
            [server]
            host-name=avahi-\(host)
            use-ipv4=yes
            use-ipv6=yes
            allow-interfaces=eth0
            enable-dbus=yes
            [wide-area]
            enable-wide-area=no
            [publish]
            publish-hinfo=no
            publish-workstation=no
            """.write(to: folder.appendingPathComponent("avahi.conf"), atomically: true, encoding: .utf8)
        processes = Mutex([])
        // Both daemonize, and are stopped with the namespace's other processes (`Segment`).
        try await daemon(["dbus-daemon", "--fork", "--config-file=\(folder.path)/bus.conf"])
        try #require(await eventually(within: .seconds(5)) { FileManager.default.fileExists(atPath: self.bus) }, "dbus-daemon did not start")
        // A /run of its own: avahi keeps its pid file and socket there.
        try await daemon(["unshare", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /run && exec avahi-daemon -D -f \(folder.path)/avahi.conf --no-chroot --no-drop-root --no-rlimits"])
        let up = await eventually(within: .seconds(10)) { (try? await self.run(["avahi-browse", "-tp", "_nothing._tcp"])) != nil }
        try #require(up, "avahi-daemon did not start in \(namespace)")
    }

    /// Starts a daemon that forks in the namespace, and waits for its first process to exit.
    /// The shell points the daemon's standard streams at /dev/null first: a daemon that kept
    /// the output pipe would hold the read of its output open for as long as it runs.
    private func daemon(_ arguments: [String]) async throws {
        let detach = #"for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] 2>/dev/null && eval "exec $n>&-"; done; exec "$@" </dev/null >/dev/null 2>&1"#
        try await run(["bash", "-c", detach, "bash"] + arguments)
    }

    private func launch(_ arguments: [String]) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ip", "netns", "exec", namespace, "env", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(bus)"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        processes.withLock { $0.append(process) }
        return process
    }

    /// Runs an avahi tool in the namespace, on this avahi's bus.
    @discardableResult
    func run(_ arguments: [String]) async throws -> String {
        let full = ["ip", "netns", "exec", namespace, "env", "DBUS_SYSTEM_BUS_ADDRESS=unix:path=\(bus)"] + arguments
        return try await onThread { try shell(full) }
    }

    /// Publishes a service through avahi until `stop`.
    func publish(_ arguments: [String]) throws {
        _ = try launch(["avahi-publish", "-s"] + arguments)
    }

    /// `avahi-browse -rtp` of `_handoff._tcp`: the resolved lines (`=;eth0;IPv4;NAME;...`).
    func browse() async throws -> [String] {
        try await run(["avahi-browse", "-rtp", "_handoff._tcp"]).split(separator: "\n").map(String.init).filter { $0.hasPrefix("=") }
    }

    func stop() {
        for process in processes.withLock({ $0.reversed() }) where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}

extension NamespaceTests {
    @Test(
        "DNS-SD beside avahi: avahi-browse in another namespace resolves our service, with nothing identifying; we find a service avahi publishes; both share port 5353 on one host; our name is defended against avahi's probe; a stopped agent says goodbye",
        .enabled(if: hasAvahi, "needs avahi-daemon, avahi-utils and dbus-daemon (apt-get install avahi-daemon avahi-utils); skipped"))
    func avahiInterop() async throws {
        try await Segment.with { segment in
            let avahi = try await NamespaceAvahi(segment: segment, host: "c")
            defer { avahi.stop() }
            try await avahiInterop(segment, avahi)
        }
    }

    func avahiInterop(_ segment: Segment, _ avahi: NamespaceAvahi) async throws {
        // A alone in its namespace; C beside avahi, on the same port 5353.
        let a = try await segment.start("a", name: "alpha")
        let c = try await segment.start("c", name: "gamma")
        try await segment.harness.pair([a, c])
        func ownInstance(_ device: TestDevice) async throws -> String? {
            try await device.call(.doctor).checks?.first { $0.area == "dns-sd" && $0.status == .ok }?.subject
        }
        let names = await eventually(within: .seconds(10)) {
            let onA = try? await ownInstance(a), onC = try? await ownInstance(c)
            return onA != nil && onC != nil
        }
        try #require(names, "both agents announce their DNS-SD names")
        let instanceA = try #require(try await ownInstance(a)), instanceC = try #require(try await ownInstance(c))

        // avahi (in C's namespace) resolves both: A over the link, C on its own host.
        var lines: [String] = []
        let resolved = await eventually(within: .seconds(15)) {
            lines = (try? await avahi.browse()) ?? []
            return lines.contains { $0.contains(";\(instanceA);") && $0.contains(segment.address("a")) }
                && lines.contains { $0.contains(";\(instanceC);") }
        }
        #expect(resolved, "avahi-browse printed: \(lines)")
        let lineA = try #require(lines.first { $0.contains(";\(instanceA);") && $0.contains("IPv4") })
        #expect(lineA.hasSuffix(";47170;\"v=1\""), "\(lineA)")
        for line in lines {
            #expect(!line.contains("alpha") && !line.contains("gamma"), "no device name in \(line)")
        }

        // A service avahi publishes is found by both our agents: A across the link, C beside it.
        try avahi.publish(["Some printer", "_handoff._tcp", "4242", "v=1"])
        func findsPublished(_ device: TestDevice) async throws -> Bool {
            try await device.call(.doctor).checks?.contains { $0.area == "dns-sd-service" && $0.subject == "Some printer" && $0.finding.contains("port 4242") } ?? false
        }
        #expect(await eventually(within: .seconds(15)) { (try? await findsPublished(a)) ?? false }, "A finds avahi's service")
        #expect(await eventually(within: .seconds(15)) { (try? await findsPublished(c)) ?? false }, "C finds avahi's service beside it")
        // And A lists C's service as a device of the account.
        let seenC = try #require(try await a.call(.doctor).checks?.first { $0.area == "dns-sd-service" && $0.subject == instanceC })
        #expect(seenC.finding.contains("a device of this account"), "\(seenC)")

        // avahi asks for A's very name: A defends it, so avahi takes another ("NAME #2") and A
        // keeps its own.
        try avahi.publish([instanceA, "_handoff._tcp", "5555"])
        var renamed: [String] = []
        let defended = await eventually(within: .seconds(15)) {
            renamed = (try? await avahi.browse()) ?? []
            // avahi-browse -p escapes the space and '#' in decimal: "NAME\032\0352".
            return renamed.contains { $0.contains(";\(instanceA)\\032\\0352;") && $0.contains(";5555;") }
        }
        #expect(defended, "avahi-browse printed: \(renamed)")
        #expect(renamed.contains { $0.contains(";\(instanceA);") && $0.contains(";47170;") }, "A keeps its name")
        #expect(try await ownInstance(a) == instanceA)

        // A stops: its goodbye takes it out of avahi's list at once, not after its TTL.
        await segment.stop("a")
        let gone = await eventually(within: .seconds(10)) { !((try? await avahi.browse()) ?? []).contains { $0.contains(";\(instanceA);") } }
        #expect(gone, "avahi still lists A after its goodbye")
    }
}

extension NamespaceTests {
    @Test("Rotation on a real link: A's DNS-SD name changes on schedule, and the beacons a bystander captures across rotations share no run of six bytes")
    func rotationOnALink() async throws {
        try await Segment.with { segment in
            let a = try await segment.start("a", name: "alpha", arguments: ["--name-rotation", "5s"])
            let b = try await segment.start("b", name: "beta")
            try await segment.harness.pair([a, b])
            try await segment.harness.installMapViewer(on: b)
            // C is the bystander: it has no agent, only a socket on the group.
            let captured = segment.harness.root.appendingPathComponent("beacons").path
            let collector = Task { [segment] in
                try await onThread {
                    try segment.run(in: "c", ["python3", "-c", beaconTool, "collect", captured, segment.address("c"), segment.address("a"), "16"])
                }
            }
            func currentName() async throws -> String? {
                try await a.call(.doctor).checks?.first(where: { $0.area == "dns-sd" })?.subject
            }
            var names: [String] = []
            for round in 0..<3 {
                // Each new activity goes out at once in a fresh beacon; then the next round
                // waits for the name to rotate.
                _ = try await offer(on: a, seenBy: b, title: "round \(round)")
                let name = try await currentName()
                if let name { names.append(name) }
                _ = await eventually(within: .seconds(8)) { (try? await currentName()).flatMap { $0 } != name }
            }
            _ = try await collector.value
            #expect(Set(names).count >= 2, "the name rotated: \(names)")
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: captured)))
            let beacons = stride(from: 0, to: bytes.count, by: 512).map { Array(bytes[$0..<min($0 + 512, bytes.count)]) }
            try #require(beacons.count >= 3, "captured \(beacons.count) beacons")
            for i in beacons.indices {
                for j in beacons.indices where j > i {
                    #expect(!sharesSixBytes(beacons[i], beacons[j]), "beacons \(i) and \(j) share six bytes")
                }
            }
        }
    }

    func sharesSixBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let runs = Set((0...(a.count - 6)).map { a[$0..<$0 + 6] })
        return (0...(b.count - 6)).contains { runs.contains(b[$0..<$0 + 6]) }
    }
}
