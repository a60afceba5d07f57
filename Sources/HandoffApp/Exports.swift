// `AppManifest` and `ActivityRouter` live below the app library, shared with the agent; an
// app or a test that imports this module sees them as before.
@_exported import HandoffCore
