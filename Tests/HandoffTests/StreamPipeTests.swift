import Foundation
import Synchronization
import Testing

@testable import Handoff

/// A value one thread hands to another.
private final class Handover<Value: Sendable>: Sendable {
    private let storage = Mutex<Value?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    func put(_ value: Value) {
        storage.withLock { $0 = value }
        ready.signal()
    }

    /// The value, once it was put; `nil` if it was not put within ten seconds.
    func take() -> Value? {
        guard ready.wait(timeout: .now() + .seconds(10)) == .success else { return nil }
        return storage.withLock { $0 }
    }
}

@discardableResult
private func write(_ bytes: [UInt8], to stream: OutputStream) -> Int {
    bytes.withUnsafeBufferPointer { stream.write($0.baseAddress!, maxLength: $0.count) }
}

/// Reads once: the bytes read, or the stream's result (0 at the end, -1 on failure) when none were.
private func read(atMost count: Int, from stream: InputStream) -> (result: Int, bytes: [UInt8]) {
    var buffer = [UInt8](repeating: 0, count: count)
    let n = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: count) }
    return (n, n > 0 ? Array(buffer[..<n]) : [])
}

/// Two connected sides, opened.
private func openedPairs(capacity: Int = 64 * 1024) -> (StreamPair, StreamPair) {
    let (a, b) = StreamPipe.makeConnectedPairs(capacity: capacity)
    for stream: Stream in [a.input, a.output, b.input, b.output] { stream.open() }
    return (a, b)
}

/// A flag one thread raises and another reads.
private final class Flag: Sendable {
    private let raised = Atomic<Bool>(false)

    func raise() { raised.store(true, ordering: .sequentiallyConsistent) }
    var isRaised: Bool { raised.load(ordering: .sequentiallyConsistent) }
}

/// A count one thread adds to and another reads.
private final class Counter: Sendable {
    private let total = Atomic<Int>(0)

    func add(_ n: Int) { total.add(n, ordering: .sequentiallyConsistent) }
    var value: Int { total.load(ordering: .sequentiallyConsistent) }
}

private struct LinkDropped: Error, Equatable {}

@Suite("Connected stream pipes")
struct StreamPipeTests {
    @Test("Bytes written on one side's output arrive on the other side's input, both ways")
    func bothDirections() {
        let (a, b) = openedPairs()
        #expect(write([1, 2, 3], to: a.output) == 3)
        #expect(write([9, 8], to: b.output) == 2)

        #expect(read(atMost: 16, from: b.input).bytes == [1, 2, 3])
        #expect(read(atMost: 16, from: a.input).bytes == [9, 8])
    }

    @Test("A reader gets the bytes in the order they were written, across several writes and reads")
    func order() {
        let (a, b) = openedPairs()
        write([1, 2], to: a.output)
        write([3], to: a.output)
        write([4, 5, 6], to: a.output)

        #expect(read(atMost: 4, from: b.input).bytes == [1, 2, 3, 4])
        #expect(read(atMost: 4, from: b.input).bytes == [5, 6])
    }

    @Test("A write larger than the free space takes what fits and says how much")
    func partialWrite() {
        let (a, b) = openedPairs(capacity: 4)
        #expect(write([1, 2, 3, 4, 5, 6], to: a.output) == 4)
        #expect(a.output.hasSpaceAvailable == false)
        #expect(read(atMost: 16, from: b.input).bytes == [1, 2, 3, 4])
        #expect(a.output.hasSpaceAvailable)
    }

    @Test("A writer blocks while the buffer is full, until the reader reads")
    func writerBlocksWhenFull() {
        let (a, b) = openedPairs(capacity: 4)
        #expect(write([1, 2, 3, 4], to: a.output) == 4)
        let readerHasStarted = Flag()
        let aboutToWrite = Handover<Bool>()
        let writeReturned = Handover<(result: Int, afterReaderStarted: Bool)>()

        Thread.detachNewThread {
            aboutToWrite.put(true)
            let n = write([5], to: a.output)
            writeReturned.put((n, readerHasStarted.isRaised))
        }
        #expect(aboutToWrite.take() == true)
        readerHasStarted.raise()
        #expect(read(atMost: 4, from: b.input).bytes == [1, 2, 3, 4])

        // The write can only have returned once the read made room, after the flag was raised.
        let outcome = writeReturned.take()
        #expect(outcome?.result == 1)
        #expect(outcome?.afterReaderStarted == true)
        #expect(read(atMost: 4, from: b.input).bytes == [5])
    }

    @Test("A writer never gets more than the buffer's capacity ahead of the reader, and nothing is lost")
    func flowControl() {
        let capacity = 8
        let (a, b) = openedPairs(capacity: capacity)
        let message = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let written = Counter()

        Thread.detachNewThread {
            var sent = 0
            while sent < message.count {
                let n = write(Array(message[sent...]), to: a.output)
                guard n > 0 else { break }
                sent += n
                written.add(n)
            }
            a.output.close()
        }
        var received: [UInt8] = []
        var chunk = 1
        while true {
            let (n, bytes) = read(atMost: chunk, from: b.input)
            if n <= 0 { break }
            received += bytes
            // Only this thread reads, so `received.count` is what has left the buffer.
            #expect(written.value <= received.count + capacity)
            chunk = chunk % 5 + 1
        }
        #expect(received == message)
    }

    @Test("Filled in place while the reader reads: every byte arrives in order through many turns of the ring, never more than its capacity ahead")
    func fillInPlace() {
        let capacity = 1_000
        let pipe = StreamPipe(capacity: capacity)
        let total = 400_000
        let written = Counter()
        Thread.detachNewThread {
            var sent = 0
            var size = 1
            while sent < total {
                var wrote = 0
                let n = pipe.fill(upTo: min(size, total - sent)) { free in
                    // Sometimes less than was offered, as a socket read may give.
                    let count = size % 3 == 0 ? max(1, free.count / 2) : free.count
                    for index in 0..<count { free[index] = UInt8(truncatingIfNeeded: (sent + index) &* 13) }
                    wrote = count
                    return count
                }
                guard n > 0 else { break }
                #expect(n == wrote)
                sent += n
                written.add(n)
                size = size % 1_500 + 97
            }
            pipe.closeWriter()
        }
        var received = 0
        var inOrder = true
        var chunk = 1
        var buffer = [UInt8](repeating: 0, count: 2_000)
        while true {
            let n = buffer.withUnsafeMutableBufferPointer { pipe.read($0.baseAddress!, max: chunk) }
            if n <= 0 { break }
            for index in 0..<n where buffer[index] != UInt8(truncatingIfNeeded: (received + index) &* 13) { inOrder = false }
            received += n
            #expect(written.value <= received + capacity)
            chunk = chunk % 1_900 + 131
        }
        #expect(inOrder)
        #expect(received == total)
    }

    @Test("A fill under way when the reader closes, and every fill after, gets -1")
    func fillAfterReaderCloses() {
        let pipe = StreamPipe(capacity: 16)
        let n = pipe.fill(upTo: 8) { free in
            pipe.closeReader()
            return free.count
        }
        #expect(n == -1)
        #expect(pipe.fill(upTo: 8) { $0.count } == -1)
    }

    @Test("A fill under way when the writing end is closed from another thread delivers nothing after the end")
    func fillAfterWriterCloses() {
        let pipe = StreamPipe(capacity: 16)
        let n = pipe.fill(upTo: 8) { free in
            pipe.closeWriter()
            return free.count
        }
        #expect(n == -1)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(buffer.withUnsafeMutableBufferPointer { pipe.read($0.baseAddress!, max: 16) } == 0)
        #expect(pipe.readEvent == .endEncountered)
    }

    @Test("Closing the writer gives the reader the buffered bytes, then the end of the stream")
    func closingWriterEndsStream() {
        let (a, b) = openedPairs()
        write([1, 2, 3], to: a.output)
        a.output.close()

        #expect(b.input.streamStatus == .open)
        #expect(read(atMost: 16, from: b.input).bytes == [1, 2, 3])
        #expect(read(atMost: 16, from: b.input).result == 0)
        #expect(b.input.streamStatus == .atEnd)
        #expect(b.input.streamError == nil)
    }

    @Test("A reader waiting for bytes sees the end of the stream when the writer closes")
    func waitingReaderSeesEnd() {
        let (a, b) = openedPairs()
        let readReturned = Handover<Int>()
        Thread.detachNewThread {
            readReturned.put(read(atMost: 16, from: b.input).result)
        }
        a.output.close()
        #expect(readReturned.take() == 0)
    }

    @Test("Once the reader closes, writes fail with -1")
    func closingReaderFailsWrites() {
        let (a, b) = openedPairs()
        b.input.close()

        #expect(write([1], to: a.output) == -1)
        #expect(a.output.streamStatus == .error)
    }

    @Test("A writer waiting on a full buffer gets -1 when the reader closes")
    func waitingWriterSeesClose() {
        let (a, b) = openedPairs(capacity: 2)
        write([1, 2], to: a.output)
        let aboutToWrite = Handover<Bool>()
        let writeReturned = Handover<Int>()
        Thread.detachNewThread {
            aboutToWrite.put(true)
            writeReturned.put(write([3], to: a.output))
        }
        #expect(aboutToWrite.take() == true)
        b.input.close()
        #expect(writeReturned.take() == -1)
    }

    @Test("When the writer fails, the reader gets -1 and the error")
    func failingWriter() throws {
        let (a, b) = openedPairs()
        let output = try #require(a.output as? PipeOutputStream)
        output.fail(LinkDropped())

        #expect(read(atMost: 16, from: b.input).result == -1)
        #expect(b.input.streamStatus == .error)
        #expect(b.input.streamError as? LinkDropped == LinkDropped())
        #expect(output.streamStatus == .error)
    }

    @Test("When the writer fails, the reader first gets the bytes written before")
    func failingWriterDeliversBufferedBytes() throws {
        let (a, b) = openedPairs()
        write([1, 2], to: a.output)
        try #require(a.output as? PipeOutputStream).fail(LinkDropped())

        #expect(read(atMost: 16, from: b.input).bytes == [1, 2])
        #expect(read(atMost: 16, from: b.input).result == -1)
    }

    @Test("A stream is not open until it is opened, and closed once closed")
    func openAndClose() {
        let (a, _) = StreamPipe.makeConnectedPairs()
        #expect(a.input.streamStatus == .notOpen)
        #expect(a.output.streamStatus == .notOpen)
        a.input.open()
        a.output.open()
        #expect(a.input.streamStatus == .open)
        #expect(a.output.streamStatus == .open)
        a.input.close()
        a.output.close()
        #expect(a.input.streamStatus == .closed)
        #expect(a.output.streamStatus == .closed)
    }
}
