import Foundation

/// A web page's address with a moment of its video in it, the way the site itself writes one
/// in a link "at the current time": what the browser extension's activity carries, so that the
/// page opens on another device where the person was (docs/system-activities.md, A browser's
/// media).
public enum PageTime {
    /// `page` at `seconds` into its media: YouTube `t=83s` (`youtu.be` `t=83`), Twitch
    /// `t=1h2m3s` (videos, not live), Dailymotion `start=83`, Vimeo `#t=83s`, and a media file
    /// opened directly `#t=83` (W3C Media Fragments). Any other page, or a time under a second,
    /// gives the page as it is, without a time it had.
    public static func url(_ page: URL, at seconds: Int) -> URL {
        guard var parts = URLComponents(url: page, resolvingAgainstBaseURL: false), let host = parts.host?.lowercased() else { return page }
        let path = parts.path
        enum Place { case query(String, String), fragment(String), none }
        let place: Place
        switch host {
        case "www.youtube.com", "youtube.com", "m.youtube.com", "music.youtube.com":
            place = path == "/watch" || path.hasPrefix("/live/") || path.hasPrefix("/shorts/") ? .query("t", "\(seconds)s") : .none
        case "youtu.be":
            place = .query("t", "\(seconds)")
        case "www.twitch.tv", "twitch.tv", "m.twitch.tv":
            place = path.hasPrefix("/videos/") ? .query("t", twitch(seconds)) : .none
        case "www.dailymotion.com", "dailymotion.com":
            place = path.hasPrefix("/video/") ? .query("start", "\(seconds)") : .none
        case "vimeo.com", "www.vimeo.com", "player.vimeo.com":
            place = .fragment("t=\(seconds)s")
        default:
            let media: Set<String> = ["mp4", "m4v", "webm", "ogv", "ogg", "oga", "opus", "mp3", "m4a", "aac", "flac", "wav", "mov"]
            place = media.contains((path as NSString).pathExtension.lowercased()) ? .fragment("t=\(seconds)") : .none
        }
        switch place {
        case .none:
            return page
        case .query(let name, let value):
            var items = (parts.queryItems ?? []).filter { $0.name != name }
            if seconds >= 1 { items.append(URLQueryItem(name: name, value: value)) }
            parts.queryItems = items.isEmpty ? nil : items
        case .fragment(let fragment):
            // A fragment that is a time is replaced; any other fragment (a section) is kept.
            let old = parts.fragment ?? ""
            let keeps = !old.isEmpty && !old.hasPrefix("t=")
            if seconds >= 1, !keeps { parts.fragment = fragment } else if !keeps { parts.fragment = nil }
        }
        return parts.url ?? page
    }

    /// Twitch's form: `1h2m3s`, its leading zero units left out.
    static func twitch(_ seconds: Int) -> String {
        let (hours, minutes, rest) = (seconds / 3600, seconds / 60 % 60, seconds % 60)
        if hours > 0 { return "\(hours)h\(minutes)m\(rest)s" }
        if minutes > 0 { return "\(minutes)m\(rest)s" }
        return "\(rest)s"
    }
}
