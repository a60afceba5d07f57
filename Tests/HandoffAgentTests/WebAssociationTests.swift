import Crypto
import Foundation
import Handoff
import HandoffApp
import HandoffLocalAPI
import HandoffWire
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization
import SwiftASN1
import HandoffTesting
import Testing
@_spi(CMS) import X509

@testable import HandoffAgent

/// A certificate authority made for a test, and server certificates it signs.
struct TestCertificateAuthority {
    let key = P256.Signing.PrivateKey()
    let certificate: Certificate
    let name: DistinguishedName

    init(_ commonName: String = "Handoff test CA") throws {
        name = try DistinguishedName { CommonName(commonName) }
        certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-300), notValidAfter: Date().addingTimeInterval(86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(key))
    }

    /// A server certificate for `host`, and its key.
    func serverIdentity(for host: String) throws -> (certificate: NIOSSLCertificate, key: NIOSSLPrivateKey) {
        let (leaf, serverKey) = try leaf(for: host)
        return (try Self.nio(leaf), try NIOSSLPrivateKey(bytes: Array(serverKey.pemRepresentation.utf8), format: .pem))
    }

    /// A certificate for `host` this authority signs, and its key.
    func leaf(
        for host: String, notValidBefore: Date = Date().addingTimeInterval(-300), notValidAfter: Date = Date().addingTimeInterval(86_400)
    ) throws -> (Certificate, P256.Signing.PrivateKey) {
        let serverKey = P256.Signing.PrivateKey()
        let leaf = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: notValidBefore, notValidAfter: notValidAfter,
            issuer: name, subject: try DistinguishedName { CommonName(host) }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName(host)])
            },
            issuerPrivateKey: .init(key))
        return (leaf, serverKey)
    }

    /// `json` signed as a site signs its association file (CMS, the content attached), by a
    /// certificate for `host`.
    func signed(_ json: String, by host: String) throws -> [UInt8] {
        let (certificate, signingKey) = try leaf(for: host)
        return try CMS.sign(Array(json.utf8), certificate: certificate, privateKey: .init(signingKey), detached: false)
    }

    /// PEM of a certificate.
    static func pem(_ certificate: Certificate) throws -> String {
        try certificate.serializeAsPEM().pemString
    }

    var nioCertificate: NIOSSLCertificate {
        get throws { try Self.nio(certificate) }
    }

    static func nio(_ certificate: Certificate) throws -> NIOSSLCertificate {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return try NIOSSLCertificate(bytes: serializer.serializedBytes, format: .der)
    }
}

/// What the test web server answers on one path.
struct WebAnswer: Sendable {
    var status: Int = 200
    var headers: [(String, String)] = [("Content-Type", "application/json")]
    var body: [UInt8]

    static func json(_ text: String) -> WebAnswer { WebAnswer(body: Array(text.utf8)) }
}

/// An HTTPS server on loopback for one test: it answers each path as told, 404 otherwise,
/// and records the paths asked for.
final class TestWebServer: Sendable {
    let port: Int
    private let channel: any Channel
    private let state: State

    final class State: Sendable {
        let answers: Mutex<[String: WebAnswer]>
        let paths = Mutex<[String]>([])
        init(_ answers: [String: WebAnswer]) { self.answers = Mutex(answers) }
    }

    init(identity: (certificate: NIOSSLCertificate, key: NIOSSLPrivateKey), answers: [String: WebAnswer]) async throws {
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(identity.certificate)], privateKey: .privateKey(identity.key))
        let context = try NIOSSLContext(configuration: configuration)
        let state = State(answers)
        self.state = state
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(Responder(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
    }

    var paths: [String] { state.paths.withLock { $0 } }

    func set(_ path: String, _ answer: WebAnswer?) { state.answers.withLock { $0[path] = answer } }

    func close() async { try? await channel.close() }

    final class Responder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let state: State
        init(state: State) { self.state = state }

        private var uri: String?

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let request): uri = request.uri
            case .body: return
            case .end: break
            }
            guard case .end = unwrapInboundIn(data), let uri else { return }
            let request = (uri: uri, ())
            state.paths.withLock { $0.append(request.uri) }
            let answer = state.answers.withLock { $0[request.uri] } ?? WebAnswer(status: 404, headers: [], body: Array("not here".utf8))
            var headers = HTTPHeaders(answer.headers)
            headers.replaceOrAdd(name: "Content-Length", value: String(answer.body.count))
            headers.replaceOrAdd(name: "Connection", value: "close")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: answer.status), headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: answer.body)))), promise: nil)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }
    }
}

let approvedApp = "WEBTEAM.com.example.news"

/// A hostile HTTPS site on loopback: whatever is asked, it answers with a JSON head and then a
/// body that never ends, as fast as the client takes it, either in HTTP chunks (no length) or
/// as raw bytes until the connection closes (no length, no chunks). It counts what it wrote.
final class EndlessWebServer: Sendable {
    enum Body: Sendable { case chunked, untilClosed }

    let port: Int
    private let channel: any Channel
    let written = Shared(0)

    init(identity: (certificate: NIOSSLCertificate, key: NIOSSLPrivateKey), body: Body) async throws {
        let context = try NIOSSLContext(
            configuration: TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(identity.certificate)], privateKey: .privateKey(identity.key)))
        let written = self.written
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(Streamer(body: body, written: written))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
    }

    func close() async { try? await channel.close() }

    final class Streamer: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let body: Body
        let written: Shared<Int>
        private var request: [UInt8] = []
        private var started = false
        // Valid JSON so far: only its length should stop the client.
        private let block = [UInt8](repeating: 0x20, count: 16 * 1024)

        init(body: Body, written: Shared<Int>) {
            self.body = body
            self.written = written
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            request += Array(unwrapInboundIn(data).readableBytesView)
            guard !started, request.count >= 4, String(decoding: request, as: UTF8.self).contains("\r\n\r\n") else { return }
            started = true
            let framing = body == .chunked ? "Transfer-Encoding: chunked\r\n" : ""
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\(framing)Connection: close\r\n\r\n"
            context.write(wrapOutboundOut(context.channel.allocator.buffer(string: head)), promise: nil)
            var piece = Array(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]},"pad":""#.utf8)
            if body == .chunked { piece = Array((String(piece.count, radix: 16) + "\r\n").utf8) + piece + Array("\r\n".utf8) }
            context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: piece)), promise: nil)
            send(context.channel)
        }

        /// One more block once the last is written: as fast as the client reads, for ever.
        private func send(_ channel: any Channel) {
            var bytes = block
            if body == .chunked { bytes = Array((String(block.count, radix: 16) + "\r\n").utf8) + block + Array("\r\n".utf8) }
            let count = bytes.count
            channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).whenComplete { result in
                guard case .success = result else { return }
                self.written.update { $0 += count }
                self.send(channel)
            }
        }
    }
}

@Suite("Web sites' association files")
struct WebAssociationTests {
    @Test("Both JSON shapes are read for activitycontinuation; a malformed section or app ID is left out and named, never costing the others; what is not JSON is refused")
    func parsing() throws {
        let ios9 = try SiteAssociationFile(json: Array(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]},"applinks":{"apps":[],"details":[{"appID":"X.y","paths":["*"]}]}}"#.utf8))
        #expect(ios9.activityContinuationApps == [approvedApp])
        let ios13 = try SiteAssociationFile(json: Array(#"{"applinks":{"details":[{"appIDs":["WEBTEAM.com.example.news"],"components":[{"/":"/a/*"}]}]},"activitycontinuation":{"apps":["WEBTEAM.com.example.news","OTHER.com.example.x"]},"webcredentials":{"apps":["WEBTEAM.com.example.news"]}}"#.utf8))
        #expect(ios13.activityContinuationApps == [approvedApp, "OTHER.com.example.x"])
        #expect(try SiteAssociationFile(json: Array(#"{"applinks":{"details":[]}}"#.utf8)).activityContinuationApps.isEmpty)
        func refusal(_ text: String) -> String {
            do {
                _ = try SiteAssociationFile(json: Array(text.utf8))
                return ""
            } catch {
                return error.message
            }
        }
        #expect(refusal("{not json").contains("not valid JSON"))
        #expect(refusal("[1,2]").contains("not a JSON object"))
        #expect(refusal(String(repeating: " ", count: 128 * 1024 + 1)).contains("over the limit"))

        func problems(_ text: String) throws -> (Set<String>, [String]) {
            let file = try SiteAssociationFile(json: Array(text.utf8))
            return (file.activityContinuationApps, file.problems)
        }
        #expect(try problems(#"{"activitycontinuation":[]}"#).1 == ["'activitycontinuation' is an array, not an object; the section is ignored"])
        #expect(try problems(#"{"activitycontinuation":{"apps":"WEBTEAM.x"}}"#).1.first?.contains("not an array") == true)
        // One malformed app ID costs only itself.
        let (apps, why) = try problems(#"{"activitycontinuation":{"apps":["no-team","WEBTEAM.com.example.news",7]}}"#)
        #expect(apps == [approvedApp])
        #expect(why.count == 2)
        #expect(why.first?.contains("'activitycontinuation.apps[0]' is 'no-team'") == true)
        // An applinks of the wrong shape does not cost activitycontinuation.
        let (kept, applinks) = try problems(#"{"applinks":{"details":{"apps":"nope"}},"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#)
        #expect(kept == [approvedApp])
        #expect(!applinks.isEmpty)
        let (alsoKept, _) = try problems(#"{"applinks":["wrong"],"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#)
        #expect(alsoKept == [approvedApp])
    }

    /// A site on loopback with a certificate from a test CA, and the associations that trust it.
    func site(_ answers: [String: WebAnswer], trusted: Bool = true) async throws -> (TestWebServer, WebSiteAssociations) {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: answers)
        let trust = trusted ? [try ca.nioCertificate] : [try TestCertificateAuthority("another CA").nioCertificate]
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return (server, try WebSiteAssociations(additionalTrust: trust, logger: logger))
    }

    func reason(_ web: WebSiteAssociations) async -> String {
        guard case .failure(let error)? = await web.outcomes.first?.result else { return "" }
        return error.message
    }

    @Test("A site that lists the app approves it; one that does not, or lists another team, approves nothing")
    func approvals() async throws {
        let listed = #"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#
        let (server, web) = try await site(["/.well-known/apple-app-site-association": .json(listed)])
        defer { Task { await server.close() } }
        #expect(await web.approved([approvedApp, "WEBTEAM.com.example.other"], forHost: "localhost", port: server.port) == [approvedApp])
        #expect(await web.approved(["OTHERTEAM.com.example.news"], forHost: "localhost", port: server.port).isEmpty)
        // Kept: the second question did not fetch again.
        #expect(server.paths == ["/.well-known/apple-app-site-association"])
    }

    @Test("The file at the root is read when the well-known place has none")
    func rootFallback() async throws {
        let (server, web) = try await site(["/apple-app-site-association": .json(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#)])
        defer { Task { await server.close() } }
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port) == [approvedApp])
        #expect(server.paths == ["/.well-known/apple-app-site-association", "/apple-app-site-association"])
    }

    @Test("S13: A redirect, an untrusted certificate, an oversized file, invalid JSON, a signed file that is not CMS: nothing approved, each with its reason")
    func refusals() async throws {
        let redirect = WebAnswer(status: 301, headers: [("Location", "https://elsewhere.example/apple-app-site-association")], body: [])
        var (server, web) = try await site(["/.well-known/apple-app-site-association": redirect, "/apple-app-site-association": redirect])
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port).isEmpty)
        let why1 = await reason(web)
        #expect(why1.contains("redirects are not followed"), "\(why1)")
        await server.close()

        (server, web) = try await site(["/.well-known/apple-app-site-association": .json(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#)], trusted: false)
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port).isEmpty)
        let untrusted = await reason(web)
        #expect(untrusted.contains("TLS handshake failed"), "\(untrusted)")
        await server.close()

        let big = WebAnswer(body: Array(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}, "pad":""#.utf8) + [UInt8](repeating: 0x61, count: 200_000) + Array(#""}"#.utf8))
        (server, web) = try await site(["/.well-known/apple-app-site-association": big])
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port).isEmpty)
        let why2 = await reason(web)
        #expect(why2.contains("over the limit"), "\(why2)")
        await server.close()

        (server, web) = try await site(["/.well-known/apple-app-site-association": .json("{\"activitycontinuation\": ")])
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port).isEmpty)
        let why3 = await reason(web)
        #expect(why3.contains("not valid JSON"), "\(why3)")
        await server.close()

        (server, web) = try await site(["/.well-known/apple-app-site-association": WebAnswer(headers: [("Content-Type", "application/pkcs7-mime")], body: [0x30, 0x80])])
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port).isEmpty)
        let why4 = await reason(web)
        #expect(why4.contains("signed"), "\(why4)")
        await server.close()

        #expect(await web.approved([approvedApp], forHost: "127.0.0.1", port: server.port).isEmpty)
        let why5 = await reason(web)
        #expect(why5.contains("only from a domain name"), "\(why5)")
    }

    @Test("S13: A body with no length that never ends, in chunks or until the site closes, is refused as soon as it passes 128 KB", arguments: [EndlessWebServer.Body.chunked, .untilClosed])
    func endlessBodies(body: EndlessWebServer.Body) async throws {
        let ca = try TestCertificateAuthority()
        let server = try await EndlessWebServer(identity: try ca.serverIdentity(for: "localhost"), body: body)
        defer { Task { await server.close() } }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate], logger: logger)
        let started = ContinuousClock.now
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port).isEmpty)
        let took = ContinuousClock.now - started
        // Had the body been read without a cap, the fetch would have run into its 10 s deadline
        // ("no answer within") instead.
        let why = await reason(web)
        #expect(why.contains("over the limit of \(SiteAssociationFile.maximumSize) bytes"), "\(why)")
        // A refused connection is cut, not read on while TLS waits for the site's goodbye (NIOSSL
        // waits 5 s by default: the two refused fetches took 10 s before). Not asserted as a
        // time, which the suite's load stretches; the setting that cuts it is checked instead.
        #expect(WebSiteAssociations.shutdownTimeout <= .milliseconds(500), "the two refused fetches took \(took)")
    }

    @Test("S13: A site whose certificate a trusted authority issued for another host is refused in the handshake")
    func certificateForAnotherHost() async throws {
        let ca = try TestCertificateAuthority()
        let listed = #"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "elsewhere.example"), answers: ["/.well-known/apple-app-site-association": .json(listed)])
        defer { Task { await server.close() } }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate], logger: logger)
        #expect(await web.approved([approvedApp], forHost: "localhost", port: server.port).isEmpty)
        let why = await reason(web)
        #expect(why.contains("not valid for localhost"), "\(why)")
        #expect(server.paths.isEmpty, "the file was asked for over a connection to the wrong host")
    }

    @Test("A signed file (CMS, application/pkcs7-mime) approves its apps when its signer's certificate is valid for the site; signed for another host, or tampered with, it approves nothing")
    func signedFiles() async throws {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: [:])
        defer { Task { await server.close() } }
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let listed = #"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#
        func outcome(_ body: [UInt8]) async throws -> (Set<String>, String) {
            server.set("/.well-known/apple-app-site-association", WebAnswer(headers: [("Content-Type", "application/pkcs7-mime")], body: body))
            let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate], logger: logger)
            let approved = await web.approved([approvedApp], forHost: "localhost", port: server.port)
            return (approved, await reason(web))
        }
        #expect(try await outcome(try ca.signed(listed, by: "localhost")).0 == [approvedApp])
        let (otherHost, why) = try await outcome(try ca.signed(listed, by: "other.example"))
        #expect(otherHost.isEmpty)
        #expect(why.contains("has a certificate that is for other.example, not localhost"), "\(why)")
        var tampered = try ca.signed(listed, by: "localhost")
        let at = try #require(tampered.firstIndex(of: UInt8(ascii: "W")))
        tampered[at] = UInt8(ascii: "X")
        let (forged, forgedWhy) = try await outcome(tampered)
        #expect(forged.isEmpty)
        #expect(!forgedWhy.isEmpty)

        // Many certificates would let a hostile file keep the chain search busy: refused at once.
        let (signer, signerKey) = try ca.leaf(for: "localhost")
        let padding = try (0..<7).map { _ in try ca.leaf(for: "pad.example").0 }
        let crowded = try CMS.sign(Array(listed.utf8), additionalIntermediateCertificates: padding, certificate: signer, privateKey: .init(signerKey), detached: false)
        let (tooMany, tooManyWhy) = try await outcome(crowded)
        #expect(tooMany.isEmpty)
        #expect(tooManyWhy.contains("more than the 6 a chain needs"), "\(tooManyWhy)")
    }

    @Test("A file signed the way Apple's guide shows, with openssl smime, is read", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs /usr/bin/openssl; skipped"))
    func signedWithOpenSSL() async throws {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: [:])
        defer { Task { await server.close() } }
        let folder = try makeFolder("openssl")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (certificate, key) = try ca.leaf(for: "localhost")
        try TestCertificateAuthority.pem(certificate).write(to: folder.appendingPathComponent("site.pem"), atomically: true, encoding: .utf8)
        try key.pemRepresentation.write(to: folder.appendingPathComponent("site.key"), atomically: true, encoding: .utf8)
        try #"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#.write(to: folder.appendingPathComponent("aasa.json"), atomically: true, encoding: .utf8)
        try shell([
            "openssl", "smime", "-sign", "-inkey", folder.appendingPathComponent("site.key").path, "-signer", folder.appendingPathComponent("site.pem").path,
            "-noattr", "-nodetach", "-outform", "DER", "-in", folder.appendingPathComponent("aasa.json").path, "-out", folder.appendingPathComponent("aasa.p7m").path,
        ])
        let body = try [UInt8](Data(contentsOf: folder.appendingPathComponent("aasa.p7m")))
        server.set("/.well-known/apple-app-site-association", WebAnswer(headers: [("Content-Type", "application/pkcs7-mime")], body: body))
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate], logger: logger)
        let approved = await web.approved([approvedApp], forHost: "localhost", port: server.port)
        let why = await reason(web)
        #expect(approved == [approvedApp], "\(why)")
    }

    @Test("An RSA signer whose file carries signed attributes (openssl's default) is read too", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs /usr/bin/openssl; skipped"))
    func signedWithRSAAndAttributes() async throws {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: [:])
        defer { Task { await server.close() } }
        let folder = try makeFolder("openssl-rsa")
        defer { try? FileManager.default.removeItem(at: folder) }
        let (body, certificate) = try opensslSigned(in: folder, name: "rsa", key: ["-newkey", "rsa:2048"])
        server.set("/.well-known/apple-app-site-association", WebAnswer(headers: [("Content-Type", "application/pkcs7-mime")], body: body))
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        // The self-signed signer is the extra authority; the site's TLS certificate comes from the test CA.
        let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate] + (try NIOSSLCertificate.fromPEMFile(certificate)), logger: logger)
        let approved = await web.approved([approvedApp], forHost: "localhost", port: server.port)
        let why = await reason(web)
        #expect(approved == [approvedApp], "\(why)")
    }
}

extension WebAssociationTests {
    @Test("Web to app through two agents: a browser's page on a site that lists the app continues in it, with the page's URL and an empty userInfo; a site that does not opens the page in the browser; doctor says which")
    func throughAgents() async throws {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: [:])
        let trust = try ca.nioCertificate
        try await withHarness { harness in
            let opened = harness.root.appendingPathComponent("opened.txt")
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") {
                $0.associationTrust = [trust]
                $0.browserCommand = ["sh", "-c", "printf %s \"$0\" > \(opened.path)"]
            }
            try await harness.pair([a, b])
            let agentB = try #require(b.agent)
            let manifest = AppManifest(
                bundleIdentifier: "com.example.news", teamIdentifier: "WEBTEAM", activityTypes: [NSUserActivityTypeBrowsingWeb],
                associatedDomains: [try AssociatedDomain(parsing: "activitycontinuation:localhost")])
            await agentB.installInProcess(manifest)
            let receiver = await MainActor.run { StreamReceiver() }
            let center = ActivityCenter(
                connection: InProcessAgentConnection(agent: agentB, bundleIdentifier: "com.example.news"), bundleIdentifier: "com.example.news",
                teamIdentifier: "WEBTEAM", deviceName: "beta")
            let app = await MainActor.run { Application(center: center, manifest: manifest, syncedContainers: [], delegate: receiver) }
            _ = app

            // A browser on alpha: its page's activity, with the browser's own state in userInfo.
            let page = "https://localhost:\(server.port)/articles/42"
            let browsing = ActivityAnnouncement(id: UUID(), activityType: NSUserActivityTypeBrowsingWeb, teamIdentifier: "BROWSERTEAM", hasWebpageURL: true)
            let state = try UserInfoCoding.encode(["scroll": 120] as [AnyHashable: Any])
            _ = try await a.offer(browsing, answering: .answer(ActivityRecord(activity: browsing, webpageURL: page, userInfo: state)), seenBy: b)

            // The site lists another app only: the page opens in the browser.
            server.set("/.well-known/apple-app-site-association", .json(#"{"activitycontinuation":{"apps":["OTHER.com.example.other"]}}"#))
            let first = try await b.call(.continue(activity: browsing.id)).continued
            #expect(first?.app == nil && first?.webpageURL == page)
            #expect(await eventually { (try? String(contentsOf: opened, encoding: .utf8)) == page })

            // The site lists the app (after its refresh): the app continues the page.
            await agentB.forgetSiteAssociations()
            server.set("/.well-known/apple-app-site-association", .json(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#))
            let second = try await b.call(.continue(activity: browsing.id)).continued
            #expect(second?.app == "com.example.news")
            #expect(await eventually { await MainActor.run { !receiver.continued.isEmpty } })
            let continued = await MainActor.run { receiver.continued.first }
            #expect(continued?.activityType == NSUserActivityTypeBrowsingWeb)
            #expect(continued?.webpageURL?.absoluteString == page)
            #expect(continued?.userInfo?.isEmpty ?? true)

            let checks = try await b.call(.doctor).checks?.filter { $0.area == "web-association" } ?? []
            #expect(checks.first?.subject == "localhost:\(server.port)" && checks.first?.finding.contains("WEBTEAM.com.example.news") == true, "\(checks)")

            // The site stops serving its file: the page opens in the browser, and doctor says why.
            await agentB.forgetSiteAssociations()
            server.set("/.well-known/apple-app-site-association", nil)
            try? FileManager.default.removeItem(at: opened)
            let third = try await b.call(.continue(activity: browsing.id)).continued
            #expect(third?.app == nil && third?.webpageURL == page)
            let failing = try await b.call(.doctor).checks?.filter { $0.area == "web-association" } ?? []
            #expect(failing.first?.status == .warning && failing.first?.finding.contains("answered 404") == true, "\(failing)")
        }
        await server.close()
    }
}

extension WebAssociationTests {
    @Test("App to web with a default browser app: a page no app here claims goes to the browser app chosen with --default-browser, which receives the whole activity, userInfo included")
    func defaultBrowserApp() async throws {
        try await withHarness { harness in
            let opened = harness.root.appendingPathComponent("opened.txt")
            let a = try await harness.start("alpha")
            let b = try await harness.start("beta") {
                $0.defaultBrowser = "org.example.browser"
                $0.browserCommand = ["sh", "-c", "printf %s \"$0\" > \(opened.path)"]
            }
            try await harness.pair([a, b])
            let agentB = try #require(b.agent)
            let manifest = AppManifest(bundleIdentifier: "org.example.browser", teamIdentifier: "BROWSERTEAM", activityTypes: [NSUserActivityTypeBrowsingWeb])
            await agentB.installInProcess(manifest)
            let receiver = await MainActor.run { StreamReceiver() }
            let center = ActivityCenter(
                connection: InProcessAgentConnection(agent: agentB, bundleIdentifier: "org.example.browser"), bundleIdentifier: "org.example.browser",
                teamIdentifier: "BROWSERTEAM", deviceName: "beta")
            let app = await MainActor.run { Application(center: center, manifest: manifest, syncedContainers: [], delegate: receiver) }
            _ = app

            // A news app on alpha whose team has no app on beta, with a page and its own state.
            let reading = ActivityAnnouncement(id: UUID(), activityType: "com.example.news.reading", teamIdentifier: "NEWSTEAM", hasWebpageURL: true)
            let state = try UserInfoCoding.encode(["article": 42] as [AnyHashable: Any])
            _ = try await a.offer(reading, answering: .answer(ActivityRecord(activity: reading, webpageURL: "https://news.example.com/42", userInfo: state)), seenBy: b)
            let continued = try #require(try await b.call(.continue(activity: reading.id)).continued)
            #expect(continued.app == "org.example.browser")
            #expect(await eventually { await MainActor.run { !receiver.continued.isEmpty } })
            let activity = await MainActor.run { receiver.continued.first }
            #expect(activity?.webpageURL?.absoluteString == "https://news.example.com/42")
            #expect(activity?.userInfo?["article"] as? Int == 42)
            #expect(!FileManager.default.fileExists(atPath: opened.path), "the page was also opened with the browser command")
        }
    }
}

extension WebAssociationTests {
    /// The association file signed as a site signs it with openssl: a self-signed certificate
    /// for localhost made with `key` (openssl req's key options), `openssl smime -sign -nodetach`
    /// with `digest` if given. Returns the DER file and the certificate's PEM path.
    func opensslSigned(in folder: URL, name: String, key keyOptions: [String], digest: String? = nil) throws -> ([UInt8], String) {
        let key = folder.appendingPathComponent("\(name).key").path
        let certificate = folder.appendingPathComponent("\(name).pem").path
        try shell(
            ["openssl", "req", "-x509"] + keyOptions + [
                "-nodes", "-keyout", key, "-out", certificate, "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-days", "1",
            ])
        let json = folder.appendingPathComponent("\(name).json")
        try #"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#.write(to: json, atomically: true, encoding: .utf8)
        let output = folder.appendingPathComponent("\(name).p7m").path
        try shell(
            ["openssl", "smime", "-sign"] + (digest.map { ["-md", $0] } ?? []) + [
                "-inkey", key, "-signer", certificate, "-nodetach", "-outform", "DER", "-in", json.path, "-out", output,
            ])
        return (try [UInt8](Data(contentsOf: URL(fileURLWithPath: output))), certificate)
    }

    /// What a site serving `body` at the well-known place approves of `approvedApp`, and why not.
    func signedOutcome(_ body: [UInt8], contentType: String = "application/pkcs7-mime", trusting ca: TestCertificateAuthority, server: TestWebServer) async throws -> (Set<String>, String) {
        server.set("/.well-known/apple-app-site-association", WebAnswer(headers: [("Content-Type", contentType)], body: body))
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate], logger: logger)
        let approved = await web.approved([approvedApp], forHost: "localhost", port: server.port)
        return (approved, await reason(web))
    }

    @Test("A signed file's refusal tells apart an expired certificate, one not yet valid, an untrusted root, another host and a broken signature; no message shows an internal name")
    func signedRefusalsSayWhy() async throws {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: [:])
        defer { Task { await server.close() } }
        let listed = Array(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#.utf8)
        func sign(_ identity: (Certificate, P256.Signing.PrivateKey)) throws -> [UInt8] {
            try CMS.sign(listed, certificate: identity.0, privateKey: .init(identity.1), detached: false)
        }
        let expired = try sign(ca.leaf(for: "localhost", notValidBefore: Date().addingTimeInterval(-86_400 * 400), notValidAfter: Date().addingTimeInterval(-86_400 * 30)))
        let early = try sign(ca.leaf(for: "localhost", notValidBefore: Date().addingTimeInterval(86_400 * 30), notValidAfter: Date().addingTimeInterval(86_400 * 60)))
        let stranger = try sign(TestCertificateAuthority("Someone else's CA").leaf(for: "localhost"))
        let otherHost = try sign(ca.leaf(for: "shop.example.org"))
        var broken = try sign(ca.leaf(for: "localhost"))
        let at = try #require(broken.firstIndex(of: UInt8(ascii: "W")))
        broken[at] = UInt8(ascii: "X")
        let cases: [([UInt8], String)] = [
            (expired, "has a certificate that expired on"), (early, "is not valid until"),
            (stranger, "which does not lead to a certificate authority this device trusts"), (otherHost, "is for shop.example.org, not localhost"),
            (broken, "does not verify with any certificate in it"), (Array([0x30, 0x03, 0x02, 0x01, 0x00]), "not CMS signed data"),
        ]
        var reasons: [String] = []
        for (body, expected) in cases {
            let (approved, why) = try await signedOutcome(body, trusting: ca, server: server)
            #expect(approved.isEmpty)
            #expect(why.contains(expected), "\(why)")
            reasons.append(why)
        }
        #expect(Set(reasons).count == cases.count, "each refusal reads differently")
        for why in reasons {
            #expect(!why.contains(".swift") && !why.contains("Error(") && !why.contains("ASN1"), "\(why)")
        }
    }

    @Test("The signed form is told by its bytes, not its Content-Type: a signed file served as JSON is verified, JSON served as pkcs7 is read as JSON")
    func signedFormByBytes() async throws {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: [:])
        defer { Task { await server.close() } }
        let listed = #"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news"]}}"#
        let signedAsJSON = try await signedOutcome(try ca.signed(listed, by: "localhost"), contentType: "application/json", trusting: ca, server: server)
        #expect(signedAsJSON.0 == [approvedApp], "\(signedAsJSON.1)")
        let jsonAsSigned = try await signedOutcome(Array(listed.utf8), contentType: "application/pkcs7-mime", trusting: ca, server: server)
        #expect(jsonAsSigned.0 == [approvedApp], "\(jsonAsSigned.1)")
        // A forged "signed" body served as JSON is still checked as signed, never read as JSON.
        var forged = try ca.signed(listed, by: "other.example")
        forged[forged.count - 1] ^= 0xFF
        #expect(try await signedOutcome(forged, contentType: "application/json", trusting: ca, server: server).0.isEmpty)
    }

    @Test("A file signed with SHA-1 digests, as sites signed them in 2014, is read: the certificate decides trust", .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "needs /usr/bin/openssl; skipped"))
    func signedWithSHA1() async throws {
        let ca = try TestCertificateAuthority()
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: [:])
        defer { Task { await server.close() } }
        let folder = try makeFolder("openssl-sha1")
        defer { try? FileManager.default.removeItem(at: folder) }
        for (name, keyKind) in [("rsa", ["-newkey", "rsa:2048"]), ("ec", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])] {
            let (body, certificate) = try opensslSigned(in: folder, name: name, key: keyKind, digest: "sha1")
            // The digest in the file is SHA-1's (1.3.14.3.2.26).
            #expect(body.firstRange(of: [0x06, 0x05, 0x2B, 0x0E, 0x03, 0x02, 0x1A]) != nil)
            server.set("/.well-known/apple-app-site-association", WebAnswer(headers: [("Content-Type", "application/pkcs7-mime")], body: body))
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate] + (try NIOSSLCertificate.fromPEMFile(certificate)), logger: logger)
            let approved = await web.approved([approvedApp], forHost: "localhost", port: server.port)
            let why = await reason(web)
            #expect(approved == [approvedApp], "\(name): \(why)")
        }
    }
}

extension WebAssociationTests {
    @Test("handoff doctor --site reads the site's file now and says, per app, what it may do there: pages, universal links (and whether an address opens), passwords, app clip; and what was left out")
    func doctorSite() async throws {
        let handoff = try #require(builtExecutable("handoff"))
        let ca = try TestCertificateAuthority()
        let file = """
            {"applinks":{"details":[{"appIDs":["WEBTEAM.com.example.news"],"components":[{"/":"/admin/*","exclude":true},{"/":"/articles/*","?":{"ref":"?*"}}]}]},
             "activitycontinuation":{"apps":["WEBTEAM.com.example.news","OTHER.com.example.reader","not an id"]},
             "webcredentials":{"apps":["WEBTEAM.com.example.news"]},
             "appclips":{"apps":["WEBTEAM.com.example.news.Clip"]}}
            """
        let server = try await TestWebServer(identity: try ca.serverIdentity(for: "localhost"), answers: ["/.well-known/apple-app-site-association": .json(file)])
        let trust = try ca.nioCertificate
        try await withHarness { harness in
            let b = try await harness.start("beta") { $0.associationTrust = [trust] }
            let agentB = try #require(b.agent)
            await agentB.installInProcess(
                AppManifest(
                    bundleIdentifier: "com.example.news", teamIdentifier: "WEBTEAM", activityTypes: [NSUserActivityTypeBrowsingWeb],
                    associatedDomains: [try AssociatedDomain(parsing: "activitycontinuation:localhost"), try AssociatedDomain(parsing: "applinks:localhost")]))
            // An app that claims the site the file does not list.
            await agentB.installInProcess(
                AppManifest(bundleIdentifier: "com.example.blog", teamIdentifier: "WEBTEAM", associatedDomains: [try AssociatedDomain(parsing: "activitycontinuation:localhost")]))
            let site = "localhost:\(server.port)"
            let (code, text) = try await runCommand(
                handoff, ["doctor", "--socket", b.socket, "--site", site, "--url", "https://localhost:\(server.port)/articles/7?ref=mail"])
            #expect(code == 0, "\(text)")
            #expect(text.contains("read https://\(site)/.well-known/apple-app-site-association (JSON)"), "\(text)")
            #expect(text.contains("left out: 'activitycontinuation.apps[2]' is 'not an id'"), "\(text)")
            let news = try #require(text.range(of: "WEBTEAM.com.example.news (installed here)").map { String(text[$0.lowerBound...]) })
            #expect(news.contains("claims: activitycontinuation:localhost, applinks:localhost"), "\(news)")
            #expect(news.contains("continue the site's pages: yes"), "\(news)")
            #expect(news.contains("universal links: not /admin/*, /articles/* ?ref=?*"), "\(news)")
            #expect(news.contains("opens https://localhost:\(server.port)/articles/7?ref=mail: yes"), "\(news)")
            #expect(news.contains("passwords (webcredentials): yes"), "\(news)")
            #expect(text.contains("OTHER.com.example.reader (not installed here)\n  continue the site's pages: listed (not installed here)"), "\(text)")
            #expect(text.contains("WEBTEAM.com.example.blog (installed here)"), "\(text)")
            #expect(text.contains("no: the app claims the site, but the file does not list it"), "\(text)")
            #expect(text.contains("WEBTEAM.com.example.news.Clip (not installed here)"), "\(text)")

            // An address the file excludes, as JSON.
            let (_, json) = try await runCommand(
                handoff, ["doctor", "--socket", b.socket, "--json", "--site", site, "--url", "https://localhost:\(server.port)/admin/users"])
            let report = try JSONDecoder().decode(LocalSiteAssociation.self, from: Data(json.utf8))
            #expect(report.apps.first { $0.applicationIdentifier == "WEBTEAM.com.example.news" }?.opensURL == false)

            // A file with a trailing comma is no file: exit 8 with the line and column.
            server.set("/.well-known/apple-app-site-association", .json(#"{"activitycontinuation":{"apps":["WEBTEAM.com.example.news",]}}"#))
            let (failed, failedText) = try await runCommand(handoff, ["doctor", "--socket", b.socket, "--site", site])
            #expect(failed == 8, "\(failedText)")
            #expect(failedText.contains("line 1, column 60: a trailing comma before ']'"), "\(failedText)")
        }
        await server.close()
    }
}

extension WebAssociationTests {
    @Test("Why a site could not be read is said in words, without the network library's type names: nothing listening, an untrusted certificate, a certificate for another host")
    func fetchFailuresInWords() async throws {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        // A port nothing listens on, held until the end: no server of this test or another can
        // be given it meanwhile (one once was, and this test read "not trusted" for "refused").
        let refused = try RefusedPort()
        let closedPort = refused.port

        let ca = try TestCertificateAuthority()
        let untrusted = try await TestWebServer(identity: try TestCertificateAuthority("Stranger").serverIdentity(for: "localhost"), answers: [:])
        let otherHost = try await TestWebServer(identity: try ca.serverIdentity(for: "other.example"), answers: [:])
        defer {
            Task {
                await untrusted.close()
                await otherHost.close()
            }
        }
        let expectations: [(Int, String)] = [
            (closedPort, "nothing answers on localhost:\(closedPort) (connection refused)"), (untrusted.port, "not trusted"), (otherHost.port, "not valid for localhost"),
        ]
        for (port, expected) in expectations {
            let web = try WebSiteAssociations(additionalTrust: [try ca.nioCertificate], logger: logger)
            #expect(await web.approved([approvedApp], forHost: "localhost", port: port).isEmpty)
            let why = await reason(web)
            #expect(why.contains(expected), "\(why)")
            for leak in ["NIO", "Error", "sslError", ".cc:", ".swift", "errno:", "SingleConnectionFailure"] {
                #expect(!why.contains(leak), "\(why)")
            }
        }
        withExtendedLifetime(refused) {}
    }
}
