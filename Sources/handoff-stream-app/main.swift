// A small app for the test suite's continuation-stream tests with real processes: installed on
// two devices, it is the origin (`handoff-stream-app origin LOG`, started by the test) that
// offers an activity supporting streams and sends bytes on every stream pair it is given, and
// the receiver (started by its agent for a continuation) that opens the streams and reads.
// Both log what happens, one line per event, for the test to read.
//
// The origin sends `STREAM_APP_BYTES` bytes (default: without end), `STREAM_APP_PACE` bytes
// per 10 ms at most (default: as fast as the stream takes them).
import Foundation
import Handoff
import HandoffApp
import Synchronization

let activityType = "com.example.streamapp.transfer"
let environment = ProcessInfo.processInfo.environment

final class Log: Sendable {
    let path: String
    /// One line at a time, whole.
    private let lock = Mutex(())
    init(_ path: String) {
        self.path = path
        _ = FileManager.default.createFile(atPath: path, contents: nil)
    }
    func write(_ line: String) {
        lock.withLock { _ in
            guard let handle = FileHandle(forWritingAtPath: path) else { return }
            handle.seekToEndOfFile()
            handle.write(Data((line + "\n").utf8))
            try? handle.close()
        }
    }
}

struct Streams: @unchecked Sendable {
    // @unchecked: each stream is handed to one thread, which alone uses it from then on.
    let input: InputStream
    let output: OutputStream
}

/// Reads to the end or an error, logging progress every MiB.
func drain(_ input: InputStream, log: Log, name: String) {
    input.open()
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    var total = 0
    var reported = 0
    while true {
        let n = buffer.withUnsafeMutableBufferPointer { input.read($0.baseAddress!, maxLength: $0.count) }
        if n > 0 {
            total += n
            if total - reported >= 1 << 20 {
                reported = total
                log.write("\(name)-read \(total)")
            }
            continue
        }
        if n == 0 {
            log.write("\(name)-end ok \(total)")
        } else {
            log.write("\(name)-end error \(total) \(input.streamError.map { "\($0)" } ?? "unknown")")
        }
        return
    }
}

/// Writes the configured bytes (or without end), logging how it ends.
func send(_ output: OutputStream, log: Log, name: String) {
    output.open()
    let limit = Int(environment["STREAM_APP_BYTES"] ?? "") ?? Int.max
    let pace = Int(environment["STREAM_APP_PACE"] ?? "") ?? 0
    let chunk = [UInt8](repeating: 0x61, count: pace > 0 ? min(pace, 64 * 1024) : 64 * 1024)
    var sent = 0
    while sent < limit {
        let n = chunk.withUnsafeBufferPointer { output.write($0.baseAddress!, maxLength: min($0.count, limit - sent)) }
        if n <= 0 {
            log.write("\(name)-write error \(sent) \(output.streamError.map { "\($0)" } ?? "unknown")")
            output.close()
            return
        }
        sent += n
        if pace > 0 { Thread.sleep(forTimeInterval: 0.01) }
    }
    output.close()
    log.write("\(name)-write ok \(sent)")
}

final class Origin: UserActivityDelegate, Sendable {
    let log: Log
    nonisolated init(log: Log) { self.log = log }

    func userActivity(_ userActivity: UserActivity, didReceive inputStream: InputStream, outputStream: OutputStream) {
        log.write("origin-streams")
        let streams = Streams(input: inputStream, output: outputStream)
        let log = self.log
        Thread.detachNewThread { drain(streams.input, log: log, name: "origin") }
        Thread.detachNewThread { send(streams.output, log: log, name: "origin") }
    }
}

@MainActor
enum Holder {
    static var activity: UserActivity?
}

@MainActor
final class Receiver: ApplicationDelegate {
    let log: Log
    init(log: Log) { self.log = log }

    func application(_ application: Application, continue userActivity: UserActivity, restorationHandler: @escaping ([UserActivityRestoring]?) -> Void) -> Bool {
        log.write("receiver-continued")
        let log = self.log
        userActivity.getContinuationStreams { input, output, error in
            guard let input, let output else {
                log.write("receiver-streams error \(error.map { "\($0)" } ?? "unknown")")
                return
            }
            log.write("receiver-streams")
            let streams = Streams(input: input, output: output)
            Thread.detachNewThread { drain(streams.input, log: log, name: "receiver") }
            // The receiver writes nothing; its output ends at once.
            streams.output.open()
            streams.output.close()
        }
        return true
    }
}

switch CommandLine.arguments.dropFirst().first {
case "origin"?:
    guard CommandLine.arguments.count == 3 else {
        FileHandle.standardError.write(Data("usage: handoff-stream-app origin LOG\n".utf8))
        exit(2)
    }
    let origin = Origin(log: Log(CommandLine.arguments[2]))
    MainActor.assumeIsolated {
        let activity = UserActivity(activityType: activityType)
        activity.title = "A stream"
        activity.supportsContinuationStreams = true
        activity.delegate = origin
        activity.becomeCurrent()
        Holder.activity = activity
    }
    dispatchMain()
default:
    // Started by the agent for a continuation.
    let folder = environment["HANDOFF_APP_DATA"] ?? "/tmp"
    MainActor.assumeIsolated {
        _ = Application(delegate: Receiver(log: Log(folder + "/stream.log")))
    }
    dispatchMain()
}
