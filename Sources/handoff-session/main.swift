import HandoffSessionService

// The graphical session's service (Sources/HandoffSessionService).
SessionServiceMain.main()
