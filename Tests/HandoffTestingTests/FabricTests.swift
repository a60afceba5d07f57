import Foundation
import Handoff
import HandoffApp
import HandoffTesting
import Synchronization
import Testing

@MainActor
@Suite("Continuing between simulated devices")
struct FabricTests {
    @Test("An activity made current on one device is offered on the other")
    func offered() async throws {
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer { $0.title = "Groceries" }
        #expect(nearby.device == "laptop")
        #expect(nearby.title == "Groceries")
        #expect(nearby.announcement.teamIdentifier == "TEAM1")
    }

    @Test("A device of another account is offered nothing")
    func otherAccount() async throws {
        let devices = try await TwoDevices()
        let stranger = devices.fabric.addDevice("stranger", account: "someone-else")
        _ = try await devices.offer()
        #expect(await stranger.nearbyActivities.isEmpty)
    }

    @Test("Continuing delivers the activity's state to the app that claims it, and the origin hears it")
    func continues() async throws {
        let devices = try await TwoDevices()
        let originDelegate = RecordingActivityDelegate()
        let (activity, nearby) = try await devices.offer {
            $0.userInfo = ["note": "buy milk", "line": 3]
            $0.webpageURL = URL(string: "https://notes.example.com/n/1")
        }
        activity.delegate = originDelegate
        let outcome = await devices.target.continueActivity(nearby)
        #expect(outcome == .continued(bundleIdentifier: "com.example.notes"))
        #expect(devices.targetDelegate.events == [.willContinue(notesType), .continued(notesType)])
        let received = try #require(devices.targetDelegate.continued.first)
        #expect(received.userInfo?["note"] as? String == "buy milk")
        #expect(received.userInfo?["line"] as? Int == 3)
        #expect(received.webpageURL == URL(string: "https://notes.example.com/n/1"))
        // The origin hears it from its own agent, once the link carries the news.
        #expect(await eventually { originDelegate.wasContinued == 1 })
    }

    @Test("The origin is asked to save once, however often needsSave was set")
    func savesOnce() async throws {
        let devices = try await TwoDevices()
        let originDelegate = RecordingActivityDelegate()
        originDelegate.onSave = { $0.addUserInfoEntries(from: ["saved": true]) }
        let (activity, nearby) = try await devices.offer()
        activity.delegate = originDelegate
        for _ in 0..<10 { activity.needsSave = true }
        _ = await devices.target.continueActivity(nearby)
        #expect(originDelegate.saves == 1)
        #expect(devices.targetDelegate.continued.first?.userInfo?["saved"] as? Bool == true)
    }

    @Test("An expired activity is never offered")
    func expired() async throws {
        let devices = try await TwoDevices()
        let expired = devices.originApp.perform { UserActivity(activityType: notesType) }
        expired.expirationDate = Date(timeIntervalSinceNow: -1)
        expired.becomeCurrent()
        let fresh = devices.originApp.perform { UserActivity(activityType: "com.example.notes.other") }
        fresh.becomeCurrent()
        _ = try await devices.target.nearbyActivity(ofType: "com.example.notes.other")
        #expect(await devices.target.nearbyActivities.allSatisfy { $0.activityType != notesType })
    }

    @Test("An activity not eligible for Handoff is not offered")
    func notEligible() async throws {
        let devices = try await TwoDevices()
        let hidden = devices.originApp.perform { UserActivity(activityType: notesType) }
        hidden.isEligibleForHandoff = false
        hidden.becomeCurrent()
        let marker = devices.originApp.perform { UserActivity(activityType: "com.example.notes.marker") }
        marker.becomeCurrent()
        _ = try await devices.target.nearbyActivity(ofType: "com.example.notes.marker")
        #expect(await devices.target.nearbyActivities.count == 1)
    }

    @Test("Resigning and invalidating withdraw the offer")
    func withdrawn() async throws {
        let devices = try await TwoDevices()
        let (activity, _) = try await devices.offer()
        activity.resignCurrent()
        try await devices.target.waitUntil("the offer to be withdrawn") { $0.nearbyActivities.isEmpty }
        activity.becomeCurrent()
        _ = try await devices.target.nearbyActivity(ofType: notesType)
        activity.invalidate()
        try await devices.target.waitUntil("the offer to be withdrawn") { $0.nearbyActivities.isEmpty }
    }

    @Test("An unreachable origin fails the continuation with 4609")
    func unreachable() async throws {
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer()
        await devices.origin.inject(.unreachable)
        let outcome = await devices.target.continueActivity(nearby)
        guard case .failed(let failure) = outcome else { Issue.record("expected a failure, got \(outcome)"); return }
        #expect(failure.code == 4609)
        #expect(devices.targetDelegate.events == [.willContinue(notesType), .failed(notesType, code: 4609)])
    }

    @Test("An origin lost during the fetch fails the continuation with 4608, as a device vanishing mid-answer does")
    func lostDuringFetch() async throws {
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer()
        await devices.origin.inject(.appStallsOnSave(bundleIdentifier: "com.example.notes"))
        let target = devices.target
        async let outcome = target.continueActivity(nearby)
        #expect(await eventually { !devices.targetDelegate.events.isEmpty })
        await devices.origin.inject(.unreachable)
        let result = await outcome
        guard case .failed(let failure) = result else { Issue.record("expected a failure, got \(result)"); return }
        #expect(failure.code == 4608)
        #expect(devices.targetDelegate.events.last == .failed(notesType, code: 4608))
    }

    @Test("An origin app that does not save in time fails the continuation with 4610")
    func stalls() async throws {
        let devices = try await TwoDevices(configuration: .init(saveDeadline: .milliseconds(200)))
        let (_, nearby) = try await devices.offer()
        await devices.origin.inject(.appStallsOnSave(bundleIdentifier: "com.example.notes"))
        let outcome = await devices.target.continueActivity(nearby)
        guard case .failed(let failure) = outcome else { Issue.record("expected a failure, got \(outcome)"); return }
        #expect(failure.code == 4610)
        #expect(devices.targetDelegate.events == [.willContinue(notesType), .failed(notesType, code: 4610)])
    }

    @Test("A payload over the limit fails the continuation with 4611")
    func tooLarge() async throws {
        let devices = try await TwoDevices(configuration: .init(payloadLimit: 1024))
        let (_, nearby) = try await devices.offer { $0.userInfo = ["blob": Data(count: 4096)] }
        let outcome = await devices.target.continueActivity(nearby)
        guard case .failed(let failure) = outcome else { Issue.record("expected a failure, got \(outcome)"); return }
        #expect(failure.code == 4611)
        #expect(devices.targetDelegate.errors.first?.code.rawValue == 4611)
        #expect(devices.targetDelegate.errors.first?.handoffMessage.contains("over the limit of 1024 bytes") == true)
    }

    @Test("A userInfo value that cannot travel fails the continuation with a message naming its key")
    func unsupportedValue() async throws {
        struct Color { var red = 1.0 }
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer { $0.userInfo = ["style": ["fill": Color()]] }
        let outcome = await devices.target.continueActivity(nearby)
        guard case .failed(let failure) = outcome else { Issue.record("expected a failure, got \(outcome)"); return }
        #expect(failure.code == 4608)
        #expect(failure.message.contains("userInfo.style.fill"))
        #expect(failure.message.contains("Color"))
        #expect(devices.targetDelegate.events == [.willContinue(notesType), .failed(notesType, code: 4608)])
    }

    @Test("A newer continuation ends the pending one with 3072, and the newer one completes")
    func superseded() async throws {
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer()
        await devices.origin.inject(.appStallsOnSave(bundleIdentifier: "com.example.notes"))
        let target = devices.target
        async let first = target.continueActivity(nearby)
        #expect(await eventually { !devices.targetDelegate.events.isEmpty })
        await devices.origin.clear(.appStallsOnSave(bundleIdentifier: "com.example.notes"))
        let second = await target.continueActivity(nearby)
        let firstOutcome = await first
        #expect(second == .continued(bundleIdentifier: "com.example.notes"))
        guard case .failed(let failure) = firstOutcome else { Issue.record("expected a failure, got \(firstOutcome)"); return }
        #expect(failure.code == 3072)
        #expect(devices.targetDelegate.events == [
            .willContinue(notesType), .failed(notesType, code: 3072), .willContinue(notesType), .continued(notesType),
        ])
    }

    @Test("Under a burst of continuations the newest wins, and each willContinue gets exactly one outcome")
    func burst() async throws {
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer()
        let target = devices.target
        // The origin's save stalls until all twenty have started, so that they all overlap (on
        // a loaded machine one could otherwise finish before the next begins, and two
        // continuations one after the other both succeed, rightly); a last one, once the save
        // no longer stalls, replaces them all.
        await devices.origin.inject(.appStallsOnSave(bundleIdentifier: "com.example.notes"))
        let started = Started()
        let outcomes = await withTaskGroup(of: ContinuationOutcome.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    started.add()
                    return await target.continueActivity(nearby)
                }
            }
            // All twenty taken by the agent, so that the last one is the newest. (A fixed 200 ms
            // here once let one of the twenty arrive after the last, and both continued.)
            var asked: UInt64 = 0
            let deadline = ContinuousClock.now + .seconds(30)
            while asked < 20, ContinuousClock.now < deadline {
                asked = await target.continuationsAsked
                await Task.yield()
            }
            #expect(asked == 20, "the agent took \(asked) of the 20 continuations")
            await devices.origin.clear(.appStallsOnSave(bundleIdentifier: "com.example.notes"))
            group.addTask { await target.continueActivity(nearby) }
            var outcomes: [ContinuationOutcome] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let events = devices.targetDelegate.events
        #expect(devices.targetDelegate.outcomesAreWellFormed, "events: \(events)")
        // Those replaced while the app was starting end with 3072 before it hears of them.
        #expect(outcomes.filter { $0 == .continued(bundleIdentifier: "com.example.notes") }.count == 1)
        #expect(outcomes.allSatisfy { outcome in
            if case .failed(let failure) = outcome { return failure.code == 3072 }
            return outcome == .continued(bundleIdentifier: "com.example.notes")
        }, "outcomes: \(outcomes)")
        #expect(events.last == .continued(notesType))
    }

    @Test("With no app but a web page, the page opens in the browser")
    func webFallback() async throws {
        let devices = try await TwoDevices(targetManifest: nil)
        let originDelegate = RecordingActivityDelegate()
        let (activity, nearby) = try await devices.offer { $0.webpageURL = URL(string: "https://notes.example.com/n/7") }
        activity.delegate = originDelegate
        let outcome = await devices.target.continueActivity(nearby)
        #expect(outcome == .openedInBrowser(URL(string: "https://notes.example.com/n/7")!))
        #expect(await devices.target.openedWebpages == [URL(string: "https://notes.example.com/n/7")!])
        // The origin hears it from its own agent, once the link carries the news.
        #expect(await eventually { originDelegate.wasContinued == 1 })
    }

    @Test("A default browser app that claims web browsing receives the activity itself")
    func browserApp() async throws {
        let devices = try await TwoDevices(targetManifest: nil)
        let browserDelegate = RecordingAppDelegate()
        let browser = AppManifest(bundleIdentifier: "org.example.browser", teamIdentifier: "OTHER", activityTypes: [NSUserActivityTypeBrowsingWeb])
        try await devices.target.install(browser) { browserDelegate }
        try await devices.target.setDefaultBrowser("org.example.browser")
        let (_, nearby) = try await devices.offer { $0.webpageURL = URL(string: "https://notes.example.com/n/8") }
        let outcome = await devices.target.continueActivity(nearby)
        #expect(outcome == .continued(bundleIdentifier: "org.example.browser"))
        #expect(browserDelegate.continued.first?.webpageURL == URL(string: "https://notes.example.com/n/8"))
    }

    @Test("With no app and no web page, nothing continues and the reason is given")
    func nowhere() async throws {
        let devices = try await TwoDevices(targetManifest: nil)
        let (_, nearby) = try await devices.offer()
        let outcome = await devices.target.continueActivity(nearby)
        guard case .notContinued(let reason) = outcome else { Issue.record("expected notContinued, got \(outcome)"); return }
        #expect(reason.contains(notesType))
    }

    @Test("An app of another team does not receive the activity")
    func otherTeam() async throws {
        let devices = try await TwoDevices(targetManifest: notesManifest(team: "TEAM2"))
        let (_, nearby) = try await devices.offer()
        let outcome = await devices.target.continueActivity(nearby)
        guard case .notContinued(let reason) = outcome else { Issue.record("expected notContinued, got \(outcome)"); return }
        #expect(reason.contains("TEAM2"))
        #expect(devices.targetDelegate.events.isEmpty)
    }

    @Test("Continuation streams carry a request and its answer between the two apps")
    func streams() async throws {
        let devices = try await TwoDevices()
        let originDelegate = RecordingActivityDelegate()
        originDelegate.onStreams = { input, output in
            let streams = UncheckedBox((input, output))
            Thread {
                let (input, output) = streams.value
                input.open()
                output.open()
                var request = [UInt8](repeating: 0, count: 5)
                _ = input.read(&request, maxLength: 5)
                _ = output.writeAll(Array("attachment for \(String(decoding: request, as: UTF8.self))".utf8))
                output.close()
            }.start()
        }
        let (activity, nearby) = try await devices.offer { $0.supportsContinuationStreams = true }
        activity.delegate = originDelegate
        _ = await devices.target.continueActivity(nearby)
        let received = try #require(devices.targetDelegate.continued.first)
        let (input, output) = try await received.continuationStreams()
        let answer = await onThread { [input = UncheckedBox(input), output = UncheckedBox(output)] in
            input.value.open()
            output.value.open()
            _ = output.value.writeAll(Array("img-1".utf8))
            return String(decoding: input.value.readToEnd(), as: UTF8.self)
        }
        #expect(answer == "attachment for img-1")
        #expect(originDelegate.streamsReceived == 1)
    }

    @Test("Asking for streams an activity does not support fails, and the origin's delegate is not called")
    func streamsUnsupported() async throws {
        let devices = try await TwoDevices()
        let originDelegate = RecordingActivityDelegate()
        let (activity, nearby) = try await devices.offer()
        activity.delegate = originDelegate
        _ = await devices.target.continueActivity(nearby)
        let received = try #require(devices.targetDelegate.continued.first)
        await #expect(throws: CocoaError.self) { _ = try await received.continuationStreams() }
        #expect(originDelegate.streamsReceived == 0)
    }

    @Test("A crashed app is launched again by the next continuation")
    func relaunch() async throws {
        let devices = try await TwoDevices()
        let (_, nearby) = try await devices.offer()
        _ = await devices.target.continueActivity(nearby)
        await devices.target.terminate("com.example.notes")
        #expect(await devices.target.application("com.example.notes") == nil)
        let outcome = await devices.target.continueActivity(nearby)
        #expect(outcome == .continued(bundleIdentifier: "com.example.notes"))
        #expect(await devices.target.application("com.example.notes") != nil)
    }
}

/// Moves a non-Sendable stream to the thread that alone uses it.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Counts the tasks that have started.
final class Started: Sendable {
    private let value = Mutex(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}
