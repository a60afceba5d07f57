// Frames are the local socket's unit as they are the links'; they live below both.
@_exported import HandoffFraming
