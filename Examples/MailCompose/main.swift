// MailCompose: composing a message with an attachment too large for userInfo, the seeds' case
// for continuation streams. The draft's subject and text travel in userInfo; the attachment's
// name and size too, but its bytes are fetched by the continuing app over continuation
// streams, as a request and a response. The originating app closes its draft once the
// activity was continued elsewhere.
//
// Install it with `handoff apps install DIR` (DIR holding App/Info.plist,
// App/MailCompose.entitlements and the built executable). Commands on standard input:
//   compose SUBJECT | type TEXT | attach PATH | show | quit
import Crypto
import Foundation
import Handoff
import HandoffApp

let composingType = "com.example.handoff.MailCompose.composing"

let dataDirectory: URL = {
    let environment = ProcessInfo.processInfo.environment
    if let given = environment["HANDOFF_APP_DATA"], !given.isEmpty { return URL(fileURLWithPath: given, isDirectory: true) }
    let base = environment["XDG_DATA_HOME"].map { URL(fileURLWithPath: $0) } ?? URL(fileURLWithPath: NSHomeDirectory()).appendingPathComponent(".local/share")
    return base.appendingPathComponent("MailCompose", isDirectory: true)
}()
try? FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
let eventLog = dataDirectory.appendingPathComponent("events.log")

/// Prints a line and appends it to the event log, so a person and a test both see it.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data("MailCompose: \(line)\n".utf8))
    let data = Data((line + "\n").utf8)
    if let handle = try? FileHandle(forWritingTo: eventLog) {
        handle.seekToEndOfFile()
        handle.write(data)
        try? handle.close()
    } else {
        try? data.write(to: eventLog)
    }
}

func digest(_ bytes: Data) -> String {
    SHA256.hash(data: bytes).prefix(8).map { String(format: "%02x", $0) }.joined()
}

/// The request and the response on the streams: the continuing app writes one line,
/// `ATTACHMENT\n`; the origin answers with the attachment's length (8 bytes, big-endian)
/// and its bytes, then ends its output.
enum AttachmentProtocol {
    static let request = Data("ATTACHMENT\n".utf8)

    static func readAll(_ input: InputStream) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBufferPointer { input.read($0.baseAddress!, maxLength: $0.count) }
            if n <= 0 { return data }
            data.append(contentsOf: buffer[..<n])
        }
    }

    static func writeAll(_ output: OutputStream, _ data: Data) -> Bool {
        var offset = 0
        while offset < data.count {
            let n = data.withUnsafeBytes { raw in
                output.write(raw.bindMemory(to: UInt8.self).baseAddress! + offset, maxLength: data.count - offset)
            }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}

struct Streams: @unchecked Sendable {
    let input: InputStream
    let output: OutputStream
}

/// A draft being composed, and the activity that offers it to the person's other devices.
@MainActor
final class Draft: NSObject, UserActivityDelegate {
    var subject: String
    var text = ""
    var attachment: (name: String, bytes: Data)?
    let activity: UserActivity

    init(subject: String) {
        self.subject = subject
        activity = UserActivity(activityType: composingType)
        super.init()
        activity.title = "Composing '\(subject)'"
        activity.supportsContinuationStreams = true
        activity.requiredUserInfoKeys = ["subject", "text", "version"]
        activity.delegate = self
        activity.needsSave = true
        activity.becomeCurrent()
    }

    func changed() {
        activity.needsSave = true
    }

    // The state, saved only when another device asks for it.
    nonisolated func userActivityWillSave(_ userActivity: UserActivity) {
        MainActor.assumeIsolated {
            var info: [AnyHashable: Any] = ["version": 1, "subject": subject, "text": text]
            if let attachment {
                info["attachmentName"] = attachment.name
                info["attachmentSize"] = attachment.bytes.count
            }
            userActivity.userInfo = info
        }
    }

    /// The continuing app asks for the attachment: answer on the streams, off the main actor.
    nonisolated func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream) {
        let streams = Streams(input: inputStream, output: outputStream)
        let bytes = MainActor.assumeIsolated { attachment?.bytes ?? Data() }
        Thread.detachNewThread {
            streams.input.open()
            streams.output.open()
            var line = Data()
            var byte: UInt8 = 0
            while line.count < 64, streams.input.read(&byte, maxLength: 1) == 1 {
                line.append(byte)
                if byte == 0x0A { break }
            }
            if line == AttachmentProtocol.request {
                var length = UInt64(bytes.count).bigEndian
                let sent = AttachmentProtocol.writeAll(streams.output, withUnsafeBytes(of: &length) { Data($0) } + bytes)
                say(sent ? "sent the attachment (\(bytes.count) bytes)" : "the other device stopped reading the attachment")
            } else {
                say("a request on the streams was not understood")
            }
            streams.output.close()
            streams.input.close()
        }
    }

    /// The draft goes on elsewhere: it closes here. Its activity stays alive (no longer
    /// current) for a minute, for the other device to fetch the attachment over streams.
    nonisolated func userActivityWasContinued(_ userActivity: UserActivity) {
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                say("draft closed: continued on another device")
                composer.handOff()
            }
        }
    }
}

/// The continuing side: the draft arrives, then its attachment over the streams.
@MainActor
final class ComposerDelegate: ApplicationDelegate {
    func application(_ application: Application, willContinueUserActivityWithType userActivityType: String) -> Bool {
        say("continuing a draft")
        return true
    }

    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        guard userActivity.activityType == composingType, (userActivity.userInfo?["version"] as? Int) == 1,
            let subject = userActivity.userInfo?["subject"] as? String
        else {
            say("a draft of another version arrived; not opened")
            return false
        }
        let text = userActivity.userInfo?["text"] as? String ?? ""
        say("continued draft '\(subject)': \(text)")
        guard let name = userActivity.userInfo?["attachmentName"] as? String, let size = userActivity.userInfo?["attachmentSize"] as? Int else {
            return true
        }
        say("fetching the attachment \(name) (\(size) bytes) from the other device")
        userActivity.getContinuationStreams { input, output, error in
            guard let input, let output else {
                say("could not fetch the attachment: \(error.map { "\($0)" } ?? "no streams")")
                return
            }
            let streams = Streams(input: input, output: output)
            Thread.detachNewThread {
                streams.output.open()
                streams.input.open()
                _ = AttachmentProtocol.writeAll(streams.output, AttachmentProtocol.request)
                streams.output.close()
                let answer = AttachmentProtocol.readAll(streams.input)
                streams.input.close()
                guard answer.count >= 8 else { return say("the attachment did not arrive") }
                let length = answer.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                let bytes = answer.dropFirst(8)
                guard length == UInt64(bytes.count), bytes.count == size else {
                    return say("the attachment arrived cut short: \(bytes.count) of \(size) bytes")
                }
                let file = dataDirectory.appendingPathComponent("attachment-\(URL(fileURLWithPath: name).lastPathComponent)")
                try? Data(bytes).write(to: file)
                say("received attachment \(name) (\(bytes.count) bytes, sha256 \(digest(Data(bytes))))")
            }
        }
        return true
    }

    func application(_ application: Application, didFailToContinueUserActivityWithType userActivityType: String, error: any Error) {
        say("failed \(userActivityType): \((error as? CocoaError)?.code.rawValue ?? 0)")
    }
}

@MainActor
final class Composer {
    let delegate = ComposerDelegate()
    let application: Application
    var draft: Draft?

    init() {
        application = Application(delegate: delegate)
    }

    /// Drafts continued elsewhere, kept until their attachment could have been fetched.
    var handedOff: [Draft] = []

    func close() {
        draft?.activity.invalidate()
        draft = nil
    }

    func handOff() {
        guard let draft else { return }
        self.draft = nil
        draft.activity.resignCurrent()
        handedOff.append(draft)
        DispatchQueue.main.asyncAfter(deadline: .now() + 60) {
            MainActor.assumeIsolated {
                self.handedOff.removeAll { $0 === draft }
                draft.activity.invalidate()
            }
        }
    }

    func run(_ line: String) {
        let words = line.split(separator: " ", maxSplits: 1).map(String.init)
        switch words.first {
        case "compose":
            guard words.count == 2 else { return say("usage: compose SUBJECT") }
            close()
            draft = Draft(subject: words[1])
            say("composing '\(words[1])'")
        case "type":
            guard words.count == 2, let draft else { return say("usage: type TEXT, with a draft open") }
            draft.text += words[1]
            draft.changed()
            say("typed")
        case "attach":
            guard words.count == 2, let draft else { return say("usage: attach PATH, with a draft open") }
            guard let bytes = try? Data(contentsOf: URL(fileURLWithPath: words[1])) else { return say("cannot read \(words[1])") }
            draft.attachment = (URL(fileURLWithPath: words[1]).lastPathComponent, bytes)
            draft.changed()
            say("attached \(words[1]) (\(bytes.count) bytes, sha256 \(digest(bytes)))")
        case "show":
            guard let draft else { return say("no draft") }
            say("'\(draft.subject)': \(draft.text) \(draft.attachment.map { "[\($0.name), \($0.bytes.count) bytes]" } ?? "")")
        case "quit":
            exit(0)
        case nil:
            break
        default:
            say("unknown command '\(words[0])'; commands: compose, type, attach, show, quit")
        }
    }
}

let composer = MainActor.assumeIsolated { Composer() }
say("ready")

Thread.detachNewThread {
    while let line = readLine() {
        DispatchQueue.main.async { MainActor.assumeIsolated { composer.run(line) } }
    }
}
dispatchMain()
