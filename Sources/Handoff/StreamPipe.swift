import Foundation

/// A one-way byte pipe with a bounded buffer: a writer blocks while it is full, a reader while
/// it is empty, so a slow reader slows the writer and memory stays bounded. Closing either end
/// is seen by the other: the reader gets end-of-stream, the writer an error.
package final class StreamPipe: @unchecked Sendable {
    // @unchecked: all state is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var buffer: [UInt8] = []
    private var head = 0
    private let capacity: Int
    private var writerClosed = false
    private var readerClosed = false
    private var failure: (any Error)?
    /// Called, outside the lock, when bytes arrive or the writer closes (for stream events).
    private var onChange: (@Sendable () -> Void)?

    package init(capacity: Int = 64 * 1024) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// Two pipes crossed into the two ends of a conversation: what one side writes the other reads.
    package static func makeConnectedPairs(capacity: Int = 64 * 1024) -> (StreamPair, StreamPair) {
        let forward = StreamPipe(capacity: capacity)
        let backward = StreamPipe(capacity: capacity)
        let first = StreamPair(input: PipeInputStream(backward), output: PipeOutputStream(forward))
        let second = StreamPair(input: PipeInputStream(forward), output: PipeOutputStream(backward))
        return (first, second)
    }

    private var buffered: Int { buffer.count - head }

    /// Writes up to `count` bytes, blocking until there is room; -1 once the reader is gone.
    func write(_ bytes: UnsafePointer<UInt8>, count: Int) -> Int {
        condition.lock()
        defer { condition.unlock() }
        while buffered >= capacity && !readerClosed && !writerClosed {
            condition.wait()
        }
        if readerClosed || writerClosed {
            return -1
        }
        if head > 0 && head >= buffer.count / 2 {
            buffer.removeFirst(head)
            head = 0
        }
        let n = min(count, capacity - buffered)
        buffer.append(contentsOf: UnsafeBufferPointer(start: bytes, count: n))
        condition.broadcast()
        if let onChange {
            condition.unlock()
            onChange()
            condition.lock()
        }
        return n
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
        buffer.withUnsafeBufferPointer { source in
            into.update(from: source.baseAddress! + head, count: n)
        }
        head += n
        if head == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            head = 0
        }
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
        buffer.removeAll()
        head = 0
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
    private let status = NSLock()
    nonisolated(unsafe) private var state: Stream.Status = .notOpen  // guarded by `status`
    /// Called once, when the stream is closed.
    private let onClose: (@Sendable () -> Void)?
    nonisolated(unsafe) private var closed = false  // guarded by `status`
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
        status.lock()
        let first = !closed
        closed = true
        status.unlock()
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
        status.lock()
        state = new
        status.unlock()
    }

    override package func open() {
        setState(.open)
        events.opened()
    }

    override package func close() {
        events.closed()
        pipe.closeReader()
        status.lock()
        state = .closed
        let first = !closed
        closed = true
        status.unlock()
        if first { onClose?() }
    }

    override package var streamStatus: Stream.Status {
        status.lock()
        defer { status.unlock() }
        return state
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
    private let status = NSLock()
    nonisolated(unsafe) private var state: Stream.Status = .notOpen  // guarded by `status`
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
        status.lock()
        state = new
        status.unlock()
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
        status.lock()
        defer { status.unlock() }
        return state
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
