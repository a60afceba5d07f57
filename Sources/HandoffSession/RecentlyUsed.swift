import Foundation

/// A document the desktop's recently-used list names: its URL, type, when it was last used, and
/// the application that used it then.
package struct RecentDocument: Sendable, Hashable {
    package var url: URL
    package var mimeType: String?
    package var used: Date
    /// The application that last used it, as the list names it (GTK: its name, and the command
    /// with `%u` or `%f`; KDE: its desktop file's name).
    package var application: RecentApplication?

    package init(url: URL, mimeType: String?, used: Date, application: RecentApplication?) {
        self.url = url
        self.mimeType = mimeType
        self.used = used
        self.application = application
    }
}

package struct RecentApplication: Sendable, Hashable {
    package var name: String
    /// The command the list gives (`'gedit %u'` as GLib quotes it), if any.
    package var exec: String?

    package init(name: String, exec: String?) {
        self.name = name
        self.exec = exec
    }

    /// The program the command runs: its first word, GLib's single quotes taken off.
    package var program: String? {
        guard let exec else { return nil }
        var text = exec.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("'"), let end = text.dropFirst().firstIndex(of: "'") {
            text = String(text[text.index(after: text.startIndex)..<end])
        }
        return text.split(separator: " ").first.map(String.init)
    }
}

/// The freedesktop recently-used list (`$XDG_DATA_HOME/recently-used.xbel`, XBEL with the
/// desktop-bookmark metadata), which GTK applications, LibreOffice and KDE's KIO write, and the
/// older KDE list (`$XDG_DATA_HOME/RecentDocuments/*.desktop`).
package enum RecentlyUsed {
    static let bookmarkNamespace = "http://www.freedesktop.org/standards/desktop-bookmarks"
    static let mimeNamespace = "http://www.freedesktop.org/standards/shared-mime-info"

    /// The most a list may be: GTK keeps it to a few hundred entries, well under 1 MiB; a larger
    /// one is not read at all.
    package static let maximumBytes = 16 << 20

    package struct ReadError: Error, CustomStringConvertible, Equatable {
        package let description: String
        package init(_ description: String) { self.description = description }
    }

    /// The documents of an XBEL list, newest use first.
    package static func documents(xbel data: Data) throws(ReadError) -> [RecentDocument] {
        guard data.count <= maximumBytes else { throw ReadError("the recently-used list is \(data.count) bytes, over \(maximumBytes): not read") }
        var reader = XBELReader()
        var markup = Markup([UInt8](try utf8Document(data)))
        do throws(Markup.Failure) {
            try markup.read(start: { reader.start($0, depth: $1) }, end: { reader.end($0, depth: $1) })
        } catch {
            throw ReadError("the recently-used list is not XBEL: \(error.message) (at byte \(error.offset))")
        }
        guard reader.sawRoot else { throw ReadError("the recently-used list is not XBEL: its root is not <xbel>") }
        return reader.documents.sorted { $0.used > $1.used }
    }

    /// `data` as a UTF-8 document without its XML declaration. GLib writes the list in UTF-8; a
    /// list that declares another encoding, or begins as UTF-16 or UTF-32 would, is refused.
    static func utf8Document(_ data: Data) throws(ReadError) -> Data {
        var bytes = [UInt8](data)
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }
        let start = bytes.firstIndex { ![0x20, 0x09, 0x0A, 0x0D].contains($0) } ?? bytes.count
        guard start < bytes.count, bytes[start] == 0x3C, start + 1 < bytes.count, bytes[start + 1] != 0 else {
            throw ReadError("the recently-used list is not XBEL: it does not begin as UTF-8 XML")
        }
        guard bytes.starts(with: Array("<?xml".utf8)) else { return Data(bytes) }
        guard let end = bytes.prefix(512).indices.first(where: { bytes[$0] == 0x3F && $0 + 1 < bytes.count && bytes[$0 + 1] == 0x3E }) else {
            throw ReadError("the recently-used list is not XBEL: its XML declaration does not end")
        }
        let declaration = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
        if let range = declaration.range(of: "encoding") {
            let rest = declaration[range.upperBound...].drop { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "'" }
            let name = rest.prefix { $0 != "\"" && $0 != "'" && $0 != " " }
            guard name == "utf-8" || name == "utf8" else {
                throw ReadError("the recently-used list is in '\(name)', not UTF-8, which GLib writes: not read")
            }
        }
        return Data(bytes[(end + 2)...])
    }

    /// The documents of KDE's older list: one link file each (`Type=Link`, `URL`, and the
    /// application in `X-KDE-LastOpenedWith`); `modified` gives each file's time.
    package static func documents(kdeLinks files: [(text: String, modified: Date)]) -> [RecentDocument] {
        var documents: [RecentDocument] = []
        for file in files {
            guard let keys = try? KeyFile(text: file.text), keys.value("Type") == "Link",
                let address = keys.value("URL") ?? keys.value("URL[$e]"), let url = URL(string: address), url.scheme != nil
            else { continue }
            let application = keys.value("X-KDE-LastOpenedWith").map { RecentApplication(name: $0, exec: nil) }
            documents.append(RecentDocument(url: url, mimeType: nil, used: file.modified, application: application))
        }
        return documents.sorted { $0.used > $1.used }
    }

    /// The newest of `documents` (newest first) that is a file inside one of `folders` (the synced
    /// containers): only those are ever offered.
    package static func newest(_ documents: [RecentDocument], inside folders: [URL]) -> RecentDocument? {
        let bases = folders.map { $0.standardizedFileURL.resolvingSymlinksInPath().path }.map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        return documents.first { document in
            guard document.url.isFileURL else { return false }
            let path = document.url.standardizedFileURL.resolvingSymlinksInPath().path
            return bases.contains { path.hasPrefix($0) && path.count > $0.count }
        }
    }

    /// GLib writes times as ISO 8601 in UTC, with or without fractions of a second.
    static func date(_ text: String?) -> Date? {
        guard let text, text.utf8.count <= 64 else { return nil }
        let plain = ISO8601DateFormatter()
        if let date = plain.date(from: text) { return date }
        // GLib writes microseconds; the formatter reads milliseconds at most.
        guard let dot = text.firstIndex(of: "."), let end = text[dot...].firstIndex(where: { !$0.isNumber && $0 != "." }) else { return nil }
        let digits = text[text.index(after: dot)..<end]
        guard !digits.isEmpty, let second = plain.date(from: String(text[..<dot]) + String(text[end...])), let fraction = Double("0." + digits) else { return nil }
        return second.addingTimeInterval(fraction)
    }
}

/// Reads an XBEL list: each `<bookmark href>` with its times, its `mime:mime-type` and its
/// `bookmark:application` entries (the one that used it last is its application).
private struct XBELReader {
    var documents: [RecentDocument] = []
    var sawRoot = false
    private var bookmark: (url: URL, used: Date)?
    private var mimeType: String?
    private var applications: [(RecentApplication, Date)] = []

    mutating func start(_ element: Markup.Element, depth: Int) {
        let attributes = element.attributes
        if depth == 1 {
            sawRoot = element.name == "xbel" && element.namespace.isEmpty
            return
        }
        guard sawRoot else { return }
        switch (element.namespace, element.name) {
        case ("", "bookmark") where depth == 2:
            guard let href = attributes["href"], let url = URL(string: href), url.scheme != nil else {
                bookmark = nil
                return
            }
            let times = ["visited", "modified", "added"].compactMap { RecentlyUsed.date(attributes[$0]) }
            bookmark = (url, times.max() ?? .distantPast)
            mimeType = nil
            applications = []
        case (RecentlyUsed.mimeNamespace, "mime-type") where bookmark != nil:
            mimeType = attributes["type"]
        case (RecentlyUsed.bookmarkNamespace, "application") where bookmark != nil:
            guard let name = attributes["name"], !name.isEmpty else { return }
            let used = RecentlyUsed.date(attributes["modified"]) ?? .distantPast
            applications.append((RecentApplication(name: name, exec: attributes["exec"]), used))
        default:
            break
        }
    }

    mutating func end(_ element: Markup.Element, depth: Int) {
        guard sawRoot, depth == 2, element.namespace.isEmpty, element.name == "bookmark", let bookmark else { return }
        let last = applications.max { $0.1 < $1.1 }
        documents.append(RecentDocument(
            url: bookmark.url, mimeType: mimeType, used: max(bookmark.used, last?.1 ?? .distantPast), application: last?.0))
        self.bookmark = nil
    }
}
