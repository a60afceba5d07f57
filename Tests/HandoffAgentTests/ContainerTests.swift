import Foundation
import Handoff
import HandoffApp
import HandoffLocalAPI
import HandoffWire
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

/// A fresh folder for a container.
func makeFolder(_ name: String) throws -> URL {
    let folder = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))-\(name)", isDirectory: true)
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}

@Suite("Synced containers")
struct ContainerTests {
    @Test("--container ID=PATH and the config file's 'container' lines: each mistake named, with where it was")
    func settings() throws {
        let notes = try makeFolder("notes")
        let photos = try makeFolder("photos")
        defer {
            try? FileManager.default.removeItem(at: notes)
            try? FileManager.default.removeItem(at: photos)
        }
        let file = try ConfigurationFile(text: "container = notes=\(notes.path)\ncontainer = photos=\(photos.path)\ndns-sd = off\nname-rotation = 10m\n", name: "h.conf")
        let configuration = try AgentConfiguration.resolve(flags: AgentSettings(), file: file, environment: ["HOME": "/h"])
        #expect(configuration.containers.map(\.identifier) == ["notes", "photos"])
        #expect(configuration.containers[0].folder.path == notes.resolvingSymlinksInPath().path)
        #expect(configuration.serviceDiscoveryPort == nil)
        #expect(configuration.nameRotation == .seconds(600))

        func refusal(_ values: [String]) -> String {
            var flags = AgentSettings()
            flags.containers = values
            do {
                _ = try AgentConfiguration.resolve(flags: flags, file: nil, environment: ["HOME": "/h"])
                return ""
            } catch {
                return error.message
            }
        }
        #expect(refusal(["notes"]).contains("is not ID=PATH"))
        #expect(refusal(["no tes=\(notes.path)"]).contains("is not a container identifier"))
        #expect(refusal(["notes=relative/path"]).contains("must be an absolute path"))
        #expect(refusal(["notes=/nonexistent/folder"]).contains("does not exist or is not a folder"))
        #expect(refusal(["notes=\(notes.path)", "notes=\(photos.path)"]).contains("is given twice"))
        #expect(refusal(["notes"]).hasPrefix("--container: "))
    }

    @Test("A path inside a container is relative to it; a peer's path that would leave the container is refused")
    func paths() throws {
        let container = ContainerFolder(identifier: "notes", folder: URL(fileURLWithPath: "/srv/sync/notes"))
        #expect(container.relativePath(of: URL(fileURLWithPath: "/srv/sync/notes/a/plan.txt")) == "a/plan.txt")
        #expect(container.relativePath(of: URL(fileURLWithPath: "/srv/sync/notes/../other/x")) == nil)
        #expect(container.relativePath(of: URL(fileURLWithPath: "/srv/sync/notesbis/x")) == nil)
        #expect(container.relativePath(of: URL(string: "https://example.com/srv/sync/notes/x")!) == nil)
        #expect(container.file(at: "a/plan.txt")?.path == "/srv/sync/notes/a/plan.txt")
        for hostile in ["../etc/passwd", "a/../../x", "/etc/passwd", "", "a//b", "./a", "a/\0b"] {
            #expect(container.file(at: hostile) == nil, "'\(hostile)' was accepted")
        }
    }

    @Test("A link inside a container that leads out of it is not followed; a file reached through a link to the container is inside it")
    func links() throws {
        let folder = try makeFolder("links")
        defer { try? FileManager.default.removeItem(at: folder) }
        let container = ContainerFolder(identifier: "notes", folder: folder.resolvingSymlinksInPath())
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("out").path, withDestinationPath: "/etc")
        #expect(container.file(at: "out/passwd") == nil)
        let alias = URL(fileURLWithPath: "/tmp/hc-alias-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createSymbolicLink(atPath: alias.path, withDestinationPath: folder.path)
        defer { try? FileManager.default.removeItem(at: alias) }
        try Data("x".utf8).write(to: folder.appendingPathComponent("plan.txt"))
        #expect(container.relativePath(of: alias.appendingPathComponent("plan.txt")) == "plan.txt")
    }

    @Test("File URLs in a userInfo, at any depth, become the receiver's paths where the origin named them; the rest are kept and listed")
    func translation() throws {
        let mine = ContainerFolder(identifier: "notes", folder: URL(fileURLWithPath: "/home/a/Sync/Notes"))
        let theirs = ContainerFolder(identifier: "notes", folder: URL(fileURLWithPath: "/data/b/notes"))
        let inside = URL(fileURLWithPath: "/home/a/Sync/Notes/2026/plan.txt")
        let outside = URL(fileURLWithPath: "/etc/hosts")
        let web = URL(string: "https://example.com/plan")!
        let userInfo = try UserInfoValue([
            "doc": inside, "other": outside, "web": web, "nested": [["deep": inside]], "set": Set([inside]),
        ] as [AnyHashable: Any])
        let references = ContainerTranslation.references(in: userInfo, containers: [mine])
        #expect(references == [WireFileReference(url: inside.absoluteString, container: "notes", path: "2026/plan.txt")])

        let (translated, untranslated) = ContainerTranslation.translate(userInfo, references: references, containers: [theirs])
        let dictionary = try #require(translated.anyValue as? [AnyHashable: Any])
        let there = URL(fileURLWithPath: "/data/b/notes/2026/plan.txt")
        #expect(dictionary["doc"] as? URL == there)
        #expect(((dictionary["nested"] as? [Any])?.first as? [String: Any])?["deep"] as? URL == there)
        #expect((dictionary["set"] as? Set<AnyHashable>)?.contains(there) == true)
        #expect(dictionary["other"] as? URL == outside)
        #expect(dictionary["web"] as? URL == web)
        #expect(untranslated == [outside.absoluteString])

        // A receiver without the container keeps the origin's URL, and says so.
        let (kept, notHere) = ContainerTranslation.translate(userInfo, references: references, containers: [])
        #expect((kept.anyValue as? [AnyHashable: Any])?["doc"] as? URL == inside)
        #expect(Set(notHere) == [inside.absoluteString, outside.absoluteString])
        // A hostile reference (out of the container) is not followed.
        let hostile = [WireFileReference(url: inside.absoluteString, container: "notes", path: "../../../etc/shadow")]
        #expect(ContainerTranslation.translate(userInfo, references: hostile, containers: [theirs]).untranslated.contains(inside.absoluteString))
    }

    @Test("Two agents with the container at different paths: the continued activity carries the receiver's own path, and a file outside arrives marked")
    func acrossAgents() async throws {
        let folderA = try makeFolder("a")
        let folderB = try makeFolder("b")
        defer {
            try? FileManager.default.removeItem(at: folderA)
            try? FileManager.default.removeItem(at: folderB)
        }
        try await withHarness { harness in
            let a = try await harness.start("alpha") { $0.containers = [ContainerFolder(identifier: "notes", folder: folderA)] }
            let b = try await harness.start("beta") { $0.containers = [ContainerFolder(identifier: "notes", folder: folderB)] }
            try await harness.pair([a, b])
            let agentA = try #require(a.agent)
            let agentB = try #require(b.agent)
            let manifest = AppManifest(bundleIdentifier: StreamScene.bundle, teamIdentifier: "STREAMTEAM", activityTypes: [streamingType])
            await agentA.installInProcess(manifest)
            await agentB.installInProcess(manifest)

            let originCenter = ActivityCenter(
                connection: InProcessAgentConnection(agent: agentA, bundleIdentifier: StreamScene.bundle), bundleIdentifier: StreamScene.bundle,
                teamIdentifier: "STREAMTEAM", deviceName: "alpha")
            let inside = folderA.resolvingSymlinksInPath().appendingPathComponent("trip/plan.txt")
            let outside = URL(fileURLWithPath: "/etc/hostname")
            let activity = ActivityCenter.$current.withValue(originCenter) { UserActivity(activityType: streamingType) }
            activity.userInfo = ["document": inside, "elsewhere": outside]
            await MainActor.run { ActivityCenter.$current.withValue(originCenter) { activity.becomeCurrent() } }

            let receiver = await MainActor.run { StreamReceiver() }
            let receivingCenter = ActivityCenter(
                connection: InProcessAgentConnection(agent: agentB, bundleIdentifier: StreamScene.bundle), bundleIdentifier: StreamScene.bundle,
                teamIdentifier: "STREAMTEAM", deviceName: "beta")
            let app = await MainActor.run { Application(center: receivingCenter, manifest: manifest, syncedContainers: [], delegate: receiver) }
            try #require(await eventually { (try? await b.nearby().first?.activity.activityType) == streamingType })
            try await b.call(.continue(activity: nil))
            try #require(await eventually { await MainActor.run { !receiver.continued.isEmpty } })
            let continued = await MainActor.run { receiver.continued[0] }
            #expect(continued.userInfo?["document"] as? URL == folderB.resolvingSymlinksInPath().appendingPathComponent("trip/plan.txt"))
            #expect(continued.userInfo?["elsewhere"] as? URL == outside)
            #expect(continued.untranslatedFileURLs == [outside])
            // The app learned the agent's container from hello.
            #expect(await MainActor.run { app.allSyncedContainers.map(\.identifier) } == ["notes"])
        }
    }

    @Test("The Editor example: a document opened on one device is continued on the other, opened there at that device's own path")
    func editorExample() async throws {
        let folderA = try makeFolder("a")
        let folderB = try makeFolder("b")
        defer {
            try? FileManager.default.removeItem(at: folderA)
            try? FileManager.default.removeItem(at: folderB)
        }
        try await withHarness { harness in try await editorScenario(harness, folderA: folderA, folderB: folderB) }
    }

    func editorScenario(_ harness: AgentHarness, folderA: URL, folderB: URL) async throws {
        let a = try await harness.start("alpha") { $0.containers = [ContainerFolder(identifier: "notes", folder: folderA)] }
        let b = try await harness.start("beta") { $0.containers = [ContainerFolder(identifier: "notes", folder: folderB)] }
        try await harness.pair([a, b])
        try await harness.installExample("Editor", on: a)
        try await harness.installExample("Editor", on: b)
        let editor = try harness.runExample("Editor", bundle: "com.example.handoff.Editor", on: a)
        editor.send("open plan.txt")
        editor.send("append Buy milk")
        let appended = await eventually { editor.log.contains { $0.hasPrefix("appended to plan.txt") } }
        let aliceLog = editor.log
        #expect(appended, "editor on alpha: \(aliceLog)")
        // The sync tool's part: the file reaches beta's copy of the folder.
        try FileManager.default.copyItem(at: folderA.appendingPathComponent("plan.txt"), to: folderB.appendingPathComponent("plan.txt"))

        let listed = await eventually { (try? await b.nearby().first?.activity.activityType) == "com.example.handoff.Editor.editing" }
        try #require(listed, "beta never listed the document")
        try await b.call(.continue(activity: nil))
        let events = b.state.appendingPathComponent("data/com.example.handoff.Editor/events.log")
        let expected = "continued \(folderB.resolvingSymlinksInPath().appendingPathComponent("plan.txt").path): Buy milk"
        let continued = await eventually(within: .seconds(15)) { logLines(events).contains(expected) }
        let betaLog = logLines(events)
        #expect(continued, "editor on beta: \(betaLog)")
    }
}
