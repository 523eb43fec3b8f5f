// CJpegPlanes: a JPEG's store file made through its Y, Cb and Cr planes.
//
// Why this exists: libvips decodes a JPEG to RGB (upsampling the chroma and
// converting YCbCr to RGB) and its encoder converts back and subsamples again.
// For an 8-bit YCbCr JPEG in sRGB (or untagged) the store needs neither:
// libjpeg-turbo's raw-data calls decode the planes as they are stored and
// encode from planes, so the store is made from the source's own samples, a
// band of rows at a time (an upright source holds no image in memory), and the
// thumbnail tap reads the same bands. A 4:2:0 one whose turn keeps its block
// grid needs not even its samples: its blocks are requantized to the store's
// tables as coded (libjpeg's two DCTs wrapped through jpegint.h, the hooks
// libjpeg-turbo installs it for), the inverse one run only for the tap. A JPEG
// in another RGB matrix/TRC profile (Display P3, Adobe RGB) is decoded to RGB a
// band at a time instead, each band converted to sRGB in place (the tables
// libvips's path uses), tapped, and encoded from RGB as libvips's encoder does.
// The caller falls back to libvips on any error here (the function returns 0,
// or -1 with a reason in `error`).
#ifndef CJPEGPLANES_H
#define CJPEGPLANES_H

/// The libjpeg-turbo version this code was compiled against, as
/// LIBJPEG_TURBO_VERSION_NUMBER gives it (2001005 for 2.1.5).
int CJpegPlanes_libjpegTurboVersion(void);

#include "CThumbKernels.h"
#include <stddef.h>
#include <stdint.h>

/// What to make of a JPEG.
typedef struct {
    /// The size the caller expects (its header's): any other is refused.
    int width, height;
    /// EXIF orientation 1–8: the store is turned upright as libvips's autorot turns pixels.
    int orientation;
    /// The store's quality (1–100, libjpeg's tables), or 0 for no store.
    int quality;
    /// Optimised Huffman tables (a second pass over the coefficients), as libvips's `optimize_coding`.
    int optimize_coding;
    /// Filled from the decoded planes when not NULL (a 3-band tap of `width × height`).
    CThumbKernelsTap *tap;
    /// When not NULL, the source's profile to sRGB: decoded to RGB, converted, re-encoded.
    const CThumbKernelsShaper *shaper;
    /// A 4:2:0 source (without a shaper) whose turn keeps its block grid is
    /// taken as coded when a store is made: the store's blocks requantized from
    /// the source's coefficients (turned as the source is), no forward DCT run,
    /// and the inverse DCT run only for the tap (the same pixels as decoding).
    int blocks;
    /// With a tap (and without a shaper): the tap is fed each block's sum from
    /// its DC alone (CThumbKernels_tap_add_block_sums; the tap's factor a
    /// multiple of 16), and no inverse DCT runs unless the store is encoded from pixels.
    int tap_means;
    /// A turned 4:2:0 source not taken as coded (its turn moves the block grid)
    /// is held as coded through the decode, its pixels decoded and turned band
    /// by band for the encoder (not held whole as decoded planes), unless a tap
    /// reads its pixels, or its file is so dense that the packed blocks would take
    /// more than the planes (over a fifth of them in bytes): the same store, byte for byte.
    /// A turned source converted with a shaper whose width and height are even is
    /// held as the store's YCbCr (luma and 4:2:0 chroma) rather than as RGB: the
    /// same store, byte for byte, in half the memory.
    int hold_turned;
} CJpegPlanesJob;

/// What was made.
typedef struct {
    /// The store file's bytes (free with CJpegPlanes_free_buffer), NULL without a store.
    unsigned char *jpeg;
    unsigned long size;
    /// Nanoseconds decoding (the tap and the chroma's downsampling included),
    /// converting colour (with a shaper) and encoding (turning the planes
    /// upright included); the three interleave.
    int64_t decode_ns, colour_ns, encode_ns;
    /// Whether the store was requantized from the source's blocks (`blocks`).
    int requantized;
    /// Whether a turned source was held as coded through its decode, or converted,
    /// as the store's YCbCr (`hold_turned`).
    int held;
    /// Whether decoded planes were encoded as they are (CJpegPlanes_encode_ycc:
    /// upright, no shaper, BT.601 full range), no RGB made.
    int jfif;
} CJpegPlanesResult;

/// Decodes `jpeg` (the file's bytes) band by band, feeds `job->tap`, and with
/// a quality encodes a baseline 4:2:0 JPEG of it, turned upright. A 4:4:4,
/// 4:2:2 or 4:4:0 source's chroma is box-averaged to 4:2:0 in the plane domain
/// (as libjpeg's own downsampler does). Refuses (-1) anything but an 8-bit
/// 3-component YCbCr JPEG in Huffman coding with one of those samplings, any
/// size other than the job's, and any decoder warning (a corrupt or truncated
/// file is left to libvips and its fail_on rules). An upright source is
/// streamed (a band of 16 rows); a turned one is held whole, as 4:2:0 planes,
/// or with `blocks` as its packed blocks.
int CJpegPlanes_transcode(const unsigned char *jpeg, size_t size, const CJpegPlanesJob *job,
                          CJpegPlanesResult *result, char *error, size_t error_size);

/// Decoded 8-bit YCbCr planes with 4:2:0 chroma (a HEIC's pictures, assembled
/// and cropped by the caller): `width × height` luma, `(width + 1) / 2 ×
/// (height + 1) / 2` of each chroma.
typedef struct {
    const unsigned char *y, *cb, *cr;
    size_t y_stride, c_stride;
    /// The matrix's Kr and Kb (BT.601 0.299 and 0.114, BT.709 0.2126 and 0.0722).
    double kr, kb;
    /// Full-range samples (0–255), else limited (luma 16–235, chroma 16–240).
    int full_range;
    /// The planes may be overwritten: a turned image converted with a shaper is then
    /// held as the store's YCbCr in them, row by row after each is read, rather than
    /// in a copy (they must then have the hold's strides: `width` and `(width + 1) / 2`
    /// rounded up to 16).
    int writable;
} CJpegPlanesYcc;

/// Makes a store file and tap from decoded planes as the converted route makes
/// them from a JPEG's RGB: each band converted to RGB (a chroma sample for its
/// 2 × 2 pixels, as libheif 1.15 converts), to sRGB through `job->shaper` when
/// set, fed to `job->tap`, and with a quality encoded as a baseline 4:2:0 JPEG
/// turned upright by `job->orientation` (`blocks`, `tap_means` do not apply).
/// Planes of an upright image in JPEG's own YCbCr (BT.601, full range) without
/// a shaper are encoded as they are instead, and tapped as a JPEG's planes are
/// (`result->jfif`): the same samples, no RGB made (writable planes have their
/// rows' ends past `width` overwritten with its edge).
int CJpegPlanes_encode_ycc(const CJpegPlanesYcc *planes, const CJpegPlanesJob *job, CJpegPlanesResult *result,
                           char *error, size_t error_size);

void CJpegPlanes_free_buffer(unsigned char *jpeg);

/// Requantizes `count` 8 × 8 blocks (natural order) from the `source` steps to
/// the `store` steps as the `blocks` route does: (|c| × round(2^15 × source /
/// store) + bias) >> 15, at most 1023, with c's sign (bias 2^14 for the DC,
/// 0.48 × 2^15 for the ACs), in portable C. For tests.
long CJpegPlanes_requantize(const short *in, short *out, size_t count, const unsigned short source[64],
                            const unsigned short store[64]);

/// How many coefficients of `count` blocks the AVX2 loop requantizes otherwise
/// than the portable one; -1 when the AVX2 loop does not apply (no AVX2, or a
/// ratio of 2^15 or more, which the portable loop serves). For tests.
long CJpegPlanes_requantize_mismatches(const short *blocks, size_t count, const unsigned short source[64],
                                       const unsigned short store[64]);

#endif
