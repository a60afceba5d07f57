import CHandoffSystem
import Foundation
import HandoffCore
import HandoffSigning
import HandoffWire

#if canImport(Glibc)
import Glibc
#endif

/// An app installed on this device: its manifest and the directory the agent keeps it in.
package struct InstalledApp: Sendable, Hashable {
    package var manifest: AppManifest
    package var directory: URL
    /// The executable the agent starts, and the only one it delivers this app's
    /// continuations to.
    package var executable: URL
    /// An app that runs in the agent's own process (`Agent.installInProcess`): only an
    /// in-process client may be it, never a process on the socket.
    package var runsInProcess = false
    /// The team whose key signed it; nil for an unsigned app (development mode only).
    package var signedBy: String? = nil
    /// Its executable as it was checked; nil for an app in the agent's own process.
    package var seal: ExecutableSeal? = nil

    /// Whether its executable is still the one installed (an app in process has none).
    package var executableIntact: Bool { runsInProcess || seal?.holds(for: executable) == true }
}

/// Why an app could not be installed or found.
package struct AppRegistryError: Error, Sendable, Hashable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// The apps installed on this device, kept under the state directory in `apps/`, one
/// directory per bundle identifier holding a copy of what `handoff apps install` was given.
///
/// A copy, so that the executable the agent checks a process against cannot change under it
/// when the developer rebuilds the original.
///
/// Apps must be signed by their team's key (`AppSignature`), and the team their entitlements
/// name must be that key's. In development mode (`allowsUnsignedApps`) unsigned apps are
/// taken too, with a warning; an app whose signature does not hold never is.
package struct AppRegistry: Sendable {
    package let directory: URL
    package let allowsUnsignedApps: Bool

    package init(stateDirectory: URL, allowsUnsignedApps: Bool = false) {
        directory = stateDirectory.appendingPathComponent("apps", isDirectory: true)
        self.allowsUnsignedApps = allowsUnsignedApps
    }

    /// Every installed app, sorted by bundle identifier. A damaged app directory is skipped
    /// and reported in `problems`.
    package func load() -> (apps: [InstalledApp], problems: [String]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        var apps: [InstalledApp] = []
        var problems: [String] = []
        for name in names.sorted() where !name.hasPrefix(".") {
            do {
                apps.append(try checked(directory.appendingPathComponent(name, isDirectory: true)).app)
            } catch {
                problems.append("\(error)")
            }
        }
        return (apps, problems)
    }

    /// Installs (or replaces) the app in `source`: a directory with `Info.plist`, optional
    /// entitlements, the executable that `CFBundleExecutable` names, and its signature.
    /// The copy is checked, not the source, so that nothing can change in between. Atomic: a
    /// failure leaves the previous install as it was. The warning says when an unsigned app
    /// was taken because of development mode.
    ///
    /// `settings` are Xcode build settings the app's files use (`PRODUCT_BUNDLE_IDENTIFIER`…).
    /// An unsigned app keeps them in its copy's `Handoff.xcconfig`, over the ones it has; a
    /// signed app carries its own in its signature, so given ones must be the same.
    @discardableResult
    package func install(from source: URL, settings: [String: String] = [:]) throws(AppRegistryError) -> (app: InstalledApp, warning: String?) {
        try Self.onlyFilesAndFolders(source, shown: source.path)
        let given: BuildSettings
        do throws(BuildSettingsError) {
            given = try BuildSettings(settings)
        } catch {
            throw AppRegistryError("\(source.path): \(error)")
        }
        let checked = try Self.read(source, settings: given)
        let fileManager = FileManager.default
        let bundle = checked.manifest.bundleIdentifier
        guard bundle.range(of: #"^[A-Za-z0-9][A-Za-z0-9.\-_]*$"#, options: .regularExpression) != nil else {
            throw AppRegistryError("\(source.path)/Info.plist: CFBundleIdentifier '\(bundle)' may hold only letters, digits, '.', '-' and '_'")
        }
        let target = directory.appendingPathComponent(bundle, isDirectory: true)
        let staging = directory.appendingPathComponent(".\(bundle)\(Self.stagingMark)\(UUID().uuidString)", isDirectory: true)
        do {
            try fileManager.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try Self.copyAsThisUser(source.standardizedFileURL, to: staging)
        } catch {
            try? fileManager.removeItem(at: staging)
            let reason = (error as? AppRegistryError)?.message.replacingOccurrences(of: staging.path, with: target.path) ?? error.localizedDescription
            throw AppRegistryError("could not install \(source.path) into \(target.path): \(reason)")
        }
        do throws(AppRegistryError) {
            try Self.keep(given, in: staging, shown: source.path)
        } catch {
            try? fileManager.removeItem(at: staging)
            throw error
        }
        // On disk before it takes the app's place: a power cut never leaves a torn app.
        Self.flush(staging)
        let staged: (app: InstalledApp, warning: String?)
        do throws(AppRegistryError) {
            do throws(AppRegistryError) {
                staged = try self.checked(staging, source: source)
            } catch {
                // The copy's folder is the agent's business: the message names the one given.
                throw AppRegistryError(error.message.replacingOccurrences(of: staging.path, with: source.path))
            }
            guard staged.app.manifest.bundleIdentifier == bundle else {
                throw AppRegistryError("\(source.path) changed while it was being installed; install it again")
            }
        } catch {
            try? fileManager.removeItem(at: staging)
            throw error
        }
        // One step: the new app takes the old one's place (which the staging name then holds,
        // to be removed), so a crash at any moment leaves the old app or the new one installed.
        let replaced = fileManager.fileExists(atPath: target.path)
        let swapped = replaced ? handoff_exchange(staging.path, target.path) : rename(staging.path, target.path)
        guard swapped == 0 else {
            let reason = String(cString: strerror(errno))
            try? fileManager.removeItem(at: staging)
            throw AppRegistryError("could not install \(source.path) into \(target.path): \(reason)")
        }
        Self.flush(directory)
        if replaced { try? fileManager.removeItem(at: staging) }
        var installed = try Self.read(target)
        installed.signedBy = staged.app.signedBy
        installed.seal = staged.app.seal
        return (installed, staged.warning)
    }

    /// Reads an app directory and checks its signature against its manifest's team. `source`
    /// names the directory in messages (the one a person gave, not the agent's copy).
    func checked(_ directory: URL, source: URL? = nil) throws(AppRegistryError) -> (app: InstalledApp, warning: String?) {
        let shown = (source ?? directory).path
        // The signature first: nothing in the directory is parsed before it is known to be
        // what its team signed.
        let team: String
        do throws(AppSignatureError) {
            team = try AppSignature.verify(directory)
        } catch {
            guard error.kind == .unsigned else {
                throw AppRegistryError("\(shown): refused: \(error.message.replacingOccurrences(of: directory.path, with: shown))")
            }
            try Self.onlyFilesAndFolders(directory, shown: shown)
            let app = try Self.read(directory)
            let bundle = app.manifest.bundleIdentifier
            if let claimed = app.manifest.teamIdentifier, TeamKey.isDerivedIdentifier(claimed) {
                throw AppRegistryError(
                    "\(shown): refused: '\(bundle)' is not signed, but names team '\(claimed)', which only that team's key can claim; sign it with that key")
            }
            guard allowsUnsignedApps else {
                throw AppRegistryError(
                    "\(shown): refused: '\(bundle)' is not signed. Sign it with 'handoff apps sign \(shown) --key TEAM.key', or run the agent in development mode (--development-mode) to allow unsigned apps on this device")
            }
            var sealed = app
            sealed.seal = ExecutableSeal(of: app.executable)
            return (sealed, "'\(bundle)' is not signed; it is allowed only because the agent runs in development mode")
        }
        var app = try Self.read(directory)
        let bundle = app.manifest.bundleIdentifier
        guard let declared = app.manifest.teamIdentifier else {
            throw AppRegistryError(
                "\(shown): '\(bundle)' is signed by team '\(team)', but names no team; set com.apple.developer.team-identifier to '\(team)' in its entitlements (or sign with --setting DEVELOPMENT_TEAM=\(team)) and sign it again")
        }
        guard declared == team else {
            let source = app.manifest.teamSource.map { " (from \($0))" } ?? ""
            throw AppRegistryError(
                "\(shown): '\(bundle)' names team '\(declared)'\(source), but it is signed by team '\(team)' (its key's identifier); set com.apple.developer.team-identifier to '\(team)' and sign it again")
        }
        app.signedBy = team
        app.seal = ExecutableSeal(of: app.executable)
        return (app, nil)
    }

    /// Marks a staging folder's name: `.BUNDLE.installing-UUID`.
    static let stagingMark = ".installing-"

    /// What interrupted installs left: staging folders (a copy not yet in place, or the old
    /// app swapped out and not yet removed) are removed. Only when no install runs: the agent
    /// calls it when it starts. An app folder an older version of the
    /// agent moved aside (`.BUNDLE.old-UUID`) and never replaced is put back.
    func recoverInterruptedInstalls() {
        let fileManager = FileManager.default
        let names = (try? fileManager.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasPrefix(".") {
            let path = directory.appendingPathComponent(name, isDirectory: true)
            if let mark = name.range(of: ".old-", options: .backwards), !name.contains(Self.stagingMark) {
                let bundle = String(name[name.index(after: name.startIndex)..<mark.lowerBound])
                let target = directory.appendingPathComponent(bundle, isDirectory: true)
                if !bundle.isEmpty, !fileManager.fileExists(atPath: target.path), (try? fileManager.moveItem(at: path, to: target)) != nil { continue }
                try? fileManager.removeItem(at: path)
            } else if name.contains(Self.stagingMark) {
                try? fileManager.removeItem(at: path)
            }
        }
    }

    /// Flushes `url` to disk: a file, or a folder with everything in it.
    static func flush(_ url: URL) {
        var pending = [url.path]
        while let path = pending.popLast() {
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR {
                pending += ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).map { path + "/" + $0 }
            }
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            fsync(fd)
            close(fd)
        }
    }

    /// Removes an installed app. Throws when it is not installed.
    package func remove(_ bundleIdentifier: String) throws(AppRegistryError) {
        let target = directory.appendingPathComponent(bundleIdentifier, isDirectory: true)
        guard !bundleIdentifier.contains("/"), !bundleIdentifier.hasPrefix("."), FileManager.default.fileExists(atPath: target.path) else {
            throw AppRegistryError("no app '\(bundleIdentifier)' is installed; 'handoff apps' lists them")
        }
        do {
            try FileManager.default.removeItem(at: target)
        } catch {
            throw AppRegistryError("could not remove \(target.path): \(error.localizedDescription)")
        }
    }

    /// Copies an app folder (only files and folders: `onlyFilesAndFolders` checked it) as the
    /// agent's user: the bytes and the permission bits (without set-id bits or write for others),
    /// never the owner or group. Foundation's `copyItem` keeps those, which a user may not give
    /// away: a folder left in root's group (`sudo cp -r`, a package's example copied) failed to
    /// install with "You don't have permission".
    static func copyAsThisUser(_ source: URL, to target: URL) throws {
        func failure(_ path: String) -> any Error {
            let code = errno
            return AppRegistryError("\(path): \(String(cString: strerror(code)))")
        }
        try FileManager.default.createDirectory(at: target, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        for name in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            let from = source.appendingPathComponent(name).path, to = target.appendingPathComponent(name).path
            // Not followed: a link or pipe put in after the folder was checked is refused here,
            // and a pipe never makes the copy wait (O_NONBLOCK).
            var found = stat()
            guard lstat(from, &found) == 0 else { throw failure(from) }
            if found.st_mode & S_IFMT == S_IFDIR {
                try copyAsThisUser(URL(fileURLWithPath: from, isDirectory: true), to: URL(fileURLWithPath: to, isDirectory: true))
                guard chmod(to, (found.st_mode & 0o755) | 0o700) == 0 else { throw failure(to) }
                continue
            }
            let input = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            guard input >= 0 else { throw failure(from) }
            defer { close(input) }
            var opened = stat()
            guard fstat(input, &opened) == 0, opened.st_mode & S_IFMT == S_IFREG else {
                throw AppRegistryError("\(from): not a plain file")
            }
            let output = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (opened.st_mode & 0o755) | 0o600)
            guard output >= 0 else { throw failure(to) }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            do {
                while true {
                    let count = buffer.withUnsafeMutableBytes { Glibc.read(input, $0.baseAddress, $0.count) }
                    if count == 0 { break }
                    guard count > 0 else {
                        if errno == EINTR { continue }
                        throw failure(from)
                    }
                    var written = 0
                    while written < count {
                        let step = buffer.withUnsafeBytes { Glibc.write(output, $0.baseAddress! + written, count - written) }
                        guard step > 0 else {
                            if step < 0 && errno == EINTR { continue }
                            throw failure(to)
                        }
                        written += step
                    }
                }
            } catch {
                close(output)
                throw error
            }
            // A write the file system takes late (a full disk, a quota) shows here.
            guard close(output) == 0 else { throw failure(to) }
        }
    }

    /// Refuses a directory holding links, pipes or devices: what they lead to could change
    /// after the check, and a pipe would make the reader wait forever.
    static func onlyFilesAndFolders(_ directory: URL, shown: String) throws(AppRegistryError) {
        let fileManager = FileManager.default
        var pending = [""]
        while let folder = pending.popLast() {
            let path = folder.isEmpty ? directory.path : directory.path + "/" + folder
            guard let names = try? fileManager.contentsOfDirectory(atPath: path) else {
                throw AppRegistryError("\(shown): cannot list \(folder.isEmpty ? "the directory" : folder)")
            }
            for name in names {
                let relative = folder.isEmpty ? name : folder + "/" + name
                switch (try? fileManager.attributesOfItem(atPath: directory.path + "/" + relative))?[.type] as? FileAttributeType {
                case .typeDirectory?: pending.append(relative)
                case .typeRegular?: continue
                default: throw AppRegistryError("\(shown)/\(relative) is a link or special file; an app directory holds only files and folders")
                }
            }
        }
    }

    /// Puts build settings given at install into an app's copy: into its `Handoff.xcconfig`,
    /// over those it has, for an unsigned app; for a signed one, they must be those it was
    /// signed with, since the file is part of what its team signed.
    static func keep(_ given: BuildSettings, in copy: URL, shown: String) throws(AppRegistryError) {
        guard !given.values.isEmpty else { return }
        let file = copy.appendingPathComponent(AppManifest.buildSettingsFile)
        var kept = BuildSettings()
        if FileManager.default.fileExists(atPath: file.path) {
            do throws(BuildSettingsError) {
                try kept.read(xcconfig: file, confinedTo: copy)
            } catch {
                throw AppRegistryError("\(shown)/\(AppManifest.buildSettingsFile): \(error.problem)")
            }
        }
        if FileManager.default.fileExists(atPath: copy.appendingPathComponent(AppSignature.path).path) {
            // Compared as they expand: the file guards some characters with `$()`.
            let differing = given.values.keys.sorted().filter { name in
                let reference = "$(\(name))"
                guard let mine = try? kept.expand(reference), let theirs = try? given.expand(reference) else { return kept[name] != given[name] }
                return mine != theirs
            }
            guard differing.isEmpty else {
                throw AppRegistryError(
                    "\(shown): refused: the app is signed with its build settings, and \(differing.joined(separator: ", ")) given here \(differing.count == 1 ? "differs" : "differ") from them; give settings to 'handoff apps sign --setting NAME=VALUE' and sign it again"
                )
            }
            return
        }
        for (name, value) in given.values.sorted(by: { $0.key < $1.key }) {
            do throws(BuildSettingsError) {
                try kept.set(name, value)
            } catch {
                throw AppRegistryError("\(shown): \(error)")
            }
        }
        do {
            try Data(kept.xcconfigText(header: "Build settings the app's Info.plist and entitlements are expanded with (handoff apps install --setting).").utf8)
                .write(to: file)
        } catch {
            throw AppRegistryError("could not write \(file.path): \(error.localizedDescription)")
        }
    }

    /// Reads and checks an app directory.
    static func read(_ directory: URL, settings: BuildSettings = BuildSettings()) throws(AppRegistryError) -> InstalledApp {
        let manifest: AppManifest
        do {
            manifest = try AppManifest(directory: directory, settings: settings)
        } catch {
            throw AppRegistryError("\(error)")
        }
        guard let name = manifest.executable, !name.isEmpty else {
            throw AppRegistryError("\(directory.path)/Info.plist: CFBundleExecutable is missing; it names the app's executable in the same directory")
        }
        guard !name.contains("/") else {
            throw AppRegistryError("\(directory.path)/Info.plist: CFBundleExecutable '\(name)' must be a file name in the app directory, not a path")
        }
        let executable = directory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw AppRegistryError("\(executable.path): the executable that CFBundleExecutable names is missing or not executable")
        }
        return InstalledApp(manifest: manifest, directory: directory, executable: executable)
    }
}
