import Foundation
import HandoffWire
import NIOCore
import NIOPosix
import NIOSSL

/// The origin's side of a fetch: it answers other devices' `fetch` messages on its link
/// listener with what `save` returns.
package final class FetchService: Sendable {
    package let listener: LinkListener

    /// `save` asks the owning app to save the activity (within its deadline) and returns the
    /// record, or a failure with its code.
    package init(
        device: UUID, identity: DeviceIdentity, pins: @escaping LinkPins, host: String = "127.0.0.1", port: Int = 0,
        save: @escaping @Sendable (UUID) async -> Result<FetchedActivity, ContinuationFailure>
    ) async throws {
        listener = try await LinkListener(identity: identity, pins: pins, host: host, port: port) { frame in
            guard let message = try? LinkMessage(frame: frame) else { return nil }
            return await Self.answer(message, device: device, save: save)
        }
    }

    /// The origin's answer to `hello` and `fetch`; nil for every other message. The agent
    /// answers these two the same way.
    static func answer(
        _ message: LinkMessage, device: UUID, save: @Sendable (UUID) async -> Result<FetchedActivity, ContinuationFailure>
    ) async -> Frame? {
        switch message {
        case .hello:
            return LinkMessage.hello(version: LinkMessage.version, device: device).frame
        case .fetch(let request, let activityID):
            switch await save(activityID) {
            case .success(let record):
                return LinkMessage.fetched(request: request, record).frame
            case .failure(let failure):
                return LinkMessage.fetchFailed(request: request, code: UInt16(clamping: failure.code), message: failure.message).frame
            }
        default:
            return nil
        }
    }

    package var port: Int { listener.port }

    package func close() async { await listener.close() }
}
