#ifndef HANDOFF_CFUZZERDRIVER_H
#define HANDOFF_CFUZZERDRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (LLVM 11 and later), which handoff-fuzz's main calls when it is built
/// with -sanitize=fuzzer: SwiftPM gives executables a main of their own, so libFuzzer's
/// main is not the one that runs.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
