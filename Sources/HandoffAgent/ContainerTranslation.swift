import Foundation
import HandoffCore
import HandoffWire

/// File URLs in a `userInfo`, between the devices' containers.
enum ContainerTranslation {
    /// On the origin: every file URL in `userInfo` that lies in one of `containers`, as the
    /// container and the path inside it.
    static func references(in userInfo: UserInfoValue, containers: [ContainerFolder]) -> [WireFileReference] {
        var found: [WireFileReference] = []
        var seen: Set<String> = []
        visitFileURLs(userInfo) { url in
            guard seen.insert(url.absoluteString).inserted else { return }
            for container in containers {
                if let path = container.relativePath(of: url) {
                    found.append(WireFileReference(url: url.absoluteString, container: container.identifier, path: path))
                    return
                }
            }
        }
        return found
    }

    /// On the receiver: each file URL the origin named in `references` becomes the same file in
    /// this device's container; every other file URL stays as it came, and is listed as not
    /// translated (as is one whose container this device does not have).
    static func translate(
        _ userInfo: UserInfoValue, references: [WireFileReference], containers: [ContainerFolder]
    ) -> (userInfo: UserInfoValue, untranslated: [String]) {
        var local: [String: URL] = [:]
        for reference in references {
            guard let container = containers.first(where: { $0.identifier == reference.container }),
                let file = container.file(at: reference.path)
            else { continue }
            local[reference.url] = file
        }
        var untranslated: [String] = []
        let translated = mapFileURLs(userInfo) { url in
            if let mine = local[url.absoluteString] { return mine }
            if !untranslated.contains(url.absoluteString) { untranslated.append(url.absoluteString) }
            return url
        }
        return (translated, untranslated)
    }

    static func visitFileURLs(_ value: UserInfoValue, _ visit: (URL) -> Void) {
        switch value {
        case .url(let url) where url.isFileURL: visit(url)
        case .array(let items): for item in items { visitFileURLs(item, visit) }
        case .set(let items): for item in items { visitFileURLs(item, visit) }
        case .dictionary(let entries):
            for (key, item) in entries {
                visitFileURLs(key, visit)
                visitFileURLs(item, visit)
            }
        default: break
        }
    }

    static func mapFileURLs(_ value: UserInfoValue, _ change: (URL) -> URL) -> UserInfoValue {
        switch value {
        case .url(let url) where url.isFileURL: return .url(change(url))
        case .array(let items): return .array(items.map { mapFileURLs($0, change) })
        case .set(let items): return .set(Set(items.map { mapFileURLs($0, change) }))
        case .dictionary(let entries):
            var mapped: [UserInfoValue: UserInfoValue] = [:]
            for (key, item) in entries { mapped[mapFileURLs(key, change)] = mapFileURLs(item, change) }
            return .dictionary(mapped)
        default: return value
        }
    }
}
