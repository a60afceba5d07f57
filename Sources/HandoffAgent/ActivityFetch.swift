import Foundation
import HandoffWire
import NIOCore
import NIOPosix
import NIOSSL

/// Why a fetch failed, with Foundation's code the continuing app receives: 4608 handoff
/// failed, 4609 connection unavailable, 4610 remote app timed out, 4611 too large.
public struct FetchFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    // Foundation's own codes, as apps match on them (4608 to 4611).
    public static let handoffFailed = CocoaError.Code.userActivityHandoffFailed.rawValue
    public static let connectionUnavailable = CocoaError.Code.userActivityConnectionUnavailable.rawValue
    public static let remoteAppTimedOut = CocoaError.Code.userActivityRemoteApplicationTimedOut.rawValue
    public static let userInfoTooLarge = CocoaError.Code.userActivityHandoffUserInfoTooLarge.rawValue

    public var description: String { "error \(code): \(message)" }
}

/// The origin's side of a fetch: it answers other devices' `fetch` messages on its link
/// listener with what `save` returns.
public final class FetchService: Sendable {
    public let listener: LinkListener

    /// `save` asks the owning app to save the activity (within its deadline) and returns the
    /// record, or a failure with its code.
    public init(
        device: UUID, identity: DeviceIdentity, pins: @escaping LinkPins, host: String = "127.0.0.1", port: Int = 0,
        save: @escaping @Sendable (UUID) async -> Result<WireActivityRecord, FetchFailure>
    ) async throws {
        listener = try await LinkListener(identity: identity, pins: pins, host: host, port: port) { frame in
            guard let message = try? LinkMessage(frame: frame) else { return nil }
            return await Self.answer(message, device: device, save: save)
        }
    }

    /// The origin's answer to `hello` and `fetch`; nil for every other message. The agent
    /// answers these two the same way.
    static func answer(
        _ message: LinkMessage, device: UUID, save: @Sendable (UUID) async -> Result<WireActivityRecord, FetchFailure>
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

    public var port: Int { listener.port }

    public func close() async { await listener.close() }
}

/// The continuing side of a fetch.
public enum ActivityFetcher {
    /// Fetches activity `activityID` from the device at `host:port`. Every failure comes back
    /// as exactly one `FetchFailure` with the code the continuing app is to receive.
    public static func fetch(
        _ activityID: UUID, from host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins,
        deadline: Duration = .seconds(10)
    ) async -> Result<WireActivityRecord, FetchFailure> {
        let link: PeerConnection
        do {
            link = try await PeerConnection.open(host: host, port: port, identity: identity, pins: pins, deadline: deadline)
        } catch {
            return .failure(error)
        }
        defer { link.close() }
        return await link.fetch(activityID, deadline: deadline)
    }
}

struct DeadlineExceeded: Error {}

/// Runs `body`, or throws `DeadlineExceeded` when `deadline` passes first (cancelling it).
func withDeadline<T: Sendable>(_ deadline: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await LoopTimer.sleep(for: deadline)
            throw DeadlineExceeded()
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw DeadlineExceeded() }
        return first
    }
}
