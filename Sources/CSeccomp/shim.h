// libseccomp, found through pkg-config (Debian: libseccomp-dev).
#include <seccomp.h>
