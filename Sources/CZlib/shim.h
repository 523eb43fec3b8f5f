// zlib, found through pkg-config (Debian: zlib1g-dev, which libvips-dev needs
// too). Only its crc32: a PNG read back from thumbpipe's own state is checked
// chunk by chunk against the CRCs it carries, with the implementation libpng uses.
#include <zlib.h>
