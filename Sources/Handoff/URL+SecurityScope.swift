import Foundation

#if !canImport(Darwin)
extension URL {
    /// Apple's apps call this before they use a URL that came in a `userInfo`, and go on only
    /// if it returns true. Linux has no sandbox to open, so Handoff provides it for ported code:
    /// true when the URL is a file URL naming something that exists on this device (a file
    /// in a synced container arrives as this device's path; a file only on the other device
    /// does not exist here), false otherwise.
    public func startAccessingSecurityScopedResource() -> Bool {
        isFileURL && FileManager.default.fileExists(atPath: path)
    }

    /// Ends what `startAccessingSecurityScopedResource()` began; nothing to do on Linux.
    public func stopAccessingSecurityScopedResource() {}
}
#endif
