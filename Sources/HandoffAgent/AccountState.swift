import Foundation
import HandoffWire

/// What a device knows of its account: who is in it and the keys they share. Kept in the
/// state directory as `account.json`, written atomically.
package struct AccountState: Codable, Sendable, Hashable {
    package struct Member: Codable, Sendable, Hashable {
        package var id: UUID
        package var name: String
        /// The member's device certificate (DER, base64 in the file), pinned for links.
        package var certificate: Data?
        package var joined: Date

        package init(id: UUID, name: String, certificate: Data? = nil, joined: Date = Date()) {
            self.id = id
            self.name = name
            self.certificate = certificate
            self.joined = joined
        }
    }

    package var id: UUID
    package var name: String
    package var members: [Member]
    /// The beacon keys, current first; the previous one is kept while a new key spreads.
    package var beaconKeys: [Data]
    /// Grows with every change to the membership, so that an older change never wins.
    package var revision: UInt64
    /// Beacon keys the account used before (the newest first, a few at most): beacons under
    /// them are never listed, only used to find members that missed a change.
    package var retiredBeaconKeys: [Data]?

    package init(id: UUID = UUID(), name: String, members: [Member], beaconKeys: [Data], revision: UInt64 = 1) {
        self.id = id
        self.name = name
        self.members = members
        self.beaconKeys = beaconKeys
        self.revision = revision
    }

    package static let fileName = "account.json"

    /// The account's recent changes, signed, for members that missed them.
    package static let changesFileName = "account-changes.json"
    /// The account a join answered with, saved by the joining device before it confirms (the
    /// inviting device commits only then); it becomes `fileName` with the commit, and a join
    /// that ended without one (refused, cut off, killed) leaves none at the next start.
    package static let joiningFileName = "account-joining.json"

    /// The retired keys, skipping any that are damaged.
    package var retiredKeys: [BeaconKey] {
        (retiredBeaconKeys ?? []).compactMap { try? BeaconKey(rawRepresentation: Array($0)) }
    }

    /// The beacon keys, checked: a state file with a damaged key is refused by name.
    package func keys(in store: StateStore) throws(StateError) -> [BeaconKey] {
        guard !beaconKeys.isEmpty else {
            throw .corrupt(path: store.url(Self.fileName).path, reason: "no beacon key")
        }
        var keys: [BeaconKey] = []
        for (index, data) in beaconKeys.enumerated() {
            do {
                keys.append(try BeaconKey(rawRepresentation: Array(data)))
            } catch {
                throw .corrupt(path: store.url(Self.fileName).path, reason: "beaconKeys[\(index)]: \(error)")
            }
        }
        return keys
    }
}
