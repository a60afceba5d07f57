import HandoffDaemon

// The agent (Sources/HandoffDaemon).
await HandoffDaemonMain.main()
