#include "CHandoffVersion.h"

// The one place the version is written. A build of another version (the package test's
// upgrade: `HANDOFF_VERSION=… Scripts/package-deb.sh`) links the programs with a replacement
// for this function instead (ld's --wrap), so that only the linker runs again: anything that
// changes this target recompiles every Swift module that imports it.
const char *handoff_version(void) { return "0.3.0"; }
