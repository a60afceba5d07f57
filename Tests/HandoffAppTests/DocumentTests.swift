import Foundation
import Handoff
import HandoffTesting
import Testing

@testable import HandoffApp

@MainActor
final class NoteDocument: Document {
    var restored: [String] = []
    override func restoreUserActivityState(_ activity: UserActivity) {
        restored.append(activity.activityType)
    }
}

@MainActor
@Suite("Documents")
struct DocumentTests {
    let editingType = "com.example.editor.editing"

    var manifest: AppManifest {
        AppManifest(
            bundleIdentifier: "com.example.editor", teamIdentifier: "EDIT",
            documentTypes: [DocumentType(name: "Note", extensions: ["note"], ubiquitousActivityType: editingType)])
    }

    func container() throws -> SyncedContainer {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sync-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return SyncedContainer(identifier: "notes", folder: folder)
    }

    @Test("A document in a synced container gets its activity with its URL")
    func automatic() async throws {
        let device = HandoffFabric().addDevice("solo")
        let synced = try container()
        await device.setSyncedContainers([synced])
        let app = try await device.launch(manifest)
        let url = synced.folder.appendingPathComponent("plan.note")
        let document = app.perform { Document(fileURL: url) }
        document.open()
        let activity = try #require(document.userActivity)
        #expect(activity.activityType == editingType)
        #expect(activity.userInfo?[NSUserActivityDocumentURLKey] as? URL == url)
        #expect(app.center.currentActivity === activity)
    }

    @Test("A document outside every synced container gets no activity")
    func outside() async throws {
        let device = HandoffFabric().addDevice("solo")
        await device.setSyncedContainers([try container()])
        let app = try await device.launch(manifest)
        let document = app.perform { Document(fileURL: URL(fileURLWithPath: "/tmp/elsewhere/plan.note")) }
        document.open()
        #expect(document.userActivity == nil)
    }

    @Test("Closing a document invalidates its activity")
    func close() async throws {
        let device = HandoffFabric().addDevice("solo")
        let synced = try container()
        await device.setSyncedContainers([synced])
        let app = try await device.launch(manifest)
        let document = app.perform { Document(fileURL: synced.folder.appendingPathComponent("a.note")) }
        document.open()
        let activity = try #require(document.userActivity)
        document.close()
        #expect(activity.isInvalidated)
    }

    @Test("A document activity the delegate does not handle opens the document, which restores it")
    func frameworkOpens() async throws {
        let fabric = HandoffFabric()
        let laptop = fabric.addDevice("laptop"), desktop = fabric.addDevice("desktop")
        let synced = try container()
        await laptop.setSyncedContainers([synced])
        await desktop.setSyncedContainers([synced])
        let origin = try await laptop.launch(manifest)
        let url = synced.folder.appendingPathComponent("b.note")
        let document = origin.perform { Document(fileURL: url) }
        document.open()
        let target = try await desktop.launch(manifest)
        target.documentClass = NoteDocument.self
        let offer = try await desktop.nearbyActivity(ofType: editingType)
        #expect(await desktop.continueActivity(offer) == .continued(bundleIdentifier: "com.example.editor"))
        let opened = try #require(target.openDocuments.first as? NoteDocument)
        #expect(opened.fileURL == url)
        #expect(opened.restored == [editingType])
    }
}

@MainActor
@Suite("Documents from other devices")
struct ContinuedDocumentTests {
    @Test("A continued document URL outside this device's synced containers is not opened")
    func refusesOutside() async throws {
        let fabric = HandoffFabric()
        let laptop = fabric.addDevice("laptop"), desktop = fabric.addDevice("desktop")
        let manifest = AppManifest(bundleIdentifier: "com.example.editor", teamIdentifier: "EDIT", activityTypes: ["com.example.editor.editing"])
        let origin = try await laptop.launch(manifest)
        for url in [URL(fileURLWithPath: "/etc/passwd"), URL(string: "https://example.com/doc")!] {
            let activity = origin.perform { UserActivity(activityType: "com.example.editor.editing") }
            activity.userInfo = [NSUserActivityDocumentURLKey: url]
            activity.becomeCurrent()
            let target = try await desktop.launch(manifest)
            let offer = try await desktop.waitFor("the activity") { device in
                device.nearbyActivities.first { $0.announcement.id == activity.id }
            }
            #expect(await desktop.continueActivity(offer) == .continued(bundleIdentifier: "com.example.editor"))
            #expect(target.openDocuments.isEmpty, "opened \(url)")
        }
    }
}
