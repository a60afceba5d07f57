import Foundation

/// The browsers whose native-messaging manifests `handoff browser install` writes, each with
/// its per-user folder on Linux.
enum Browser: String, CaseIterable {
    case chromium, chrome, brave, edge, firefox

    func folder(home: String, configHome: String) -> String {
        switch self {
        case .chromium: return "\(configHome)/chromium/NativeMessagingHosts"
        case .chrome: return "\(configHome)/google-chrome/NativeMessagingHosts"
        case .brave: return "\(configHome)/BraveSoftware/Brave-Browser/NativeMessagingHosts"
        case .edge: return "\(configHome)/microsoft-edge/NativeMessagingHosts"
        case .firefox: return "\(home)/.mozilla/native-messaging-hosts"
        }
    }

    /// The folder where the browser reads manifests for every user of the machine (what a
    /// system package installs), or nil where Handoff knows none.
    var systemFolder: String? {
        switch self {
        case .chromium: return "/etc/chromium/native-messaging-hosts"
        case .chrome: return "/etc/opt/chrome/native-messaging-hosts"
        case .edge: return "/etc/opt/edge/native-messaging-hosts"
        case .firefox: return "/usr/lib/mozilla/native-messaging-hosts"
        case .brave: return nil
        }
    }
}

/// The native host's name, as the extension connects to it.
let nativeHostName = "org.handoff.browser"
/// The extension's identifier in Chromium-based browsers, which follows from the public key in
/// Extensions/Browser/manifest.json (a test checks that they agree).
let chromiumExtensionID = "bcgblgbejekhpkmkaoapfinefihbjeha"
/// The extension's identifier in Firefox (its manifest's `browser_specific_settings`).
let firefoxExtensionID = "browser@handoff.invalid"
