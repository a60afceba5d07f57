// `AgentBenchmark local-codec`: the time to encode and decode the local API messages a warm
// continuation carries (JSON, as the agent and the apps write them), for profiling where an
// agent's CPU goes. Prints the median of 9 rounds of 2,000 each, in microseconds.
import BenchmarkReport
import Foundation
import Handoff
import HandoffLocalAPI

func localCodecProfile() throws {
    let userInfo = try UserInfoCoding.encode(typicalUserInfo(iteration: 1))
    let activity = ActivityAnnouncement(
        id: UUID(), activityType: activityType, title: "Benchmark", bundleIdentifier: bundleIdentifier, teamIdentifier: "ABCDE12345",
        hasWebpageURL: false, supportsContinuationStreams: false)
    let record = ActivityRecord(activity: activity, keywords: ["map", "place"], userInfo: userInfo)
    let messages: [(String, LocalMessage)] = [
        ("call continue", .call(request: 7, .continue(activity: activity.id))),
        ("save (to the origin app)", .save(request: 3, activity: activity.id)),
        ("saved (the origin app's answer, \(userInfo.count) B userInfo)", .saved(request: 3, record)),
        ("willContinue", .willContinue(continuation: UUID(), activityType: activityType)),
        ("deliver (\(userInfo.count) B userInfo)", .deliver(continuation: UUID(), record: record, origin: LocalOrigin(device: UUID(), deviceName: "origin", activity: activity.id))),
        ("reply continued", .reply(request: 7, LocalReply(continued: LocalContinued(continuation: UUID(), device: "origin", activity: activity, app: bundleIdentifier, webpageURL: nil, seconds: 0.0012)))),
    ]
    print("| message | bytes | encode µs | decode µs |")
    print("| --- | --- | --- | --- |")
    for (name, message) in messages {
        let frame = message.frame
        var encodes: [Double] = []
        var decodes: [Double] = []
        for _ in 0..<9 {
            var start = now()
            for _ in 0..<2_000 { _ = message.frame }
            encodes.append(Double(now() - start) / 2_000 / 1_000)
            start = now()
            for _ in 0..<2_000 { _ = try LocalMessage(frame: frame) }
            decodes.append(Double(now() - start) / 2_000 / 1_000)
        }
        print("| \(name) | \(frame.payload.count) | \(format(percentile(encodes, 0.5), 1)) | \(format(percentile(decodes, 0.5), 1)) |")
    }
}
