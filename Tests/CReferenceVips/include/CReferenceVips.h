#ifndef CREFERENCEVIPS_H
#define CREFERENCEVIPS_H
#include <stddef.h>

/// The fidelity tests' reference thumbnail, written straight against libvips and
/// independent of the product's code: the full decode (no shrink-on-load), turned
/// upright, converted to sRGB through the embedded profile, premultiplied RGBA as
/// floats, reduced with a pure Lanczos3 kernel (or enlarged with Lanczos3) so that
/// it covers width × height, then cropped exactly at the centre.
/// On success returns 0 and sets *pixels to width × height × 4 floats (0…255,
/// premultiplied), to be freed with reference_free; on failure returns -1 and
/// copies libvips's message into error.
int reference_thumbnail(const char *path, int width, int height, float **pixels, char *error, size_t error_size);

/// Frees what reference_thumbnail returned.
void reference_free(void *pixels);

/// Makes a test image: `source` scaled and centre-cropped to exactly
/// width × height, written to `destination` (its suffix picks the format, and
/// may carry libvips save options: "x.png[interlace]", "x.jpg[Q=90]").
int reference_make_image(const char *source, const char *destination, int width, int height, char *error,
                         size_t error_size);

/// Makes a test image in another encoding: `source` converted by libvips to
/// `interpretation` (a libvips nick: "scrgb", "lab", "xyz", "rgb16", "grey16",
/// "b-w"), with an opaque alpha band when `alpha`, written to `destination`
/// (its suffix and options pick the format: "x.tif[profile=srgb]").
int reference_convert(const char *source, const char *destination, const char *interpretation, int alpha, char *error,
                      size_t error_size);

#endif
