import Foundation
import HandoffProcess
import HandoffSession
import Testing

@Suite("Desktop entries and the recently-used list, as a desktop reads them")
struct SessionDocumentsTests {
    @Test("S15: A desktop ID another device sends never names a file outside the applications folders: dashes that would make '..' (a planted entry in a synced folder), a hidden or an empty part are not IDs")
    func desktopIDsStayInside() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ids-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: root) }
        let applications = root.appendingPathComponent("data/applications")
        let synced = root.appendingPathComponent("Sync")
        for folder in [applications, synced, applications.appendingPathComponent("kde")] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        let entry = "[Desktop Entry]\nType=Application\nName=Planted\nExec=sh -c 'touch /tmp/planted' %u\n"
        try Data(entry.utf8).write(to: synced.appendingPathComponent("x.desktop"))
        try Data(entry.utf8).write(to: applications.appendingPathComponent("kde/kate.desktop"))
        let desktop = DesktopApplications(environment: ["HOME": root.path, "XDG_DATA_HOME": root.appendingPathComponent("data").path, "XDG_DATA_DIRS": "/nonexistent"])
        for id in ["-..-..-Sync-x.desktop", "..-..-Sync-x.desktop", "kde-..-..-..-Sync-x.desktop", "a--b.desktop", "kde-.kate.desktop", "-kate.desktop"] {
            #expect(desktop.entry(id: id) == nil, "\(id) named a file")
        }
        // A real subfolder ID still works.
        #expect(desktop.entry(id: "kde-kate.desktop")?.name == "Planted")
    }

    static func entry(_ text: String, id: String = "test.desktop") throws -> DesktopEntry {
        try DesktopEntry(id: id, keyFile: KeyFile(text: text), location: "/usr/share/applications/\(id)")
    }

    @Test("A key file is read as the specification says: groups, comments, string escapes; what is not one is refused with the line")
    func keyFiles() throws {
        let file = try KeyFile(text: "# a comment\n[Desktop Entry]\nType=Application\nName=Text\\sEditor\nName[de]=Texteditor\nExec = gedit %U\nName=second\n\n[Desktop Action new]\nExec=gedit --new\n")
        #expect(file.string("Name") == "Text Editor")
        #expect(file.value("Name[de]") == "Texteditor")
        #expect(file.value("Exec") == "gedit %U")
        #expect(file.value("Exec", in: "Desktop Action new") == "gedit --new")
        for bad in ["Name=before a group\n", "[Desktop Entry]\njust words\n", "[A]\n[A]\n", "[Desktop Entry\nName=x\n"] {
            #expect(throws: KeyFile.ParseError.self) { try KeyFile(text: bad) }
        }
        #expect(throws: KeyFile.ParseError.self) { try KeyFile(text: "[Desktop Entry]\n" + String(repeating: "X=y\n", count: 300_000)) }
    }

    @Test("Exec expands as the specification says: files as arguments of their own for %f %F %u %U, %i %c %k %%, quoted arguments kept whole, files appended where there is no code")
    func execExpands() throws {
        let one = URL(fileURLWithPath: "/home/me/Sync/Notes/plan one.txt")
        let two = URL(fileURLWithPath: "/home/me/Sync/b.txt")
        let gedit = try Self.entry("[Desktop Entry]\nType=Application\nName=Text Editor\nExec=gedit %U\nIcon=accessories-text-editor\n")
        #expect(try gedit.command(opening: [one, two]) == ["gedit", one.absoluteString, two.absoluteString])
        #expect(gedit.program == "gedit")
        let files = try Self.entry("[Desktop Entry]\nType=Application\nName=Files\nExec=app --open %F --title %c %i\nIcon=app\n")
        #expect(try files.command(opening: [one, two]) == ["app", "--open", one.path, two.path, "--title", "Files", "--icon", "app"])
        let inline = try Self.entry("[Desktop Entry]\nType=Application\nName=X\nExec=env GDK_BACKEND=x11 \"/opt/My App/run\" --file=%f --at=100%% --from=%k\n")
        #expect(try inline.command(opening: [one]) == ["env", "GDK_BACKEND=x11", "/opt/My App/run", "--file=\(one.path)", "--at=100%", "--from=/usr/share/applications/test.desktop"])
        let bare = try Self.entry("[Desktop Entry]\nType=Application\nName=Mousepad\nExec=mousepad\n")
        #expect(try bare.command(opening: [one]) == ["mousepad", one.path])
        let deprecated = try Self.entry("[Desktop Entry]\nType=Application\nName=Old\nExec=old %d %f %m\n")
        #expect(try deprecated.command(opening: [one]) == ["old", one.path])
        let escaped = try Self.entry("[Desktop Entry]\nType=Application\nName=Q\nExec=run \"a \\\\\"quoted\\\\\" \\\\$HOME\"\n")
        #expect(try escaped.command(opening: []) == ["run", "a \"quoted\" $HOME"])
    }

    @Test("A field code in a quoted argument (sh -c \"open %f\"), an unknown or misplaced code, a quote that does not close: refused; an entry without Type=Application, Name or Exec is not one")
    func execRefusals() throws {
        let file = URL(fileURLWithPath: "/tmp/a.txt")
        for exec in ["sh -c \"xdg-open %f\"", "app %z", "app --files=%F", "app \"unclosed", "app %", "%f"] {
            let entry = try Self.entry("[Desktop Entry]\nType=Application\nName=Bad\nExec=\(exec)\n")
            #expect(throws: KeyFile.ParseError.self, "\(exec)") { try entry.command(opening: [file]) }
        }
        for text in ["[Desktop Entry]\nType=Link\nName=x\nURL=file:///tmp\n", "[Desktop Entry]\nType=Application\nExec=x\n", "[Desktop Entry]\nType=Application\nName=x\n", "[Other]\nType=Application\n"] {
            #expect(throws: KeyFile.ParseError.self) { try DesktopEntry(id: "x.desktop", keyFile: KeyFile(text: text)) }
        }
        let dbus = try Self.entry("[Desktop Entry]\nType=Application\nName=Viewer\nDBusActivatable=true\n")
        #expect(dbus.dbusActivatable)
        #expect(throws: KeyFile.ParseError.self) { try dbus.command(opening: [file]) }
    }

    @Test("A file named to run a command is one argument and runs nothing: the program gets it as a name")
    func namesRunNothing() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("exec-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let marker = folder.appendingPathComponent("ran")
        let hostile = folder.appendingPathComponent("x; touch \(marker.path) `touch \(marker.path)` $(touch \(marker.path)) ' \" .txt")
        let echo = try Self.entry("[Desktop Entry]\nType=Application\nName=Echo\nExec=/bin/echo %f\n")
        let argv = try echo.command(opening: [hostile])
        #expect(argv == ["/bin/echo", hostile.path])
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: argv[0])
        process.arguments = Array(argv.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(String(decoding: printed, as: UTF8.self) == hostile.path + "\n")
        #expect(!FileManager.default.fileExists(atPath: marker.path))
    }

    static let gtkList = """
        <?xml version="1.0" encoding="UTF-8"?>
        <xbel version="1.0"
              xmlns:bookmark="http://www.freedesktop.org/standards/desktop-bookmarks"
              xmlns:mime="http://www.freedesktop.org/standards/shared-mime-info"
        >
          <bookmark href="file:///home/me/Sync/old.odt" added="2026-11-01T09:00:00Z" modified="2026-11-01T09:00:00Z" visited="2026-11-01T09:00:00Z">
            <info>
              <metadata owner="http://freedesktop.org">
                <mime:mime-type type="application/vnd.oasis.opendocument.text"/>
                <bookmark:applications>
                  <bookmark:application name="LibreOffice" exec="&apos;soffice %u&apos;" modified="2026-11-01T09:00:00Z" count="1"/>
                </bookmark:applications>
              </metadata>
            </info>
          </bookmark>
          <bookmark href="file:///home/me/Sync/Notes/plan%20one.txt" added="2026-11-20T10:00:00.123456Z" modified="2026-11-20T10:00:00.123456Z" visited="2026-11-20T10:00:00.123456Z">
            <info>
              <metadata owner="http://freedesktop.org">
                <mime:mime-type type="text/plain"/>
                <bookmark:applications>
                  <bookmark:application name="gedit" exec="&apos;gedit %u&apos;" modified="2026-11-20T10:00:00Z" count="2"/>
                  <bookmark:application name="Text Editor" exec="&apos;gnome-text-editor %u&apos;" modified="2026-11-27T18:30:00.5Z" count="1"/>
                </bookmark:applications>
              </metadata>
            </info>
          </bookmark>
          <bookmark href="https://example.com/page" added="2026-11-28T08:00:00Z" modified="2026-11-28T08:00:00Z" visited="2026-11-28T08:00:00Z"/>
          <bookmark href="file:///tmp/scratch.txt" added="2026-11-26T08:00:00Z" modified="2026-11-26T08:00:00Z" visited="2026-11-26T08:00:00Z"/>
        </xbel>
        """

    @Test("GTK's recently-used list is read as GLib writes it: each document with its type, its last use and the application that used it last")
    func xbel() throws {
        let documents = try RecentlyUsed.documents(xbel: Data(Self.gtkList.utf8))
        #expect(documents.map(\.url.absoluteString) == [
            "https://example.com/page", "file:///home/me/Sync/Notes/plan%20one.txt", "file:///tmp/scratch.txt", "file:///home/me/Sync/old.odt",
        ])
        let plan = documents[1]
        #expect(plan.url.path == "/home/me/Sync/Notes/plan one.txt")
        #expect(plan.mimeType == "text/plain")
        #expect(plan.application == RecentApplication(name: "Text Editor", exec: "'gnome-text-editor %u'"))
        #expect(plan.application?.program == "gnome-text-editor")
        #expect(plan.used == Date(timeIntervalSince1970: 1_795_804_200.5))
        // Only a file inside a synced container is ever offered: the newest such.
        let newest = RecentlyUsed.newest(documents, inside: [URL(fileURLWithPath: "/home/me/Sync")])
        #expect(newest?.url.path == "/home/me/Sync/Notes/plan one.txt")
        #expect(RecentlyUsed.newest(documents, inside: [URL(fileURLWithPath: "/home/me/Sync/Notes/plan one.txt")]) == nil)
        #expect(RecentlyUsed.newest(documents, inside: []) == nil)
    }

    @Test("A recently-used list that is not XML, not XBEL, over 16 MiB, or an entity bomb is refused or read in bounded time, never crashing")
    func badLists() throws {
        for bad in ["not xml at all", "<html><body/></html>", "<xbel><bookmark href=\"file:///a\"></xbel>", ""] {
            #expect(throws: RecentlyUsed.ReadError.self, "\(bad)") { try RecentlyUsed.documents(xbel: Data(bad.utf8)) }
        }
        var huge = Data(Self.gtkList.utf8)
        huge.append(Data(repeating: 0x20, count: 17 << 20))
        #expect(throws: RecentlyUsed.ReadError.self) { try RecentlyUsed.documents(xbel: huge) }
        // Entities that would expand to 10^9 bytes.
        var bomb = "<?xml version=\"1.0\"?>\n<!DOCTYPE xbel [\n<!ENTITY a0 \"aaaaaaaaaa\">\n"
        for level in 1...9 { bomb += "<!ENTITY a\(level) \"" + String(repeating: "&a\(level - 1);", count: 10) + "\">\n" }
        bomb += "]>\n<xbel version=\"1.0\"><bookmark href=\"file:///&a9;\"/></xbel>"
        let started = ContinuousClock.now
        let read = try? RecentlyUsed.documents(xbel: Data(bomb.utf8))
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect((read ?? []).allSatisfy { $0.url.absoluteString.utf8.count < 1 << 20 })
        // Another encoding than GLib's UTF-8 is refused before the XML parser sees it: one
        // declaring UTF-7 crashed FoundationXML's (found by the desktop-files fuzz target).
        let utf7 = Self.gtkList.replacingOccurrences(of: "encoding=\"UTF-8\"", with: "encoding=\"UTF-7\"")
        #expect(throws: RecentlyUsed.ReadError.self) { try RecentlyUsed.documents(xbel: Data(utf7.utf8)) }
        #expect(throws: RecentlyUsed.ReadError.self) { try RecentlyUsed.documents(xbel: Data("<?xml version=\"1.0\" encoding=\"UTF-7\"?>\n<xbel version=\"1.0\"/>".utf8)) }
        var utf16 = Data([0xFF, 0xFE])
        utf16.append(Self.gtkList.data(using: .utf16LittleEndian)!)
        #expect(throws: RecentlyUsed.ReadError.self) { try RecentlyUsed.documents(xbel: utf16) }
        // With a UTF-8 byte-order mark, or no declaration, the list reads the same.
        let bom = Data([0xEF, 0xBB, 0xBF]) + Data(Self.gtkList.utf8)
        #expect(try RecentlyUsed.documents(xbel: bom).count == 4)
        let bare = String(Self.gtkList[Self.gtkList.range(of: "?>")!.upperBound...])
        #expect(try RecentlyUsed.documents(xbel: Data(bare.utf8)).count == 4)
        // Bookmarks without a usable href are skipped; the rest is read.
        let partial = "<xbel version=\"1.0\"><bookmark href=\"\"/><bookmark/><bookmark href=\"file:///home/me/a.txt\" visited=\"2026-11-20T10:00:00Z\"/></xbel>"
        #expect(try RecentlyUsed.documents(xbel: Data(partial.utf8)).map(\.url.path) == ["/home/me/a.txt"])
    }

    @Test("KDE's older list of links is read too: the URL and the application that opened it, newest first; what is not a link is skipped")
    func kdeLinks() {
        let documents = RecentlyUsed.documents(kdeLinks: [
            ("[Desktop Entry]\nType=Link\nURL[$e]=file:///home/me/Sync/report.pdf\nX-KDE-LastOpenedWith=okular\nName=report.pdf\n", Date(timeIntervalSince1970: 200)),
            ("[Desktop Entry]\nType=Link\nURL=file:///home/me/Sync/a.txt\nX-KDE-LastOpenedWith=kate\n", Date(timeIntervalSince1970: 300)),
            ("[Desktop Entry]\nType=Application\nName=x\nExec=x\n", Date(timeIntervalSince1970: 400)),
            ("not a key file", Date(timeIntervalSince1970: 500)),
        ])
        #expect(documents.map(\.url.path) == ["/home/me/Sync/a.txt", "/home/me/Sync/report.pdf"])
        #expect(documents.map { $0.application?.name } == ["kate", "okular"])
    }

    /// A desktop's folders of a test's own: applications in the system's and the user's data
    /// folders, and mimeapps.list files in the user's configuration and the system's data.
    static func desktop(_ root: URL) throws -> DesktopApplications {
        func write(_ path: String, _ text: String) throws {
            let file = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: file)
        }
        try write("usr/share/applications/org.gnome.TextEditor.desktop", "[Desktop Entry]\nType=Application\nName=Text Editor\nExec=gnome-text-editor %U\nMimeType=text/plain;\n")
        try write("usr/share/applications/org.kde.kate.desktop", "[Desktop Entry]\nType=Application\nName=Kate\nExec=kate -b %U\nMimeType=text/plain;text/x-c;\n")
        try write("usr/share/applications/kde/okular.desktop", "[Desktop Entry]\nType=Application\nName=Okular\nExec=okular %U\nMimeType=application/pdf;\n")
        try write("usr/share/applications/libreoffice-writer.desktop", "[Desktop Entry]\nType=Application\nName=LibreOffice Writer\nExec=libreoffice --writer %U\nMimeType=application/vnd.oasis.opendocument.text;\n")
        try write("usr/share/applications/vim.desktop", "[Desktop Entry]\nType=Application\nName=Vim\nExec=vim %F\nMimeType=text/plain;\n")
        // The user hides the system's Vim, and sets Kate as the default for text, GNOME aside.
        try write("home/.local/share/applications/vim.desktop", "[Desktop Entry]\nType=Application\nName=Vim\nExec=vim %F\nHidden=true\n")
        try write("home/.config/mimeapps.list", "[Default Applications]\ntext/plain=missing.desktop;org.kde.kate.desktop;\n[Removed Associations]\napplication/pdf=kde-okular.desktop;\n")
        try write("home/.config/gnome-mimeapps.list", "[Default Applications]\ntext/plain=org.gnome.TextEditor.desktop\n")
        try write("usr/share/applications/mimeapps.list", "[Default Applications]\ntext/x-c=vim.desktop;org.kde.kate.desktop\n")
        return DesktopApplications(environment: [
            "HOME": root.appendingPathComponent("home").path, "XDG_DATA_DIRS": root.appendingPathComponent("usr/share").path,
            "XDG_CONFIG_DIRS": root.appendingPathComponent("etc/xdg").path, "XDG_CURRENT_DESKTOP": "KDE",
        ])
    }

    @Test("Applications are found as the XDG specifications say: entries by ID (subfolders as dashes, the user's hiding the system's), defaults from mimeapps.list in order, an installed one only")
    func applications() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xdg-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let desktop = try Self.desktop(root)
        #expect(desktop.entry(id: "org.gnome.TextEditor.desktop")?.name == "Text Editor")
        #expect(desktop.entry(id: "kde-okular.desktop")?.name == "Okular")
        #expect(desktop.entry(id: "vim.desktop") == nil, "the user's Hidden=true copy hides it")
        #expect(desktop.entry(id: "../../etc/passwd.desktop") == nil)
        #expect(Set(desktop.allEntries().map(\.id)) == ["org.gnome.TextEditor.desktop", "org.kde.kate.desktop", "kde-okular.desktop", "libreoffice-writer.desktop"])
        // KDE: the user's list names a missing app, then Kate.
        #expect(desktop.defaultEntry(for: "text/plain")?.id == "org.kde.kate.desktop")
        // The system's default is hidden (Vim): the next it names.
        #expect(desktop.defaultEntry(for: "text/x-c")?.id == "org.kde.kate.desktop")
        // Removed by the user, and no other app takes PDF.
        #expect(desktop.defaultEntry(for: "application/pdf") == nil)
        // No list names it: an app whose entry lists the type.
        #expect(desktop.defaultEntry(for: "application/vnd.oasis.opendocument.text")?.id == "libreoffice-writer.desktop")
        // On GNOME the user's GNOME list comes first.
        let gnome = DesktopApplications(environment: [
            "HOME": root.appendingPathComponent("home").path, "XDG_DATA_DIRS": root.appendingPathComponent("usr/share").path, "XDG_CURRENT_DESKTOP": "ubuntu:GNOME",
        ])
        #expect(gnome.defaultEntry(for: "text/plain")?.id == "org.gnome.TextEditor.desktop")
    }

    @Test("The app the recently-used list names is found here by its desktop ID, its program or its name; where it is not installed the type's default opens the file; with neither, nothing")
    func openers() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xdg-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let desktop = try Self.desktop(root)
        let file = URL(fileURLWithPath: "/home/me/Sync/plan.txt")
        let gtk = RecentApplication(name: "Text Editor", exec: "'gnome-text-editor %u'")
        #expect(desktop.opener(for: file, mimeType: "text/plain", application: gtk)?.id == "org.gnome.TextEditor.desktop")
        #expect(desktop.opener(for: file, mimeType: "text/plain", application: RecentApplication(name: "org.kde.kate", exec: nil))?.id == "org.kde.kate.desktop")
        #expect(desktop.opener(for: file, mimeType: "text/plain", application: RecentApplication(name: "LibreOffice Writer", exec: nil))?.id == "libreoffice-writer.desktop")
        // gedit is not installed here: the default for text, Kate.
        let gedit = RecentApplication(name: "gedit", exec: "'gedit %u'")
        let opener = try #require(desktop.opener(for: file, mimeType: "text/plain", application: gedit))
        #expect(opener.id == "org.kde.kate.desktop")
        #expect(try opener.command(opening: [file]) == ["kate", "-b", file.absoluteString])
        #expect(desktop.opener(for: file, mimeType: "application/x-unknown", application: gedit) == nil)
        #expect(desktop.opener(for: file, mimeType: nil, application: nil) == nil)
    }
}
