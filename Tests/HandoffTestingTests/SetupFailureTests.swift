import Foundation
import HandoffApp
import Testing

@testable import HandoffTesting

@MainActor
@Suite("A simulated device that cannot start")
struct SetupFailureTests {
    /// Before, the fabric stopped the whole test process (`fatalError`) here.
    @Test("A device whose agent cannot start throws, naming the device and why, from every call that needs it; the test process goes on")
    func agentCannotStart() async throws {
        let fabric = HandoffFabric()
        // Where the device's state folder goes, a file: its agent cannot make its state.
        try FileManager.default.createDirectory(at: fabric.root, withIntermediateDirectories: true)
        try Data().write(to: fabric.root.appendingPathComponent("device-1"))
        let broken = fabric.addDevice("broken")
        let manifest = AppManifest(bundleIdentifier: "com.example.broken", teamIdentifier: "T", activityTypes: ["com.example.broken.view"])
        await #expect {
            try await broken.launch(manifest)
        } throws: { error in
            let failure = error as? FabricSetupFailure
            return failure?.device == "broken" && failure?.reason.contains("its agent could not start") == true
        }
        await #expect(throws: FabricSetupFailure.self) { try await broken.install(manifest) }
        await #expect(throws: FabricSetupFailure.self) { try await broken.waitUntil("anything") { _ in true } }
        // Another device of the fabric works as ever.
        let fine = fabric.addDevice("fine", account: "other")
        _ = try await fine.launch(manifest)
    }
}
