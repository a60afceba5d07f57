// Frames are shared with the local API, which the app library reads without Crypto; both
// take them from HandoffFraming, which has no I/O, so this module stays bytes in, values out.
@_exported import HandoffFraming
// The activity's announcement and record, which links carry in this module's encoding.
@_exported import HandoffModel
