import Foundation
import HandoffLocalAPI
import Synchronization

/// Tells the agent, once, whether a system activity it delivered was opened here
/// (`LocalMessage.delivered`): the person who continued it hears "Continued" only when it was,
/// and why not when it was not. What goes wrong after the app has it (a player that does not
/// seek) is told in a notification only.
final class DeliveryAnswer: Sendable {
    private let continuation: UUID
    private let client: LocalClient
    private let answered = Mutex(false)

    init(_ continuation: UUID, to client: LocalClient) {
        self.continuation = continuation
        self.client = client
    }

    /// Opened (`reason` nil), or not, and why; only the first answer is sent.
    func callAsFunction(notOpened reason: String? = nil) {
        guard answered.withLock({ answered in defer { answered = true }; return !answered }) else { return }
        try? client.send(.delivered(continuation: continuation, error: reason.map { LocalError(.failed, $0) }))
    }
}
