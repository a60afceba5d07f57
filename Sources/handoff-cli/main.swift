import HandoffCLI

// The full command line (Sources/HandoffCLI); `handoff` hands it every command but a plain continue.
await HandoffMain.main()
