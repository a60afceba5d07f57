import Crypto
import Foundation
import Handoff
import HandoffLocalAPI
import HandoffTesting
import Testing

@testable import HandoffAgent
import HandoffProcess

/// The native-messaging host, started as a browser starts it, spoken to with native-messaging
/// frames (a 4-byte little-endian length, then JSON).
final class NativeHost: Sendable {
    let process: ChildProcess
    private let input: FileHandle
    private let output: FileHandle

    /// `shared`: started through handoff-programs, the one binary the Debian package ships, by a
    /// link named handoff-browser-host (in the socket's folder), as the package's manifest names it.
    init(socket: String, shared: Bool = false) throws {
        var binary = try #require(builtExecutable("handoff-browser-host"), "handoff-browser-host was not built next to the tests")
        if shared {
            let link = URL(fileURLWithPath: socket).deletingLastPathComponent().appendingPathComponent("shared/handoff-browser-host")
            try FileManager.default.createDirectory(at: link.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: try #require(builtExecutable("handoff-programs")).path)
            binary = link
        }
        process = ChildProcess()
        process.executableURL = binary
        process.arguments = ["chrome-extension://bcgblgbejekhpkmkaoapfinefihbjeha/"]
        var environment = ProcessInfo.processInfo.environment
        environment["HANDOFF_SOCKET"] = socket
        process.environment = environment
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        input = stdin.fileHandleForWriting
        output = stdout.fileHandleForReading
    }

    func send(raw: Data) {
        var length = UInt32(raw.count).littleEndian
        input.write(withUnsafeBytes(of: &length) { Data($0) } + raw)
    }

    /// Sends a message and returns the host's answer.
    func ask(_ message: [String: Any]) async throws -> [String: Any] {
        send(raw: try JSONSerialization.data(withJSONObject: message))
        return try await answer()
    }

    func answer() async throws -> [String: Any] {
        let output = self.output
        let data = try await onThread { () -> Data in
            let header = output.readData(ofLength: 4)
            guard header.count == 4 else { return Data() }
            let length = header.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
            return output.readData(ofLength: Int(length))
        }
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }

    func finish() { try? input.close() }
}

@Suite("The browser extension's native host", .serialized)
struct BrowserTests {
    @Test("The extension's identifier in Chromium follows from the key in its manifest, and handoff browser install names it")
    func extensionIdentity() throws {
        let manifestURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Extensions/Browser/manifest.json").standardizedFileURL
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: manifestURL)) as? [String: Any])
        let key = try #require((manifest["key"] as? String).flatMap { Data(base64Encoded: $0) })
        let id = SHA256.hash(data: key).prefix(16).flatMap { [$0 >> 4, $0 & 0x0F] }.map { Character(UnicodeScalar(UInt8(ascii: "a") + $0)) }
        #expect(String(id) == "bcgblgbejekhpkmkaoapfinefihbjeha")
        #expect(manifest["manifest_version"] as? Int == 3)
        #expect((manifest["permissions"] as? [String])?.contains("nativeMessaging") == true)
    }

    @Test("handoff browser install writes each browser's manifest naming the host and the extension; a wrong browser is named")
    func install() async throws {
        let home = try makeFolder("home")
        defer { try? FileManager.default.removeItem(at: home) }
        let handoff = try #require(builtExecutable("handoff"))
        let (status, printed) = try await runCommand(handoff, ["browser", "install", "--json"], environment: ["HOME": home.path, "PATH": "/usr/bin:/bin"])
        #expect(status == 0, "\(printed)")
        let chromium = home.appendingPathComponent(".config/chromium/NativeMessagingHosts/org.handoff.browser.json")
        let firefox = home.appendingPathComponent(".mozilla/native-messaging-hosts/org.handoff.browser.json")
        let c = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: chromium)) as? [String: Any])
        let f = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: firefox)) as? [String: Any])
        #expect(c["allowed_origins"] as? [String] == ["chrome-extension://bcgblgbejekhpkmkaoapfinefihbjeha/"])
        #expect(f["allowed_extensions"] as? [String] == ["browser@handoff.invalid"])
        #expect((c["path"] as? String)?.hasSuffix("/handoff-browser-host") == true && c["type"] as? String == "stdio")
        #expect(FileManager.default.isExecutableFile(atPath: c["path"] as? String ?? ""))

        let (badStatus, badPrinted) = try await runCommand(handoff, ["browser", "install", "--browser", "netscape"])
        #expect(badStatus != 0 && badPrinted.contains("'netscape' is not one of"), "\(badPrinted)")
    }

    @Test("The native host, spoken to with native-messaging frames: the active tab's page is offered to the other device and opens there in its browser; resigning withdraws it; a video's time goes into the address when it is fetched, and the page's media is paused when it was continued; bad messages get an error answer (the host alone, and through the package's shared binary)", arguments: [false, true])
    func nativeMessaging(shared: Bool) async throws {
        try await withHarness { harness in
            let opened = harness.root.appendingPathComponent("opened.txt")
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") { $0.browserCommand = ["sh", "-c", "printf %s \"$0\" > \(opened.path)"] }
            try await harness.pair([a, b])
            let host = try NativeHost(socket: a.socket, shared: shared)
            defer { host.process.terminate() }

            let page = "https://news.example.com/articles/7"
            let answer = try await host.ask(["type": "page", "tab": 4, "url": page, "title": "An article"])
            #expect(answer["ok"] as? Bool == true, "\(answer)")
            let listed = await eventually { (try? await b.nearby().first?.activity.title) == "An article" }
            try #require(listed, "beta never listed the browser's page")
            let offer = try #require(try await b.nearby().first)
            #expect(offer.activity.activityType == NSUserActivityTypeBrowsingWeb && offer.handler == "browser")
            let continued = try #require(try await b.call(.continue(activity: offer.activity.id)).continued)
            #expect(continued.webpageURL == page)
            #expect(await eventually { (try? String(contentsOf: opened, encoding: .utf8)) == page })

            #expect(try await host.ask(["type": "resign"])["ok"] as? Bool == true)
            #expect(await eventually { (try? await b.nearby().isEmpty) == true }, "beta still lists the page after the browser resigned it")

            let refused = try await host.ask(["type": "page", "tab": 4, "url": "file:///etc/passwd"])
            #expect(refused["ok"] as? Bool == false && (refused["error"] as? String)?.contains("http or https") == true)
            host.send(raw: Data("not json".utf8))
            #expect(try await host.answer()["ok"] as? Bool == false)
            // A message over 64 KiB (a huge URL) is skipped with an error, and the host goes on.
            host.send(raw: Data(repeating: 0x20, count: 70_000))
            #expect((try await host.answer()["error"] as? String)?.contains("skipped") == true)
            #expect(try await host.ask(["type": "resign"])["ok"] as? Bool == true)

            // A video site's page with the time its tab said: continued at that moment, and the
            // extension is told to pause the page's media here.
            let video = "https://www.youtube.com/watch?v=abc"
            #expect(try await host.ask(["type": "page", "tab": 5, "url": video, "title": "A video"])["ok"] as? Bool == true)
            #expect(try await host.ask(["type": "time", "tab": 5, "seconds": 83])["ok"] as? Bool == true)
            let wrongTime = try await host.ask(["type": "time", "tab": 5, "seconds": -1])
            #expect(wrongTime["ok"] as? Bool == false && (wrongTime["error"] as? String)?.contains("seconds") == true)
            #expect(await eventually { (try? await b.nearby().first?.activity.title) == "A video" })
            let videoOffer = try #require(try await b.nearby().first)
            let atTime = try #require(try await b.call(.continue(activity: videoOffer.activity.id)).continued)
            #expect(atTime.webpageURL == video + "&t=83s")
            let pause = try await host.answer()
            #expect(pause["type"] as? String == "pause" && pause["tab"] as? Int == 5, "\(pause)")

            // The browser closes the port: the host ends.
            host.finish()
            #expect(await eventually(within: .seconds(5)) { !host.process.isRunning })
        }
    }
}

/// Alpha and beta paired, the native host installed for Chromium in `home`, and headless
/// Chromium with the extension on alpha (`arguments` after its own: the page to open last);
/// beta's browser writes what it opens to the file `body` gets.
func withExtensionInChromium(_ browser: String, home: URL, _ arguments: [String], _ body: (TestDevice, TestDevice, URL) async throws -> Void) async throws {
    try await withHarness { harness in
        let opened = harness.root.appendingPathComponent("opened.txt")
        let a = try await harness.start("alpha")
        let b = try await harness.start("beta") { $0.browserCommand = ["sh", "-c", "printf %s \"$0\" > \(opened.path)"] }
        try await harness.pair([a, b])
        let handoff = try #require(builtExecutable("handoff"))
        let (installed, printed) = try await runCommand(handoff, ["browser", "install", "--browser", "chromium"], environment: ["HOME": home.path, "PATH": "/usr/bin:/bin"])
        try #require(installed == 0, "\(printed)")
        let extensionFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Extensions/Browser").standardizedFileURL
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: browser)
        process.arguments = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(home.path)/.config/chromium", "--load-extension=\(extensionFolder.path)",
        ] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home.path
        environment["HANDOFF_SOCKET"] = a.socket
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { kill(process.processIdentifier, SIGKILL) }
        try await body(a, b, opened)
    }
}

/// Debian's Chromium, when it is installed.
let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }

extension BrowserTests {
    @Test("The extension loaded into headless Chromium: the page it shows is offered to the other device through the real native host, and continues there", .enabled(if: chromium != nil, "needs Chromium (Debian's chromium package) to load the extension; skipped"))
    func headlessChromium() async throws {
        let browser = try #require(chromium)
        let home = try makeFolder("chromium-home")
        let site = try makeFolder("site")
        defer {
            _ = try? shell(["pkill", "-9", "-f", home.path])
            try? FileManager.default.removeItem(at: home)
            try? FileManager.default.removeItem(at: site)
        }
        try "<html><head><title>A page from Chromium</title></head><body>Hello</body></html>".write(
            to: site.appendingPathComponent("page.html"), atomically: true, encoding: .utf8)
        let port = Int.random(in: 20_000..<40_000)
        let server = ChildProcess()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1", "--directory", site.path]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            // SIGKILL: a child may inherit a mask that blocks SIGTERM; and python3 may be a shim
            // that starts the real one, so that is ended by its command line.
            kill(server.processIdentifier, SIGKILL)
            _ = try? shell(["pkill", "-9", "-f", "http.server \(port) --bind 127.0.0.1 --directory \(site.path)"])
        }

        let page = "http://127.0.0.1:\(port)/page.html"
        try await withExtensionInChromium(browser, home: home, [page]) { _, b, opened in
            let listed = await eventually(within: .seconds(45)) { (try? await b.nearby().first?.activity.title) == "A page from Chromium" }
            try #require(listed, "beta never listed the page Chromium shows")
            let offer = try #require(try await b.nearby().first)
            #expect(offer.activity.activityType == NSUserActivityTypeBrowsingWeb)
            let continued = try #require(try await b.call(.continue(activity: offer.activity.id)).continued)
            #expect(continued.webpageURL == page)
            #expect(await eventually { (try? String(contentsOf: opened, encoding: .utf8)) == page })
        }
    }
}

/// A video site for Chromium: `www.youtube.com` answered by a server on this machine (TLS with a
/// certificate of its own; Chromium is told to resolve only that name, to this server), whose
/// page plays a sound from 1:23 and says on `/log?…` when it plays and pauses.
let videoSite = """
    import http.server, ssl, sys, os
    folder, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    PAGE = b\"\"\"<html><head><title>A video</title></head><body><audio id="a" preload="auto"></audio><script>
    const a = document.getElementById("a");
    a.addEventListener("loadedmetadata", () => { a.currentTime = 83; a.play(); });
    // Held whole in memory, so that it can be seeked (this server answers no ranges).
    fetch("/tone.wav").then((r) => r.blob()).then((b) => { a.src = URL.createObjectURL(b); });
    a.addEventListener("pause", () => fetch("/log?paused-at-" + Math.floor(a.currentTime)));
    a.addEventListener("playing", () => fetch("/log?playing"));
    </script></body></html>\"\"\"
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args): pass
        def do_GET(self):
            if self.path.startswith("/log?"):
                with open(log, "a") as out: out.write(self.path[5:] + "\\n")
                body, kind = b"ok", "text/plain"
            elif self.path == "/start":
                # The browser's first page, loaded before its extensions are: the video comes after.
                body, kind = b"<html><head><title>Starting</title></head><body><script>setTimeout(() => { location = '/watch?v=abc'; }, 1500);</script></body></html>", "text/html"
            elif self.path == "/tone.wav":
                body, kind = open(os.path.join(folder, "tone.wav"), "rb").read(), "audio/wav"
            else:
                body, kind = PAGE, "text/html"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()
    """

extension BrowserTests {
    @Test(
        "The extension in headless Chromium on a video site: where the page's audio is goes into the address beta opens (t=1m23s and on), and when beta continued it the audio pauses on alpha",
        .enabled(if: chromium != nil && FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs Chromium and openssl; skipped"))
    func videoTimeInChromium() async throws {
        let browser = try #require(chromium)
        let home = try makeFolder("chromium-home")
        let site = try makeFolder("video-site")
        defer {
            _ = try? shell(["pkill", "-9", "-f", home.path])
            try? FileManager.default.removeItem(at: home)
            try? FileManager.default.removeItem(at: site)
        }
        try shell(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", site.appendingPathComponent("key.pem").path,
            "-out", site.appendingPathComponent("cert.pem").path, "-days", "1", "-subj", "/CN=www.youtube.com"])
        try silence(seconds: 200).write(to: site.appendingPathComponent("tone.wav"))
        let log = site.appendingPathComponent("page.log")
        let port = Int.random(in: 20_000..<40_000)
        let server = ChildProcess()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        server.arguments = ["-c", videoSite, site.path, String(port), log.path]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { kill(server.processIdentifier, SIGKILL) }

        let page = "https://www.youtube.com/watch?v=abc"
        try await withExtensionInChromium(browser, home: home, [
            // Only the video site resolves, to the server here: nothing leaves this machine.
            "--host-resolver-rules=MAP www.youtube.com 127.0.0.1:\(port), MAP * ~NOTFOUND", "--ignore-certificate-errors",
            "--autoplay-policy=no-user-gesture-required", "https://www.youtube.com/start",
        ]) { _, b, opened in
            let listed = await eventually(within: .seconds(45)) { (try? await b.nearby().first?.activity.title) == "A video" }
            try #require(listed, "beta never listed the video page")
            #expect(await eventually { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("playing") }, "the page's audio never played")
            // Continued once the extension has told where the audio is (at most 5 s after it plays).
            var continuedAt: String?
            let timed = await eventually(within: .seconds(20)) {
                guard let offer = try? await b.nearby().first, let continued = try? await b.call(.continue(activity: offer.activity.id)).continued else { return false }
                continuedAt = continued.webpageURL
                return continued.webpageURL?.contains("&t=") == true
            }
            try #require(timed, "the address never carried the time: \(continuedAt ?? "nothing"); page log: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
            let time = try #require(continuedAt?.components(separatedBy: "&t=").last.flatMap { Int($0.dropLast()) })
            #expect(continuedAt?.hasPrefix(page + "&t=") == true && (83...120).contains(time), "\(continuedAt ?? "")")
            #expect(await eventually { (try? String(contentsOf: opened, encoding: .utf8))?.hasPrefix(page + "&t=") == true })
            // Alpha's page paused its audio when beta continued it.
            #expect(await eventually { ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("paused-at-") }, "\((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }
    }
}
