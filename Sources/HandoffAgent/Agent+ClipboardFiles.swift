import Foundation
import HandoffLocalAPI
import HandoffWire
import Synchronization

/// Copied files on the account's clipboard: the copying device's side (its manifest, and each
/// file) and the pasting device's (its own paths, and the files it fetched). See ClipboardFiles.
extension Agent {
    /// Where files fetched for a paste are kept: one folder per paste, removed an hour later.
    nonisolated var clipboardFilesFolder: URL {
        configuration.stateDirectory.appendingPathComponent("clipboard-files", isDirectory: true)
    }

    /// How long fetched files stay: an app that pasted them has long copied them by then.
    static let clipboardFilesLifetime: TimeInterval = 3600

    /// Removes the folders of pastes older than `clipboardFilesLifetime`, and with
    /// `unfinished` (at start) those of pastes that never ended: a paste killed with the agent
    /// leaves its part file, and no app was ever given that folder.
    nonisolated func removeStaleClipboardFiles(unfinished: Bool = false) {
        let folders = (try? FileManager.default.contentsOfDirectory(at: clipboardFilesFolder, includingPropertiesForKeys: [.creationDateKey])) ?? []
        for folder in folders {
            let made = (try? folder.resourceValues(forKeys: [.creationDateKey]).creationDate) ?? .distantPast
            if Date().timeIntervalSince(made) > Self.clipboardFilesLifetime || (unfinished && Self.holdsPartFile(folder)) {
                try? FileManager.default.removeItem(at: folder)
            }
        }
    }

    /// The end of a file's name while it is received: `.NAME.handoff-part` (a name of the
    /// agent's own, which no copied file has by chance, as it might `.part`).
    static let partSuffix = ".handoff-part"

    /// Whether a paste's folder still holds a file being received.
    private nonisolated static func holdsPartFile(_ folder: URL) -> Bool {
        guard let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { return false }
        return files.contains { ($0 as? URL).map { $0.lastPathComponent.hasPrefix(".") && $0.lastPathComponent.hasSuffix(partSuffix) } ?? false }
    }

    // MARK: The copying device

    /// A device pastes this device's copied files: it asks for their manifest, or for one file.
    func acceptFilesPaste(generation: UInt64, type: String, _ stream: LinkStream) async -> ContinuationFailure? {
        let listed: (manifest: ClipboardFiles.Manifest, files: [URL?])
        switch await copiedFiles(generation: generation) {
        case .success(let files): listed = files
        case .failure(let why):
            logger.notice("a paste of copied files was refused: \(why)")
            return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "'\(deviceName)' did not give its copied files: \(why)")
        }
        if type == ClipboardFiles.manifestType {
            let bytes: [UInt8]
            do {
                bytes = Array(try JSONEncoder().encode(listed.manifest))
            } catch {
                return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "'\(deviceName)' cannot write its manifest: \(error)")
            }
            stream.accept()
            let started = tasks.start("send a manifest of copied files") {
                do {
                    try await stream.write(bytes)
                    stream.finish()
                } catch {
                    stream.reset("the manifest could not be sent: \(error)")
                }
            }
            if !started { stream.reset("'\(deviceName)' is stopping") }
            return nil
        }
        guard let index = ClipboardFiles.fileIndex(type), index < listed.files.count, let file = listed.files[index] else {
            return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "'\(deviceName)' has no file \(type) in its copy")
        }
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: file)
        } catch {
            return ContinuationFailure(code: ContinuationFailure.Code.handoffFailed, message: "'\(deviceName)' cannot read the copied file \(file.lastPathComponent): \(error)")
        }
        logger.info("sending a copied file", metadata: ["file": "\(file.lastPathComponent)"])
        return acceptSending(handle, on: stream)
    }

    /// The manifest of this device's copy `generation`, read from its list of files (kept for
    /// the pastes that follow).
    func copiedFiles(generation: UInt64) async -> Result<(manifest: ClipboardFiles.Manifest, files: [URL?]), ClipboardFiles.ListError> {
        if let cached = clipboardFileList, cached.generation == generation { return .success((cached.manifest, cached.files)) }
        guard let local = clipboardBoard.local, local.offer.generation == generation else { return .failure(ClipboardFiles.ListError(ClipboardRefusal.replaced.description)) }
        guard ContinuousClock.now < local.expires else { return .failure(ClipboardFiles.ListError(ClipboardRefusal.expired.description)) }
        guard let listType = local.offer.types.first(where: { ClipboardFiles.listTypes.contains($0.name) }) else {
            return .failure(ClipboardFiles.ListError("the copy lists no files"))
        }
        guard listType.size <= UInt64(ClipboardFiles.maximumManifestBytes) else { return .failure(ClipboardFiles.ListError("the copy's list of files is over \(ClipboardFiles.maximumManifestBytes) bytes")) }
        let bytes: [UInt8]
        switch await readLocalCopy(listType, local.content) {
        case .success(let read): bytes = read
        case .failure(let why): return .failure(why)
        }
        do throws(ClipboardFiles.ListError) {
            let uris = try ClipboardFiles.uris(in: bytes, type: listType.name)
            let (manifest, files) = try ClipboardFiles.manifest(of: uris, containers: configuration.containers)
            clipboardFileList = (generation, manifest, files)
            return .success((manifest, files))
        } catch {
            return .failure(error)
        }
    }

    /// All the bytes of this device's copy as `type`: its file, or what its provider sends.
    func readLocalCopy(_ type: ClipboardType, _ content: LocalClipboardContent) async -> Result<[UInt8], ClipboardFiles.ListError> {
        switch content {
        case .held(let files):
            guard let file = files[type.name], let data = FileManager.default.contents(atPath: file.path) else { return .failure(ClipboardFiles.ListError("the copy as '\(type.name)' is gone")) }
            return .success(Array(data))
        case .provided(let session):
            let buffer = Mutex<[UInt8]>([])
            return await withCheckedContinuation { (done: CheckedContinuation<Result<[UInt8], ClipboardFiles.ListError>, Never>) in
                let sink = ClipboardSink(
                    write: { bytes in buffer.withLock { $0 += bytes } },
                    finish: { failure in done.resume(returning: failure.map { .failure(ClipboardFiles.ListError($0)) } ?? .success(buffer.withLock { $0 })) })
                if !tasks.start("read the copied list of files", { await self.readProvided(session, type, into: sink) }) {
                    done.resume(returning: .failure(ClipboardFiles.ListError("'\(self.deviceName)' is stopping")))
                }
            }
        }
    }

    // MARK: The pasting device

    /// Pastes another device's copied files as `type`: asks it for the manifest, names the files
    /// its containers hold here by their paths here, fetches the others into a folder here
    /// (all of them within the size limit, else none, and a notification says why), and gives
    /// the list naming this device's paths.
    func pasteFiles(of generation: UInt64, as type: String, from link: any OutgoingLink, name: String) async -> Result<[UInt8], LocalError> {
        let manifestBytes: [UInt8]
        switch await fetch(ClipboardFiles.manifestType, of: generation, from: link, name: name, limit: UInt64(ClipboardFiles.maximumManifestBytes), into: nil) {
        case .success(let bytes): manifestBytes = bytes
        case .failure(let error): return .failure(error)
        }
        let resolutions: [ClipboardFiles.Resolution]
        do {
            let manifest = try JSONDecoder().decode(ClipboardFiles.Manifest.self, from: Data(manifestBytes))
            resolutions = try ClipboardFiles.resolve(manifest, containers: configuration.containers)
        } catch let error as ClipboardFiles.ListError {
            return .failure(LocalError(.failed, "the files copied on '\(name)' cannot be pasted here: \(error)"))
        } catch {
            return .failure(LocalError(.failed, "'\(name)' sent a manifest of its copied files that is not one: \(error)"))
        }
        var total: UInt64 = 0
        for case .fetch(_, _, let size) in resolutions { total += size }
        let limit = configuration.clipboardSizeLimit
        guard total <= limit else {
            let message = "the files copied on '\(name)' are \(total) bytes, over this device's clipboard size limit of \(limit) bytes (--clipboard-size-limit): nothing was pasted"
            logger.notice("\(message)")
            await inform(summary: "Handoff could not paste the files copied on '\(name)'", body: message)
            return .failure(LocalError(.notAllowed, message))
        }
        removeStaleClipboardFiles()
        let folder = clipboardFilesFolder.appendingPathComponent(UUID.random().uuidString, isDirectory: true)
        var uris: [String] = []
        var pasted = false
        defer { if !pasted { try? FileManager.default.removeItem(at: folder) } }
        for resolution in resolutions {
            switch resolution {
            case .local(let file): uris.append(file.absoluteString)
            case .uri(let uri): uris.append(uri)
            case .fetch(let index, let fileName, let size):
                let file = folder.appendingPathComponent("\(index)", isDirectory: true).appendingPathComponent(fileName)
                do {
                    try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
                } catch {
                    return .failure(LocalError(.failed, "cannot make a folder for the pasted files in \(clipboardFilesFolder.path): \(error)"))
                }
                if case .failure(let error) = await fetch(ClipboardFiles.fileType(index), of: generation, from: link, name: name, limit: size, into: file) {
                    return .failure(error)
                }
                uris.append(file.absoluteString)
            }
        }
        pasted = true
        logger.info("pasted files copied on '\(name)'", metadata: ["files": "\(resolutions.count)", "fetched bytes": "\(total)"])
        return .success(ClipboardFiles.list(uris, type: type))
    }

    /// Fetches `type` of another device's copy: exactly `limit` bytes into `file` (a file), or
    /// at most `limit` bytes returned (`file` nil: the manifest).
    func fetch(_ type: String, of generation: UInt64, from link: any OutgoingLink, name: String, limit: UInt64, into file: URL?) async -> Result<[UInt8], LocalError> {
        let stream: LinkStream
        switch await link.openStream(.clipboard(generation: generation, type: type), deadline: configuration.fetchDeadline) {
        case .success(let opened): stream = opened
        case .failure(let failure):
            return .failure(LocalError(.continuation, code: failure.code, "'\(name)' did not give its copied files: \(failure.message)"))
        }
        stream.finish()
        return await Self.receive(stream, limit: limit, into: file, device: name)
    }

    /// Reads a stream to its end: into `file` (exactly `limit` bytes, written to a part file
    /// renamed at the end) or into memory (at most `limit`).
    static func receive(_ stream: LinkStream, limit: UInt64, into file: URL?, device: String) async -> Result<[UInt8], LocalError> {
        defer { stream.close() }
        var bytes: [UInt8] = []
        var received: UInt64 = 0
        var handle: FileHandle?
        let part = file.map { $0.deletingLastPathComponent().appendingPathComponent(".\($0.lastPathComponent)\(Self.partSuffix)") }
        if let part {
            guard FileManager.default.createFile(atPath: part.path, contents: nil, attributes: [.posixPermissions: 0o600]), let opened = try? FileHandle(forWritingTo: part) else {
                stream.reset("cannot write here")
                return .failure(LocalError(.failed, "cannot write \(part.path)"))
            }
            handle = opened
        }
        func failed(_ message: String) -> Result<[UInt8], LocalError> {
            try? handle?.close()
            if let part { try? FileManager.default.removeItem(at: part) }
            return .failure(LocalError(.failed, message))
        }
        for await event in stream.events {
            switch event {
            case .data(let chunk):
                received += UInt64(chunk.count)
                guard received <= limit else {
                    stream.reset("more bytes than announced")
                    return failed("'\(device)' sent more than the \(limit) bytes it announced: nothing was pasted")
                }
                if let handle {
                    do {
                        try handle.write(contentsOf: chunk)
                    } catch {
                        stream.reset("cannot write here")
                        return failed("cannot write a pasted file: \(error)")
                    }
                } else {
                    bytes += chunk
                }
                stream.consumed(chunk.count)
            case .end:
                guard file == nil || received == limit else { return failed("'\(device)' sent \(received) of the \(limit) bytes of a copied file: nothing was pasted") }
                try? handle?.close()
                if let part, let file {
                    do {
                        try FileManager.default.moveItem(at: part, to: file)
                    } catch {
                        return failed("cannot keep a pasted file at \(file.path): \(error)")
                    }
                }
                return .success(bytes)
            case .stop:
                continue
            case .failed(let reason):
                return failed("the paste from '\(device)' failed: \(reason)")
            }
        }
        return failed("the paste from '\(device)' ended early")
    }

    /// A desktop notification that only informs (nothing to press).
    func inform(summary: String, body: String) async {
        guard let desktop = await desktopNotifier() else { return }
        _ = try? await desktop.notifier.inform(summary: summary, body: body)
    }
}
