// Frames are shared with the local API, which the app library reads without Crypto.
@_exported import HandoffLocalAPI
