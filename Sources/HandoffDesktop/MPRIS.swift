import Foundation
import HandoffCore

/// The names of the MPRIS D-Bus interface (media players on the session bus), version 2.2.
public enum MPRIS {
    /// Every player's bus name begins with it: `org.mpris.MediaPlayer2.vlc`, `….mpv`,
    /// `….firefox.instance_1_52`.
    public static let namePrefix = "org.mpris.MediaPlayer2."
    public static let path = "/org/mpris/MediaPlayer2"
    public static let root = "org.mpris.MediaPlayer2"
    public static let player = "org.mpris.MediaPlayer2.Player"

    /// The match rules that tell of players coming and going and of their changes: no polling.
    public static let matchRules = [
        "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',member='NameOwnerChanged',arg0namespace='org.mpris.MediaPlayer2'",
        "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',path='/org/mpris/MediaPlayer2'",
        "type='signal',interface='org.mpris.MediaPlayer2.Player',member='Seeked',path='/org/mpris/MediaPlayer2'",
    ]

    /// Players of web browsers, which the browser extension's activity covers (it carries the
    /// page, and the time where the site allows): their bus names' first part after the prefix.
    public static let browsers: Set<String> = [
        "firefox", "chromium", "chrome", "google-chrome", "brave", "vivaldi", "opera", "microsoft-edge", "edge", "epiphany",
        "plasma-browser-integration", "librewolf", "waterfox", "falkon", "qutebrowser",
    ]

    /// The player's own name in `busName` (`vlc` of `org.mpris.MediaPlayer2.vlc.instance42`).
    public static func playerName(of busName: String) -> String? {
        guard busName.hasPrefix(namePrefix) else { return nil }
        return busName.dropFirst(namePrefix.count).split(separator: ".").first.map(String.init)
    }
}

/// What a player says it is playing (its `Metadata` property), read leniently: a key of the
/// wrong type is as if absent.
public struct MediaMetadata: Sendable, Equatable {
    public var trackID: String?
    public var url: URL?
    public var title: String?
    public var artists: [String] = []
    public var album: String?
    /// The item's length, in microseconds.
    public var length: Int64?

    public init() {}

    /// Reads the `a{sv}` of the property.
    public init(_ values: [String: DBusValue]) {
        // A track id is an object path; one that is not (some players send a plain string) is
        // not one to send back, and the position is then set with Seek.
        let id = values["mpris:trackid"]?.string
        trackID = id.flatMap { DBusValue.isObjectPath($0) ? $0 : nil }
        url = values["xesam:url"]?.string.flatMap { URL(string: $0) }
        title = values["xesam:title"]?.string
        artists = (values["xesam:artist"]?.strings ?? []).filter { !$0.isEmpty }
        album = values["xesam:album"]?.string
        length = values["mpris:length"]?.integer
    }

    /// How the item is named to a person: "Title — Artist", else the file's name.
    public var displayTitle: String {
        let title = (self.title?.isEmpty == false ? self.title : nil) ?? url.map { $0.isFileURL ? $0.lastPathComponent : $0.absoluteString } ?? "Media"
        return artists.isEmpty ? title : "\(title) — \(artists.joined(separator: ", "))"
    }
}

/// A player's playback state (`PlaybackStatus`).
public enum PlaybackStatus: String, Sendable {
    case playing = "Playing"
    case paused = "Paused"
    case stopped = "Stopped"
}

/// Whether a player's item can be continued on another device, and if not why (what
/// `handoff doctor` shows).
public enum MediaTravel: Sendable, Equatable {
    /// It can: a file inside a synced container, or an `http(s)` URL.
    case travels(URL)
    /// It cannot, for this reason.
    case stays(String)

    /// Decides for `metadata`, played by `player`, with this device's synced `containers`.
    public static func decide(_ metadata: MediaMetadata, player: String, containers: [URL]) -> MediaTravel {
        if let name = MPRIS.playerName(of: player), MPRIS.browsers.contains(name.lowercased()) {
            return .stays("\(name) is a browser: its page is the browser extension's activity")
        }
        guard let url = metadata.url else { return .stays("\(player) gives no URL for what it plays") }
        switch url.scheme?.lowercased() {
        case "http", "https":
            return .travels(url)
        case "file":
            let file = url.standardizedFileURL.resolvingSymlinksInPath().path
            let inside = containers.contains { container in
                let folder = container.standardizedFileURL.resolvingSymlinksInPath().path
                return file.hasPrefix(folder.hasSuffix("/") ? folder : folder + "/")
            }
            return inside ? .travels(url) : .stays("\(url.lastPathComponent) is outside every synced container (--container)")
        default:
            return .stays("a \(url.scheme ?? "schemeless") item cannot be opened on another device")
        }
    }
}

/// A player's item as the activity carries it (`org.handoff.system.media`'s `userInfo`).
public struct MediaActivity: Sendable, Equatable {
    public var url: URL
    public var title: String?
    public var artists: [String]
    public var album: String?
    /// Where playback was when the activity was fetched, in seconds.
    public var position: Double
    public var length: Double?
    /// The player's desktop entry ID, without `.desktop` (MPRIS's `DesktopEntry`).
    public var desktopEntry: String?
    /// The player's name for people (MPRIS's `Identity`).
    public var player: String?
    /// Whether it was playing at the fetch.
    public var playing: Bool

    public init(url: URL, title: String?, artists: [String], album: String?, position: Double, length: Double?, desktopEntry: String?, player: String?, playing: Bool) {
        self.url = url
        self.title = title
        self.artists = artists
        self.album = album
        self.position = position
        self.length = length
        self.desktopEntry = desktopEntry
        self.player = player
        self.playing = playing
    }
}

extension MediaActivity {
    /// The activity's `userInfo`: `url`, `position` and `playing`, and `title`, `artists`,
    /// `album`, `length`, `desktopEntry`, `player` where known (docs/system-activities.md).
    public var userInfo: UserInfoValue {
        var entries: [UserInfoValue: UserInfoValue] = [
            .string("url"): .url(url), .string("position"): .double(position), .string("playing"): .bool(playing),
        ]
        if let title { entries[.string("title")] = .string(title) }
        if !artists.isEmpty { entries[.string("artists")] = .array(artists.map(UserInfoValue.string)) }
        if let album { entries[.string("album")] = .string(album) }
        if let length { entries[.string("length")] = .double(length) }
        if let desktopEntry { entries[.string("desktopEntry")] = .string(desktopEntry) }
        if let player { entries[.string("player")] = .string(player) }
        return .dictionary(entries)
    }

    /// Reads a fetched activity's `userInfo`; throws what is missing or of the wrong type.
    public init(userInfo: UserInfoValue) throws(MediaActivityError) {
        guard case .dictionary(let entries) = userInfo else { throw MediaActivityError("its userInfo is not a dictionary") }
        func string(_ key: String) throws(MediaActivityError) -> String? {
            switch entries[.string(key)] {
            case nil: return nil
            case .string(let value)?: return value
            default: throw MediaActivityError("'\(key)' is not a string")
            }
        }
        func number(_ key: String) throws(MediaActivityError) -> Double? {
            switch entries[.string(key)] {
            case nil: return nil
            case .double(let value)?: return value
            case .float(let value)?: return Double(value)
            case .integer(let value)?:
                let unsigned = [.uint, .uint8, .uint16, .uint32, .uint64].contains(value.width)
                return unsigned ? Double(value.bits) : Double(Int64(bitPattern: value.bits))
            default: throw MediaActivityError("'\(key)' is not a number")
            }
        }
        guard case .url(let url)? = entries[.string("url")] else { throw MediaActivityError("it has no 'url'") }
        // At most 10^7 s (115 days): no item is longer, and microseconds of it fit in an Int64.
        guard let position = try number("position"), position.isFinite, position >= 0, position <= 1e7 else {
            throw MediaActivityError("its 'position' is not a number of seconds from 0 to 10^7")
        }
        var artists: [String] = []
        if case .array(let values)? = entries[.string("artists")] {
            artists = values.compactMap { if case .string(let s) = $0 { return s } else { return nil } }
        }
        var playing = true
        if case .bool(let value)? = entries[.string("playing")] { playing = value }
        let length = try number("length")
        self.init(
            url: url, title: try string("title"), artists: artists, album: try string("album"), position: position,
            length: length.flatMap { $0.isFinite && $0 >= 0 && $0 <= 1e7 ? $0 : nil }, desktopEntry: try string("desktopEntry"), player: try string("player"), playing: playing)
    }
}

/// Why a media activity's `userInfo` cannot be read.
public struct MediaActivityError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
