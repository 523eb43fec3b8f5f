// Why: the contact sheet asks fontconfig (the library pango, and so libvips's
// text, already chooses fonts with) which characters of a label no installed
// font has, so it can say so instead of drawing boxes silently.
#ifndef CFONTCONFIG_SHIM_H
#define CFONTCONFIG_SHIM_H
#include <fontconfig/fontconfig.h>
#endif
