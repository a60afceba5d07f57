import Foundation

/// What the agent keeps of continuation streams: the continuations delivered here that their
/// apps may still open streams for (the newest `remembered`, and none of a session that
/// ended), and the streams other devices opened that wait for an app here to take them.
struct ContinuationStreams {
    /// How many delivered continuations are remembered for opening streams.
    static let remembered = 64

    private var sources: [UUID: Agent.StreamSource] = [:]
    /// The remembered continuations, oldest first.
    private var order: [UUID] = []
    /// Streams other devices opened, by the token the app takes them with.
    var pending: [UUID: Agent.PendingStream] = [:]

    /// `continuation` was delivered: its app may open streams back to `source`.
    mutating func remember(_ continuation: UUID, _ source: Agent.StreamSource) {
        sources[continuation] = source
        order.append(continuation)
        while order.count > Self.remembered {
            sources[order.removeFirst()] = nil
        }
    }

    func source(of continuation: UUID) -> Agent.StreamSource? {
        sources[continuation]
    }

    /// The session ended: its continuations open no more streams; the tokens of the streams
    /// waiting for it (for the caller to refuse).
    mutating func forget(session: UUID) -> [UUID] {
        sources = sources.filter { $0.value.session != session }
        order.removeAll { sources[$0] == nil }
        return pending.filter { $0.value.session == session }.map(\.key)
    }
}
