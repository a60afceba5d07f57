import Foundation
import HandoffCore

/// The apps this agent starts and accepts, as the agent knows them now: the registry's, with
/// the apps a test runs in the agent's own process in place of installed copies of the same
/// bundle identifier, and the browser app that takes web pages itself.
struct InstalledApps: Sendable {
    /// Sorted by bundle identifier.
    private(set) var all: [InstalledApp] = []
    /// Apps installed for this run only, running in the agent's process.
    private var inProcess: [InstalledApp] = []
    /// The browser app that receives web activities itself, if any.
    var defaultBrowser: String?

    /// Takes what the registry loaded (the apps run in process win over copies of theirs).
    mutating func loaded(_ registered: [InstalledApp]) {
        let inProcessIdentifiers = Set(inProcess.map(\.manifest.bundleIdentifier))
        all = (registered.filter { !inProcessIdentifiers.contains($0.manifest.bundleIdentifier) } + inProcess)
            .sorted { $0.manifest.bundleIdentifier < $1.manifest.bundleIdentifier }
    }

    /// Adds (or replaces) an app run in process; `loaded` then takes it in.
    mutating func addInProcess(_ app: InstalledApp) {
        inProcess.removeAll { $0.manifest.bundleIdentifier == app.manifest.bundleIdentifier }
        inProcess.append(app)
    }

    func app(_ bundleIdentifier: String) -> InstalledApp? {
        all.first { $0.manifest.bundleIdentifier == bundleIdentifier }
    }

    var manifests: [AppManifest] { all.map(\.manifest) }
}
