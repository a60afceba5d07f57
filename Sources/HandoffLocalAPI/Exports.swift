// Frames are the local socket's unit as they are the links'; they live below both.
@_exported import HandoffFraming
// The activity's announcement and record, which the socket carries as JSON.
@_exported import HandoffModel
// The socket's blocking calls, its errors and its JSON's primitives, which the `handoff` front
// uses without Foundation.
@_exported import HandoffLocalSocket
