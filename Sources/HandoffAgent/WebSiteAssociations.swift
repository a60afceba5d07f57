import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SwiftASN1
import Synchronization
import X509

/// A document fetched over HTTPS.
struct FetchedDocument: Sendable {
    var status: Int
    var contentType: String?
    var location: String?
    var body: [UInt8]
}

/// A GET over verified HTTPS with nothing a hostile site could stretch: one request, no
/// redirects followed, the body capped (longer bodies are refused as soon as they pass the cap),
/// and one deadline for everything.
enum HTTPSFetcher {
    static func get(
        host: String, port: Int, path: String, context: NIOSSLContext, limit: Int, deadline: Duration,
        eventLoopGroup: any EventLoopGroup
    ) async throws(SiteAssociationError) -> FetchedDocument {
        do {
            return try await withDeadline(deadline) {
                try await fetch(host: host, port: port, path: path, context: context, limit: limit, eventLoopGroup: eventLoopGroup)
            }
        } catch let error as SiteAssociationError {
            throw error
        } catch is DeadlineExceeded {
            throw SiteAssociationError("no answer within \(deadline)")
        } catch NIOSSLError.handshakeFailed(let why) {
            // BoringSSL's text names its source files: only what it means is said.
            if "\(why)".contains("CERTIFICATE_VERIFY_FAILED") {
                throw SiteAssociationError(
                    "the TLS handshake failed: the site's certificate is not trusted here (no certificate authority this device trusts issued it for \(host); a private one is added with --association-ca)")
            }
            throw SiteAssociationError("the TLS handshake failed: the site and this device agree on no TLS 1.2 or newer connection")
        } catch let error as NIOSSLExtraError where error == .failedToValidateHostname {
            throw SiteAssociationError("the TLS handshake failed: the site's certificate is not valid for \(host)")
        } catch is BoringSSLError {
            throw SiteAssociationError("the TLS handshake failed: the site's certificate is not trusted or not valid for \(host)")
        } catch let error as NIOConnectionError {
            if error.dnsAError != nil && error.dnsAAAAError != nil && error.connectionErrors.isEmpty {
                throw SiteAssociationError("no answer: the name \(host) could not be resolved")
            }
            let codes = error.connectionErrors.compactMap { ($0.error as? IOError)?.errnoCode }
            if codes.contains(ECONNREFUSED) { throw SiteAssociationError("nothing answers on \(host):\(port) (connection refused)") }
            if let code = codes.first { throw SiteAssociationError("no answer: cannot connect to \(host):\(port) (\(String(cString: strerror(code))))") }
            throw SiteAssociationError("no answer: cannot connect to \(host):\(port)")
        } catch ChannelError.connectTimeout {
            throw SiteAssociationError("no answer: no connection to \(host):\(port) within 5 seconds")
        } catch let error as IOError {
            throw SiteAssociationError("cannot fetch it: \(String(cString: strerror(error.errnoCode)))")
        } catch {
            throw SiteAssociationError("cannot fetch it: the connection to \(host):\(port) failed")
        }
    }

    private static func fetch(
        host: String, port: Int, path: String, context: NIOSSLContext, limit: Int, eventLoopGroup: any EventLoopGroup
    ) async throws -> FetchedDocument {
        let channel = try await ClientBootstrap(group: eventLoopGroup)
            .connectTimeout(.seconds(5))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: host))
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: path)
            head.headers.add(name: "Host", value: port == 443 ? host : "\(host):\(port)")
            head.headers.add(name: "User-Agent", value: "Handoff/\(handoffVersion)")
            head.headers.add(name: "Accept", value: "application/json, application/pkcs7-mime")
            head.headers.add(name: "Connection", value: "close")
            // A site may answer and close before the request is all written, and a failed
            // handshake fails the writes too: what happened is read from the answer.
            try? await outbound.write(.head(head))
            try? await outbound.write(.end(nil))
            var document = FetchedDocument(status: 0, body: [])
            var parts = inbound.makeAsyncIterator()
            while true {
                let next: HTTPClientResponsePart?
                do {
                    next = try await parts.next()
                } catch NIOSSLError.uncleanShutdown where document.status != 0 {
                    // A body without a length ends when the site closes, some without TLS's goodbye.
                    return document
                }
                guard let part = next else { break }
                switch part {
                case .head(let response):
                    document.status = Int(response.status.code)
                    document.contentType = response.headers.first(name: "Content-Type")
                    document.location = response.headers.first(name: "Location")
                    if let declared = response.headers.first(name: "Content-Length").flatMap(Int.init), declared > limit {
                        throw SiteAssociationError("the file is \(declared) bytes, over the limit of \(limit)")
                    }
                case .body(let buffer):
                    guard document.body.count + buffer.readableBytes <= limit else {
                        throw SiteAssociationError("the file is over the limit of \(limit) bytes")
                    }
                    document.body.append(contentsOf: buffer.readableBytesView)
                case .end:
                    return document
                }
            }
            throw SiteAssociationError("the site closed the connection before the whole answer came")
        }
    }
}

/// Which apps web sites approve for continuing their pages (web to app): each site's
/// `apple-app-site-association` file, fetched over HTTPS with the site's certificate verified
/// (the system's trust store, plus any extra certificate authority given), from
/// `/.well-known/apple-app-site-association`, else `/apple-app-site-association`; redirects
/// are not followed; at most 128 KB. What a site says is kept for `refresh`, a failure for a
/// minute, and both are what `handoff doctor` shows. See `docs/web.md`.
package actor WebSiteAssociations: SiteAssociations {
    /// A site's file as it was read.
    package struct ReadFile: Sendable {
        package var file: SiteAssociationFile
        /// Where on the site it was found: `/.well-known/apple-app-site-association`…
        package var path: String
        /// It came in the signed (2014) form, and its signature held.
        package var signed: Bool
    }

    /// What was last learned of one site.
    package struct Outcome: Sendable {
        package var site: String
        package var fetched: Date
        /// The site's file, or why it has none that can be used.
        package var result: Result<ReadFile, SiteAssociationError>
    }

    private let context: NIOSSLContext
    /// The extra certificate authorities, for verifying signed files.
    private let extraRoots: [Certificate]
    private let refresh: Duration
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private var known: [String: (outcome: Outcome, until: ContinuousClock.Instant)] = [:]
    private var fetching: [String: Task<Outcome, Never>] = [:]

    /// How many sites are remembered.
    static let rememberedSites = 256
    /// How long a closing connection waits for the site's TLS goodbye: a site that keeps
    /// sending once its answer is refused (over the size limit) is not read on (NIOSSL's
    /// default, 5 s, is spent reading what it sends).
    static let shutdownTimeout: TimeAmount = .milliseconds(100)
    static let failureRetry: Duration = .seconds(60)

    /// - Parameter additionalTrust: certificate authorities trusted besides the system's (for a
    ///   private network, or tests).
    package init(
        additionalTrust: [NIOSSLCertificate] = [], refresh: Duration = .seconds(3600),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger
    ) throws {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        configuration.certificateVerification = .fullVerification
        configuration.trustRoots = .default
        configuration.shutdownTimeout = Self.shutdownTimeout
        if !additionalTrust.isEmpty { configuration.additionalTrustRoots = [.certificates(additionalTrust)] }
        context = try NIOSSLContext(configuration: configuration)
        extraRoots = try additionalTrust.map { try Certificate(derEncoded: try $0.toDERBytes()) }
        self.refresh = refresh
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
    }

    package func approved(_ candidates: Set<String>, forHost host: String, port: Int?) async -> Set<String> {
        let outcome = await outcome(host: host, port: port ?? 443)
        switch outcome.result {
        case .success(let read): return read.file.activityContinuationApps.intersection(candidates)
        case .failure: return []
        }
    }

    /// Forgets what sites said: the next question fetches their files again.
    package func forget() {
        known = [:]
    }

    /// Fetches a site's file again, now, as `handoff doctor --site` asks.
    package func refresh(host: String, port: Int = 443) async -> Outcome {
        known[port == 443 ? host.lowercased() : "\(host.lowercased()):\(port)"] = nil
        return await outcome(host: host, port: port)
    }

    /// What is known of each site asked about so far, most recent first.
    package var outcomes: [Outcome] {
        known.values.map(\.outcome).sorted { $0.fetched > $1.fetched }
    }

    func outcome(host: String, port: Int) async -> Outcome {
        let site = port == 443 ? host.lowercased() : "\(host.lowercased()):\(port)"
        if let entry = known[site], ContinuousClock.now < entry.until { return entry.outcome }
        if let running = fetching[site] { return await running.value }
        let task = Task { await self.fetch(host: host.lowercased(), port: port, site: site) }
        fetching[site] = task
        let outcome = await task.value
        fetching[site] = nil
        let keep: Duration
        switch outcome.result {
        case .success(let read):
            keep = refresh
            logger.info(
                "a web site's association file was read",
                metadata: [
                    "site": "\(site)", "apps": "\(read.file.activityContinuationApps.sorted().joined(separator: " "))",
                    "problems": "\(read.file.problems.count)",
                ])
        case .failure(let error):
            keep = min(refresh, Self.failureRetry)
            logger.notice("a web site's association file approves no app: \(error.message)", metadata: ["site": "\(site)"])
        }
        if known[site] == nil, known.count >= Self.rememberedSites,
            let oldest = known.min(by: { $0.value.outcome.fetched < $1.value.outcome.fetched })?.key
        {
            known[oldest] = nil
        }
        known[site] = (outcome, ContinuousClock.now + keep)
        return outcome
    }

    private func fetch(host: String, port: Int, site: String) async -> Outcome {
        let result: Result<ReadFile, SiteAssociationError>
        var address = in_addr()
        if host.isEmpty || host.contains(":") || inet_aton(host, &address) != 0 {
            result = .failure(SiteAssociationError("association files are fetched only from a domain name, not \(host)"))
        } else {
            var reasons: [String] = []
            var found: Result<ReadFile, SiteAssociationError>?
            for path in ["/.well-known/apple-app-site-association", "/apple-app-site-association"] {
                do throws(SiteAssociationError) {
                    let document = try await HTTPSFetcher.get(
                        host: host, port: port, path: path, context: context, limit: SiteAssociationFile.maximumSize, deadline: .seconds(10),
                        eventLoopGroup: eventLoopGroup)
                    let (file, signed) = try await read(document, host: host)
                    found = .success(ReadFile(file: file, path: path, signed: signed))
                    break
                } catch {
                    reasons.append("\(path): \(error.message)")
                    // A site whose certificate fails fails the same way for the second path.
                    if error.message.hasPrefix("the TLS handshake failed") || error.message.hasPrefix("no answer") || error.message.hasPrefix("nothing answers") {
                        break
                    }
                }
            }
            result = found ?? .failure(SiteAssociationError(reasons.joined(separator: "; ")))
        }
        return Outcome(site: site, fetched: Date(), result: result)
    }

    /// The file in an answer, or why the answer holds none. A signed file (CMS with the JSON
    /// attached, the 2014 form) is told by its bytes, whatever its `Content-Type`, and counts
    /// only if its signature verifies against a certificate that is valid now, for this host,
    /// and chains to a trusted authority.
    func read(_ document: FetchedDocument, host: String) async throws(SiteAssociationError) -> (SiteAssociationFile, signed: Bool) {
        switch document.status {
        case 200:
            break
        case 300..<400:
            throw SiteAssociationError("the site redirects (\(document.status) to \(document.location ?? "nowhere")), and redirects are not followed")
        default:
            throw SiteAssociationError("the site answered \(document.status)")
        }
        guard SignedAssociationFile.looksSigned(document.body) else { return (try SiteAssociationFile(json: document.body), false) }
        let roots = CertificateStore.systemTrustRoots.appending(contentsOf: extraRoots)
        return (try SiteAssociationFile(json: try await SignedAssociationFile.verify(document.body, host: host, roots: roots)), true)
    }
}
