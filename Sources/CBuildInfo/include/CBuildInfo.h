// Why this target exists: `thumbpipe --version` names the source revision it was
// built from. Swift has no way to take a value from the build's command line, but
// a C target can take a preprocessor define, and Package.swift sets one from
// THUMBPIPE_REVISION (the Makefile passes `git describe`). Only this file then
// depends on the revision, so a new revision rebuilds one C file, not the package.
#ifndef CBUILDINFO_H
#define CBUILDINFO_H

/// The source revision of this build ("unknown" when the build was not told).
const char *CBuildInfo_revision(void);

#endif
