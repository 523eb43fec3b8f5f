// CJpegPlanes: a JPEG's store file made through its Y, Cb and Cr planes.
//
// Why this exists: libvips decodes a JPEG to RGB (upsampling the chroma and
// converting YCbCr to RGB) and its encoder converts back and subsamples again.
// For an 8-bit YCbCr JPEG in sRGB (or untagged) the store needs neither: with
// libjpeg-turbo's TurboJPEG API the planes are decoded as they are, turned
// upright as planes, and encoded again at the store's quality. The caller falls
// back to libvips on any error here (every function returns 0, or -1 with a
// reason in `error`).
#ifndef CJPEGPLANES_H
#define CJPEGPLANES_H

#include <stddef.h>
#include <stdint.h>

/// A decoded JPEG as 4:2:0 planes in TurboJPEG's geometry: Y of `width ×
/// height` pixels in rows of `y_stride` (the width padded to even, the padding
/// a copy of the edge), Cb and Cr of `chroma_width × chroma_height` (each side
/// halved, rounded up) in rows of `chroma_width`.
typedef struct {
    int width, height;
    int y_stride, y_rows;
    int chroma_width, chroma_height;
    unsigned char *y, *cb, *cr;
} CJpegPlanes;

/// Decodes `jpeg` (the file's bytes) into its 4:2:0 planes. Refuses (-1)
/// anything but an 8-bit 4:2:0 YCbCr JPEG (full-resolution chroma planes cost
/// more, in memory and its traffic, than the round trip they save: measured
/// 0.97× libvips's speed and +140 MB PSS over 4:4:4 photos, against 1.18× over
/// 4:2:0 ones), and any decoder warning (a corrupt or truncated file is left to
/// libvips and its fail_on rules). Free with CJpegPlanes_free.
int CJpegPlanes_decode(const unsigned char *jpeg, size_t size, CJpegPlanes *out, char *error, size_t error_size);

/// The planes turned upright for EXIF orientation 1–8 (as libvips's autorot
/// turns pixels), in place. Chroma is turned as its own grid: for a mirrored odd
/// side the chroma siting moves by one luma pixel.
int CJpegPlanes_orient(CJpegPlanes *planes, int orientation, char *error, size_t error_size);

/// Encodes the planes as a baseline 4:2:0 JPEG at `quality` (1–100, libjpeg's
/// tables, islow DCT); `*jpeg` is freed with CJpegPlanes_free_buffer.
int CJpegPlanes_encode(const CJpegPlanes *planes, int quality, unsigned char **jpeg, unsigned long *size, char *error,
                       size_t error_size);

void CJpegPlanes_free(CJpegPlanes *planes);
void CJpegPlanes_free_buffer(unsigned char *jpeg);

#endif
