import Foundation
import HandoffWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import X509
import Synchronization

/// Bounds what connections can cost before they prove anything: at most `limit` open at
/// once, at most `perSourceLimit` of them from one address still before their first frame,
/// and each must complete its TLS handshake (and, between members, its membership proof) and
/// send a first frame within `deadline`, or it is closed. When every slot is taken, a new connection takes the slot of one still waiting
/// for its first frame: the longest waiting, from the address with the most waiting. So
/// strangers holding connections open from many addresses cannot keep a member's new link
/// (or a join) out; only links that have proved themselves keep their slots. Refusals are
/// counted by `watch`, which logs a flood once.
final class ConnectionGuard: ChannelInboundHandler, Sendable {
    typealias InboundIn = Frame
    typealias InboundOut = Frame

    /// What the connections of one listener share.
    final class Count: Sendable {
        let value = Mutex(0)
        /// Connections before their first frame, by source address.
        let pending = Mutex<[String: Int]>([:])
        /// The same connections, oldest first, for one to give its slot to a newcomer.
        let waiting = Mutex<[String: [ConnectionGuard]]>([:])
    }

    private let count: Count
    private let limit: Int
    private let perSourceLimit: Int
    private let deadline: TimeAmount
    private let watch: FloodWatch?
    private let timer = Mutex<Scheduled<Void>?>(nil)
    private let counted = Mutex(false)
    /// The source while this connection is pending (counted in `Count.pending`).
    private let pendingSource = Mutex<String?>(nil)
    private let channel = Mutex<(any Channel)?>(nil)

    init(count: Count, limit: Int, perSourceLimit: Int = 16, deadline: TimeAmount, watch: FloodWatch? = nil) {
        self.count = count
        self.limit = limit
        self.perSourceLimit = perSourceLimit
        self.deadline = deadline
        self.watch = watch
    }

    func channelActive(context: ChannelHandlerContext) {
        let source = context.channel.remoteAddress?.ipAddress ?? "?"
        let pendingAdmitted = count.pending.withLock { pending in
            guard pending[source, default: 0] < perSourceLimit else { return false }
            pending[source, default: 0] += 1
            return true
        }
        guard pendingAdmitted else {
            watch?.refused(from: source, reason: "over \(perSourceLimit) handshakes at once from one address")
            context.close(promise: nil)
            return
        }
        pendingSource.withLock { $0 = source }
        // A free slot, or the slot of the connection that waits longest from the address with
        // the most waiting (which then counts as closed).
        let (admitted, victim): (Bool, ConnectionGuard?) = count.value.withLock { open in
            if open < limit {
                open += 1
                return (true, nil)
            }
            let victim: ConnectionGuard? = count.waiting.withLock { waiting in
                guard let crowded = waiting.max(by: { $0.value.count < $1.value.count })?.key, var queue = waiting[crowded], !queue.isEmpty else { return nil }
                let oldest = queue.removeFirst()
                waiting[crowded] = queue.isEmpty ? nil : queue
                return oldest
            }
            guard let victim else { return (false, nil) }
            // Under the count's lock, as `channelInactive` decrements it: the victim's slot passes
            // to this connection, unless the victim closed meanwhile and gave it back already.
            let stillCounted = victim.counted.withLock { counted in
                defer { counted = false }
                return counted
            }
            if !stillCounted { open += 1 }
            return (true, victim)
        }
        if let victim {
            let from = victim.pendingSource.withLock { $0 } ?? "?"
            victim.evict()
            watch?.refused(from: from, reason: "waiting for a first frame when every slot was taken")
        }
        guard admitted else {
            endPending()
            watch?.refused(from: source, reason: "over \(limit) connections open")
            context.close(promise: nil)
            return
        }
        counted.withLock { $0 = true }
        channel.withLock { $0 = context.channel }
        count.waiting.withLock { $0[source, default: []].append(self) }
        let channel = context.channel
        let watch = self.watch
        let seconds = deadline.nanoseconds / 1_000_000_000
        timer.withLock {
            $0 = context.eventLoop.scheduleTask(in: deadline) {
                watch?.refused(from: source, reason: "no first frame within \(seconds) s")
                channel.close(promise: nil)
            }
        }
        context.fireChannelActive()
    }

    /// Closes this connection, whose slot was given away (it no longer counts as open).
    private func evict() {
        timer.withLock { $0?.cancel() }
        endPending()
        channel.withLock { $0 }?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        timer.withLock { scheduled in
            scheduled?.cancel()
            scheduled = nil
        }
        endPending()
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer.withLock { $0?.cancel() }
        endPending()
        channel.withLock { $0 = nil }
        count.value.withLock { open in
            if counted.withLock({ counted in defer { counted = false }; return counted }) { open -= 1 }
        }
        context.fireChannelInactive()
    }

    private func endPending() {
        guard let source = pendingSource.withLock({ source in defer { source = nil }; return source }) else { return }
        count.pending.withLock { pending in
            let left = pending[source, default: 1] - 1
            pending[source] = left > 0 ? left : nil
        }
        count.waiting.withLock { waiting in
            guard var queue = waiting[source] else { return }
            queue.removeAll { $0 === self }
            waiting[source] = queue.isEmpty ? nil : queue
        }
    }
}
