import HandoffLocalAPI
import NIOCore

/// Reads each frame of a local client's connection into a `LocalMessage` on the event loop, as
/// it arrives, and passes it on (to the connection's `NIOAsyncChannel`, whose reader is the
/// agent's serving of that client: no task between). A frame that is not a message is answered
/// at once with the error, under its request number if that can be read, and passed on as a
/// failure.
///
/// What the agent has not taken yet waits in the async channel, which stops reading the
/// connection while more than a few wait: a client that sends faster than the agent answers is
/// slowed down (its writes wait), not cut off, and nothing it sent is lost.
final class LocalMessageDecoder: ChannelInboundHandler {
    typealias InboundIn = Frame
    typealias InboundOut = Result<LocalMessage, LocalError>

    private let peer: LocalPeer

    init(peer: LocalPeer) {
        self.peer = peer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireChannelRead(wrapInboundOut(Self.read(unwrapInboundIn(data), answeringFailuresTo: peer)))
    }

    /// The message in `frame`; if there is none, the error, which `peer` is told at once.
    static func read(_ frame: Frame, answeringFailuresTo peer: LocalPeer) -> Result<LocalMessage, LocalError> {
        do throws(LocalError) {
            return .success(try LocalMessage(frame: frame))
        } catch {
            peer.send(.reply(request: LocalAPIServer.requestNumber(in: frame.payload), .failure(error)))
            return .failure(error)
        }
    }
}

/// One local client's messages as the agent serves them, in order: from its connection (the
/// first, read during the handshake, then what the connection's async channel reads), or from
/// a client in the agent's own process. A connection that fails ends them.
package struct LocalMessages: AsyncSequence, Sendable {
    package typealias Element = Result<LocalMessage, LocalError>

    private enum Source: Sendable {
        case stream(AsyncStream<Element>)
        case connection(NIOAsyncChannelInboundStream<Element>)
    }

    private let first: Element?
    private let source: Source

    /// The messages of a client in this process, as it sends them.
    init(_ stream: AsyncStream<Element>) {
        first = nil
        source = .stream(stream)
    }

    /// `first`, then what `inbound` reads.
    init(first: Element, inbound: NIOAsyncChannelInboundStream<Element>) {
        self.first = first
        source = .connection(inbound)
    }

    package func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .stream(let stream): AsyncIterator(first: first, stream: stream.makeAsyncIterator(), inbound: nil)
        case .connection(let inbound): AsyncIterator(first: first, stream: nil, inbound: inbound.makeAsyncIterator())
        }
    }

    package struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate var first: Element?
        fileprivate var stream: AsyncStream<Element>.AsyncIterator?
        fileprivate var inbound: NIOAsyncChannelInboundStream<Element>.AsyncIterator?

        package mutating func next() async -> Element? {
            if let message = first {
                first = nil
                return message
            }
            if var iterator = stream {
                defer { stream = iterator }
                return await iterator.next()
            }
            if var iterator = inbound {
                defer { inbound = iterator }
                // A connection that failed (or a serving task cancelled) ends the messages.
                return try? await iterator.next()
            }
            return nil
        }
    }
}
