import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// Turns the bytes of a link into frames and back, refusing oversized frames by closing.
final class FrameHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = Frame
    typealias OutboundIn = Frame
    typealias OutboundOut = ByteBuffer

    private var decoder: FrameDecoder
    /// How long a frame may take to arrive once it has begun; nil for no limit.
    private let partialDeadline: TimeAmount?
    private var partialTimer: Scheduled<Void>?

    init(maximumPayload: Int, partialDeadline: TimeAmount? = nil) {
        decoder = FrameDecoder(maximumPayload: maximumPayload)
        self.partialDeadline = partialDeadline
    }

    /// Changes the frame limit from the next frame on (a link between members is held to a
    /// small one until its peer is proven).
    func setMaximumPayload(_ maximum: Int) {
        decoder.maximumPayload = maximum
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        do {
            // Whole frames in this read go straight from it to their payloads: one copy of a
            // stream's bytes, not two. What is left (a frame begun) waits in the decoder.
            if decoder.bufferedByteCount == 0 {
                while let declared = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self).map(Int.init),
                    declared <= decoder.maximumPayload, buffer.readableBytes >= Frame.headerSize + declared
                {
                    buffer.moveReaderIndex(forwardBy: 4)
                    let kind = buffer.readInteger(as: UInt8.self)!
                    let payload = buffer.readBytes(length: declared)!
                    context.fireChannelRead(wrapInboundOut(Frame(kind: kind, payload: payload)))
                }
            }
            decoder.append(buffer.readableBytesView)
            while let frame = try decoder.next() {
                context.fireChannelRead(wrapInboundOut(frame))
            }
        } catch {
            context.fireErrorCaught(error)
            context.close(promise: nil)
            return
        }
        // Bytes came: the wait they ended is over (see `read`).
        partialTimer?.cancel()
        partialTimer = nil
    }

    /// A frame begun must go on arriving: a sender that stops half-way would otherwise hold its
    /// buffer and connection for ever. So each read asked for while a frame is unfinished must
    /// bring bytes within the deadline. The clock runs only while a read is asked for: while
    /// this side reads nothing (the frames read wait for the link's credit, and NIO's
    /// back-pressure holds further reads back), a sender that waits is not to blame; and a
    /// transfer that goes on for longer than the deadline, every read ending inside a frame, is
    /// making progress.
    func read(context: ChannelHandlerContext) {
        if decoder.bufferedByteCount > 0, partialTimer == nil, let partialDeadline {
            let channel = context.channel
            partialTimer = context.eventLoop.scheduleTask(in: partialDeadline) { channel.close(promise: nil) }
        }
        context.read()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        partialTimer?.cancel()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let frame = unwrapOutboundIn(data)
        // Header and payload straight into one buffer: one copy of the payload, not two.
        var buffer = context.channel.allocator.buffer(capacity: Frame.headerSize + frame.payload.count)
        buffer.writeInteger(UInt32(frame.payload.count))
        buffer.writeInteger(frame.kind)
        buffer.writeBytes(frame.payload)
        context.write(wrapOutboundOut(buffer), promise: promise)
    }
}
