#include "CBuildInfo.h"

#ifndef THUMBPIPE_REVISION
#define THUMBPIPE_REVISION "unknown"
#endif

const char *CBuildInfo_revision(void) { return THUMBPIPE_REVISION; }
