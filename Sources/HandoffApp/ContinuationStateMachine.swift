import Foundation
import Handoff

/// Decides what an app's delegate hears about continuations, so that each
/// `willContinueUserActivityWithType` is followed by exactly one `continue` or one
/// `didFailToContinue`, with the same type, whatever order the events arrive in.
///
/// ```
///            willContinue(a)                 deliver(a) / fail(a)
///   idle ──────────────────────▶ pending(a) ─────────────────────▶ idle
///                                   │  willContinue(b)
///                                   ▼
///              didFail(a, 3072), then pending(b)
/// ```
/// Events for a continuation that already ended, was superseded or was never announced are
/// dropped: a late delivery must not reach the app after its failure was reported.
struct ContinuationStateMachine<Activity> {
    enum State {
        case idle
        case pending(id: UUID, activityType: String)
    }

    /// What the app's delegate is to be told, in order.
    enum Action {
        case willContinue(activityType: String)
        case `continue`(Activity)
        case didFail(activityType: String, ContinuationFailure)
    }

    private(set) var state: State = .idle
    /// Continuations that ended, so that their late or repeated events are dropped.
    private var ended: [UUID] = []
    private static var endedMemory: Int { 64 }

    private mutating func end(_ id: UUID) {
        ended.append(id)
        if ended.count > Self.endedMemory { ended.removeFirst(ended.count - Self.endedMemory) }
    }

    mutating func willContinue(_ id: UUID, activityType: String) -> [Action] {
        if ended.contains(id) { return [] }
        switch state {
        case .pending(let current, _) where current == id:
            return []
        case .pending(let current, let currentType):
            end(current)
            state = .pending(id: id, activityType: activityType)
            let superseded = ContinuationFailure.cancelled("a newer continuation replaced the one of '\(currentType)'")
            return [.didFail(activityType: currentType, superseded), .willContinue(activityType: activityType)]
        case .idle:
            state = .pending(id: id, activityType: activityType)
            return [.willContinue(activityType: activityType)]
        }
    }

    mutating func deliver(_ id: UUID, _ activity: Activity) -> [Action] {
        guard case .pending(let current, _) = state, current == id else { return [] }
        end(id)
        state = .idle
        return [.continue(activity)]
    }

    mutating func fail(_ id: UUID, _ failure: ContinuationFailure) -> [Action] {
        guard case .pending(let current, let activityType) = state, current == id else { return [] }
        end(id)
        state = .idle
        return [.didFail(activityType: activityType, failure)]
    }
}
