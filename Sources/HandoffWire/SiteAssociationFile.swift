import Foundation

/// Why an association file approves nothing.
public struct SiteAssociationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A web site's `apple-app-site-association` file, as far as activity continuation reads it:
/// the application identifiers (`TEAMID.bundle.id`) its `activitycontinuation` section lists.
///
/// Both unsigned JSON shapes are read: the iOS 9 one, and the iOS 13 one that adds `applinks`
/// `details` with `appIDs` and `components`; in both, `activitycontinuation` is an object whose
/// `apps` is an array of application identifiers. Other sections (`applinks`, `webcredentials`,
/// `appclips`) approve nothing for continuation, and are only checked to be well formed enough
/// to read. See `docs/web.md`.
public struct SiteAssociationFile: Sendable, Hashable {
    /// The largest file read, as Apple's own limit.
    public static let maximumSize = 128 * 1024

    /// The application identifiers approved for activity continuation.
    public var activityContinuationApps: Set<String>

    public init(activityContinuationApps: Set<String>) {
        self.activityContinuationApps = activityContinuationApps
    }

    /// Reads the JSON bytes of an unsigned file; throws saying what is wrong, never traps.
    public init(json bytes: some Collection<UInt8>) throws(SiteAssociationError) {
        guard bytes.count <= Self.maximumSize else {
            throw SiteAssociationError("the file is \(bytes.count) bytes, over the limit of \(Self.maximumSize)")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(bytes), options: [])
        } catch {
            throw SiteAssociationError("the file is not valid JSON")
        }
        guard let root = object as? [String: Any] else {
            throw SiteAssociationError("the file is not a JSON object")
        }
        var apps: Set<String> = []
        if let section = root["activitycontinuation"] {
            guard let continuation = section as? [String: Any] else {
                throw SiteAssociationError("'activitycontinuation' is not an object")
            }
            if let listed = continuation["apps"] {
                guard let identifiers = listed as? [Any] else {
                    throw SiteAssociationError("'activitycontinuation.apps' is not an array")
                }
                for (index, entry) in identifiers.enumerated() {
                    guard let identifier = entry as? String, Self.isApplicationIdentifier(identifier) else {
                        throw SiteAssociationError("'activitycontinuation.apps[\(index)]' is not an application identifier such as ABCDE12345.com.example.app")
                    }
                    apps.insert(identifier)
                }
            }
        }
        if let links = root["applinks"] {
            guard links is [String: Any] else { throw SiteAssociationError("'applinks' is not an object") }
        }
        activityContinuationApps = apps
    }

    /// `TEAMID.bundle.id`: a team identifier, a dot, and a bundle identifier.
    public static func isApplicationIdentifier(_ text: String) -> Bool {
        text.range(of: #"^[A-Za-z0-9]+\.[A-Za-z0-9][A-Za-z0-9.\-_]*$"#, options: .regularExpression) != nil && text.utf8.count <= 255
    }
}
