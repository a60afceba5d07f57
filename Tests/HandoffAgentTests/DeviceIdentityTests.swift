import Foundation
import Testing
import X509

@testable import HandoffAgent

@Suite("Device identity")
struct DeviceIdentityTests {
    func temporaryStore() throws -> StateStore {
        try StateStore(directory: FileManager.default.temporaryDirectory.appendingPathComponent("handoff-identity-\(UUID())"))
    }

    @Test("A new identity has a self-signed certificate naming the device")
    func generated() throws {
        let identity = try DeviceIdentity.generate(name: "laptop")
        let certificate = identity.certificate
        #expect(certificate.subject == certificate.issuer)
        #expect("\(certificate.subject)".contains("laptop"))
        #expect("\(certificate.subject)".contains(identity.id.uuidString))
        #expect(certificate.publicKey.isValidSignature(certificate.signature, for: certificate))
        #expect(certificate.notValidAfter > Date().addingTimeInterval(365 * 86_400))
        #expect(identity.fingerprint.count == 64)
    }

    @Test("Two identities never share a key or a fingerprint")
    func distinct() throws {
        let a = try DeviceIdentity.generate(name: "same"), b = try DeviceIdentity.generate(name: "same")
        #expect(a.fingerprint != b.fingerprint)
        #expect(a.privateKey.rawRepresentation != b.privateKey.rawRepresentation)
    }

    @Test("An identity saved is loaded back the same, from an owner-only file")
    func roundTrip() throws {
        let store = try temporaryStore()
        let identity = try DeviceIdentity.generate(name: "desktop")
        try identity.save(to: store)
        let loaded = try #require(try DeviceIdentity.load(from: store))
        #expect(loaded.id == identity.id)
        #expect(loaded.name == "desktop")
        #expect(loaded.fingerprint == identity.fingerprint)
        #expect(loaded.privateKey.rawRepresentation == identity.privateKey.rawRepresentation)
        let file = try FileManager.default.attributesOfItem(atPath: store.url(DeviceIdentity.fileName).path)
        #expect((file[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test("A damaged key, or a certificate for another key, is refused by name")
    func damaged() throws {
        let store = try temporaryStore()
        let identity = try DeviceIdentity.generate(name: "tablet")
        try identity.save(to: store)
        let path = store.url(DeviceIdentity.fileName)
        var json = try JSONSerialization.jsonObject(with: Data(contentsOf: path)) as! [String: Any]

        var broken = json
        broken["privateKey"] = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"
        try store.write(DeviceIdentity.fileName, JSONSerialization.data(withJSONObject: broken))
        #expect(throws: StateError.corrupt(path: path.path, reason: "privateKey is not a P-256 key in PEM")) {
            try DeviceIdentity.load(from: store)
        }

        json["certificate"] = try DeviceIdentity.generate(name: "other").certificate.serializeAsPEM().pemString
        try store.write(DeviceIdentity.fileName, JSONSerialization.data(withJSONObject: json))
        #expect(throws: StateError.corrupt(path: path.path, reason: "the certificate is not for this device's key")) {
            try DeviceIdentity.load(from: store)
        }
    }
}
