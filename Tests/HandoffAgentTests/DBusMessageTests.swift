import Foundation
import HandoffCore
import HandoffDesktop
import HandoffSession
import Testing

@Suite("D-Bus messages: written and read as the specification says, and what a peer sends never crashes the reader")
struct DBusMessageTests {
    /// A method call with a value of every type, nested as MPRIS and the tray protocol nest them.
    static let everything: [DBusValue] = [
        .byte(7), .boolean(true), .int16(-2), .uint16(3), .int32(-40), .uint32(50), .int64(-42_000_000), .uint64(1 << 40), .double(0.25),
        .string("héllo"), .objectPath("/org/mpris/MediaPlayer2"), .signature("a{sv}"), .unixFD(0),
        .dictionary(["xesam:artist": .strings(["A", "B"]), "mpris:length": .int64(120_000_000), "xesam:url": .string("file:///x.wav")]),
        .structure([.int32(0), .dictionary([:]), .array(element: "v", [.variant(.structure([.int32(1), .emptyDictionary, .array(element: "v", [])]))])]),
        .array(element: "(ia{sv}av)", []),
        .variant(.variant(.uint32(9))),
    ]

    @Test("A message with a value of every type reads back as it was written")
    func roundTrip() throws {
        var message = DBusMessage(kind: .methodCall, path: "/a/b", interface: "org.example.I", member: "M", destination: "org.example", body: Self.everything)
        message.serial = 77
        message.sender = ":1.5"
        let read = try DBusMessage.decode(message.encoded())
        #expect(read.body == Self.everything)
        #expect(read.serial == 77)
        #expect(read.path == "/a/b")
        #expect(read.interface == "org.example.I")
        #expect(read.member == "M")
        #expect(read.destination == "org.example")
        #expect(read.sender == ":1.5")
        #expect(read.body.map(\.signature).joined() == "ybnqiuxtdsogha{sv}(ia{sv}av)a(ia{sv}av)v")
    }

    @Test("Every value is aligned as the specification says: an int64 after a byte starts at 8, an empty array of structures still pads to 8")
    func alignment() throws {
        let bytes = DBusMessage(kind: .signal, path: "/", interface: "a.b", member: "C", body: [.byte(1), .int64(-1), .array(element: "(ii)", []), .byte(2)]).encoded()
        let header = bytes.count - 25
        // byte, 7 of padding, 8 of int64, the array's length (4) and 4 of padding to 8, the byte.
        #expect(Array(bytes[header...]) == [1, 0, 0, 0, 0, 0, 0, 0] + Array(repeating: 255, count: 8) + [0, 0, 0, 0, 0, 0, 0, 0] + [2])
    }

    @Test("A message in big-endian byte order (a sender's choice, which the bus passes on) is read as well as a little-endian one")
    func bigEndian() throws {
        var bytes: [UInt8] = []
        func align(_ n: Int) { while bytes.count % n != 0 { bytes.append(0) } }
        func u32(_ v: UInt32) { align(4); bytes += [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        func text(_ v: String) { u32(UInt32(v.utf8.count)); bytes += Array(v.utf8) + [0] }
        func signature(_ v: String) { bytes += [UInt8(v.utf8.count)] + Array(v.utf8) + [0] }
        let body: [UInt8] = [0, 0, 0, 7, 0, 0, 0, 2, UInt8(ascii: "h"), UInt8(ascii: "i"), 0]
        bytes = [UInt8(ascii: "B"), 4, 0, 1]
        u32(UInt32(body.count))
        u32(9)
        u32(0)
        let fieldsStart = bytes.count
        for (code, type, value) in [(UInt8(1), "o", "/a"), (2, "s", "a.b"), (3, "s", "C"), (8, "g", "us")] {
            align(8)
            bytes.append(code)
            signature(type)
            if type == "g" { signature(value) } else { text(value) }
        }
        let fieldsLength = UInt32(bytes.count - fieldsStart)
        bytes.replaceSubrange(12..<16, with: [UInt8(fieldsLength >> 24), UInt8(fieldsLength >> 16 & 0xFF), UInt8(fieldsLength >> 8 & 0xFF), UInt8(fieldsLength & 0xFF)])
        align(8)
        bytes += body
        let message = try DBusMessage.decode(bytes)
        #expect(message.serial == 9)
        #expect(message.path == "/a" && message.interface == "a.b" && message.member == "C")
        #expect(message.body == [.uint32(7), .string("hi")])
    }

    @Test("What is written is always a valid message: a NUL in a string (a title from another device) is dropped, an object path that is not one is written as /")
    func writtenValid() throws {
        let message = DBusMessage(kind: .signal, path: "/p", interface: "a.b", member: "C", body: [.string("a\u{0}b"), .objectPath("not a path")])
        let read = try DBusMessage.decode(message.encoded())
        #expect(read.body == [.string("ab"), .objectPath("/")])
        #expect(DBusValue.isObjectPath("/org/mpris/MediaPlayer2") && DBusValue.isObjectPath("/") && !DBusValue.isObjectPath("/a//b") && !DBusValue.isObjectPath("/a-b"))
    }

    @Test("A metadata dictionary of 10,000 entries is read whole")
    func tenThousandEntries() throws {
        var entries: [String: DBusValue] = [:]
        for index in 0..<10_000 { entries["x-test:key\(index)"] = .string("value \(index)") }
        entries["xesam:title"] = .string("Song")
        let message = DBusMessage(kind: .methodReturn, body: [.variant(.dictionary(entries))])
        let read = try DBusMessage.decode(message.encoded())
        let dictionary = try #require(read.body.first?.dictionary)
        #expect(dictionary.count == 10_001)
        #expect(MediaMetadata(dictionary).title == "Song")
    }

    @Test("Every truncation of a valid message, and every single flipped byte, is refused with an error or read: never a crash")
    func truncatedAndFlipped() {
        let bytes = DBusMessage(kind: .methodCall, path: "/p", interface: "i.j", member: "M", body: Self.everything).encoded()
        for length in 0..<bytes.count {
            #expect(throws: DBusError.self) { try DBusMessage.decode(Array(bytes.prefix(length))) }
        }
        for index in 0..<bytes.count {
            for value: UInt8 in [0, 0x7F, 0xFF] {
                var flipped = bytes
                flipped[index] = value
                _ = try? DBusMessage.decode(flipped)
            }
        }
    }

    @Test("What the specification forbids is refused, saying what: a boolean of 2, an array past its message, variants 100 deep, arrays nested 33 deep, a signature that does not close")
    func forbidden() throws {
        func body(_ signature: String, _ bytes: [UInt8]) -> [UInt8] { Self.raw(signature: signature, body: bytes) }
        #expect(throws: DBusError.self) { try DBusMessage.decode(body("b", [2, 0, 0, 0])) }
        #expect(throws: DBusError.self) { try DBusMessage.decode(body("ay", [0xFF, 0xFF, 0, 0, 1])) }
        var deep: [UInt8] = []
        for _ in 0..<100 { deep += [1, UInt8(ascii: "v"), 0] }
        deep += [1, UInt8(ascii: "y"), 0, 7]
        let error = #expect(throws: DBusError.self) { try DBusMessage.decode(body("v", deep)) }
        #expect(error?.message.contains("deeper") == true)
        #expect(throws: DBusError.self) { try DBusMessage.decode(body(String(repeating: "a", count: 33) + "y", [0, 0, 0, 0])) }
        #expect(throws: DBusError.self) { try DBusMessage.decode(body("(ii", [0, 0, 0, 0, 0, 0, 0, 0])) }
        #expect(throws: DBusError.self) { try DBusMessage.decode(body("a{vs}", [0, 0, 0, 0])) }
    }

    /// A signal whose header names `signature`, followed by `body` as given.
    static func raw(signature: String, body: [UInt8]) -> [UInt8] {
        var message = DBusMessage(kind: .signal, path: "/", interface: "a.b", member: "C")
        message.serial = 1
        var bytes = message.encoded()
        // The header's fields, and after them the signature field (8, 'g'), written by hand.
        var fieldsEnd = 16 + Int(UInt32(bytes[12]) | UInt32(bytes[13]) << 8 | UInt32(bytes[14]) << 16 | UInt32(bytes[15]) << 24)
        while fieldsEnd % 8 != 0 { fieldsEnd += 1 }
        var fields = Array(bytes[16..<fieldsEnd])
        while fields.count % 8 != 0 { fields.append(0) }
        let field: [UInt8] = [8, 1, UInt8(ascii: "g"), 0, UInt8(signature.utf8.count)] + Array(signature.utf8) + [0]
        let fieldsLength = UInt32(fields.count + field.count)
        bytes = Array(bytes[0..<12]) + withUnsafeBytes(of: fieldsLength.littleEndian, Array.init) + fields + field
        while bytes.count % 8 != 0 { bytes.append(0) }
        let bodyLength = UInt32(body.count)
        bytes.replaceSubrange(4..<8, with: withUnsafeBytes(of: bodyLength.littleEndian, Array.init))
        return bytes + body
    }
}

@Suite("MPRIS: what a player's metadata says, and which items can travel")
struct MPRISTests {
    @Test("Metadata is read leniently: an artist given as a string or a list, a key of the wrong type as if absent; the title shown is 'Title — Artist', else the file's name")
    func metadata() {
        let full = MediaMetadata([
            "mpris:trackid": .objectPath("/0"), "xesam:url": .string("file:///m/song%20one.wav"), "xesam:title": .string("Song"),
            "xesam:artist": .strings(["Ann", "Bo"]), "mpris:length": .int64(120_000_000),
        ])
        #expect(full.trackID == "/0")
        #expect(full.url?.path == "/m/song one.wav")
        #expect(full.length == 120_000_000)
        #expect(full.displayTitle == "Song — Ann, Bo")
        let odd = MediaMetadata(["xesam:artist": .string("Solo"), "xesam:title": .int32(5), "xesam:url": .string("file:///m/a.ogg"), "mpris:length": .string("long")])
        #expect(odd.artists == ["Solo"])
        #expect(odd.title == nil)
        #expect(odd.length == nil)
        #expect(odd.displayTitle == "a.ogg — Solo")
    }

    @Test("An item travels when it is a file inside a synced container or an http(s) address; not a file outside (also through a symlink out), no URL, another scheme, or a browser's")
    func travel() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("travel-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let synced = root.appendingPathComponent("sync")
        try FileManager.default.createDirectory(at: synced, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: synced.appendingPathComponent("out"), withDestinationURL: URL(fileURLWithPath: "/etc"))
        func decide(_ url: String?, player: String = "org.mpris.MediaPlayer2.vlc") -> MediaTravel {
            var metadata = MediaMetadata()
            metadata.url = url.flatMap(URL.init(string:))
            return MediaTravel.decide(metadata, player: player, containers: [synced])
        }
        #expect(decide(synced.appendingPathComponent("a.ogg").absoluteString) == .travels(synced.appendingPathComponent("a.ogg")))
        #expect(decide("https://radio.example/stream") == .travels(URL(string: "https://radio.example/stream")!))
        guard case .stays(let outside) = decide("file:///home/me/a.ogg") else { Issue.record("a file outside travelled"); return }
        #expect(outside.contains("outside every synced container"))
        guard case .stays = decide(synced.appendingPathComponent("out/passwd").absoluteString) else { Issue.record("a symlink out travelled"); return }
        guard case .stays(let none) = decide(nil) else { Issue.record("no URL travelled"); return }
        #expect(none.contains("gives no URL"))
        guard case .stays = decide("cdda://1") else { Issue.record("a CD track travelled"); return }
        guard case .stays(let browser) = decide("https://video.example/v", player: "org.mpris.MediaPlayer2.firefox.instance_1_7") else {
            Issue.record("a browser's media travelled")
            return
        }
        #expect(browser.contains("browser extension"))
    }

    @Test("A media activity's userInfo reads back; one without a url, with a negative or infinite position, or a title of the wrong type is refused saying which")
    func userInfo() throws {
        let media = MediaActivity(
            url: URL(string: "https://radio.example/s")!, title: "Song", artists: ["Ann"], album: nil, position: 42.5, length: 120, desktopEntry: "mpv", player: "mpv", playing: true)
        #expect(try MediaActivity(userInfo: media.userInfo) == media)
        let decoded = try MediaActivity(userInfo: try UserInfoCoding.decode(try UserInfoCoding.encode(media.userInfo)))
        #expect(decoded == media)
        func refused(_ entries: [UserInfoValue: UserInfoValue]) -> String? {
            do {
                _ = try MediaActivity(userInfo: .dictionary(entries))
                return nil
            } catch {
                return error.description
            }
        }
        let url: [UserInfoValue: UserInfoValue] = [.string("url"): .url(URL(string: "https://a.example")!)]
        #expect(refused([.string("position"): .double(1)])?.contains("no 'url'") == true)
        #expect(refused(url.merging([.string("position"): .double(-1)]) { $1 })?.contains("position") == true)
        #expect(refused(url.merging([.string("position"): .double(.infinity)]) { $1 })?.contains("position") == true)
        #expect(refused(url.merging([.string("position"): .double(1), .string("title"): .integer(UserInfoInteger(3))]) { $1 })?.contains("'title'") == true)
    }

    @Test("The desktop's MIME type of a file comes from shared-mime-info's globs2: the highest weight, then the longest pattern; case-sensitive patterns only match their case")
    func mimeTypes() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("mime-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root.appendingPathComponent("mime"), withIntermediateDirectories: true)
        try Data("# generated\n50:audio/x-wav:*.wav\n50:audio/x-vorbis+ogg:*.ogg\n60:audio/x-special:*.tar.ogg\n50:text/x-c:*.C:cs\n10:text/x-bad:*.*wav\n".utf8)
            .write(to: root.appendingPathComponent("mime/globs2"))
        let applications = DesktopApplications(environment: ["HOME": root.path, "XDG_DATA_HOME": root.path, "XDG_DATA_DIRS": "/nonexistent"])
        #expect(applications.mimeType(forFileNamed: "song one.WAV") == "audio/x-wav")
        #expect(applications.mimeType(forFileNamed: "a.tar.ogg") == "audio/x-special")
        #expect(applications.mimeType(forFileNamed: "b.ogg") == "audio/x-vorbis+ogg")
        #expect(applications.mimeType(forFileNamed: "main.C") == "text/x-c")
        #expect(applications.mimeType(forFileNamed: "main.c") == nil)
        #expect(applications.mimeType(forFileNamed: "notes") == nil)
    }

    @Test("A desktop entry that takes files (%f, %F, or no code) does not get a web address: it is refused, not turned into a path")
    func filesOnlyEntry() throws {
        for exec in ["player %f", "player %F", "player"] {
            let entry = try DesktopEntry(id: "player.desktop", keyFile: KeyFile(text: "[Desktop Entry]\nType=Application\nName=P\nExec=\(exec)\n"))
            #expect(throws: KeyFile.ParseError.self) { try entry.command(opening: [URL(string: "https://radio.example/s")!]) }
            #expect(try entry.command(opening: [URL(fileURLWithPath: "/m/a b.ogg")]) == ["player", "/m/a b.ogg"])
        }
        let urls = try DesktopEntry(id: "player.desktop", keyFile: KeyFile(text: "[Desktop Entry]\nType=Application\nName=P\nExec=player %U\n"))
        #expect(try urls.command(opening: [URL(string: "https://radio.example/s")!]) == ["player", "https://radio.example/s"])
    }
}
