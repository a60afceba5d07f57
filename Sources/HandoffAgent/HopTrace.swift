import CHandoffSystem
import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a continuation is, stamped in every process it crosses, for `Benchmarks/hops.sh`
/// (docs/agent.md, "After quiet, hop by hop").
///
/// Off unless `HANDOFF_HOP_TRACE` names a file when the process first stamps: then each stamp
/// appends one line, `<pid> <CLOCK_MONOTONIC ns> <processor> <label>`, with one `write`, so the
/// lines of several processes appending to one file stay whole. The processor is the one the
/// stamping thread ran on (-1 if unknown): it shows where Linux placed each process it woke.
/// Off, a stamp costs a check that the file was looked for, a load and a branch: its label is
/// not even made.
package enum HopTrace {
    /// The file's descriptor, opened once; nil when tracing is off.
    private static let file: Int32? = {
        guard let path = ProcessInfo.processInfo.environment["HANDOFF_HOP_TRACE"], !path.isEmpty else { return nil }
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        return descriptor >= 0 ? descriptor : nil
    }()

    private static let process = getpid()

    /// Whether stamps are written.
    package static var isOn: Bool { file != nil }

    /// Appends `label`, stamped now, when tracing is on.
    @inline(__always)
    package static func stamp(_ label: @autoclosure () -> String) {
        guard let file else { return }
        append(label(), to: file)
    }

    private static func append(_ label: String, to file: Int32) {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        let nanoseconds = Int(time.tv_sec) * 1_000_000_000 + Int(time.tv_nsec)
        let processor = Int(handoff_processor())
        var line = "\(process) \(nanoseconds) \(processor) \(label)\n"
        _ = line.withUTF8 { write(file, $0.baseAddress, $0.count) }
    }
}

/// Stamps each read and each write of a link's connection, below TLS (`tls read <bytes>`,
/// `tls write <bytes>`): the handshake's flights, seen from each side (a flight that comes in
/// two reads is stamped at the first). In the pipeline only while tracing is on.
package final class HopTraceRecords: ChannelDuplexHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundIn = ByteBuffer

    /// Adds one at the head of `channel`'s pipeline when tracing is on.
    package static func add(to channel: any Channel) throws {
        guard HopTrace.isOn else { return }
        try channel.pipeline.syncOperations.addHandler(HopTraceRecords(), position: .first)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        HopTrace.stamp("tls read \(unwrapInboundIn(data).readableBytes)")
        context.fireChannelRead(data)
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        HopTrace.stamp("tls write \(unwrapOutboundIn(data).readableBytes)")
        context.write(data, promise: promise)
    }
}
