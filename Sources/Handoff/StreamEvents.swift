import Foundation

/// Stream-delegate events for continuation streams, as Cocoa code expects them: a stream given
/// a `delegate` and scheduled on a run loop (`schedule(in:forMode:)`) gets `.openCompleted`,
/// then `.hasBytesAvailable` / `.hasSpaceAvailable` as it can be read or written, and one
/// `.endEncountered` or `.errorOccurred`, on that run loop.
///
/// Events for `RunLoop.main` go through the main queue, which runs under `dispatchMain()` as
/// under `RunLoop.main.run()`; for another run loop, through a timer added to it.
final class StreamEvents: @unchecked Sendable {
    // @unchecked: every field is read and written under `lock`.
    // NSLock rather than Mutex: what it guards holds values that are not Sendable (run loops,
    // the stream, its delegate), read out under the lock; Mutex hands out only what it can send.
    private let lock = NSLock()
    private weak var delegateStorage: (any StreamDelegate)?
    private var places: [(runLoop: RunLoop, mode: RunLoop.Mode)] = []
    private var pending = false
    private var finished = false
    private var isOpen = false
    private weak var stream: Stream?
    /// The event the stream's state calls for now (not `.openCompleted`), or nil.
    private let state: @Sendable () -> Stream.Event?

    init(state: @escaping @Sendable () -> Stream.Event?) {
        self.state = state
    }

    func attach(_ stream: Stream) {
        lock.withLock { self.stream = stream }
    }

    var delegate: (any StreamDelegate)? {
        get { lock.withLock { delegateStorage } }
        set { lock.withLock { delegateStorage = newValue } }
    }

    func schedule(in runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        let opened = lock.withLock { () -> Bool in
            places.append((runLoop, mode))
            return isOpen
        }
        if opened { signal() }
    }

    func remove(from runLoop: RunLoop, forMode mode: RunLoop.Mode) {
        lock.withLock { places.removeAll { $0.runLoop === runLoop && $0.mode == mode } }
    }

    /// The stream opened: `.openCompleted`, then whatever its state calls for.
    func opened() {
        lock.withLock { isOpen = true }
        post { stream, delegate in delegate.stream(stream, handle: .openCompleted) }
        signal()
    }

    /// The stream was closed: no more events.
    func closed() {
        lock.withLock { finished = true }
    }

    /// A read or write was made, in a delegate call or not: as with Cocoa's streams, the
    /// next `.hasBytesAvailable` or `.hasSpaceAvailable` comes after it, when the stream's
    /// state calls for one.
    func used() {
        signal()
    }

    /// The stream's state changed (bytes came, the other side ended, a failure): one event is
    /// sent, if the stream is open and scheduled and none is on its way.
    func signal() {
        let go = lock.withLock { () -> Bool in
            guard isOpen, !finished, !pending, !places.isEmpty, delegateStorage != nil else { return false }
            pending = true
            return true
        }
        if go { post { _, _ in self.deliver() } }
    }

    private func deliver() {
        let event: Stream.Event? = lock.withLock {
            pending = false
            guard !finished else { return nil }
            return state()
        }
        guard let event, let stream = lock.withLock({ self.stream }), let delegate else { return }
        if event == .endEncountered || event == .errorOccurred { lock.withLock { finished = true } }
        delegate.stream(stream, handle: event)
    }

    /// Runs `body` on each run loop the stream is scheduled on.
    private func post(_ body: @escaping @Sendable (Stream, any StreamDelegate) -> Void) {
        let targets = lock.withLock { places }
        let handler: @Sendable () -> Void = { [weak self] in
            guard let self, let stream = self.lock.withLock({ self.stream }), let delegate = self.delegate else { return }
            body(stream, delegate)
        }
        // One delivery per event, on the first place it is scheduled (Cocoa streams live on one).
        guard let target = targets.first else { return }
        if target.runLoop === RunLoop.main {
            DispatchQueue.main.async(execute: handler)
        } else {
            let timer = Timer(timeInterval: 0, repeats: false) { _ in handler() }
            target.runLoop.add(timer, forMode: target.mode)
        }
    }
}
