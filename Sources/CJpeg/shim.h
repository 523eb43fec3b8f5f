// libjpeg-turbo's libjpeg API, found through pkg-config (Debian: libjpeg62-turbo-dev).
// jpeglib.h needs FILE and size_t declared first.
#include <stddef.h>
#include <stdio.h>
#include <jpeglib.h>
