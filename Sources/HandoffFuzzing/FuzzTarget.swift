import Foundation
import HandoffDesktop
import Handoff
import HandoffAgent
import HandoffApp
import HandoffLocalAPI
import HandoffSession
import HandoffWire

/// Every decoder that reads bytes from outside the process, as a fuzz target: one function
/// that takes any bytes and must neither trap nor leak, whatever they are. Where a decoder has
/// an encoder, what decodes must also encode and decode again to the same value; a failure
/// of that is a trap too, so that the fuzzer reports it.
///
/// `handoff-fuzz` runs these under libFuzzer (`Scripts/fuzz.sh`), and the test suite runs
/// each over its committed corpus and mutations of it (`FuzzCorpusTests`).
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A datagram on the discovery port: a sealed beacon (512 bytes) opened with the
    /// account's key, or any other length read as the sealed part's plaintext, which only an
    /// opened beacon reaches.
    case beacon
    /// An mDNS packet (DNS-SD discovery).
    case dnsMessage = "dns-message"
    /// Bytes on a link between agents: frames, each read as a link message.
    case linkFrames = "link-frames"
    /// The account a member sends in a signed change (JSON), read before and after its
    /// signature is checked.
    case accountChange = "account-change"
    /// Bytes on the local socket: frames, each read as a local-API message (JSON).
    case localMessages = "local-messages"
    /// Bytes on the local socket, frame after frame, each message that decodes then served by
    /// an agent (in this process, on an in-memory network): whatever a local client sends, no
    /// value may trap the agent. The first byte picks the session's role.
    case agentLocalMessages = "agent-local-messages"
    /// The `userInfo` encoding.
    case userInfo = "user-info"
    /// An app's `Info.plist` (XML or binary).
    case infoPlist = "info-plist"
    /// An app's entitlements plist, beside a valid `Info.plist`.
    case entitlements
    /// A web site's association file, unsigned JSON.
    case associationFile = "association-file"
    /// A web site's association file in the signed (CMS) form.
    case signedAssociationFile = "signed-association-file"
    /// The agent's configuration file.
    case configFile = "config-file"
    /// The manifest of another device's copied files (JSON), and a list of copied files
    /// (`text/uri-list` and GNOME's) as a session service gives it.
    case clipboardFiles = "clipboard-files"
    /// What the session service reads of the desktop: the recently-used list (XBEL), and a
    /// desktop entry whose `Exec` is expanded for a file.
    case desktopFiles = "desktop-files"
    /// A D-Bus message from the session bus (a media player's metadata, a tray's call), and
    /// what MPRIS reads of it.
    case dbusMessage = "dbus-message"
    /// An `.xcconfig` file (its `#include` lines dropped: a fuzzer must not read files), and
    /// Xcode's `$(VARIABLE)` expansion of its values and of an Info.plist string.
    case buildSettings = "build-settings"

    /// The account beacon key the `beacon` target opens with (the seed corpus is sealed with
    /// it, so mutations of real beacons reach the tag check).
    public static let beaconKey = try! BeaconKey(rawRepresentation: Array(0..<32))

    /// Runs the decoder on `bytes`.
    public func run(_ bytes: [UInt8]) {
        switch self {
        case .beacon: Self.beacon(bytes)
        case .dnsMessage: Self.dnsMessage(bytes)
        case .linkFrames: Self.linkFrames(bytes)
        case .accountChange: Self.accountChange(bytes)
        case .localMessages: Self.localMessages(bytes)
        case .agentLocalMessages: Self.agentLocalMessages(bytes)
        case .userInfo: Self.userInfo(bytes)
        case .infoPlist: _ = try? AppManifest(infoPlist: Data(bytes))
        case .entitlements: _ = try? AppManifest(infoPlist: Self.validInfoPlist, entitlements: Data(bytes))
        case .associationFile: Self.associationFile(bytes)
        case .buildSettings: Self.buildSettings(bytes)
        case .signedAssociationFile: Self.signedAssociationFile(bytes)
        case .configFile: _ = try? ConfigurationFile(text: String(decoding: bytes, as: UTF8.self), name: "fuzz.conf")
        case .clipboardFiles: Self.clipboardFiles(bytes)
        case .desktopFiles: Self.desktopFiles(bytes)
        case .dbusMessage: Self.dbusMessage(bytes)
        }
    }

    // MARK: The targets

    private static func beacon(_ bytes: [UInt8]) {
        if bytes.count == Beacon.size {
            guard let content = Beacon.open(bytes, with: [beaconKey]) else { return }
            var guardState = BeaconReplayGuard(window: 30, capacity: 4)
            _ = guardState.admit(content, now: content.timestamp)
            return
        }
        guard let content = Beacon.decode(bytes) else { return }
        // What reads must write again (titles are shortened to fit, so only the identity is compared).
        guard let written = try? Beacon.encode(content), let again = Beacon.decode(written) else {
            preconditionFailure("a beacon that decodes does not encode again: \(content)")
        }
        check(again.sender == content.sender && again.sequence == content.sequence && again.activity?.id == content.activity?.id, "beacon", content, again)
    }

    private static func dnsMessage(_ bytes: [UInt8]) {
        guard let message = try? DNSMessage(bytes: bytes) else { return }
        let written = message.encoded()
        guard let again = try? DNSMessage(bytes: written) else {
            preconditionFailure("a DNS message that decodes does not decode after encoding: \(message)")
        }
        check(again == message, "DNS message", message, again)
    }

    private static func linkFrames(_ bytes: [UInt8]) {
        var decoder = FrameDecoder(maximumPayload: 1 << 20)
        // Fed in two pieces, as a stream arrives, so that split headers are read too.
        let cut = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        decoder.append(bytes[..<cut])
        var frames: [Frame] = []
        while let frame = try? decoder.next() { frames.append(frame) }
        decoder.append(bytes[cut...])
        while let frame = try? decoder.next() { frames.append(frame) }
        for frame in frames {
            guard let message = try? LinkMessage(frame: frame) else { continue }
            guard let again = try? LinkMessage(frame: message.frame) else {
                preconditionFailure("a link message that decodes does not decode after encoding: \(message)")
            }
            check(again == message, "link message", message, again)
        }
    }

    private static func accountChange(_ bytes: [UInt8]) {
        let change = SignedChange(signer: UUID(), state: bytes, signature: [])
        guard let account = try? change.account() else { return }
        // The joining device reads the account's members before it can check anything.
        _ = account.members.map(\.name)
        _ = try? change.verified(against: account)
    }

    private static func localMessages(_ bytes: [UInt8]) {
        // The first byte picks the form: a bare JSON message, or a stream of frames.
        guard let first = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        if first & 1 == 0 {
            guard let message = try? LocalMessage(frame: Frame(kind: LocalMessage.frameKind, payload: rest)) else { return }
            guard let again = try? LocalMessage(frame: message.frame) else {
                preconditionFailure("a local message that decodes does not decode after encoding: \(message)")
            }
            _ = again
            return
        }
        var decoder = FrameDecoder(maximumPayload: LocalMessage.maximumFrame)
        decoder.append(rest)
        while let frame = try? decoder.next() {
            _ = try? LocalMessage(frame: frame)
        }
    }

    private static func agentLocalMessages(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        var decoder = FrameDecoder(maximumPayload: LocalMessage.maximumFrame)
        decoder.append(bytes.dropFirst())
        var messages: [LocalMessage] = []
        while let frame = try? decoder.next() {
            guard let message = try? LocalMessage(frame: frame), !FuzzAgent.reachesOutside(message) else { continue }
            messages.append(message)
        }
        guard !messages.isEmpty else { return }
        FuzzAgent.shared.serve(messages, role: first & 1 == 0 ? .control : .app)
    }

    private static func userInfo(_ bytes: [UInt8]) {
        guard let value = try? UserInfoCoding.decode(Data(bytes)) else { return }
        guard let written = try? UserInfoCoding.encode(value) else {
            preconditionFailure("a userInfo value that decodes does not encode: \(value)")
        }
        guard (try? UserInfoCoding.decode(written)) != nil else {
            preconditionFailure("a userInfo value that decodes does not decode after encoding: \(value)")
        }
        _ = try? UserInfoCoding.decodeUserInfo(Data(bytes))
    }

    private static func associationFile(_ bytes: [UInt8]) {
        guard let file = try? SiteAssociationFile(json: bytes) else { return }
        // What a universal link's matching does with the file's patterns.
        for address in ["https://example.com/", "https://example.com/a/b?c=d&e=%C3%A9#f", "https://example.com/" + String(repeating: "a", count: 300)] {
            _ = file.appLinkApps(for: URL(string: address)!)
        }
    }

    private static func buildSettings(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#include") }.joined(separator: "\n")
        var settings = BuildSettings()
        guard (try? settings.read(xcconfig: text, file: "fuzz.xcconfig", directory: URL(fileURLWithPath: "/nonexistent"))) != nil else {
            _ = try? settings.expand(text)
            return
        }
        for name in settings.values.keys.sorted() { _ = try? settings.expand("$(\(name))") }
        // What is written out reads back as the same values.
        var again = BuildSettings()
        do {
            try again.read(xcconfig: settings.xcconfigText(), file: "again.xcconfig", directory: URL(fileURLWithPath: "/nonexistent"))
        } catch {
            fatalError("written settings do not read back: \(error)")
        }
        for name in settings.values.keys {
            let before = try? settings.expand("$(\(name))")
            let after = try? again.expand("$(\(name))")
            if before != after { fatalError("\(name) expands to \(String(describing: before)) before writing, \(String(describing: after)) after") }
        }
    }

    private static func signedAssociationFile(_ bytes: [UInt8]) {
        guard let parsed = try? SignedAssociationFile.parse(bytes) else { return }
        _ = try? SiteAssociationFile(json: parsed.content)
    }

    private static func check<Value>(_ condition: Bool, _ what: String, _ first: Value, _ second: Value) {
        guard condition else {
            preconditionFailure("a \(what) reads differently after encoding: \(first) became \(second)")
        }
    }

    /// Made for each use: a global `Data` is reported as a leak by LeakSanitizer.
    static var validInfoPlist: Data {
        Data(
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict>
        <key>CFBundleIdentifier</key><string>com.example.fuzz</string>
        <key>CFBundleExecutable</key><string>Fuzz</string>
        <key>NSUserActivityTypes</key><array><string>com.example.fuzz.editing</string></array>
        </dict></plist>
        """.utf8)
    }

    static func clipboardFiles(_ bytes: [UInt8]) {
        _ = try? ClipboardFiles.uris(in: bytes, type: ClipboardFiles.uriList)
        _ = try? ClipboardFiles.uris(in: bytes, type: ClipboardFiles.gnomeCopiedFiles)
        guard let manifest = try? JSONDecoder().decode(ClipboardFiles.Manifest.self, from: Data(bytes)) else { return }
        // What decodes is checked, and encodes and decodes again to the same value.
        _ = try? ClipboardFiles.resolve(manifest, containers: [])
        guard let again = try? JSONDecoder().decode(ClipboardFiles.Manifest.self, from: JSONEncoder().encode(manifest)), again == manifest else {
            fatalError("a manifest did not survive encoding and decoding")
        }
    }

    static func desktopFiles(_ bytes: [UInt8]) {
        _ = try? RecentlyUsed.documents(xbel: Data(bytes))
        let text = String(decoding: bytes, as: UTF8.self)
        _ = RecentlyUsed.documents(kdeLinks: [(text, Date(timeIntervalSince1970: 0))])
        guard let keys = try? KeyFile(text: text), let entry = try? DesktopEntry(id: "fuzz.desktop", keyFile: keys) else { return }
        // Whatever Exec says, a file is one argument, whole, and the program is never a file.
        let file = URL(fileURLWithPath: "/tmp/a b;$(x).txt")
        guard let argv = try? entry.command(opening: [file]) else { return }
        guard let program = argv.first, !program.isEmpty,
            ![file.path, file.absoluteString].contains(program) || entry.exec?.contains(program) == true
        else {
            fatalError("Exec made the file its program: \(argv)")
        }
    }

    static func dbusMessage(_ bytes: [UInt8]) {
        guard let message = try? DBusMessage.decode(bytes) else { return }
        // What was read is written, and reads back as the same bytes (a NaN is not equal to
        // itself, so the bytes are compared, not the values).
        let written = message.encoded()
        guard let again = try? DBusMessage.decode(written), again.encoded() == written else {
            fatalError("a message did not read back as it was written: \(message)")
        }
        // What MPRIS reads of a body, and the decision it takes on it.
        for value in message.body {
            guard let metadata = value.dictionary?["Metadata"]?.dictionary ?? value.dictionary else { continue }
            let read = MediaMetadata(metadata)
            _ = read.displayTitle
            _ = MediaTravel.decide(read, player: "org.mpris.MediaPlayer2.fuzz", containers: [URL(fileURLWithPath: "/home/me/Sync")])
        }
    }
}
