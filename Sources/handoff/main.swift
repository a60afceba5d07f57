import HandoffCommandLine

// `handoff`, the command people and scripts type. Its plain `continue` forms run here, in a
// program that links neither Foundation nor the argument parser, small enough to start in well
// under a millisecond (linked as a static executable for an install: docs/agent.md,
// Installing); every other command, help and every mistake included, runs the full command
// line, `handoff-cli`, in this process's place, with the same arguments.

let arguments = Array(CommandLine.arguments.dropFirst())
if let quick = QuickContinue(arguments: arguments) { quick.run() }
FullCommandLine.run()
