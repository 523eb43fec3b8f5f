// CVipsShim: fixed-arity wrappers over libvips.
//
// Why this exists: libvips's API takes its optional arguments as NULL-terminated
// variadic lists (`vips_resize(in, &out, scale, "kernel", ..., NULL)`), and Swift
// cannot call C variadic functions. Every such call thumbpipe makes goes through
// one function here, with every argument spelled out; besides them, the few
// process-wide settings (warning collection, loader blocking, module loading)
// only C can make. thumbpipe's own pixel kernels live in CThumbKernels. Errors
// are read from vips_error_buffer() by the Swift side, in one place (Vips.swift).
//
// The operations that return int return 0 on success and -1 on failure (libvips's
// convention); the queries return their answer: CVipsShim_get_int its value,
// CVipsShim_has_field 0 or 1, CVipsShim_loader_shrink_kind 0, 1 or 2 (-1 for an
// unknown loader).
#ifndef CVIPSSHIM_H
#define CVIPSSHIM_H

#include <stddef.h>
#include <stdint.h>
#include <vips/vips.h>

/// The warnings libvips and its loaders logged since the last call, one per
/// line, or NULL; free with CVipsShim_free.
char *CVipsShim_take_warnings(void);

/// Blocks every libvips loader (and every operation libvips marks untrusted)
/// except the loader classes named in `allowed` (e.g. "VipsForeignLoadJpeg").
void CVipsShim_restrict_loaders(const char *const *allowed, int count);

/// Starts libvips (vips_init), turns the operation cache off for batch work and
/// sets libvips's own worker threads per image.
int CVipsShim_init(const char *argv0, int threads_per_image);

/// Loads one libvips module (e.g. .../vips-modules-8.14/vips-heif.so), as
/// vips_init loads every module of its module folder.
int CVipsShim_load_module(const char *path);
/// The file libvips itself was loaded from (dladdr), or NULL: where its modules
/// are, found without vips_guess_prefix, which keeps its first answer for good.
const char *CVipsShim_library_file(void);

/// The loader libvips picks for a file (e.g. "VipsForeignLoadJpegFile"), or NULL.
const char *CVipsShim_find_loader(const char *path);

/// How many times this process asked libvips to find a loader for a file:
/// every loader allowed is asked whether it recognises the file, so a test
/// can check that a refused format was refused before any was asked.
unsigned long CVipsShim_find_loader_calls(void);

/// Opens a file through its loader. `shrink` (an integer, for loaders that have
/// it: JPEG) or `scale` (for loaders that have it: WebP, SVG, PDF) is applied at
/// load time when > 1 / < 1. `fail_on` is a VipsFailOn value. `sequential`
/// selects VIPS_ACCESS_SEQUENTIAL. A multi-page source loads its first page
/// (libvips's default `n` of 1: no page option is set).
int CVipsShim_load(const char *path, int shrink, double scale, int fail_on,
                   int sequential, VipsImage **out);

/// A source's bytes, read whole from an open descriptor (pread from offset 0,
/// at most `max_bytes`, which 0 leaves unbounded) into a blob libvips loads
/// from: the worker never opens a source by name. NULL with `*error` an errno
/// (EFBIG when larger than `max_bytes`). Release with CVipsShim_blob_release.
VipsBlob *CVipsShim_blob_read_fd(int fd, size_t max_bytes, int *error);

/// The bytes of a blob.
const void *CVipsShim_blob_bytes(VipsBlob *blob, size_t *length);

/// Drops a reference to a blob (images loaded from it keep their own).
void CVipsShim_blob_release(VipsBlob *blob);

/// The loader libvips picks for a blob's bytes ("VipsForeignLoadJpegSource",
/// or a buffer loader for a format with no source loader), or NULL.
const char *CVipsShim_find_loader_blob(VipsBlob *blob);

/// CVipsShim_load from a blob's bytes.
int CVipsShim_load_blob(VipsBlob *blob, int shrink, double scale, int fail_on, int sequential, VipsImage **out);

/// Whether a loader (as CVipsShim_find_loader names it) has a load-time integer
/// `shrink` (1) or a `scale` (2) option, or neither (0).
int CVipsShim_loader_shrink_kind(const char *loader);

/// vips_icc_transform to sRGB, 8 bit, relative intent, through the embedded
/// profile, falling back to `fallback_profile` ("srgb", "cmyk") when none.
int CVipsShim_icc_to_srgb(VipsImage *in, VipsImage **out, const char *fallback_profile);

/// vips_colourspace to sRGB.
int CVipsShim_colourspace_srgb(VipsImage *in, VipsImage **out);

/// Float or double RGB device values (0–1, as a float TIFF with an ICC profile
/// holds them) as 16-bit ones (0–65535, clamped) tagged RGB16, so that lcms reads
/// them through their embedded profile: libvips's ICC import takes floats as
/// 0–255 and makes them black.
int CVipsShim_float_to_rgb16(VipsImage *in, VipsImage **out);

/// vips_cast to 8-bit unsigned, with shift for 16-bit sources.
int CVipsShim_cast_uchar(VipsImage *in, VipsImage **out, int shift);

/// vips_bandjoin_const1.
int CVipsShim_bandjoin_const1(VipsImage *in, VipsImage **out, double c);

/// vips_extract_band(in, out, band, "n", n).
int CVipsShim_extract_bands(VipsImage *in, VipsImage **out, int band, int n);

/// vips_premultiply (AspectFillScale undoes it on the canvas-sized result itself).
int CVipsShim_premultiply(VipsImage *in, VipsImage **out);

/// vips_resize with the Lanczos3 kernel; separate horizontal and vertical scales.
int CVipsShim_resize(VipsImage *in, VipsImage **out, double hscale, double vscale);

/// vips_autorot: applies and clears the EXIF orientation.
int CVipsShim_autorot(VipsImage *in, VipsImage **out);

/// vips_crop.
int CVipsShim_crop(VipsImage *in, VipsImage **out, int left, int top, int width, int height);

/// vips_pngsave_buffer, no metadata, no interlace.
int CVipsShim_pngsave_buffer(VipsImage *in, void **buf, size_t *len, int compression);

/// vips_jpegsave_target to an open file descriptor: baseline, `quality`,
/// 4:2:0 chroma, optimised Huffman tables when asked (libjpeg then holds the
/// whole image's coefficients); metadata as attached to the image.
int CVipsShim_jpegsave_fd(VipsImage *in, int fd, int quality, int optimize_coding);

/// Removes metadata on a copy: every item but the EXIF orientation (so a saved
/// JPEG carries no GPS, maker notes, thumbnails or profiles), or with
/// `keep_all_but_profile` only the ICC profile (the pixels are sRGB by now).
int CVipsShim_remove_metadata(VipsImage *in, VipsImage **out, int keep_all_but_profile);

/// The string value of a header field, or NULL (vips_image_get_string).
const char *CVipsShim_get_string(VipsImage *image, const char *name);

/// The integer value of a header field, or `fallback`.
int CVipsShim_get_int(VipsImage *image, const char *name, int fallback);

/// Whether a header field exists.
int CVipsShim_has_field(VipsImage *image, const char *name);

/// g_object_unref.
void CVipsShim_unref(VipsImage *image);

/// g_free (for buffers libvips allocates).
void CVipsShim_free(void *p);

/// vips_text: renders `text` as an 8-bit coverage mask, wrapped at `width`
/// pixels, with a Pango font description such as "sans 10".
int CVipsShim_text(VipsImage **out, const char *text, const char *font, int width, int dpi);

/// vips_profile_load: the bytes of a profile libvips knows by name ("srgb").
/// `*blob` holds them; release it with CVipsShim_blob_unref.
int CVipsShim_profile_load(const char *name, const void **data, size_t *length, void **blob);

/// Releases a blob from CVipsShim_profile_load.
void CVipsShim_blob_unref(void *blob);

/// Computes every pixel of `in` in full-width strips and discards them.
int CVipsShim_drain(VipsImage *in);

#endif
