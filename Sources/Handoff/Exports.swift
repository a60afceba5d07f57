// The activity's values (`ActivityAnnouncement`, `ActivityRecord`, `ContinuationFailure`) and
// what the app library shares with the agent (the manifest, the router, the `userInfo` codec)
// live below this module; an app sees them as before, here.
@_exported import HandoffCore
@_exported import HandoffModel
