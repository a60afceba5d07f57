import Foundation
import Synchronization

/// A one-way byte pipe with a bounded buffer: a writer blocks while it is full, a reader while
/// it is empty, so a slow reader slows the writer and memory stays bounded. Closing either end
/// is seen by the other: the reader gets end-of-stream, the writer an error.
package final class StreamPipe: @unchecked Sendable {
    // @unchecked: all state is read and written only while `condition` is locked, except the
    // free region a writer filling in place was given (`fill`), which only that writer touches
    // until it commits; the storage lives as long as the pipe.
    private let condition = NSCondition()
    /// A ring: `buffered` bytes from `head`, wrapping at `capacity`.
    private let storage: UnsafeMutableRawBufferPointer
    private var head = 0
    private var buffered = 0
    private let capacity: Int
    private var writerClosed = false
    private var readerClosed = false
    private var failure: (any Error)?
    /// Called, outside the lock, when bytes arrive or the writer closes (for stream events).
    private var onChange: (@Sendable () -> Void)?

    package init(capacity: Int = 64 * 1024) {
        precondition(capacity > 0)
        self.capacity = capacity
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
    }

    deinit {
        storage.deallocate()
    }

    /// Two pipes crossed into the two ends of a conversation: what one side writes the other reads.
    package static func makeConnectedPairs(capacity: Int = 64 * 1024) -> (StreamPair, StreamPair) {
        let forward = StreamPipe(capacity: capacity)
        let backward = StreamPipe(capacity: capacity)
        let first = StreamPair(input: PipeInputStream(backward), output: PipeOutputStream(forward))
        let second = StreamPair(input: PipeInputStream(forward), output: PipeOutputStream(backward))
        return (first, second)
    }

    /// Writes up to `count` bytes, blocking until there is room; -1 once the reader is gone.
    func write(_ bytes: UnsafePointer<UInt8>, count: Int) -> Int {
        fill(upTo: count) { free in
            free.copyMemory(from: UnsafeRawBufferPointer(start: bytes, count: free.count))
            return free.count
        }
    }

    /// Fills the pipe in place: waits until there is room, then gives `body` the free bytes
    /// that follow the buffered ones (at most `count`, contiguous) to write into, without the
    /// lock, so that a reader goes on meanwhile; `body` returns how many it wrote (0 or fewer:
    /// none, and that is returned). -1 once the reader is gone (before or during `body`).
    /// One writer at a time.
    func fill(upTo count: Int, _ body: (UnsafeMutableRawBufferPointer) -> Int) -> Int {
        guard count > 0 else { return 0 }
        condition.lock()
        while buffered >= capacity && !readerClosed && !writerClosed {
            condition.wait()
        }
        if readerClosed || writerClosed {
            condition.unlock()
            return -1
        }
        let tail = (head + buffered) % capacity
        let room = tail >= head && buffered < capacity ? capacity - tail : head - tail
        let free = UnsafeMutableRawBufferPointer(rebasing: storage[tail..<tail + min(room, count)])
        condition.unlock()
        let written = body(free)
        condition.lock()
        guard written > 0 else {
            condition.unlock()
            return written
        }
        // Closed meanwhile: by the reader, or for the reader (bytes after its end would reach
        // a reader that was already told the stream ended).
        if readerClosed || writerClosed {
            condition.unlock()
            return -1
        }
        buffered += min(written, free.count)
        condition.broadcast()
        let change = onChange
        condition.unlock()
        change?()
        return min(written, free.count)
    }

    /// Calls `change` whenever bytes arrive or the writer closes.
    func observe(_ change: @escaping @Sendable () -> Void) {
        condition.lock()
        onChange = change
        condition.unlock()
    }

    /// The stream event the reading end's state calls for: bytes to read, or its end.
    var readEvent: Stream.Event? {
        condition.lock()
        defer { condition.unlock() }
        if buffered > 0 { return .hasBytesAvailable }
        if writerClosed { return failure == nil ? .endEncountered : .errorOccurred }
        return nil
    }

    /// The stream event the writing end's state calls for.
    var writeEvent: Stream.Event? {
        condition.lock()
        defer { condition.unlock() }
        if readerClosed { return .errorOccurred }
        return buffered < capacity ? .hasSpaceAvailable : nil
    }

    /// Reads up to `max` bytes, blocking until some arrive; 0 at the end, -1 on failure.
    func read(_ into: UnsafeMutablePointer<UInt8>, max: Int) -> Int {
        condition.lock()
        defer { condition.unlock() }
        while buffered == 0 && !writerClosed && !readerClosed {
            condition.wait()
        }
        if buffered == 0 {
            return failure == nil ? 0 : -1
        }
        let n = min(max, buffered)
        let first = min(n, capacity - head)
        UnsafeMutableRawPointer(into).copyMemory(from: storage.baseAddress! + head, byteCount: first)
        if n > first {
            UnsafeMutableRawPointer(into + first).copyMemory(from: storage.baseAddress!, byteCount: n - first)
        }
        head = (head + n) % capacity
        // The head is never moved back to the start: a writer filling in place holds a region
        // computed from it.
        buffered -= n
        condition.broadcast()
        return n
    }

    var hasBytesAvailable: Bool {
        condition.lock()
        defer { condition.unlock() }
        return buffered > 0 || writerClosed
    }

    var hasSpaceAvailable: Bool {
        condition.lock()
        defer { condition.unlock() }
        return buffered < capacity || readerClosed
    }

    /// Ends the pipe for the reader: at the end of the bytes, or with `failure`. Only the
    /// first close counts.
    func closeWriter(failure: (any Error)? = nil) {
        condition.lock()
        guard !writerClosed else {
            condition.unlock()
            return
        }
        writerClosed = true
        if let failure { self.failure = failure }
        condition.broadcast()
        let change = onChange
        condition.unlock()
        change?()
    }

    func closeReader() {
        condition.lock()
        readerClosed = true
        buffered = 0
        condition.broadcast()
        condition.unlock()
    }

    var error: (any Error)? {
        condition.lock()
        defer { condition.unlock() }
        return failure
    }
}

/// The reading end of a `StreamPipe`, as a Foundation `InputStream`. `read` blocks until bytes
/// arrive or the writer closes, like a stream read off the main thread on Apple platforms.
package final class PipeInputStream: InputStream {
    private let pipe: StreamPipe
    /// The stream's status, and whether it was closed (by `close` or by being let go of).
    private let status = Mutex<(state: Stream.Status, closed: Bool)>((.notOpen, false))
    /// Called once, when the stream is closed.
    private let onClose: (@Sendable () -> Void)?
    private let events: StreamEvents

    init(_ pipe: StreamPipe, onClose: (@Sendable () -> Void)? = nil) {
        self.pipe = pipe
        self.onClose = onClose
        events = StreamEvents { [pipe] in pipe.readEvent }
        super.init(data: Data())
        events.attach(self)
        pipe.observe { [events] in events.signal() }
    }

    /// A stream let go of without `close` is closed, as Foundation's are.
    deinit {
        let first = status.withLock { status in
            defer { status.closed = true }
            return !status.closed
        }
        if first {
            pipe.closeReader()
            onClose?()
        }
    }

    override package var delegate: (any StreamDelegate)? {
        get { events.delegate }
        set { events.delegate = newValue }
    }

    override package func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.schedule(in: aRunLoop, forMode: mode)
    }

    override package func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.remove(from: aRunLoop, forMode: mode)
    }

    private func setState(_ new: Stream.Status) {
        status.withLock { $0.state = new }
    }

    override package func open() {
        setState(.open)
        events.opened()
    }

    override package func close() {
        events.closed()
        pipe.closeReader()
        let first = status.withLock { status in
            defer { status = (.closed, true) }
            return !status.closed
        }
        if first { onClose?() }
    }

    override package var streamStatus: Stream.Status {
        status.withLock { $0.state }
    }

    override package var streamError: (any Error)? { pipe.error }

    override package var hasBytesAvailable: Bool { pipe.hasBytesAvailable }

    override package func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        guard len > 0 else { return 0 }
        let n = pipe.read(buffer, max: len)
        if n == 0 { setState(.atEnd) }
        if n < 0 { setState(.error) }
        events.used()
        return n
    }

    override package func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>) -> Bool {
        false
    }
}

/// The writing end of a `StreamPipe`, as a Foundation `OutputStream`. `write` blocks while the
/// reader is behind, which is the flow control.
package final class PipeOutputStream: OutputStream {
    private let pipe: StreamPipe
    private let status = Mutex<Stream.Status>(.notOpen)
    private let events: StreamEvents

    init(_ pipe: StreamPipe) {
        self.pipe = pipe
        events = StreamEvents { [pipe] in pipe.writeEvent }
        super.init(toMemory: ())
        events.attach(self)
    }

    /// Foundation requires this initializer; a stream made this way has no reader, so every
    /// write fails.
    package required init(toMemory: ()) {
        pipe = StreamPipe(capacity: 1)
        pipe.closeReader()
        events = StreamEvents { nil }
        super.init(toMemory: ())
    }

    /// A stream let go of without `close` is closed, as Foundation's are: the reader sees the end.
    deinit {
        pipe.closeWriter()
    }

    override package var delegate: (any StreamDelegate)? {
        get { events.delegate }
        set { events.delegate = newValue }
    }

    override package func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.schedule(in: aRunLoop, forMode: mode)
    }

    override package func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        events.remove(from: aRunLoop, forMode: mode)
    }

    private func setState(_ new: Stream.Status) {
        status.withLock { $0 = new }
    }

    override package func open() {
        setState(.open)
        events.opened()
    }

    override package func close() {
        events.closed()
        pipe.closeWriter()
        setState(.closed)
    }

    /// Ends the stream with an error the reader sees, as when a link drops.
    package func fail(_ error: any Error) {
        pipe.closeWriter(failure: error)
        setState(.error)
    }

    override package var streamStatus: Stream.Status {
        status.withLock { $0 }
    }

    override package var hasSpaceAvailable: Bool { pipe.hasSpaceAvailable }

    override package func write(_ buffer: UnsafePointer<UInt8>, maxLength len: Int) -> Int {
        guard len > 0 else { return 0 }
        let n = pipe.write(buffer, count: len)
        if n < 0 { setState(.error) }
        events.used()
        return n
    }
}
