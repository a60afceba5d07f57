import Foundation
import HandoffWire
import NIOCore
import NIOPosix
import NIOSSL

/// The continuing side of a fetch.
package enum ActivityFetcher {
    /// Fetches activity `activityID` from the device at `host:port`. Every failure comes back
    /// as exactly one `ContinuationFailure` with the code the continuing app is to receive.
    package static func fetch(
        _ activityID: UUID, from host: String, port: Int, identity: DeviceIdentity, pins: @escaping LinkPins,
        deadline: Duration = .seconds(10)
    ) async -> Result<FetchedActivity, ContinuationFailure> {
        let link: TLSLink
        do {
            link = try await TLSLink.open(host: host, port: port, identity: identity, pins: pins, deadline: deadline)
        } catch {
            return .failure(error)
        }
        defer { link.close() }
        return await link.fetch(activityID, deadline: deadline)
    }
}
