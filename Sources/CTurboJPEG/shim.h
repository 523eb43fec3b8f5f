// libjpeg-turbo's TurboJPEG API, found through pkg-config (Debian: libturbojpeg0-dev).
#include <turbojpeg.h>
