// CThumbKernels: thumbpipe's own pixel kernels, as libvips operations (the
// thumbnail tap and its resample, the table-driven sRGB conversion, the
// pipeline clocks). See CThumbKernels.c for why they are in C.
//
// Functions returning int return 0 on success and -1 on failure, with the
// reason in libvips's error buffer (libvips's convention).
#ifndef CTHUMBKERNELS_H
#define CTHUMBKERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <vips/vips.h>

/// The thumbnail tap: a pass-through that box-sums the pixels the store's
/// pipeline pulls, so one decode feeds both the store file and the thumbnail.
typedef struct CThumbKernelsTap CThumbKernelsTap;

/// A tap for an 8-bit `width × height` image of 3 or 4 bands, averaging
/// `factor × factor` blocks, for one resample of its block means with Lanczos3
/// by `hscale × vscale` (as `vips_resize` would, centres aligned, edges
/// copied) over the output window [left, left + rw) × [top, top + rh). Only the
/// blocks that window reads are summed. NULL for impossible arguments. The
/// caller owns one reference.
CThumbKernelsTap *CThumbKernels_tap_new(int width, int height, int bands, int factor, double hscale, double vscale,
                                        int left, int top, int rw, int rh);

/// Adds a reference to a tap.
CThumbKernelsTap *CThumbKernels_tap_ref(CThumbKernelsTap *tap);

/// Drops a reference; the last one frees the tap.
void CThumbKernels_tap_unref(CThumbKernelsTap *tap);

/// The bytes a tap holds for its sums and bookkeeping (pixels_done aside,
/// which only a rectangle that is not a whole row brings).
size_t CThumbKernels_tap_bytes(const CThumbKernelsTap *tap);

/// `out` is `in`, pixel for pixel; every pixel computed through it is added to
/// `tap` once, however the regions asked for overlap. `out` holds a reference
/// to `tap` as long as it lives.
int CThumbKernels_tap(VipsImage *in, VipsImage **out, CThumbKernelsTap *tap);

/// Adds rows [first, first + count) of a JPEG's planes to a 3-band tap instead
/// of its pixels, in order, top to bottom: `y[i]` is luma row `first + i` (the
/// tap's width), `cb[j]` and `cr[j]` chroma row `(first >> vshift) + j`, chroma
/// subsampled by `1 << hshift` across and `1 << vshift` down (each 0 or 1;
/// `first` a multiple of `1 << vshift`). Each block's means of Y, Cb and Cr are
/// turned into RGB at the block (JFIF's YCbCr; exact up to rounding and
/// clipping, the conversion being affine). `y_width` and `c_width` are how many
/// bytes each luma and chroma row holds: rows narrower than the tap's columns are
/// refused (-1), never read past.
int CThumbKernels_tap_add_ycbcr_rows(CThumbKernelsTap *tap, int first, int count, unsigned char *const *y,
                                     unsigned char *const *cb, unsigned char *const *cr, int hshift, int vshift,
                                     int y_width, int c_width);

/// Adds source rows [first, first + count) of a JPEG to a 3-band tap from its
/// blocks' sums alone (no inverse DCT): `sums[c]` holds component c's blocks
/// in those rows, `ceil(count / block_height[c])` rows of `wide[c]` each, every
/// one the sum of its 64 decoded samples (8 × its dequantized DC + 8192) and
/// covering `block_width[c] × block_height[c]` source pixels (8 or 16 each).
/// The tap's factor must be a multiple of 16, so that every component's blocks
/// tile its blocks: their means are then the decoded pixels' means, up to
/// rounding and clipping. `first` is a multiple of every block height, and so
/// is `count` but at the image's end. Bands come in order, top to bottom; a
/// tap fed rows of pixels refuses sums (-1), and the other way round.
int CThumbKernels_tap_add_block_sums(CThumbKernelsTap *tap, int first, int count, const int32_t *const sums[3],
                                     const int wide[3], const int block_width[3], const int block_height[3]);

/// Adds rows [first, first + count) of an 8-bit RGB image to a 3-band tap, in
/// order, top to bottom: `rows[i]` is row `first + i`, `width` pixels (3 bytes
/// each) long. Rows narrower than the tap's columns are refused (-1), never read past.
int CThumbKernels_tap_add_rgb_rows(CThumbKernelsTap *tap, int first, int count, unsigned char *const *rows, int width);

/// The tap's resample (as made): premultiplied RGBA floats on 0…255, `rw × rh × 4`
/// of them, into `out`.
int CThumbKernels_tap_resample(CThumbKernelsTap *tap, float *out);

/// Steps of the linear-light to 8-bit sRGB table of CThumbKernels_shaper_to_srgb.
#define CTHUMBKERNELS_SHAPER_STEPS 16384

/// Converts 8-bit RGB(A) pixels in a matrix/TRC profile to sRGB, as lcms's
/// relative-intent transform does, through tables: `linear` (3 × 256 floats,
/// the source's tone curves), `matrix` (3 × 3, row-major: source linear RGB to
/// sRGB linear RGB) and `encode` (CTHUMBKERNELS_SHAPER_STEPS bytes: linear light
/// 0…1 to 8-bit sRGB). Alpha passes through; the output has no ICC profile and
/// holds its own copy of the tables.
int CThumbKernels_shaper_to_srgb(VipsImage *in, VipsImage **out, const float *linear, const float *matrix,
                                 const unsigned char *encode);

/// The tables of CThumbKernels_shaper_to_srgb, built once, to convert rows of
/// pixels outside libvips (the plane path's decoded bands).
typedef struct CThumbKernelsShaper CThumbKernelsShaper;

/// The tables for `linear`, `matrix` and `encode` (as CThumbKernels_shaper_to_srgb
/// takes them); NULL when a matrix entry is past ±10 (a crafted profile).
CThumbKernelsShaper *CThumbKernels_shaper_new(const float *linear, const float *matrix, const unsigned char *encode);

void CThumbKernels_shaper_free(CThumbKernelsShaper *shaper);

/// Converts `count` 8-bit RGB pixels (3 bytes each) to sRGB in place, exactly
/// as CThumbKernels_shaper_to_srgb converts them.
void CThumbKernels_shaper_rgb(const CThumbKernelsShaper *shaper, unsigned char *rgb, size_t count);

/// 1 when CThumbKernels_shaper_new can make a shaper of `matrix` (its 9 entries
/// fit the integer sums), 0 when it is out of range.
int CThumbKernels_shaper_fits(const float *matrix);

/// 1 when CThumbKernels_shaper_rgb runs its AVX-512 loop on this CPU (AVX-512 BW
/// and VBMI), 0 when it runs the portable one.
int CThumbKernels_shaper_vector(void);

/// CThumbKernels_shaper_rgb without vector instructions (what a CPU without
/// AVX-512 runs), for tests that compare the two.
void CThumbKernels_shaper_rgb_portable(const CThumbKernelsShaper *shaper, unsigned char *rgb, size_t count);

/// A counter of nanoseconds that pipeline timers add to. The caller owns one reference.
typedef struct CThumbKernelsClock CThumbKernelsClock;

CThumbKernelsClock *CThumbKernels_clock_new(void);
void CThumbKernels_clock_unref(CThumbKernelsClock *clock);
int64_t CThumbKernels_clock_nanoseconds(const CThumbKernelsClock *clock);

/// `out` is `in`, pixel for pixel; the time spent computing `in`'s pixels (all
/// that lies upstream) is added to `clock`, which `out` holds as long as it lives.
int CThumbKernels_timer(VipsImage *in, VipsImage **out, CThumbKernelsClock *clock);

#endif
