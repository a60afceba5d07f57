import Foundation
import HandoffLocalAPI
import HandoffWire
import Testing

@testable import HandoffAgent

/// The agent's decisions about continuations, each transition on its own: no app, no link,
/// no clock. A continuation's context is its number; a save's waiter is its name.
@Suite("Agent continuation state machine")
struct AgentContinuationStateMachineTests {
    typealias Machine = ContinuationStateMachine<Int, String>

    let app = "com.example.maps"
    let other = "com.example.notes"
    let session = UUID()
    let activity = UUID()

    func machine() -> Machine { Machine(launchDeadline: .seconds(10), saveDeadline: .seconds(5)) }

    func record(_ title: String = "a map") -> FetchedActivity {
        FetchedActivity(ActivityRecord(activity: ActivityAnnouncement(id: activity, activityType: "com.example.maps.viewing", title: title)))
    }

    /// Each action as a short line, so that a whole step is compared at once.
    func lines(_ actions: [Machine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .launch(let app, _, let attempt): "launch \(app) #\(attempt)"
            case .schedule(let deadline, let after): "schedule \(name(deadline)) in \(after)"
            case .cancel(let deadline): "cancel \(name(deadline))"
            case .willContinue(let context, let session): "willContinue \(context) to \(session == self.session ? "app" : "other session")"
            case .deliver(let context, _, let record): "deliver \(context) \(record.record.activity.title ?? "")"
            case .failInApp(let context, _, let failure): "failInApp \(context) \(name(failure))"
            case .fail(let context, let failure): "fail \(context) \(name(failure))"
            case .askToSave(let request, _, _): "askToSave #\(request)"
            case .answerSave(let waiter, let outcome): "answerSave \(waiter) \(name(outcome))"
            }
        }
    }

    func name(_ deadline: ContinuationDeadline) -> String {
        switch deadline {
        case .launch(let app, let attempt): "launch \(app) #\(attempt)"
        case .save(let request): "save #\(request)"
        }
    }

    func name(_ failure: Machine.Failure) -> String {
        switch failure {
        case .superseded: "superseded"
        case .appQuit: "appQuit"
        case .launchFailed: "launchFailed"
        case .endedBeforeConnecting: "endedBeforeConnecting"
        case .didNotConnect: "didNotConnect"
        case .fetch(let failure): "fetch \(failure.code)"
        case .agentStopped: "agentStopped"
        }
    }

    func name(_ outcome: Machine.SaveOutcome) -> String {
        switch outcome {
        case .saved: "saved"
        case .failed(let error): "failed \(error.code ?? 0)"
        case .timedOut: "timedOut"
        case .appQuit: "appQuit"
        case .agentStopped: "agentStopped"
        }
    }

    // MARK: Receiving

    @Test("An app that runs hears willContinue at once, and the activity when the fetch brings it")
    func runningApp() {
        var machine = machine()
        let ticket = machine.ask()
        let id = UUID()
        #expect(lines(machine.begin(id, ticket: ticket, app: app, context: 1, running: session)) == ["willContinue 1 to app"])
        #expect(machine.underWay == (0, 1))
        #expect(lines(machine.fetched(id, .success(record()))) == ["deliver 1 a map"])
        #expect(machine.underWay == (0, 0))
        // A second result for the same continuation changes nothing.
        #expect(lines(machine.fetched(id, .success(record()))) == [])
    }

    @Test("A fetch that fails after willContinue fails in the app with the fetch's code")
    func fetchFails() {
        var machine = machine()
        let id = UUID()
        _ = machine.begin(id, ticket: machine.ask(), app: app, context: 1, running: session)
        #expect(lines(machine.fetched(id, .failure(ContinuationFailure(code: 4610, message: "late")))) == ["failInApp 1 fetch 4610"])
    }

    @Test("An app that does not run is started; the fetch that arrives meanwhile waits; on connecting the app hears willContinue and the activity at once")
    func startedApp() {
        var machine = machine()
        let id = UUID()
        #expect(lines(machine.begin(id, ticket: machine.ask(), app: app, context: 1, running: nil)) == ["launch \(app) #1"])
        #expect(lines(machine.launched(app, attempt: 1)) == ["schedule launch \(app) #1 in 10.0 seconds"])
        #expect(lines(machine.fetched(id, .success(record()))) == [])
        #expect(machine.underWay == (1, 0))
        #expect(lines(machine.appConnected(app, session: session)) == ["cancel launch \(app) #1", "willContinue 1 to app", "deliver 1 a map"])
        #expect(machine.underWay == (0, 0))
    }

    @Test("A prefetched activity (a web page's) goes to the app with willContinue")
    func prefetched() {
        var machine = machine()
        let actions = machine.begin(UUID(), ticket: machine.ask(), app: app, context: 1, running: session, fetched: .success(record("page")))
        #expect(lines(actions) == ["willContinue 1 to app", "deliver 1 page"])
    }

    @Test("Continuations for an app that is starting wait for the same start: one launch; the newest is told, the older ones fail unheard")
    func oneLaunch() {
        var machine = machine()
        let first = UUID(), second = UUID()
        #expect(lines(machine.begin(first, ticket: machine.ask(), app: app, context: 1, running: nil)) == ["launch \(app) #1"])
        #expect(lines(machine.begin(second, ticket: machine.ask(), app: app, context: 2, running: nil)) == [])
        #expect(lines(machine.appConnected(app, session: session)) == ["cancel launch \(app) #1", "fail 1 superseded", "willContinue 2 to app"])
        // The older one's fetch is of no use any more.
        #expect(lines(machine.fetched(first, .success(record()))) == [])
        #expect(lines(machine.fetched(second, .success(record()))) == ["deliver 2 a map"])
    }

    @Test("A newer continuation told ends the one told before with a failure in its app (3072), whichever app it is in")
    func newerTold() {
        var machine = machine()
        let first = UUID(), second = UUID(), elsewhere = UUID()
        _ = machine.begin(first, ticket: machine.ask(), app: app, context: 1, running: session)
        #expect(lines(machine.begin(second, ticket: machine.ask(), app: other, context: 2, running: elsewhere)) == ["failInApp 1 superseded", "willContinue 2 to other session"])
        #expect(lines(machine.fetched(first, .success(record()))) == [])
        #expect(lines(machine.fetched(second, .success(record()))) == ["deliver 2 a map"])
    }

    @Test("A continuation asked for while an older one's app starts wins, even before it has its app: the older one fails unheard when its app connects")
    func newerAskedWhileStarting() {
        var machine = machine()
        let first = UUID()
        _ = machine.begin(first, ticket: machine.ask(), app: app, context: 1, running: nil)
        _ = machine.ask()  // the newer one is still routing, say
        #expect(lines(machine.appConnected(app, session: session)) == ["cancel launch \(app) #1", "fail 1 superseded"])
    }

    @Test("A burst of twenty continuations to a starting app: one launch, and exactly the last is told and delivered; the nineteen others fail unheard")
    func burst() {
        var machine = machine()
        var ids: [UUID] = []
        var all: [String] = []
        for n in 1...20 {
            let id = UUID()
            ids.append(id)
            all += lines(machine.begin(id, ticket: machine.ask(), app: app, context: n, running: nil))
        }
        #expect(all == ["launch \(app) #1"])
        all = lines(machine.appConnected(app, session: session))
        for (n, id) in ids.enumerated() { all += lines(machine.fetched(id, .success(record("#\(n + 1)")))) }
        #expect(all == ["cancel launch \(app) #1"] + (1...19).map { "fail \($0) superseded" } + ["willContinue 20 to app", "deliver 20 #20"])
        #expect(machine.underWay == (0, 0))
    }

    @Test("The same burst to a running app: each is told in turn and ends the one before it in its app; only the last is delivered")
    func burstRunning() {
        var machine = machine()
        var all: [String] = []
        var ids: [UUID] = []
        for n in 1...20 {
            let id = UUID()
            ids.append(id)
            all += lines(machine.begin(id, ticket: machine.ask(), app: app, context: n, running: session))
        }
        for id in ids { all += lines(machine.fetched(id, .success(record("last")))) }
        #expect(all == ["willContinue 1 to app"] + (2...20).flatMap { ["failInApp \($0 - 1) superseded", "willContinue \($0) to app"] } + ["deliver 20 last"])
    }

    @Test("A launch that fails, an app that ends before connecting, and one that never connects each fail what waits for it, unheard")
    func launchEnds() {
        var machine = machine()
        _ = machine.begin(UUID(), ticket: machine.ask(), app: app, context: 1, running: nil)
        #expect(lines(machine.launchFailed(app, attempt: 1, reason: "no such file")) == ["cancel launch \(app) #1", "fail 1 launchFailed"])

        _ = machine.begin(UUID(), ticket: machine.ask(), app: app, context: 2, running: nil)
        _ = machine.launched(app, attempt: 2)
        #expect(lines(machine.appEnded(app, attempt: 2, how: "exit 1")) == ["cancel launch \(app) #2", "fail 2 endedBeforeConnecting"])

        _ = machine.begin(UUID(), ticket: machine.ask(), app: app, context: 3, running: nil)
        _ = machine.launched(app, attempt: 3)
        #expect(lines(machine.deadlinePassed(.launch(app: app, attempt: 3))) == ["fail 3 didNotConnect"])
        #expect(machine.underWay == (0, 0))
    }

    @Test("What arrives late for an earlier start (its deadline, its process's end, its launch) changes nothing for the next start of the same app")
    func lateForEarlierStart() {
        var machine = machine()
        _ = machine.begin(UUID(), ticket: machine.ask(), app: app, context: 1, running: nil)
        _ = machine.launched(app, attempt: 1)
        _ = machine.appConnected(app, session: session)
        _ = machine.begin(UUID(), ticket: machine.ask(), app: app, context: 2, running: nil)
        #expect(lines(machine.deadlinePassed(.launch(app: app, attempt: 1))) == [])
        #expect(lines(machine.appEnded(app, attempt: 1, how: "killed")) == [])
        #expect(lines(machine.launched(app, attempt: 1)) == [])
        // The first is told (its fetch is still out), the second waits for its own start.
        #expect(machine.underWay == (1, 1))
    }

    @Test("An app that quits after willContinue fails its continuation for the asker; the app cannot be told")
    func appQuits() {
        var machine = machine()
        let id = UUID()
        _ = machine.begin(id, ticket: machine.ask(), app: app, context: 1, running: session)
        #expect(lines(machine.sessionEnded(UUID())) == [])
        #expect(lines(machine.sessionEnded(session)) == ["fail 1 appQuit"])
        #expect(lines(machine.fetched(id, .success(record()))) == [])
    }

    // MARK: Origin

    @Test("A save is asked of the app with a deadline; the app's answer cancels it and answers the fetch")
    func save() {
        var machine = machine()
        #expect(lines(machine.save(activity, session: session, waiter: "fetch")) == ["askToSave #1", "schedule save #1 in 5.0 seconds"])
        let saved = ActivityRecord(activity: ActivityAnnouncement(id: activity, activityType: "t"))
        #expect(lines(machine.saved(1, session: session, .success(saved))) == ["cancel save #1", "answerSave fetch saved"])
        #expect(machine.savesAwaited == 0)
    }

    @Test("An answer from another session, to an unknown request, or a second answer changes nothing; an app's error is passed on")
    func saveAnswers() {
        var machine = machine()
        _ = machine.save(activity, session: session, waiter: "fetch")
        #expect(lines(machine.saved(1, session: UUID(), .failure(LocalError(.failed, "not mine")))) == [])
        #expect(lines(machine.saved(7, session: session, .failure(LocalError(.failed, "unknown")))) == [])
        #expect(lines(machine.saved(1, session: session, .failure(LocalError(.continuation, code: 4608, "cannot")))) == ["cancel save #1", "answerSave fetch failed 4608"])
        #expect(lines(machine.saved(1, session: session, .failure(LocalError(.continuation, code: 4608, "again")))) == [])
    }

    @Test("A save past its deadline times out; the app's late answer changes nothing")
    func saveTimesOut() {
        var machine = machine()
        _ = machine.save(activity, session: session, waiter: "fetch")
        #expect(lines(machine.deadlinePassed(.save(request: 1))) == ["answerSave fetch timedOut"])
        #expect(lines(machine.deadlinePassed(.save(request: 1))) == [])
        #expect(lines(machine.saved(1, session: session, .failure(LocalError(.failed, "late")))) == [])
    }

    @Test("An app that quits fails its saves, not another app's; each save has its own request")
    func saveAppQuits() {
        var machine = machine()
        let elsewhere = UUID()
        _ = machine.save(activity, session: session, waiter: "a")
        _ = machine.save(activity, session: elsewhere, waiter: "b")
        _ = machine.save(activity, session: session, waiter: "c")
        #expect(lines(machine.sessionEnded(session)) == ["cancel save #1", "answerSave a appQuit", "cancel save #3", "answerSave c appQuit"])
        #expect(machine.savesAwaited == 1)
    }

    @Test("Stopping fails everything under way: launches, continuations waiting or told, saves")
    func stopping() {
        var machine = machine()
        _ = machine.begin(UUID(), ticket: machine.ask(), app: other, context: 1, running: session)
        _ = machine.begin(UUID(), ticket: machine.ask(), app: app, context: 2, running: nil)
        _ = machine.save(activity, session: session, waiter: "fetch")
        #expect(lines(machine.stopped()) == ["cancel launch \(app) #1", "fail 1 agentStopped", "fail 2 agentStopped", "cancel save #1", "answerSave fetch agentStopped"])
        #expect(machine.underWay == (0, 0))
        #expect(machine.savesAwaited == 0)
        // Asked for before the stop, begun after it (its caller was still routing it): it
        // fails at once, and nothing is started for it.
        #expect(lines(machine.begin(UUID(), ticket: machine.ask(), app: app, context: 3, running: nil)) == ["fail 3 agentStopped"])
        #expect(lines(machine.begin(UUID(), ticket: machine.ask(), app: other, context: 4, running: session)) == ["fail 4 agentStopped"])
        #expect(lines(machine.save(activity, session: session, waiter: "late")) == ["answerSave late agentStopped"])
        #expect(machine.underWay == (0, 0))
    }

    // MARK: Any order

    @Test("Any interleaving of continuations, app starts and ends, fetches, deadlines and sessions ending: each continuation ends exactly once, an app hears deliver or fail only after willContinue and at most once, and at most one is told at a time")
    func anyOrder() {
        var generator = SeededGenerator(seed: 0xC0_17)
        for _ in 0..<300 {
            var machine = machine()
            let apps = [app, other]
            var sessions: [String: UUID] = [:]
            var attempts: [String: UInt64] = [:]
            var started: [UUID] = []
            var ended: [Int: Int] = [:]
            var told: Set<Int> = []
            var heard: [Int: Int] = [:]
            var scheduled: Set<ContinuationDeadline> = []
            var contexts = 0

            func apply(_ actions: [Machine.Action]) {
                for action in actions {
                    switch action {
                    case .launch(let app, _, let attempt): attempts[app] = attempt
                    case .schedule(let deadline, _): scheduled.insert(deadline)
                    case .cancel(let deadline): scheduled.remove(deadline)
                    case .willContinue(let context, _):
                        #expect(!told.contains(context), "told twice")
                        told.insert(context)
                        let underWay = machine.underWay.told
                        #expect(underWay <= 1, "more than one told")
                    case .deliver(let context, _, _), .failInApp(let context, _, _):
                        #expect(told.contains(context), "heard before willContinue")
                        heard[context, default: 0] += 1
                        ended[context, default: 0] += 1
                    case .fail(let context, _):
                        ended[context, default: 0] += 1
                    case .askToSave, .answerSave: break
                    }
                }
            }

            for _ in 0..<30 {
                switch Int.random(in: 0..<7, using: &generator) {
                case 0, 1:
                    contexts += 1
                    let id = UUID()
                    started.append(id)
                    let target = apps.randomElement(using: &generator)!
                    apply(machine.begin(id, ticket: machine.ask(), app: target, context: contexts, running: sessions[target]))
                case 2:
                    let target = apps.randomElement(using: &generator)!
                    if sessions[target] == nil, Bool.random(using: &generator) {
                        let session = UUID()
                        sessions[target] = session
                        apply(machine.appConnected(target, session: session))
                    } else if let attempt = attempts[target] {
                        apply(machine.launched(target, attempt: attempt))
                    }
                case 3:
                    if let id = started.randomElement(using: &generator) {
                        apply(machine.fetched(id, Bool.random(using: &generator) ? .success(record()) : .failure(ContinuationFailure(code: 4609, message: "gone"))))
                    }
                case 4:
                    if let deadline = scheduled.randomElement(using: &generator) {
                        scheduled.remove(deadline)
                        apply(machine.deadlinePassed(deadline))
                    }
                case 5:
                    let target = apps.randomElement(using: &generator)!
                    if let session = sessions.removeValue(forKey: target) {
                        apply(machine.sessionEnded(session))
                    } else if let attempt = attempts[target] {
                        apply(Bool.random(using: &generator)
                            ? machine.appEnded(target, attempt: attempt, how: "exit 1") : machine.launchFailed(target, attempt: attempt, reason: "no"))
                    }
                default:
                    if let id = started.randomElement(using: &generator) {
                        apply(machine.fetched(id, .success(record())))
                    }
                }
            }
            apply(machine.stopped())
            for n in 1...max(contexts, 1) where contexts > 0 {
                #expect(ended[n] == 1, "continuation \(n) ended \(ended[n] ?? 0) times")
                #expect((heard[n] ?? 0) <= 1)
            }
            #expect(scheduled.isEmpty, "deadlines left running: \(scheduled)")
        }
    }
}
