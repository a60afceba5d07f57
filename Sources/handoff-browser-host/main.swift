import HandoffBrowserHost

// The browser extension's native-messaging host (Sources/HandoffBrowserHost).
BrowserHostMain.main()
