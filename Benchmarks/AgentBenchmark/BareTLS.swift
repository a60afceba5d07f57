// The baseline continue is measured against: the fastest exchange NIO can make over a fresh TLS
// connection. One process per side, each with one warm event loop and one TLS context made
// before the clock starts; TLS 1.3, both sides present a P-256 certificate (as the agents'
// links do) and pin the other's by its SHA-256; TCP_NODELAY; a 3 KB request echoed back. The
// client's loop runs on its event loop, so no thread or task hop is timed: from `connect` to
// the last byte of the answer, then the connection is closed and the next one begins.
// Nothing else is in the path: no framing library, no membership proof, no actor.
import Crypto
import BenchmarkReport
import Foundation
import HandoffAgent
import NIOCore
import NIOPosix
import NIOSSL
import SwiftASN1
import X509

#if canImport(Glibc)
import Glibc
#endif

/// Writes a fresh P-256 certificate (DER and PEM) and key for each side into `folder`
/// (`server.der`, `server.pem`, `server.key.pem`, and the same for `client`).
func makeBareTLSIdentities(in folder: String) throws {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    for side in ["server", "client"] {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(side) }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3_600), notValidAfter: Date().addingTimeInterval(86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
            },
            issuerPrivateKey: .init(key))
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        try Data(serializer.serializedBytes).write(to: URL(fileURLWithPath: "\(folder)/\(side).der"))
        try PEMDocument(type: "CERTIFICATE", derBytes: serializer.serializedBytes).pemString
            .write(toFile: "\(folder)/\(side).pem", atomically: true, encoding: .utf8)
        try key.pemRepresentation.write(toFile: "\(folder)/\(side).key.pem", atomically: true, encoding: .utf8)
    }
}

/// This side's TLS context, and a verifier that accepts only the other side's certificate.
/// A verifier that pins one certificate.
typealias PinningVerifier = @Sendable ([NIOSSLCertificate], EventLoopPromise<NIOSSLVerificationResult>) -> Void

func bareTLSContext(folder: String, side: String, peer: String) throws -> (NIOSSLContext, PinningVerifier) {
    let der = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(side).der")))
    let key = try NIOSSLPrivateKey(file: "\(folder)/\(side).key.pem", format: .pem)
    let pinned = Array(SHA256.hash(data: try Data(contentsOf: URL(fileURLWithPath: "\(folder)/\(peer).der"))))
    var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: [.certificate(try NIOSSLCertificate(bytes: der, format: .der))], privateKey: .privateKey(key))
    configuration.minimumTLSVersion = .tlsv13
    configuration.maximumTLSVersion = .tlsv13
    configuration.certificateVerification = .noHostnameVerification
    configuration.trustRoots = .certificates([])
    let verify: PinningVerifier = { certificates, promise in
        let leaf = certificates.first.flatMap { try? $0.toDERBytes() }
        promise.succeed(leaf.map { Array(SHA256.hash(data: $0)) == pinned } == true ? .certificateVerified : .failed)
    }
    return (try NIOSSLContext(configuration: configuration), verify)
}

let bareRequestSize = 3 * 1024

/// Reads a 4-byte length and that many bytes; the server echoes them, the client completes.
/// A client with `repeats` sends the next request as each answer comes, on the same
/// connection, and records each exchange's time (`latencies`).
final class BareExchangeHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: used only on its channel's event loop.
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var buffer: ByteBuffer?
    private let answered: EventLoopPromise<Void>?
    private var repeats: Int
    private let size: Int
    private var sent: UInt64 = 0
    private(set) var latencies: [UInt64] = []

    init(answered: EventLoopPromise<Void>?, repeats: Int = 0, size: Int = bareRequestSize) {
        self.answered = answered
        self.repeats = repeats
        self.size = size
    }

    func channelActive(context: ChannelHandlerContext) {
        if answered != nil { send(context) }
        context.fireChannelActive()
    }

    private func send(_ context: ChannelHandlerContext) {
        var request = context.channel.allocator.buffer(capacity: 4 + size)
        request.writeInteger(UInt32(size))
        request.writeRepeatingByte(0x41, count: size)
        sent = now()
        context.writeAndFlush(wrapOutboundOut(request), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        if buffer == nil { buffer = incoming } else { buffer!.writeBuffer(&incoming) }
        guard let length = buffer!.getInteger(at: buffer!.readerIndex, as: UInt32.self), buffer!.readableBytes >= 4 + Int(length) else { return }
        if let answered {
            buffer = nil
            latencies.append(now() - sent)
            if repeats > 0 {
                repeats -= 1
                send(context)
            } else {
                answered.succeed(())
            }
            return
        }
        HopTrace.stamp("answered")
        context.writeAndFlush(wrapOutboundOut(buffer!), promise: nil)
        buffer = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        answered?.fail(error)
        context.close(promise: nil)
    }
}

func runBareTLSServer(folder: String, host: String, port: Int) throws -> Never {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let (context, verify) = try bareTLSContext(folder: folder, side: "server", peer: "client")
    let channel = try ServerBootstrap(group: group)
        .serverChannelOption(.backlog, value: 256)
        .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
        .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                // Only under Benchmarks/hops.sh (HANDOFF_HOP_TRACE): stamps each record.
                try HopTraceRecords.add(to: channel)
                try channel.pipeline.syncOperations.addHandlers([
                    NIOSSLServerHandler(context: context, customVerificationCallback: verify), BareExchangeHandler(answered: nil),
                ])
            }
        }
        .bind(host: host, port: port).wait()
    print("listening \(channel.localAddress?.port ?? 0)")
    fflush(nil)
    while true { sleep(3600) }
}

/// `count` exchanges (after 20 to warm up) on one connection kept open, the connection's
/// handshake not counted: what a request and its answer cost on a link already open, with
/// nothing but TLS in the path. Prints each latency in milliseconds.
func runWarmTLSClient(folder: String, host: String, port: Int, count: Int, size: Int = bareRequestSize) throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let (context, verify) = try bareTLSContext(folder: folder, side: "client", peer: "server")
    let warmUp = 20
    let answered = group.next().makePromise(of: Void.self)
    let handler = BareExchangeHandler(answered: answered, repeats: count + warmUp - 1, size: size)
    let channel = try ClientBootstrap(group: group).channelOption(.tcpOption(.tcp_nodelay), value: 1)
        .channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandlers([
                    try NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: verify), handler,
                ])
            }
        }
        .connect(host: host, port: port).wait()
    try answered.futureResult.wait()
    let latencies = try channel.eventLoop.submit { handler.latencies }.wait()
    try channel.close().wait()
    for latency in latencies.dropFirst(warmUp) { print(milliseconds(latency)) }
}

/// `count` exchanges (after 20 to warm up), each on a fresh connection; prints each latency in
/// milliseconds. With `pacedMilliseconds`, each measured connection waits that long after the
/// one before closed, so that each begins on idle processors, as a paced continuation (or one
/// after quiet) does; the warm-up runs back to back. `stepped`: each measured connection waits
/// instead for a line on standard input, and its time is printed as soon as it is measured, so
/// that the caller can alternate the exchanges with what it compares them to.
func runBareTLSClient(folder: String, host: String, port: Int, count: Int, pacedMilliseconds: Int64? = nil, stepped: Bool = false) throws {
    let pace = pacedMilliseconds.map(TimeAmount.milliseconds)
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop = group.next()
    let (context, verify) = try bareTLSContext(folder: folder, side: "client", peer: "server")
    let done = loop.makePromise(of: [UInt64].self)
    let warmUp = 20
    // Runs on the event loop only.
    final class Loop: @unchecked Sendable {
        var latencies: [UInt64] = []
    }
    let state = Loop()
    @Sendable func next() {
        guard state.latencies.count < count + warmUp else { return done.succeed(state.latencies) }
        let answered = loop.makePromise(of: Void.self)
        let bootstrap = ClientBootstrap(group: loop).channelOption(.tcpOption(.tcp_nodelay), value: 1)
        // Only the measured exchanges are stamped (Benchmarks/hops.sh), not the warm-up.
        let measured = state.latencies.count >= warmUp
        if measured { HopTrace.stamp("call") }
        let start = now()
        bootstrap.channelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try HopTraceRecords.add(to: channel)
                try channel.pipeline.syncOperations.addHandlers([
                    try NIOSSLClientHandler(context: context, serverHostname: nil, customVerificationCallback: verify), BareExchangeHandler(answered: answered),
                ])
            }
        }
        .connect(host: host, port: port).whenComplete { result in
            switch result {
            case .failure(let error): done.fail(error)
            case .success(let channel):
                answered.futureResult.whenComplete { outcome in
                    let latency = now() - start
                    state.latencies.append(latency)
                    if measured { HopTrace.stamp("answered") }
                    if case .failure(let error) = outcome { return done.fail(error) }
                    if measured && stepped {
                        FileHandle.standardOutput.write(Data("\(milliseconds(latency))\n".utf8))
                    }
                    channel.close().whenComplete { _ in
                        if stepped && state.latencies.count >= warmUp && state.latencies.count < count + warmUp {
                            // Stepped: the next exchange when the caller asks (on this loop's
                            // thread, which has nothing else to do), as after its own timer.
                            guard readLine() != nil else { return done.succeed(state.latencies) }
                            next()
                        } else if let pace, state.latencies.count >= warmUp {
                            loop.scheduleTask(in: pace) { next() }
                        } else {
                            next()
                        }
                    }
                }
            }
        }
    }
    loop.execute { next() }
    let latencies = try done.futureResult.wait()
    guard !stepped else { return }
    for latency in latencies.dropFirst(warmUp) { print(milliseconds(latency)) }
}
