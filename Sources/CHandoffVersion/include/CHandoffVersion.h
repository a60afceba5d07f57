// Handoff's version, in one place: every program (`handoffd --version`, `handoff --version`,
// the session service, the browser host) and the Debian package (Scripts/package-deb.sh) read
// it from here.
#ifndef C_HANDOFF_VERSION_H
#define C_HANDOFF_VERSION_H

/// The version of this build of Handoff, such as "0.3.0".
const char *handoff_version(void);

#endif
