// CHevc: a HEIC's coded pictures decoded one at a time by FFmpeg's HEVC decoder.
//
// Why this exists: Debian 12's libheif (1.15, no plugins) decodes HEVC through
// libde265, which took 0.96 s where libavcodec took 0.54 s on the same 96
// iPhone tiles, one thread each (Benchmarks/HevcFloor, docs/BENCHMARKS.md).
// thumbpipe parses the HEIF container itself (HEIFContainer.swift) and hands
// this shim one picture at a time (a grid's tile, or a lone image): its
// parameter sets and slices in Annex B form. The decoder runs on one thread
// (the worker is one of `--jobs` processes) and its frame is borrowed until the
// next call. Nothing here reads a file or the container: bytes in, planes out.
//
// libavcodec is loaded with dlopen, not linked: it brings some forty libraries
// (every codec FFmpeg is built with), which took a process's start-up from 32
// to 62 ms; linked, the parent and every command would pay that. A worker loads
// it before it enters its sandbox (CHevc_load), and only when HEIF is allowed.
#ifndef CHEVC_H
#define CHEVC_H

#include <stddef.h>
#include <stdint.h>

typedef struct CHevcDecoder CHevcDecoder;

/// Where a picture may be decoded straight into (FFmpeg's direct rendering):
/// 8-bit 4:2:0 planes with room from each pointer for `width` × `height` luma
/// samples and half as many chroma each way, rows `stride[i]` bytes apart.
typedef struct {
    uint8_t *plane[3];
    int stride[3];
    int width, height;
} CHevcTarget;

/// A decoded picture's planes: the target's when `direct`, else borrowed from
/// the decoder until its next call.
typedef struct {
    const uint8_t *plane[3];
    int stride[3];
    int width, height;
    /// 1 when the picture was decoded into the target (its top left at the
    /// target's; a picture cropped at its top or left moved there).
    int direct;
    /// 1 for 8-bit 4:2:0 (YUV420P or YUVJ420P): the only layout handed back; any
    /// other is refused with a reason.
    int yuv420;
    /// The bitstream's video_full_range_flag (1 full, 0 limited, -1 not said) and
    /// matrix_coefficients (H.273, 2 when not said).
    int full_range, matrix;
} CHevcPicture;

/// Loads libavcodec and libavutil (the major versions compiled against) once:
/// 0, or -1 when they cannot be loaded (then no decoder opens).
int CHevc_load(void);

/// A decoder on one thread (loading libavcodec first if needed); NULL when it
/// cannot be loaded, has no HEVC decoder, or there is no memory.
CHevcDecoder *CHevc_open(void);

/// Decodes one picture (Annex B bytes: its parameter sets, unless the decoder
/// has them from an earlier picture, then its slices). 0 with `picture` filled,
/// or -1 with a reason in `error`. The decoder is ready for the next picture
/// either way. With a `target` (or NULL), the first frame the decoder asks for
/// is the target's memory when it fits there (its size aligned as libavcodec
/// asks, the target's pointers and strides at libavcodec's alignment); the
/// decoder keeps no reference to it after the call.
int CHevc_decode(CHevcDecoder *decoder, const uint8_t *data, size_t size, const CHevcTarget *target,
                 CHevcPicture *picture, char *error, size_t error_size);

void CHevc_close(CHevcDecoder *decoder);

/// A picture decoded into `target` and cropped at its top or left starts inside
/// it, at `from`: its `width` × `height` samples (half each way for chroma) move
/// up and left to the target's origin, rows in order, each with memmove (each
/// source row is at or after its destination, in the same stride).
void CHevc_move_planes(const CHevcTarget *target, const uint8_t *const from[3], int width, int height);

/// The libavcodec version compiled against (LIBAVCODEC_VERSION_INT), for --version
/// and the fingerprints; a process that loaded none names it all the same.
unsigned CHevc_libavcodecVersion(void);

#endif
