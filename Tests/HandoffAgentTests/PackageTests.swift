import Foundation
import HandoffProcess
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the package test needs that this machine may lack, or nil when it can run: root (it
/// installs a package system-wide, makes users and network namespaces), apt-get, dpkg-dev's
/// dpkg-shlibdeps, lintian, and no `handoff` package it did not install itself.
let packageTestBlocker: String? = {
    guard getuid() == 0 else { return "not root" }
    guard canMakeNamespaces else { return "no network namespaces" }
    for tool in ["/usr/bin/apt-get", "/usr/bin/dpkg-deb", "/usr/bin/dpkg-shlibdeps", "/usr/bin/lintian", "/usr/sbin/useradd", "/usr/sbin/runuser"]
    where !FileManager.default.isExecutableFile(atPath: tool) {
        return "\(tool) is missing (.ci/run installs it)"
    }
    // "installed" exactly: a purged package may still be listed as "not-installed".
    let status = (try? shell(["dpkg-query", "-W", "-f=${db:Status-Status}", "handoff"])) ?? ""
    if status.trimmingCharacters(in: .whitespacesAndNewlines) == "installed" && !FileManager.default.fileExists(atPath: "/var/lib/handoff-package-test") {
        return "a handoff package this test did not install is on this machine"
    }
    return nil
}()

/// The Debian package end to end, by Scripts/package-test.sh: built twice (this version and a
/// newer build), lintian clean, installed with apt-get; the installed programs pair two users
/// on two hosts and continue MapViewer between them; the newer build installed over it keeps
/// the account, devices and apps, which still continue; purge leaves no file of the package and
/// every user's state. The packages come from a release build, or from the debug build when
/// .ci/run made them before the tests (HANDOFF_PACKAGE_TEST_PACKAGES).
@Suite(
    "The Debian package", .serialized,
    .enabled(if: packageTestBlocker == nil, "needs root, network namespaces, apt-get, dpkg-dev and lintian, and no handoff package it did not install; skipped"))
struct PackageTests {
    @Test(.timeLimit(.minutes(30)))
    func installUpgradeAndPurge() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Scripts/package-test.sh").standardizedFileURL
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-package-test-\(getpid()).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let output = try FileHandle(forWritingTo: log)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script.path]
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let ended = await process.exited()
        try output.close()
        let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        // Its summary (sizes, the time from apt-get install to the first continuation) is what
        // docs/operations.md reports: shown in the test's output.
        print(text.split(separator: "\n").suffix(4).joined(separator: "\n"))
        #expect(ended.status == 0, "Scripts/package-test.sh exited with \(ended.status):\n\(text.split(separator: "\n").suffix(60).joined(separator: "\n"))")
    }
}
