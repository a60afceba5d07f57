import Foundation
import Testing

@testable import Handoff

/// A value an app might put in `userInfo` by mistake: a type of its own.
private struct Shape {
    var sides: Int
}

@Suite("Saving an activity for a continuation")
@MainActor
struct ActivityCenterSaveTests {
    @Test("Saving asks the delegate to save once when needsSave is set")
    func savesOnce() async throws {
        let app = AppUnderTest()
        let activity = app.activity()
        let delegate = SaveRecorder()
        activity.delegate = delegate
        activity.becomeCurrent()
        activity.needsSave = true
        activity.needsSave = true

        _ = try await app.center.save(activityID: activity.id).get()

        #expect(delegate.saves == 1)
        #expect(activity.needsSave == false)
    }

    @Test("Saving without needsSave does not ask the delegate")
    func noSaveWithoutNeedsSave() async throws {
        let app = AppUnderTest()
        let activity = app.activity()
        let delegate = SaveRecorder()
        activity.delegate = delegate
        activity.becomeCurrent()

        _ = try await app.center.save(activityID: activity.id).get()

        #expect(delegate.saves == 0)
    }

    @Test("The saved record carries the userInfo the delegate brought up to date")
    func recordCarriesUserInfo() async throws {
        let app = AppUnderTest()
        let activity = app.activity()
        let delegate = SaveRecorder()
        delegate.duringSave = { $0.addUserInfoEntries(from: ["cursor": 7]) }
        activity.delegate = delegate
        activity.userInfo = ["note": "42", "tags": ["a", "b"], "edited": Date(timeIntervalSinceReferenceDate: 1.5)]
        activity.becomeCurrent()
        activity.needsSave = true

        let record = try await app.center.save(activityID: activity.id).get()

        let bytes = try #require(record.userInfo)
        let decoded = try UserInfoValue.dictionary(from: UserInfoCoding.decodeUserInfo(bytes))
        let expected = try UserInfoValue.dictionary(from: [
            "note": "42", "tags": ["a", "b"], "edited": Date(timeIntervalSinceReferenceDate: 1.5), "cursor": 7,
        ])
        #expect(decoded == expected)
    }

    @Test("The saved record carries the activity's identity and properties")
    func recordCarriesProperties() async throws {
        let app = AppUnderTest()
        let activity = app.activity("com.example.app.reading")
        activity.title = "Chapter 1"
        activity.webpageURL = URL(string: "https://example.com/chapter/1")
        activity.keywords = ["book"]
        activity.targetContentIdentifier = "window-1"
        activity.becomeCurrent()

        let record = try await app.center.save(activityID: activity.id).get()

        #expect(record.activity == app.announcement(of: activity))
        #expect(record.activity.bundleIdentifier == "com.example.app")
        #expect(record.activity.teamIdentifier == "TEAM")
        #expect(record.webpageURL == "https://example.com/chapter/1")
        #expect(record.keywords == ["book"])
        #expect(record.targetContentIdentifier == "window-1")
        #expect(record.userInfo == nil)
    }

    @Test("A userInfo value that cannot travel fails the save with error 4608 naming its key path")
    func unsupportedValueFails() async throws {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.userInfo = ["shapes": ["circle", Shape(sides: 4)] as [Any]]
        activity.becomeCurrent()

        let result = await app.center.save(activityID: activity.id)

        guard case .failure(let failure) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(failure.code == 4608)
        #expect(failure.message.contains("userInfo.shapes.[1] holds a value of type Shape"))
    }

    @Test("Saving an invalidated activity fails with error 4608")
    func invalidatedFails() async throws {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.becomeCurrent()
        activity.invalidate()

        let result = await app.center.save(activityID: activity.id)

        guard case .failure(let failure) = result else {
            Issue.record("expected a failure, got \(result)")
            return
        }
        #expect(failure.code == CocoaError.Code.userActivityHandoffFailed.rawValue)
        #expect(failure.code == 4608)
        #expect(failure.message.contains("invalidated"))
    }

    @Test("A userInfo nested deeper than the continuing device can read fails the save with error 4608")
    func tooDeepUserInfoFails() async throws {
        let app = AppUnderTest()
        let activity = app.activity()
        var deep: Any = "leaf"
        for _ in 0...UserInfoCoding.maximumDepth { deep = [deep] }
        activity.userInfo = ["outline": deep]
        activity.becomeCurrent()

        let result = await app.center.save(activityID: activity.id)

        guard case .failure(let failure) = result else {
            Issue.record("expected a failure, got a record the continuing device cannot decode")
            return
        }
        #expect(failure.code == 4608)
        #expect(failure.message.contains("userInfo.outline"))
    }
}
