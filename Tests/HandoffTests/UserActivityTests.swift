import Foundation
import Testing

@testable import Handoff

@Suite("Making a user activity")
struct UserActivityCreationTests {
    @Test("An activity keeps the type it was made with, and announces it")
    func activityTypeIsFixed() async {
        let app = AppUnderTest()
        let activity = app.activity("com.example.app.reading")
        activity.title = "Chapter 1"
        activity.userInfo = ["page": 12]
        activity.becomeCurrent()

        #expect(activity.activityType == "com.example.app.reading")
        let events = await app.connection.next(1)
        guard case .becameCurrent(let announcement)? = events.first else {
            Issue.record("expected becameCurrent, got \(events)")
            return
        }
        #expect(announcement.activityType == "com.example.app.reading")
        #expect(announcement.id == activity.id)
    }

    @Test("The validating initializer throws for an empty activity type")
    func validatingInitializerRejectsEmptyType() {
        #expect(throws: UserActivityError.emptyActivityType) {
            _ = try UserActivity(validatingActivityType: "")
        }
    }

    @Test("The validating initializer accepts a non-empty activity type")
    func validatingInitializerAcceptsType() throws {
        let activity = try UserActivity(validatingActivityType: "com.example.app.editing")
        #expect(activity.activityType == "com.example.app.editing")
    }

    @Test("Making an activity with an empty type stops the process with a message")
    func emptyTypeStopsTheProcess() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = UserActivity(activityType: "")
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("non-empty activityType"))
    }

    @Test("A new activity has no title, state, URLs, dates, keywords or identifiers")
    func contentDefaults() {
        let activity = AppUnderTest().activity()
        #expect(activity.title == nil)
        #expect(activity.userInfo == nil)
        #expect(activity.requiredUserInfoKeys == nil)
        #expect(activity.needsSave == false)
        #expect(activity.webpageURL == nil)
        #expect(activity.referrerURL == nil)
        #expect(activity.expirationDate == nil)
        #expect(activity.keywords.isEmpty)
        #expect(activity.persistentIdentifier == nil)
        #expect(activity.targetContentIdentifier == nil)
    }

    @Test("A new activity is eligible for Handoff, and not for search, public indexing or prediction")
    func eligibilityDefaults() {
        let activity = AppUnderTest().activity()
        #expect(activity.isEligibleForHandoff)
        #expect(activity.isEligibleForSearch == false)
        #expect(activity.isEligibleForPublicIndexing == false)
        #expect(activity.isEligibleForPrediction == false)
    }

    @Test("A new activity does not support continuation streams")
    func continuationStreamsDefault() {
        #expect(AppUnderTest().activity().supportsContinuationStreams == false)
    }

    @Test("A new activity has no delegate")
    @MainActor
    func delegateDefault() {
        #expect(AppUnderTest().activity().delegate == nil)
    }

    @Test("Every property keeps the value it was set to")
    func propertiesKeepTheirValues() throws {
        let activity = AppUnderTest().activity()
        let expiry = Date(timeIntervalSinceReferenceDate: 800_000_000.25)
        activity.title = "Notes"
        activity.requiredUserInfoKeys = ["note"]
        activity.referrerURL = URL(string: "https://example.com/index")
        activity.expirationDate = expiry
        activity.keywords = ["notes", "draft"]
        activity.isEligibleForHandoff = false
        activity.isEligibleForSearch = true
        activity.isEligibleForPublicIndexing = true
        activity.isEligibleForPrediction = true
        activity.persistentIdentifier = "note-42"
        activity.targetContentIdentifier = "window-1"
        activity.supportsContinuationStreams = true

        #expect(activity.title == "Notes")
        #expect(activity.requiredUserInfoKeys == ["note"])
        #expect(activity.referrerURL == URL(string: "https://example.com/index"))
        #expect(activity.expirationDate == expiry)
        #expect(activity.keywords == ["notes", "draft"])
        #expect(activity.isEligibleForHandoff == false)
        #expect(activity.isEligibleForSearch)
        #expect(activity.isEligibleForPublicIndexing)
        #expect(activity.isEligibleForPrediction)
        #expect(activity.persistentIdentifier == "note-42")
        #expect(activity.targetContentIdentifier == "window-1")
        #expect(activity.supportsContinuationStreams)
    }

    @Test("Setting targetContentIdentifier does not set needsSave")
    func targetContentIdentifierDoesNotSetNeedsSave() {
        let activity = AppUnderTest().activity()
        activity.targetContentIdentifier = "window-1"
        #expect(activity.needsSave == false)
    }
}

@Suite("Merging userInfo entries")
struct AddUserInfoEntriesTests {
    @Test("addUserInfoEntries keeps existing keys and adds new ones")
    func mergesEntries() throws {
        let activity = AppUnderTest().activity()
        activity.userInfo = ["note": "42"]
        activity.addUserInfoEntries(from: ["cursor": 7])

        let info = try #require(activity.userInfo)
        #expect(info.count == 2)
        #expect(info["note"] as? String == "42")
        #expect(info["cursor"] as? Int == 7)
    }

    @Test("For a key already in userInfo, the added value wins")
    func laterValueWins() throws {
        let activity = AppUnderTest().activity()
        activity.userInfo = ["note": "42", "cursor": 1]
        activity.addUserInfoEntries(from: ["cursor": 7])

        let info = try #require(activity.userInfo)
        #expect(info["cursor"] as? Int == 7)
        #expect(info["note"] as? String == "42")
    }

    @Test("addUserInfoEntries makes a userInfo when there was none")
    func worksWithoutUserInfo() throws {
        let activity = AppUnderTest().activity()
        activity.addUserInfoEntries(from: ["cursor": 7])

        let info = try #require(activity.userInfo)
        #expect(info.count == 1)
        #expect(info["cursor"] as? Int == 7)
    }
}

@Suite("webpageURL accepts only absolute http and https URLs")
struct WebpageURLTests {
    @Test(
        "An http or https URL is accepted, whatever the case of its scheme",
        arguments: ["http://example.com/a", "https://example.com/a", "HTTPS://example.com/a", "HtTp://example.com/a?q=1#top"]
    )
    func acceptsWebURLs(_ text: String) throws {
        let activity = AppUnderTest().activity()
        let url = try #require(URL(string: text))
        try activity.setWebpageURL(url)
        #expect(activity.webpageURL == url)
    }

    @Test(
        "A URL of another scheme, or a relative one, is refused with a message naming it",
        arguments: ["ftp://example.com/file", "file:///etc/hosts", "mailto:someone@example.com", "notes/42", "https:notes"]
    )
    func refusesOtherURLs(_ text: String) throws {
        let activity = AppUnderTest().activity()
        let url = try #require(URL(string: text))
        let error = #expect(throws: UserActivityError.self) {
            try activity.setWebpageURL(url)
        }
        #expect(error == .unsupportedWebpageURL(url.absoluteString))
        #expect(error?.description.contains("'\(url.absoluteString)'") == true)
        #expect(activity.webpageURL == nil)
    }

    @Test("A refused URL leaves the previous webpageURL in place")
    func refusedURLKeepsPrevious() throws {
        let activity = AppUnderTest().activity()
        let page = try #require(URL(string: "https://example.com/notes/42"))
        activity.webpageURL = page
        #expect(throws: UserActivityError.self) {
            try activity.setWebpageURL(URL(string: "ftp://example.com/file"))
        }
        #expect(activity.webpageURL == page)
    }

    @Test("Setting webpageURL to nil clears it")
    func nilClears() throws {
        let activity = AppUnderTest().activity()
        activity.webpageURL = URL(string: "https://example.com/notes/42")
        try activity.setWebpageURL(nil)
        #expect(activity.webpageURL == nil)
    }

    @Test("Assigning an unsupported webpageURL stops the process with a message naming it")
    func setterStopsTheProcess() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let activity = UserActivity(activityType: "com.example.app.editing")
            activity.webpageURL = URL(string: "ftp://example.com/file")
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(message.contains("'ftp://example.com/file'"))
    }
}

@Suite("Becoming, resigning and invalidating")
struct CurrentActivityTests {
    @Test("becomeCurrent makes the activity its app's current one and tells the agent")
    func becomeCurrent() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.becomeCurrent()

        #expect(app.center.currentActivity === activity)
        #expect(activity.isCurrent)
        #expect(await app.connection.next(1) == [.becameCurrent(app.announcement(of: activity))])
    }

    @Test("A second activity's becomeCurrent replaces the first")
    func secondReplacesFirst() async {
        let app = AppUnderTest()
        let first = app.activity("com.example.app.reading")
        let second = app.activity("com.example.app.editing")
        first.becomeCurrent()
        second.becomeCurrent()

        #expect(app.center.currentActivity === second)
        #expect(first.isCurrent == false)
        #expect(await app.connection.next(2) == [.becameCurrent(app.announcement(of: first)), .becameCurrent(app.announcement(of: second))])
    }

    @Test("resignCurrent on the current activity leaves the app with none and tells the agent")
    func resignCurrent() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.becomeCurrent()
        activity.resignCurrent()

        #expect(app.center.currentActivity == nil)
        #expect(await app.connection.next(2) == [.becameCurrent(app.announcement(of: activity)), .resigned(activity.id)])
    }

    @Test("resignCurrent on an activity that is not current changes nothing")
    func resignNonCurrent() async {
        let app = AppUnderTest()
        let current = app.activity("com.example.app.reading")
        let other = app.activity("com.example.app.editing")
        current.becomeCurrent()
        other.resignCurrent()
        let marker = app.activity("com.example.app.marker")
        marker.invalidate()  // an event after which nothing else may have been sent

        #expect(app.center.currentActivity === current)
        #expect(await app.connection.next(2) == [.becameCurrent(app.announcement(of: current)), .invalidated(marker.id)])
    }

    @Test("becomeCurrent after invalidate does nothing")
    func becomeCurrentAfterInvalidate() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.invalidate()
        activity.becomeCurrent()
        let marker = app.activity("com.example.app.marker")
        marker.invalidate()

        #expect(app.center.currentActivity == nil)
        #expect(await app.connection.next(2) == [.invalidated(activity.id), .invalidated(marker.id)])
    }

    @Test("invalidate resigns the current activity, and a second invalidate does nothing")
    func invalidateIsIdempotentAndResigns() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.becomeCurrent()
        activity.invalidate()
        activity.invalidate()
        let marker = app.activity("com.example.app.marker")
        marker.invalidate()

        #expect(app.center.currentActivity == nil)
        #expect(activity.isInvalidated)
        #expect(
            await app.connection.next(3) == [
                .becameCurrent(app.announcement(of: activity)), .invalidated(activity.id), .invalidated(marker.id),
            ])
    }

    @Test("A change others can see to the current activity is announced again")
    func changeToCurrentIsAnnounced() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.becomeCurrent()
        let before = app.announcement(of: activity)
        activity.title = "Chapter 2"

        #expect(await app.connection.next(2) == [.becameCurrent(before), .becameCurrent(app.announcement(of: activity))])
    }

    @Test("A change to an activity that is not current is not announced")
    func changeToNonCurrentIsSilent() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.title = "Chapter 2"
        activity.webpageURL = URL(string: "https://example.com/chapter/2")
        let marker = app.activity("com.example.app.marker")
        marker.invalidate()

        #expect(app.center.currentActivity == nil)
        #expect(await app.connection.next(1) == [.invalidated(marker.id)])
    }
    @Test("An activity not eligible for Handoff can be current, but is not offered")
    func ineligibleCurrentIsNotOffered() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.isEligibleForHandoff = false
        activity.becomeCurrent()

        #expect(app.center.currentActivity === activity)
        #expect(await app.connection.next(1) == [.resigned(activity.id)])
    }

    @Test("An expired activity can be current, but is not offered")
    func expiredCurrentIsNotOffered() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.expirationDate = Date(timeIntervalSinceNow: -60)
        activity.becomeCurrent()

        #expect(app.center.currentActivity === activity)
        #expect(await app.connection.next(1) == [.resigned(activity.id)])
    }

    @Test("A current activity made eligible again is offered")
    func eligibleAgainIsOffered() async {
        let app = AppUnderTest()
        let activity = app.activity()
        activity.isEligibleForHandoff = false
        activity.becomeCurrent()
        activity.isEligibleForHandoff = true

        #expect(await app.connection.next(2) == [.resigned(activity.id), .becameCurrent(app.announcement(of: activity))])
    }

    @Test("A change made on another thread never makes a replaced activity current again")
    func concurrentChangeDoesNotResurrect() {
        let app = AppUnderTest()
        let replaced = app.activity("com.example.app.reading")
        let replacing = app.activity("com.example.app.editing")
        let editor = Thread {
            for page in 0..<30_000 { replaced.title = "page \(page)" }
        }
        editor.start()
        var resurrections = 0
        while !editor.isFinished {
            replaced.becomeCurrent()
            replacing.becomeCurrent()
            // Only a title changed on `replaced` since: it must stay replaced.
            if app.center.currentActivity === replaced { resurrections += 1 }
        }
        #expect(resurrections == 0)
    }
}

@Suite("Saving through needsSave and the delegate")
@MainActor
struct NeedsSaveTests {
    @Test("Setting needsSave many times asks the delegate to save once")
    func coalesces() {
        let activity = AppUnderTest().activity()
        let delegate = SaveRecorder()
        activity.delegate = delegate
        for _ in 0..<10 { activity.needsSave = true }

        activity.saveIfNeeded()
        activity.saveIfNeeded()

        #expect(delegate.saves == 1)
        #expect(activity.needsSave == false)
    }

    @Test("needsSave is false while the delegate saves")
    func falseDuringSave() {
        let activity = AppUnderTest().activity()
        let delegate = SaveRecorder()
        activity.delegate = delegate
        activity.needsSave = true

        activity.saveIfNeeded()

        #expect(delegate.needsSaveDuringSaves == [false])
    }

    @Test("Setting needsSave during a save asks for another save")
    func settingDuringSaveRearms() {
        let activity = AppUnderTest().activity()
        let delegate = SaveRecorder()
        delegate.duringSave = { activity in
            if activity.title == nil {
                activity.title = "saved once"
                activity.needsSave = true
            }
        }
        activity.delegate = delegate
        activity.needsSave = true

        activity.saveIfNeeded()
        #expect(activity.needsSave)
        #expect(delegate.saves == 1)

        activity.saveIfNeeded()
        #expect(delegate.saves == 2)
        #expect(activity.needsSave == false)
    }

    @Test("Without needsSave, the delegate is not asked to save")
    func noSaveWithoutNeedsSave() {
        let activity = AppUnderTest().activity()
        let delegate = SaveRecorder()
        activity.delegate = delegate

        activity.saveIfNeeded()

        #expect(delegate.saves == 0)
    }

    @Test("The delegate is held weakly: once it is gone, saving calls nothing and does not crash")
    func deallocatedDelegate() {
        let activity = AppUnderTest().activity()
        var delegate: SaveRecorder? = SaveRecorder()
        weak let probe = delegate
        activity.delegate = delegate
        delegate = nil

        #expect(probe == nil)
        #expect(activity.delegate == nil)
        activity.needsSave = true
        activity.saveIfNeeded()
        #expect(activity.needsSave == false)
    }
}

@Suite("Continuation streams on an activity made on this device")
struct LocalContinuationStreamsTests {
    private static let notContinued = "can only be opened on a continued activity"

    @Test("getContinuationStreams reports error 4608: the activity was not continued")
    func completionHandlerFails() async throws {
        let activity = AppUnderTest().activity()
        activity.supportsContinuationStreams = true
        let failure: (any Error)? = await withCheckedContinuation { done in
            activity.getContinuationStreams { input, output, error in
                #expect(input == nil)
                #expect(output == nil)
                done.resume(returning: error)
            }
        }
        let error = try #require(failure as? CocoaError)
        #expect(error.code == .userActivityHandoffFailed)
        #expect(error.code.rawValue == 4608)
        #expect(error.handoffMessage.contains(Self.notContinued))
    }

    @Test("continuationStreams() throws error 4608: the activity was not continued")
    func asyncFormFails() async throws {
        let activity = AppUnderTest().activity()
        activity.supportsContinuationStreams = true
        let error = await #expect(throws: CocoaError.self) {
            _ = try await activity.continuationStreams()
        }
        #expect(error?.code.rawValue == 4608)
        #expect(error?.handoffMessage.contains(Self.notContinued) == true)
    }
}
