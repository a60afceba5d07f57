import Foundation
import HandoffDesktop
import Handoff
import HandoffAgent
import HandoffLocalAPI
import HandoffWire

/// Valid inputs for each target, made with the project's own encoders: the start of the
/// committed corpus in `Fuzz/Corpus` (`handoff-fuzz seeds` writes them). The signed
/// association file's seed is made with openssl and committed as it is.
public enum FuzzSeeds {
    public static func seeds(for target: FuzzTarget) -> [(name: String, bytes: [UInt8])] {
        switch target {
        case .beacon: beacons()
        case .dnsMessage: dnsMessages()
        case .linkFrames: linkFrames()
        case .accountChange: accountChanges()
        case .localMessages: localMessages()
        case .agentLocalMessages: agentLocalMessages()
        case .userInfo: userInfos()
        case .infoPlist: infoPlists()
        case .entitlements: entitlementsFiles()
        case .associationFile: associationFiles()
        case .signedAssociationFile: []
        case .configFile: configFiles()
        case .clipboardFiles: clipboardFiles()
        case .desktopFiles: desktopFiles()
        case .dbusMessage: dbusMessages()
        case .buildSettings: buildSettings()
        }
    }

    static let sender = UUID(uuidString: "6F1C2A52-3C43-4E0B-9A52-1C0D5E6F7A81")!
    static let activityID = UUID(uuidString: "0B1E7C4D-2F3A-4B5C-8D9E-0F1A2B3C4D5E")!
    static let moment = Date(timeIntervalSince1970: 1_790_000_000)

    static func beacons() -> [(name: String, bytes: [UInt8])] {
        let presence = BeaconContent(sender: sender, sequence: 1, timestamp: moment, linkPort: 40001, activity: nil, accountRevision: 3)
        var activity = presence
        activity.sequence = 2
        activity.activity = ActivityAnnouncement(
            id: activityID, activityType: "com.example.notes.editing", title: "Groceries ✓", teamIdentifier: "EXAMPLETEAM",
            hasWebpageURL: true, supportsContinuationStreams: true)
        activity.refreshSeconds = 30
        activity.asksForAnswers = true
        var clipboard = activity
        clipboard.sequence = 3
        clipboard.clipboard = ClipboardOffer(
            generation: 1_790_000_000_000, copiedAt: moment, lifetimeSeconds: 120,
            types: [ClipboardType(name: "text/plain;charset=utf-8", size: 12), ClipboardType(name: "text/html", size: 4096), ClipboardType(name: "application/x-example", size: 1 << 40)])
        var seeds: [(String, [UInt8])] = []
        for (name, content) in [("presence", presence), ("activity", activity), ("clipboard", clipboard)] {
            seeds.append(("sealed-\(name)", try! Beacon.seal(content, with: FuzzTarget.beaconKey)))
            seeds.append(("plaintext-\(name)", try! Beacon.encode(content)))
        }
        return seeds
    }

    static func dnsMessages() -> [(name: String, bytes: [UInt8])] {
        let service = DNSName("_handoff._tcp.local")
        let instance = service.prepending("k3j9x2")
        let host = DNSName("k3j9x2.local")
        let query = DNSMessage(isResponse: false, questions: [DNSQuestion(name: service, type: DNSType.ptr, unicastResponse: true)])
        let answer = DNSMessage(
            isResponse: true, isAuthoritative: true,
            answers: [DNSRecord(name: service, ttl: 120, data: .ptr(instance))],
            additionals: [
                DNSRecord(name: instance, cacheFlush: true, ttl: 120, data: .srv(priority: 0, weight: 0, port: 40001, target: host)),
                DNSRecord(name: instance, cacheFlush: true, ttl: 4500, data: .txt([Array("v=1".utf8)])),
                DNSRecord(name: host, cacheFlush: true, ttl: 120, data: .a([127, 0, 0, 1])),
                DNSRecord(name: host, cacheFlush: true, ttl: 120, data: .aaaa([UInt8](repeating: 0, count: 15) + [1])),
                DNSRecord(name: host, cacheFlush: true, ttl: 120, data: .nsec(next: host, types: [DNSType.a, DNSType.aaaa])),
                DNSRecord(name: host, ttl: 10, data: .other(type: 99, [1, 2, 3])),
            ])
        let goodbye = DNSMessage(isResponse: true, answers: [DNSRecord(name: service, ttl: 0, data: .ptr(instance))])
        return [("query", query.encoded()), ("answer", answer.encoded()), ("goodbye", goodbye.encoded())]
    }

    static func linkFrames() -> [(name: String, bytes: [UInt8])] {
        let record = FetchedActivity(
            ActivityRecord(
                activity: ActivityAnnouncement(
                    id: activityID, activityType: "com.example.notes.editing", title: "Groceries ✓", bundleIdentifier: "com.example.notes",
                    teamIdentifier: "EXAMPLETEAM", hasWebpageURL: true, supportsContinuationStreams: true, expirationDate: moment),
                webpageURL: "https://notes.example.com/n/1", referrerURL: "https://example.com", keywords: ["milk"],
                requiredUserInfoKeys: ["note"], persistentIdentifier: "p-1", targetContentIdentifier: "note-1",
                isEligibleForSearch: true, isEligibleForPublicIndexing: false, isEligibleForPrediction: true,
                userInfo: userInfos().first.map { Data($0.bytes) }),
            fileReferences: [WireFileReference(url: "file:///home/a/Notes/b.txt", container: "notes", path: "b.txt")])
        let messages: [(String, LinkMessage)] = [
            ("hello", .hello(version: LinkMessage.version, device: sender)),
            ("fetch", .fetch(request: 42, activityID: activityID)),
            ("fetched", .fetched(request: 42, record)),
            ("fetch-failed", .fetchFailed(request: 7, code: 4610, message: "the app did not save in time")),
            ("continued", .continued(activityID: activityID)),
            ("account-update", .accountUpdate([SignedChange(signer: sender, state: Array(accountJSON.utf8), signature: [0x30, 0x06, 2, 1, 1, 2, 1, 1])])),
            ("join-request", .joinRequest(version: 1, name: "desk", certificate: [0x30, 0x82, 0, 0], proof: [UInt8](repeating: 9, count: 32))),
            ("join-accepted", .joinAccepted(SignedChange(signer: sender, state: Array(accountJSON.utf8), signature: [4]))),
            ("join-refused", .joinRefused(reason: "the code is wrong")),
            ("join-confirmed", .joinConfirmed),
            ("removed", .removed(SignedChange(signer: sender, state: Array(accountJSON.utf8), signature: [4]))),
            ("stream-open", .streamOpen(stream: 1, activityID: activityID, window: 1 << 20)),
            ("stream-accepted", .streamAccepted(stream: 1, window: 1 << 20)),
            ("stream-refused", .streamRefused(stream: 3, code: 4610, message: "the app did not take the streams")),
            ("stream-data", .streamData(stream: 1, bytes: Array("hello".utf8))),
            ("stream-credit", .streamCredit(stream: 1, bytes: 262_144)),
            ("stream-end", .streamEnd(stream: 1)),
            ("stream-stop", .streamStop(stream: 1)),
            ("stream-reset", .streamReset(stream: 1, reason: "the app crashed")),
            ("clipboard-open", .clipboardOpen(stream: 2, generation: 1_790_000_000_000, type: "image/png", window: 1 << 20)),
        ]
        // The first byte of a link-frames input says where the input is cut in two.
        var seeds = messages.map { (name, message) in (name, [UInt8(3)] + message.frame.encoded) }
        seeds.append(("conversation", [UInt8(0)] + messages.prefix(4).flatMap { $0.1.frame.encoded }))
        return seeds
    }

    static let accountJSON = """
        {"beaconKeys":["AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="],"id":"2D1C5E0A-7B8C-4D9E-A0B1-C2D3E4F5A6B7",\
        "members":[{"id":"6F1C2A52-3C43-4E0B-9A52-1C0D5E6F7A81","joined":1790000000,"name":"laptop"},\
        {"id":"7A2B3C4D-5E6F-4A1B-8C2D-3E4F5A6B7C8D","joined":1790000100,"name":"desktop"}],"name":"home","revision":2}
        """

    static func accountChanges() -> [(name: String, bytes: [UInt8])] {
        [("account", Array(accountJSON.utf8)), ("empty-object", Array("{}".utf8))]
    }

    static func localMessages() -> [(name: String, bytes: [UInt8])] {
        let record = ActivityRecord(
            activity: ActivityAnnouncement(id: activityID, activityType: "com.example.notes.editing", title: "Groceries", hasWebpageURL: true),
            webpageURL: "https://notes.example.com/n/1", keywords: ["milk"], requiredUserInfoKeys: ["note"], userInfo: Data([1, 2, 3]))
        let messages: [(String, LocalMessage)] = [
            ("hello", .call(request: 1, .hello(version: LocalMessage.version, role: .app, bundleIdentifier: "com.example.notes"))),
            ("continue", .call(request: 2, .continue(activity: activityID))),
            ("invite", .call(request: 3, .invite(token: true, host: "127.0.0.1", lifetime: 300))),
            ("probe", .call(request: 4, .probe(host: "127.0.0.1", port: 40001))),
            ("open-stream", .call(request: 5, .openStream(version: LocalMessage.version, continuation: activityID))),
            ("copy", .call(request: 8, .copy(version: LocalMessage.version, clipboardType: "text/plain;charset=utf-8"))),
            ("paste", .call(request: 9, .paste(version: LocalMessage.version, clipboardType: "image/png"))),
            ("proof", .proof(nonce: Data(repeating: 0x5A, count: 16))),
            ("became-current", .becameCurrent(record.activity)),
            ("saved", .saved(request: 6, record)),
            ("save-failed", .saveFailed(request: 7, LocalError(.failed, "the document could not be read"))),
            ("reply", .reply(request: 1, LocalReply.failure(LocalError(.badRequest, "unknown call")))),
            ("deliver", .deliver(continuation: activityID, record: record, origin: LocalOrigin(device: sender, deviceName: "laptop", activity: activityID))),
            ("stream-request", .streamRequest(stream: sender, activity: activityID)),
        ]
        var seeds = messages.map { (name, message) in ("json-\(name)", [UInt8(0)] + message.frame.payload) }
        seeds.append(("frames", [UInt8(1)] + messages.prefix(5).flatMap { $0.1.frame.encoded }))
        return seeds
    }

    /// A client's messages to an agent, a frame each after the role byte (0 control, 1 app):
    /// every call a client makes, and sessions that make an account and then pair, offer and paste.
    static func agentLocalMessages() -> [(name: String, bytes: [UInt8])] {
        var activity = ActivityAnnouncement(id: activityID, activityType: "com.example.notes.editing", title: "Groceries", hasWebpageURL: true)
        activity.expirationDate = moment
        let record = ActivityRecord(activity: activity, webpageURL: "https://notes.example.com/n/1", keywords: ["milk"], userInfo: Data([1, 2, 3]))
        let calls: [(String, LocalCall)] = [
            ("status", .status), ("devices", .devices), ("nearby", .nearby), ("apps", .apps), ("watch", .watch), ("doctor", .doctor),
            ("continue", .continue(activity: activityID)), ("continue-latest", .continue(activity: nil)),
            ("remove-app", .removeApp(bundleIdentifier: "com.example.notes")), ("create-account", .createAccount(name: "home")),
            ("invite", .invite(token: false, host: "127.0.0.1", lifetime: 300)), ("await-join", .awaitJoin(invitation: activityID)),
            ("confirm-join", .confirmJoin(invitation: activityID, accept: true)), ("join", .join(code: "6Q0A-G08M-0K8G-R6RD-AH6K-8XGN")),
            ("await-join-result", .awaitJoinResult), ("remove-device", .removeDevice(name: "laptop")),
            ("probe", .probe(host: "127.0.0.1", port: 40001)), ("site-association", .siteAssociation(host: "example.com", url: "https://example.com/a")),
            ("offer-clipboard", .offerClipboard(types: [LocalClipboardType(name: "text/plain;charset=utf-8", size: 5)])),
            ("watch-clipboard", .watchClipboard(session: "X11 :0")), ("handle-system-activities", .handleSystemActivities(types: [SystemActivityType.document])),
            ("system-activity-status", .systemActivityStatus(status: "mpv plays nothing")),
        ]
        var seeds = calls.enumerated().map { index, call in ("call-\(call.0)", [UInt8(0)] + LocalMessage.call(request: UInt64(index + 2), call.1).frame.encoded) }
        let app: [(String, LocalMessage)] = [
            ("became-current", .becameCurrent(activity)), ("resigned", .resigned(activity: activityID)), ("invalidated", .invalidated(activity: activityID)),
            ("saved", .saved(request: 1, record)), ("save-failed", .saveFailed(request: 1, LocalError(.failed, code: 4610, "no"))),
            ("stream-refused", .streamRefused(stream: activityID, error: LocalError(.failed, "no"))),
            ("clipboard-refused", .clipboardRefused(read: activityID, error: LocalError(.failed, "no"))),
            ("delivered", .delivered(continuation: activityID, error: nil)),
            ("not-delivered", .delivered(continuation: activityID, error: LocalError(.failed, "no app here opens text/plain"))),
        ]
        seeds += app.map { ("app-\($0.0)", [UInt8(1)] + $0.1.frame.encoded) }
        let session: [LocalMessage] = [
            .call(request: 2, .createAccount(name: "home")), .call(request: 3, .invite(token: true, host: "127.0.0.1", lifetime: 60)),
            .becameCurrent(activity), .call(request: 4, .offerClipboard(types: [LocalClipboardType(name: "text/plain", size: 3)])),
            .call(request: 5, .nearby), .call(request: 6, .continue(activity: nil)), .resigned(activity: activityID),
        ]
        seeds.append(("session", [UInt8(1)] + session.flatMap { $0.frame.encoded }))
        return seeds
    }

    static func userInfos() -> [(name: String, bytes: [UInt8])] {
        let values: [(String, UserInfoValue)] = [
            ("note", .dictionary([.string("note"): .string("Groceries"), .string("version"): .integer(UserInfoInteger(2))])),
            (
                "everything",
                .dictionary([
                    .string("flag"): .bool(true), .string("ratio"): .double(0.5), .string("small"): .float(1.5),
                    .string("bytes"): .data(Data([0, 1, 2])), .string("when"): .date(moment),
                    .string("where"): .url(URL(string: "https://example.com/a?b=c")!), .string("file"): .url(URL(fileURLWithPath: "/home/a/Notes/b.txt")),
                    .string("id"): .uuid(activityID), .string("none"): .null,
                    .string("list"): .array([.integer(UserInfoInteger(width: .int8, bits: UInt64(bitPattern: -3))), .integer(UserInfoInteger(width: .uint64, bits: UInt64.max))]),
                    .string("tags"): .set([.string("a"), .string("b")]),
                    .integer(UserInfoInteger(7)): .dictionary([.string("nested"): .array([])]),
                ])
            ),
        ]
        return values.map { (name, value) in (name, Array(try! UserInfoCoding.encode(value))) }
    }

    static func infoPlists() -> [(name: String, bytes: [UInt8])] {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>
            <key>CFBundleIdentifier</key><string>com.example.editor</string>
            <key>CFBundleExecutable</key><string>Editor</string>
            <key>CFBundleName</key><string>Editor</string>
            <key>NSUserActivityTypes</key><array><string>com.example.editor.editing</string></array>
            <key>CFBundleDocumentTypes</key><array><dict>
            <key>CFBundleTypeName</key><string>Text</string>
            <key>CFBundleTypeExtensions</key><array><string>txt</string></array>
            <key>LSItemContentTypes</key><array><string>public.plain-text</string></array>
            <key>NSUbiquitousDocumentUserActivityType</key><string>com.example.editor.document</string>
            </dict></array>
            </dict></plist>
            """
        let dictionary: [String: Any] = [
            "CFBundleIdentifier": "com.example.maps", "CFBundleExecutable": "Maps",
            "NSUserActivityTypes": ["com.example.maps.viewing", "com.example.maps.editing"],
        ]
        let binary = try! PropertyListSerialization.data(fromPropertyList: dictionary, format: .binary, options: 0)
        return [("xml", Array(xml.utf8)), ("binary", Array(binary))]
    }

    static func entitlementsFiles() -> [(name: String, bytes: [UInt8])] {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>
            <key>com.apple.developer.team-identifier</key><string>EXAMPLETEAM</string>
            <key>com.apple.developer.associated-domains</key><array>
            <string>activitycontinuation:example.com</string><string>activitycontinuation:*.example.org</string>
            </array>
            </dict></plist>
            """
        let dictionary: [String: Any] = ["application-identifier": "EXAMPLETEAM.com.example.fuzz"]
        let binary = try! PropertyListSerialization.data(fromPropertyList: dictionary, format: .binary, options: 0)
        return [("xml", Array(xml.utf8)), ("binary", Array(binary))]
    }

    static func associationFiles() -> [(name: String, bytes: [UInt8])] {
        [
            ("ios9", Array(#"{"activitycontinuation":{"apps":["EXAMPLETEAM.com.example.notes"]}}"#.utf8)),
            ("ios13", Array(#"{"activitycontinuation":{"apps":["A1B2C3.com.example.a","A1B2C3.com.example.b"]},"applinks":{"details":[]}}"#.utf8)),
            (
                "components",
                Array(
                    ##"{"applinks":{"defaults":{"caseSensitive":false},"details":[{"appIDs":["A1.b"],"components":[{"/":"/a/*","exclude":true},{"/":"/b/?*","?":{"q":"*"},"#":"x*","percentsEncoded":false}]},{"appID":"C2.d","paths":["NOT /p/*","/*"]}]},"webcredentials":{"apps":["A1.b"]},"appclips":{"apps":["A1.b.Clip"]},"activitycontinuation":{"apps":["A1.b"]}}"##
                        .utf8)
            ),
        ]
    }

    static func buildSettings() -> [(name: String, bytes: [UInt8])] {
        [
            (
                "project",
                Array(
                    """
                    // Notes.xcconfig
                    PRODUCT_NAME = Notes App
                    PRODUCT_BUNDLE_IDENTIFIER = com.example.$(PRODUCT_NAME:lower:rfc1034identifier)
                    OTHER_FLAGS = $(inherited) -x ;
                    SUFFIX[config=Debug] = .debug
                    ID = ${PRODUCT_BUNDLE_IDENTIFIER}$(SUFFIX:default=)
                    WEBSITE = https:/$()/example.com
                    DEVELOPMENT_TEAM = ABCDE12345
                    APP_ID = $(AppIdentifierPrefix)$(PRODUCT_BUNDLE_IDENTIFIER)
                    """.utf8)
            ),
            ("plist-string", Array("$(PRODUCT_BUNDLE_IDENTIFIER).editing".utf8)),
        ]
    }

    static func configFiles() -> [(name: String, bytes: [UInt8])] {
        let text = """
            # handoffd
            name = laptop
            listen = 127.0.0.1:40001
            interface = lo
            peer = 10.0.0.2:40001
            peer = [fd00::2]:40001
            container = notes=/home/a/Notes
            save-deadline = 250ms
            maximum-payload = 4096
            dns-sd = on
            notifications = off

            """
        return [("full", Array(text.utf8))]
    }

    static func clipboardFiles() -> [(name: String, bytes: [UInt8])] {
        let manifest = ClipboardFiles.Manifest(entries: [
            ClipboardFiles.Entry(name: "notes.txt", size: 13, container: "documents", path: "Work/notes.txt"),
            ClipboardFiles.Entry(name: "photo.png", size: 300_000),
            ClipboardFiles.Entry(container: "documents", path: "Album"),
            ClipboardFiles.Entry(uri: "https://example.com/page"),
        ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return [
            ("manifest", Array(try! encoder.encode(manifest))),
            ("uri-list", Array("# copied\r\nfile:///home/me/Documents/notes.txt\r\nfile:///tmp/photo%20one.png\r\n".utf8)),
            ("gnome-copied-files", Array("copy\nfile:///home/me/Documents/notes.txt\nfile:///tmp/photo.png".utf8)),
        ]
    }

    static func desktopFiles() -> [(name: String, bytes: [UInt8])] {
        let xbel = """
            <?xml version="1.0" encoding="UTF-8"?>
            <xbel version="1.0"
                  xmlns:bookmark="http://www.freedesktop.org/standards/desktop-bookmarks"
                  xmlns:mime="http://www.freedesktop.org/standards/shared-mime-info"
            >
              <bookmark href="file:///home/me/Sync/plan%20one.txt" added="2026-11-28T13:07:51.589536Z" modified="2026-11-28T13:07:51.589542Z" visited="2026-11-28T13:07:51.589537Z">
                <title>plan one.txt</title>
                <info>
                  <metadata owner="http://freedesktop.org">
                    <mime:mime-type type="text/plain"/>
                    <bookmark:applications>
                      <bookmark:application name="Notes" exec="&apos;notes %u&apos;" modified="2026-11-28T13:07:51.589539Z" count="1"/>
                    </bookmark:applications>
                  </metadata>
                </info>
              </bookmark>
            </xbel>
            """
        return [
            ("recently-used.xbel", Array(xbel.utf8)),
            ("desktop-entry", Array("[Desktop Entry]\nType=Application\nName=Text Editor\nExec=env A=1 \"/opt/My App/run\" --file=%f %U %i %c %%\nIcon=editor\nMimeType=text/plain;\n".utf8)),
            ("kde-link", Array("[Desktop Entry]\nType=Link\nURL[$e]=file:///home/me/Sync/report.pdf\nX-KDE-LastOpenedWith=okular\n".utf8)),
        ]
    }
}

extension FuzzSeeds {
    /// A player's `GetAll` answer as mpv-mpris gives it, a tray's `GetLayout` answer, and a
    /// signal of the bus.
    static func dbusMessages() -> [(name: String, bytes: [UInt8])] {
        var getAll = DBusMessage(kind: .methodReturn, destination: ":1.7", body: [.dictionary([
            "PlaybackStatus": .string("Playing"), "Position": .int64(42_249_755), "Rate": .double(1), "CanSeek": .boolean(true),
            "Metadata": .dictionary([
                "xesam:url": .string("file:///home/me/Sync/song%20one.wav"), "mpris:trackid": .objectPath("/0"), "xesam:title": .string("song one.wav"),
                "xesam:artist": .strings(["Ann"]), "mpris:length": .int64(120_000_000),
            ]),
        ])])
        getAll.replySerial = 4
        getAll.sender = ":1.3"
        var layout = DBusMessage(kind: .methodReturn, destination: ":1.9", body: [
            .uint32(3),
            .structure([.int32(0), .dictionary(["children-display": .string("submenu")]), .array(element: "v", [
                .variant(.structure([.int32(1), .dictionary(["label": .string("alpha: plan.txt"), "enabled": .boolean(true)]), .array(element: "v", [])])),
            ])]),
        ])
        layout.replySerial = 9
        var changed = DBusMessage(kind: .signal, path: "/org/mpris/MediaPlayer2", interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged", body: [
            .string("org.mpris.MediaPlayer2.Player"), .dictionary(["PlaybackStatus": .string("Paused")]), .strings(["Metadata"]),
        ])
        changed.sender = ":1.3"
        changed.serial = 12
        return [("mpris-get-all", getAll.encoded()), ("dbusmenu-layout", layout.encoded()), ("properties-changed", changed.encoded())]
    }
}

/// Inputs made from a corpus by the mutations a fuzzer starts with: bit flips, byte changes,
/// cuts, repeats, insertions and splices, from a seeded generator so that a run is repeatable.
public struct FuzzMutator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed &+ 0x9E37_79B9_7F4A_7C15 }

    public mutating func next() -> UInt64 {
        // SplitMix64.
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func below(_ bound: Int) -> Int { bound <= 0 ? 0 : Int(next() % UInt64(bound)) }

    /// One mutation of `input`, sometimes splicing in part of `other`.
    public mutating func mutate(_ input: [UInt8], other: [UInt8]) -> [UInt8] {
        var bytes = input
        for _ in 0...below(3) {
            switch below(8) {
            case 0 where !bytes.isEmpty:
                bytes[below(bytes.count)] ^= UInt8(1 << below(8))
            case 1 where !bytes.isEmpty:
                bytes[below(bytes.count)] = [0, 0xFF, 0x7F, 0x80, UInt8(truncatingIfNeeded: next())][below(5)]
            case 2 where !bytes.isEmpty:
                bytes.removeSubrange(below(bytes.count)...)
            case 3 where !bytes.isEmpty:
                let start = below(bytes.count)
                let end = start + below(bytes.count - start) + 1
                bytes.removeSubrange(start..<end)
            case 4 where !bytes.isEmpty:
                let start = below(bytes.count)
                let piece = bytes[start..<min(bytes.count, start + 1 + below(16))]
                bytes.insert(contentsOf: Array(repeating: piece, count: 1 + below(8)).joined(), at: below(bytes.count + 1))
            case 5:
                bytes.insert(contentsOf: (0..<(1 + below(8))).map { _ in UInt8(truncatingIfNeeded: next()) }, at: below(bytes.count + 1))
            case 6 where !other.isEmpty:
                let start = below(other.count)
                bytes.replaceSubrange(below(bytes.count + 1)..<bytes.count, with: other[start...])
            default:
                // Numbers at a random place: a length or count field set huge or zero.
                if bytes.count >= 4 {
                    let at = below(bytes.count - 3)
                    let value: [UInt8] = [[0xFF, 0xFF, 0xFF, 0xFF], [0, 0, 0, 0], [0x7F, 0xFF, 0xFF, 0xFF], [0, 0x10, 0, 0]][below(4)]
                    bytes.replaceSubrange(at..<(at + 4), with: value)
                }
            }
        }
        return bytes
    }
}
