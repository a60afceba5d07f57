import Foundation
import HandoffLocalAPI
import Synchronization
import HandoffTesting
import Testing

@testable import HandoffAgent

@Suite("Copied files: lists, manifests and where each file is on the pasting device")
struct ClipboardFilesUnitTests {
    @Test("A URI list is read as RFC 2483 writes it (CR LF, comments), GNOME's after its copy or cut line; a bad GNOME list is refused")
    func listsAreRead() throws {
        let list = Array("# copied\r\nfile:///tmp/a.txt\r\nhttps://example.com/\r\n\r\n".utf8)
        #expect(try ClipboardFiles.uris(in: list, type: ClipboardFiles.uriList) == ["file:///tmp/a.txt", "https://example.com/"])
        let gnome = Array("cut\nfile:///tmp/a.txt\nfile:///tmp/b%20c.txt".utf8)
        #expect(try ClipboardFiles.uris(in: gnome, type: ClipboardFiles.gnomeCopiedFiles) == ["file:///tmp/a.txt", "file:///tmp/b%20c.txt"])
        #expect(throws: ClipboardFiles.ListError.self) { try ClipboardFiles.uris(in: Array("file:///tmp/a.txt".utf8), type: ClipboardFiles.gnomeCopiedFiles) }
        let many = Array((0...ClipboardFiles.maximumEntries).map { "file:///tmp/\($0)" }.joined(separator: "\n").utf8)
        #expect(throws: ClipboardFiles.ListError.self) { try ClipboardFiles.uris(in: many, type: ClipboardFiles.uriList) }
        #expect(ClipboardFiles.list(["file:///x", "file:///y"], type: ClipboardFiles.uriList) == Array("file:///x\r\nfile:///y\r\n".utf8))
        #expect(ClipboardFiles.list(["file:///x"], type: ClipboardFiles.gnomeCopiedFiles) == Array("copy\nfile:///x".utf8))
        #expect(ClipboardFiles.fileIndex(ClipboardFiles.fileType(12)) == 12)
        #expect(ClipboardFiles.fileIndex("x-handoff/file;index=-1") == nil)
        #expect(ClipboardFiles.fileIndex("text/plain") == nil)
    }

    @Test("The manifest names a file in a container by its container and path, every file by its name and size; a folder travels only inside a container")
    func manifest() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("files-\(UUID().uuidString)", isDirectory: true).resolvingSymlinksInPath()
        defer { try? FileManager.default.removeItem(at: root) }
        let sync = root.appendingPathComponent("sync", isDirectory: true)
        try FileManager.default.createDirectory(at: sync.appendingPathComponent("album"), withIntermediateDirectories: true)
        try Data("notes".utf8).write(to: sync.appendingPathComponent("notes.txt"))
        try Data("photo!".utf8).write(to: root.appendingPathComponent("photo.png"))
        let containers = [ContainerFolder(identifier: "sync", folder: sync)]
        let uris = [
            sync.appendingPathComponent("notes.txt").absoluteString, root.appendingPathComponent("photo.png").absoluteString,
            sync.appendingPathComponent("album").absoluteString, "https://example.com/",
        ]
        let (manifest, files) = try ClipboardFiles.manifest(of: uris, containers: containers)
        #expect(manifest.entries == [
            ClipboardFiles.Entry(name: "notes.txt", size: 5, container: "sync", path: "notes.txt"),
            ClipboardFiles.Entry(name: "photo.png", size: 6),
            ClipboardFiles.Entry(container: "sync", path: "album"),
            ClipboardFiles.Entry(uri: "https://example.com/"),
        ])
        #expect(files.map { $0?.lastPathComponent } == ["notes.txt", "photo.png", nil, nil])
        #expect(throws: ClipboardFiles.ListError.self) { try ClipboardFiles.manifest(of: [root.absoluteString], containers: containers) }
        #expect(throws: ClipboardFiles.ListError.self) { try ClipboardFiles.manifest(of: [root.appendingPathComponent("gone").absoluteString], containers: containers) }
    }

    @Test("S14: On the pasting device a file is its own container's where that holds it with the same size, else fetched; names and paths that would leave the folder are refused")
    func resolve() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("files-\(UUID().uuidString)", isDirectory: true).resolvingSymlinksInPath()
        defer { try? FileManager.default.removeItem(at: root) }
        let sync = root.appendingPathComponent("mine", isDirectory: true)
        try FileManager.default.createDirectory(at: sync.appendingPathComponent("album"), withIntermediateDirectories: true)
        try Data("notes".utf8).write(to: sync.appendingPathComponent("notes.txt"))
        try Data("older".utf8 + [0x21]).write(to: sync.appendingPathComponent("draft.txt"))
        let containers = [ContainerFolder(identifier: "sync", folder: sync)]
        let manifest = ClipboardFiles.Manifest(entries: [
            ClipboardFiles.Entry(name: "notes.txt", size: 5, container: "sync", path: "notes.txt"),
            ClipboardFiles.Entry(name: "draft.txt", size: 5, container: "sync", path: "draft.txt"),
            ClipboardFiles.Entry(name: "photo.png", size: 6),
            ClipboardFiles.Entry(name: "other.txt", size: 2, container: "elsewhere", path: "other.txt"),
            ClipboardFiles.Entry(container: "sync", path: "album"),
            ClipboardFiles.Entry(uri: "https://example.com/"),
        ])
        #expect(try ClipboardFiles.resolve(manifest, containers: containers) == [
            .local(sync.appendingPathComponent("notes.txt")),
            // Not synced yet (another size): fetched.
            .fetch(index: 1, name: "draft.txt", size: 5),
            .fetch(index: 2, name: "photo.png", size: 6),
            .fetch(index: 3, name: "other.txt", size: 2),
            .local(sync.appendingPathComponent("album")),
            .uri("https://example.com/"),
        ])
        for hostile in [
            ClipboardFiles.Entry(name: "../escape", size: 1), ClipboardFiles.Entry(name: "a/b", size: 1), ClipboardFiles.Entry(name: "..", size: 1),
            ClipboardFiles.Entry(name: "x", size: 1, container: "sync", path: "../../etc/passwd"), ClipboardFiles.Entry(),
        ] {
            #expect(throws: ClipboardFiles.ListError.self) { try ClipboardFiles.resolve(ClipboardFiles.Manifest(entries: [hostile]), containers: containers) }
        }
        #expect(throws: ClipboardFiles.ListError.self) {
            try ClipboardFiles.resolve(ClipboardFiles.Manifest(entries: [ClipboardFiles.Entry(container: "elsewhere", path: "album")]), containers: containers)
        }
    }
}

/// Two folders that stand for one synced container on two devices, and a file outside both.
struct SyncedFiles {
    /// Paired alpha and beta, each with its folder as container `sync`, and the list copied on
    /// alpha (with `handoff copy`).
    static func copiedOnAlpha(_ harness: AgentHarness) async throws -> (SyncedFiles, TestDevice, TestDevice) {
        let files = try SyncedFiles(root: harness.root.appendingPathComponent("files"))
        let a = try await harness.start("alpha") { $0.containers = [ContainerFolder(identifier: "sync", folder: files.onA)] }
        let b = try await harness.start("beta") { $0.containers = [ContainerFolder(identifier: "sync", folder: files.onB)] }
        try await harness.pair([a, b])
        #expect(try await a.copy(files.list, as: ClipboardFiles.uriList)?.kind == LocalStreamFrame.end)
        return (files, a, b)
    }

    let root: URL
    let onA: URL
    let onB: URL
    let outside: URL

    init(root: URL) throws {
        self.root = root.resolvingSymlinksInPath()
        onA = self.root.appendingPathComponent("a-sync", isDirectory: true)
        onB = self.root.appendingPathComponent("b-sync", isDirectory: true)
        outside = self.root.appendingPathComponent("outside", isDirectory: true)
        for folder in [onA, onB, outside] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        // The same document on both (synced), and a picture only alpha has, outside any container.
        for folder in [onA, onB] { try Data("meeting notes".utf8).write(to: folder.appendingPathComponent("notes.txt")) }
        try Data(testPicture(300_000)).write(to: outside.appendingPathComponent("photo.png"))
    }

    var list: [UInt8] {
        Array("\(onA.appendingPathComponent("notes.txt").absoluteString)\r\n\(outside.appendingPathComponent("photo.png").absoluteString)\r\n".utf8)
    }

    /// Checks what beta pasted as `type`: its own copy of the document, and the picture fetched
    /// into its agent's folder, whole.
    func checkPasted(_ bytes: [UInt8], type: String, on b: TestDevice) throws {
        let uris = try ClipboardFiles.uris(in: bytes, type: type)
        try #require(uris.count == 2, "pasted: \(String(decoding: bytes, as: UTF8.self))")
        #expect(uris[0] == onB.appendingPathComponent("notes.txt").absoluteString)
        let fetched = try #require(URL(string: uris[1]))
        #expect(fetched.path.hasPrefix(b.state.appendingPathComponent("clipboard-files").path), "\(fetched.path)")
        #expect(fetched.lastPathComponent == "photo.png")
        #expect(FileManager.default.contents(atPath: fetched.path).map(Array.init) == testPicture(300_000))
    }
}

@Suite("Copied files on the account's clipboard")
struct ClipboardFilesTests {
    @Test("Files copied on alpha paste on beta as beta's paths: a file in a synced container as beta's own copy, another fetched whole into beta's folder, as text/uri-list and GNOME's list")
    func filesPasteAsOwnPaths() async throws {
        try await withHarness { harness in
            let (files, a, b) = try await SyncedFiles.copiedOnAlpha(harness)
            #expect(await eventually { (try? await b.clipboard())?.types.first?.name == ClipboardFiles.uriList })
            let pasted = try await b.paste(ClipboardFiles.uriList)
            #expect(pasted.ended, "\(pasted.failure ?? "")")
            try files.checkPasted(pasted.bytes, type: ClipboardFiles.uriList, on: b)

            let gnome = Array("copy\n".utf8) + Array(String(decoding: files.list, as: UTF8.self).replacingOccurrences(of: "\r\n", with: "\n").utf8)
            #expect(try await a.copy(gnome, as: ClipboardFiles.gnomeCopiedFiles)?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard())?.types.first?.name == ClipboardFiles.gnomeCopiedFiles })
            let again = try await b.paste(ClipboardFiles.gnomeCopiedFiles)
            #expect(again.ended, "\(again.failure ?? "")")
            #expect(String(decoding: again.bytes, as: UTF8.self).hasPrefix("copy\n"))
            try files.checkPasted(again.bytes, type: ClipboardFiles.gnomeCopiedFiles, on: b)
            // On alpha itself the list is as copied.
            #expect(try await a.paste(ClipboardFiles.gnomeCopiedFiles).bytes == gnome)
        }
    }

    @Test("Files over beta's size limit paste nothing, and a desktop notification says why; nothing is left in beta's folder", .enabled(if: hasDBusDaemon, "needs dbus-daemon for a private session bus; skipped"))
    func overTheLimit() async throws {
        try await withHarness { harness in
            let (daemon, address) = try await privateSessionBus(in: harness.root.appendingPathComponent("bus"))
            defer { kill(daemon.processIdentifier, SIGKILL) }
            let server = try await FakeNotificationServer(address: address)
            let files = try SyncedFiles(root: harness.root.appendingPathComponent("files"))
            let a = try await harness.start("alpha") { $0.containers = [ContainerFolder(identifier: "sync", folder: files.onA)] }
            let b = try await harness.start("beta") { configuration in
                configuration.containers = [ContainerFolder(identifier: "sync", folder: files.onB)]
                configuration.clipboardSizeLimit = 100_000
                configuration.desktopBus = address
            }
            try await harness.pair([a, b])
            #expect(try await a.copy(files.list, as: ClipboardFiles.uriList)?.kind == LocalStreamFrame.end)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            let pasted = try await b.paste(ClipboardFiles.uriList)
            #expect(pasted.refusal?.message.contains("over this device's clipboard size limit") == true, "\(pasted)")
            #expect(pasted.bytes.isEmpty)
            #expect(await eventually { server.shown.contains("Handoff could not paste the files copied on 'alpha'") }, "\(server.shown)")
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: b.state.appendingPathComponent("clipboard-files").path)) ?? []).isEmpty)
        }
    }

    @Test("S14: A copied file that grew after alpha listed it is refused whole on beta (more bytes than announced), a deleted one too, and nothing half-written stays")
    func fileChangedAfterListing() async throws {
        try await withHarness { harness in
            let (files, _, b) = try await SyncedFiles.copiedOnAlpha(harness)
            #expect(await eventually { (try? await b.clipboard())?.deviceName == "alpha" })
            #expect(try await b.paste(ClipboardFiles.uriList).ended)
            // Alpha listed the picture at its first paste; it grows after.
            let photo = files.outside.appendingPathComponent("photo.png")
            let handle = try FileHandle(forWritingTo: photo)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(repeating: 7, count: 5000))
            try handle.close()
            let grown = try await b.paste(ClipboardFiles.uriList)
            #expect(!grown.ended)
            #expect(grown.refusal?.message.contains("more than the 300000 bytes") == true, "\(grown)")
            try FileManager.default.removeItem(at: photo)
            let deleted = try await b.paste(ClipboardFiles.uriList)
            #expect(deleted.refusal != nil, "\(deleted)")
            // One folder: the first paste's, whole; none of the failed ones, no part file.
            let folders = try FileManager.default.contentsOfDirectory(atPath: b.state.appendingPathComponent("clipboard-files").path)
            #expect(folders.count == 1)
            let kept = b.state.appendingPathComponent("clipboard-files").appendingPathComponent(folders[0]).appendingPathComponent("1")
            #expect(try FileManager.default.contentsOfDirectory(atPath: kept.path) == ["photo.png"])
        }
    }
}
