import Foundation
import Synchronization

/// Carries sealed beacons between the devices of an in-memory network, as multicast would:
/// every beacon posted reaches every other device on the bus, with the sender's address.
package final class BeaconBus: Sendable {
    private let listeners = Mutex<[UUID: @Sendable ([UInt8], String) -> Void]>([:])

    package init() {}

    func subscribe(_ id: UUID, _ receive: @escaping @Sendable ([UInt8], String) -> Void) {
        listeners.withLock { $0[id] = receive }
    }

    func unsubscribe(_ id: UUID) {
        listeners.withLock { $0[id] = nil }
    }

    func post(_ bytes: [UInt8], from address: String, by sender: UUID) {
        let receivers = listeners.withLock { $0.filter { $0.key != sender }.map(\.value) }
        for receive in receivers { receive(bytes, address) }
    }
}
