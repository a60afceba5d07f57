// Frames are shared with the local API, which the app library reads without Crypto; both
// take them from HandoffFraming, which has no I/O, so this module stays bytes in, values out.
@_exported import HandoffFraming
