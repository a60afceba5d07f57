import Foundation

/// A pair of continuation streams for async code: what the other app writes arrives as chunks
/// of an async sequence, and `write` suspends (instead of blocking a thread) while the other
/// side is behind.
///
/// On the continuing side, `UserActivity.continuationByteStreams()` opens one. On the
/// originating side, wrap the Foundation streams the delegate receives:
///
/// ```swift
/// func userActivity(_ activity: UserActivity, didReceive input: InputStream, outputStream output: OutputStream) {
///     let streams = ContinuationByteStream(input: input, output: output)
///     Task {
///         for try await chunk in streams.incoming { … }
///         try await streams.write(Array("done".utf8))
///         streams.finish()
///     }
/// }
/// ```
///
/// Each direction runs its blocking Foundation calls on a queue of its own, so reading and
/// writing may go on at once, and no thread async code shares is ever blocked.
public final class ContinuationByteStream: @unchecked Sendable {
    // @unchecked: `input` is used only on `reading`, `output` only on `writing`, one call at a time.
    private let input: InputStream
    private let output: OutputStream
    private let reading = DispatchQueue(label: "handoff.continuation-stream.read")
    private let writing = DispatchQueue(label: "handoff.continuation-stream.write")

    /// The bytes the other app writes, in chunks of at most `chunkSize`; the sequence ends when
    /// the other app closes its output, and throws if the stream fails (the link dropped, the
    /// other app crashed).
    public let incoming: Incoming
    public let chunkSize: Int

    public init(input: InputStream, output: OutputStream, chunkSize: Int = 64 * 1024) {
        precondition(chunkSize > 0)
        self.input = input
        self.output = output
        self.chunkSize = chunkSize
        incoming = Incoming(input: input, queue: reading, chunkSize: chunkSize)
        reading.async { [self] in self.input.open() }
        writing.async { [self] in self.output.open() }
    }

    /// Sends `bytes`, suspending while the other side is behind. Throws once the other app
    /// closed its input or the stream failed.
    public func write(_ bytes: [UInt8]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            writing.async { [self] in
                let output = self.output
                var offset = 0
                while offset < bytes.count {
                    let n = bytes.withUnsafeBufferPointer { output.write($0.baseAddress! + offset, maxLength: bytes.count - offset) }
                    if n <= 0 {
                        continuation.resume(throwing: output.streamError ?? CocoaError.handoff(.userActivityHandoffFailed, "the stream is closed for writing"))
                        return
                    }
                    offset += n
                }
                continuation.resume()
            }
        }
    }

    /// Sends `data`, as `write(_:)` does.
    public func write(_ data: Data) async throws {
        try await write([UInt8](data))
    }

    /// Ends this side's output: the other app reads what was written, then the end. Writes
    /// queued before it go first.
    public func finish() {
        writing.async { [self] in self.output.close() }
    }

    /// Closes both directions: the other app's reads end, and its writes fail.
    public func close() {
        finish()
        input.close()
    }

    /// The chunks the other app writes.
    public struct Incoming: AsyncSequence, @unchecked Sendable {
        // @unchecked: `input` is read only on `queue` (the stream's `reading` queue), one call
        // at a time, whichever task iterates.
        public typealias Element = [UInt8]
        fileprivate let input: InputStream
        fileprivate let queue: DispatchQueue
        fileprivate let chunkSize: Int

        public func makeAsyncIterator() -> Iterator {
            Iterator(input: input, queue: queue, chunkSize: chunkSize)
        }

        public struct Iterator: AsyncIteratorProtocol, @unchecked Sendable {
            // @unchecked: as `Incoming`, `input` is read only on `queue`.
            fileprivate let input: InputStream
            fileprivate let queue: DispatchQueue
            fileprivate let chunkSize: Int

            public mutating func next() async throws -> [UInt8]? {
                let me = self
                return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
                    me.queue.async {
                        let input = me.input
                        let size = me.chunkSize
                        var buffer = [UInt8](repeating: 0, count: size)
                        let n = buffer.withUnsafeMutableBufferPointer { input.read($0.baseAddress!, maxLength: size) }
                        if n > 0 {
                            buffer.removeSubrange(n...)
                            continuation.resume(returning: buffer)
                        } else if n == 0 {
                            continuation.resume(returning: nil)
                        } else {
                            continuation.resume(throwing: input.streamError ?? CocoaError.handoff(.userActivityHandoffFailed, "the stream failed"))
                        }
                    }
                }
            }
        }
    }
}

extension UserActivity {
    /// Opens a pair of streams to the originating app, as `continuationStreams()` does, for
    /// async code: see `ContinuationByteStream`.
    public func continuationByteStreams() async throws -> ContinuationByteStream {
        let (input, output) = try await continuationStreams()
        return ContinuationByteStream(input: input, output: output)
    }
}
