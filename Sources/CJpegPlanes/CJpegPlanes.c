#include "CJpegPlanes.h"
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
// The decoder's inverse and the encoder's forward DCT, which the requantizing
// route replaces (libjpeg-turbo installs this header for such extensions).
#include <jpegint.h>
#include <immintrin.h>
#include <stddef.h>

// The contract with libjpeg-turbo: this file reads its internal structures
// (jpegint.h) and replaces its internal DCT routines, which no API promises to
// keep. It was written against libjpeg-turbo 2.1 with the libjpeg 6.2 API
// (Debian 12's libjpeg62-turbo); any other is refused at compile time, to be
// ported on purpose rather than misread at run time. The version built against is
// named by --version and is part of every output's fingerprint (OutputVersions).
#if !defined(LIBJPEG_TURBO_VERSION_NUMBER) || LIBJPEG_TURBO_VERSION_NUMBER < 2001000 || \
    LIBJPEG_TURBO_VERSION_NUMBER >= 2002000 || JPEG_LIB_VERSION != 62
#error "CJpegPlanes is written against libjpeg-turbo 2.1.x with the libjpeg 6.2 API; port it to this one first"
#endif

int CJpegPlanes_libjpegTurboVersion(void) { return LIBJPEG_TURBO_VERSION_NUMBER; }

// MARK: - libjpeg's errors and output

// libjpeg reports an error by calling error_exit, which must not return: it
// jumps back to CJpegPlanes_transcode. A warning (corrupt data, a truncated
// file) is an error here: such a file is left to libvips and its fail_on rules.
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char *error;
    size_t error_size;
} Errors;

static void on_error(j_common_ptr cinfo) {
    Errors *errors = (Errors *)cinfo->err;
    char message[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, message);
    if (errors->error && errors->error_size) snprintf(errors->error, errors->error_size, "%s", message);
    longjmp(errors->jump, 1);
}

static void on_message(j_common_ptr cinfo, int level) {
    if (level < 0) on_error(cinfo);
}

// Stops the transcode with thumbpipe's own reason.
static void stop(j_common_ptr cinfo, const char *why) {
    Errors *errors = (Errors *)cinfo->err;
    if (errors->error && errors->error_size) snprintf(errors->error, errors->error_size, "%s", why);
    longjmp(errors->jump, 1);
}

// The store's bytes in one growing buffer the caller takes (libjpeg's own
// jpeg_mem_dest loses track of its buffer when an error interrupts it).
typedef struct {
    struct jpeg_destination_mgr pub;
    unsigned char *data;
    size_t capacity;
} Sink;

static void sink_init(j_compress_ptr cinfo) {
    Sink *sink = (Sink *)cinfo->dest;
    sink->pub.next_output_byte = sink->data;
    sink->pub.free_in_buffer = sink->capacity;
}

static boolean sink_grow(j_compress_ptr cinfo) {
    Sink *sink = (Sink *)cinfo->dest;
    unsigned char *grown = realloc(sink->data, sink->capacity * 2);
    if (!grown) stop((j_common_ptr)cinfo, "out of memory for the store's bytes");
    sink->data = grown;
    sink->pub.next_output_byte = grown + sink->capacity;
    sink->pub.free_in_buffer = sink->capacity;
    sink->capacity *= 2;
    return TRUE;
}

static void sink_term(j_compress_ptr cinfo) { (void)cinfo; }

// MARK: - Planes and bands

// A plane, or a band of one: rows of `stride` bytes.
typedef struct {
    unsigned char *p;
    int stride;
} Plane;

static inline int round_up(int value, int step) { return (value + step - 1) / step * step; }

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// Makes `count` 4:2:0 chroma rows of `width` samples by box-averaging chroma
// at the source's sampling (`hs`, `vs`: the luma's sampling factors, so chroma
// of full width for hs 1 and full height for vs 1), with libjpeg's alternating
// rounding bias. `src` holds the source chroma rows of luma rows [r, r + 8 × vs)
// (rows past the image repeat its last; `last_row`, `last_col`: the source's
// last chroma row and column), `dst[t]` the 4:2:0 row for luma rows 2(r / 2 + t)
// and after.
static void downsample(const Plane *src, int hs, int vs, int r, int last_row, int last_col, unsigned char *const *dst,
                       int count, int width) {
    for (int t = 0; t < count; t++) {
        unsigned char *out = dst[t];
        if (vs == 2) {
            // 4:4:0: rows are already 4:2:0's; halve across (libjpeg's h2v1).
            const unsigned char *in = src->p + (size_t)t * src->stride;
            int bias = 0;
            for (int x = 0; x < width; x++, bias ^= 1) {
                const int a = 2 * x, b = a + 1 > last_col ? last_col : a + 1;
                out[x] = (unsigned char)((in[a] + in[b] + bias) >> 1);
            }
            continue;
        }
        // Source chroma rows 2t and 2t + 1 of the band (the image's last row repeated past it).
        const int y0 = r + 2 * t, y1 = y0 + 1 > last_row ? last_row : y0 + 1;
        const unsigned char *a = src->p + (size_t)(y0 - r) * src->stride;
        const unsigned char *b = src->p + (size_t)(y1 - r) * src->stride;
        if (hs == 2) {
            // 4:2:2: halve down (libjpeg's general rounding, (a + b + 1) / 2).
            for (int x = 0; x < width; x++) out[x] = (unsigned char)((a[x] + b[x] + 1) >> 1);
        } else {
            // 4:4:4: 2 × 2 means, biased 1, 2, 1, 2 (libjpeg's h2v2).
            int bias = 1;
            for (int x = 0; x < width; x++, bias ^= 3) {
                const int c0 = 2 * x, c1 = c0 + 1 > last_col ? last_col : c0 + 1;
                out[x] = (unsigned char)((a[c0] + a[c1] + b[c0] + b[c1] + bias) >> 2);
            }
        }
    }
}

// One band for the encoder: 16 luma rows `ys` bytes apart, then 8 rows each of Cb
// and Cr `cs` apart, at `p` (band_bytes of them).
typedef struct {
    Plane y, cb, cr;
} Band;

static size_t band_bytes(int ys, int cs) { return (size_t)16 * ys + (size_t)16 * cs; }

static Band band_at(unsigned char *p, int ys, int cs) {
    Band b = {{p, ys}, {p + (size_t)16 * ys, cs}, {p + (size_t)16 * ys + (size_t)8 * cs, cs}};
    return b;
}

// Repeats the edge of a band's `valid_rows × valid_cols` samples to `rows ×
// stride`: the encoder reads whole blocks, and libjpeg's own downsampler pads so.
static void pad_band(Plane band, int valid_cols, int valid_rows, int rows) {
    for (int y = 0; y < valid_rows; y++) {
        unsigned char *row = band.p + (size_t)y * band.stride;
        memset(row + valid_cols, row[valid_cols - 1], (size_t)(band.stride - valid_cols));
    }
    for (int y = valid_rows; y < rows; y++)
        memcpy(band.p + (size_t)y * band.stride, band.p + (size_t)(valid_rows - 1) * band.stride, (size_t)band.stride);
}

// 16 bytes, loaded and stored unaligned through memcpy.
typedef unsigned char Bytes16 __attribute__((vector_size(16)));
typedef unsigned int Words4 __attribute__((vector_size(16)));

static inline Bytes16 load16(const unsigned char *p) {
    Bytes16 v;
    memcpy(&v, p, 16);
    return v;
}

// Transposes a square tile of bytes held in `n` registers of 16 bytes (16 × 16
// in 16, or 8 × 8 in 4, two rows a register): `rounds` rounds (4, or 3) of
// interleaving register k with register k + n / 2. Each round rotates a byte's
// (row, column) index left by one bit, so the last swaps row and column.
static inline void interleave_rounds(Bytes16 *r, int n, int rounds) {
    for (int round = 0; round < rounds; round++) {
        Bytes16 t[16];
        for (int k = 0; k < n / 2; k++) {
            t[2 * k] = __builtin_shufflevector(r[k], r[k + n / 2], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            t[2 * k + 1] = __builtin_shufflevector(r[k], r[k + n / 2], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14,
                                                   30, 15, 31);
        }
        for (int k = 0; k < n; k++) r[k] = t[k];
    }
}

static inline void transpose16(Bytes16 r[16]) { interleave_rounds(r, 16, 4); }

// Writes the transpose of an 8 × 8 block of samples (`in`: 64 bytes, rows of 8)
// as 8 rows of 8 at `out`, `stride` apart: 12 shuffles and 8 stores instead of
// 64 loads and 64 strided stores.
static inline void transpose8_into(const unsigned char *in, unsigned char *out, size_t stride) {
    Bytes16 r[4];
    for (int k = 0; k < 4; k++) r[k] = load16(in + 16 * k);
    interleave_rounds(r, 4, 3);
    for (int k = 0; k < 4; k++) {
        memcpy(out + (size_t)(2 * k) * stride, &r[k], 8);
        memcpy(out + (size_t)(2 * k + 1) * stride, (const unsigned char *)&r[k] + 8, 8);
    }
}

// How EXIF orientation `o` (1–8) shows a stored image upright, as
// AspectFillScale.storedPixel says, per axis: an upright row is a stored row,
// or when turned a `quarter` a stored column (either way a "line"), the lines
// taken from the last back when `lines_back`; along a line, the upright columns
// run from its end back when `across_back`. In the coefficient domain the same
// three are a transpose, negated odd vertical and negated odd horizontal
// frequencies. The one place the orientations are spelt out.
typedef struct {
    int quarter, lines_back, across_back;
} Turn;

static Turn turn_of(int o) {
    const int quarter = o >= 5 && o <= 8;
    return (Turn){quarter, quarter ? o == 7 || o == 8 : o == 3 || o == 4, quarter ? o == 6 || o == 7 : o == 2 || o == 3};
}

// One RGB pixel (a call to memcpy a pixel would cost more than the copy).
static inline void copy3(unsigned char *restrict to, const unsigned char *restrict from) {
    to[0] = from[0];
    to[1] = from[1];
    to[2] = from[2];
}

// gather_rows for a source not turned a quarter: each upright row is a stored
// row (from the last back when `lines_back`), copied, or read from its end back.
static void gather_upright_rows(const unsigned char *in, size_t stride, int w, int h, Turn t, int px, int row0,
                                int rows, unsigned char *const *out) {
    for (int i = 0; i < rows; i++) {
        const int y = row0 + i < h ? row0 + i : h - 1;
        const unsigned char *src = in + (size_t)(t.lines_back ? h - 1 - y : y) * stride;
        if (!t.across_back) {
            memcpy(out[i], src, (size_t)w * px);
        } else if (px == 1) {
            for (int x = 0; x < w; x++) out[i][x] = src[w - 1 - x];
        } else {
            for (int x = 0; x < w; x++) copy3(out[i] + (size_t)x * 3, src + (size_t)(w - 1 - x) * 3);
        }
    }
}

// A quarter-turned source's stored rows and columns (see gather_rows): upright
// column x is stored row `stored_row(x)`; upright row row0 + i starts `column[i]`
// bytes into every stored row.
typedef struct {
    const unsigned char *in;
    size_t stride;
    int h, rows_down, columns_back;
    size_t column[16];
} Quarter;

static inline const unsigned char *quarter_row(const Quarter *q, int x) {
    return q->in + (size_t)(q->rows_down ? q->h - 1 - x : x) * q->stride;
}

// Upright columns [x, …) of a 1-byte plane in 16 × 16 tiles: 16 bytes of 16
// stored rows, transposed in registers (for a band of 8 rows, the first 8 bytes
// of each, as chroma's bands are). Returns the first column not done.
static int gather_tiles1(const Quarter *q, int uw, int rows, unsigned char *const *out) {
    const size_t first = q->columns_back ? q->column[rows - 1] : q->column[0];
    int x = 0;
    for (; x + 16 <= uw; x += 16) {
        Bytes16 r[16];
        for (int k = 0; k < 16; k++) {
            // The tile after next's rows, ahead of their loads (a stored row is a cache miss).
            if (x + 32 + k < uw) __builtin_prefetch(quarter_row(q, x + 32 + k) + first);
            r[k] = load16(quarter_row(q, x + k) + first);
            if (q->columns_back)
                r[k] = rows == 16
                           ? __builtin_shufflevector(r[k], r[k], 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
                           : __builtin_shufflevector(r[k], r[k], 7, 6, 5, 4, 3, 2, 1, 0, 8, 9, 10, 11, 12, 13, 14, 15);
        }
        transpose16(r);
        for (int i = 0; i < rows; i++) memcpy(out[i] + x, &r[i], 16);
    }
    return x;
}

// Upright columns [x, …) of 3-byte pixels, 16 rows, in 4 × 4 tiles of pixels:
// each pixel widened to a 4-byte lane, the lanes transposed, narrowed back.
// Returns the first column not done.
static int gather_tiles3(const Quarter *q, int uw, unsigned char *const *out) {
    const size_t first = q->columns_back ? q->column[15] : q->column[0];
    int x = 0;
    for (; x + 4 <= uw; x += 4) {
        const unsigned char *src[4];
        for (int k = 0; k < 4; k++) {
            src[k] = quarter_row(q, x + k);
            if (x + 16 + k < uw) {
                const unsigned char *ahead = quarter_row(q, x + 16 + k) + first;
                __builtin_prefetch(ahead);
                __builtin_prefetch(ahead + 47);
            }
        }
        for (int g = 0; g < 16; g += 4) {
            Words4 v[4];
            for (int k = 0; k < 4; k++) {
                const Bytes16 b = load16(src[k] + (q->columns_back ? q->column[g + 3] : q->column[g]));
                v[k] = (Words4)(q->columns_back ? __builtin_shufflevector(b, b, 9, 10, 11, 0, 6, 7, 8, 0, 3, 4, 5, 0, 0, 1, 2, 0)
                                                : __builtin_shufflevector(b, b, 0, 1, 2, 0, 3, 4, 5, 0, 6, 7, 8, 0, 9, 10, 11, 0));
            }
            const Words4 t0 = __builtin_shufflevector(v[0], v[1], 0, 4, 1, 5), t1 = __builtin_shufflevector(v[0], v[1], 2, 6, 3, 7);
            const Words4 t2 = __builtin_shufflevector(v[2], v[3], 0, 4, 1, 5), t3 = __builtin_shufflevector(v[2], v[3], 2, 6, 3, 7);
            const Words4 u[4] = {__builtin_shufflevector(t0, t2, 0, 1, 4, 5), __builtin_shufflevector(t0, t2, 2, 3, 6, 7),
                                 __builtin_shufflevector(t1, t3, 0, 1, 4, 5), __builtin_shufflevector(t1, t3, 2, 3, 6, 7)};
            for (int j = 0; j < 4; j++) {
                const Bytes16 b = (Bytes16)u[j];
                const Bytes16 packed = __builtin_shufflevector(b, b, 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 0, 0, 0, 0);
                memcpy(out[g + j] + (size_t)x * 3, &packed, 12);
            }
        }
    }
    return x;
}

// Fills `out[0 … rows)` with upright rows [row0, row0 + rows) of a `w × h`
// image of `px`-byte pixels (1 or 3; rows `stride` bytes apart) turned by EXIF
// orientation `o` (rows past the upright image repeat its last): the stored
// pixel shown at upright (x, y), as AspectFillScale.storedPixel says. A turned
// image's upright rows are its stored columns: they are read along the stored
// rows, a whole band's 16 pixels of a stored row together, in tiles transposed
// in registers (16 × 16 bytes, or 4 × 4 pixels), with the rows two tiles ahead
// prefetched (each stored row is a cache miss). `in` must be readable 16 bytes
// past its last pixel. On an 18 Mpx photo turned 90°, a luma plane's upright
// rows took 7–9 ms instead of 27–60, and its RGB rows 19–36 ms instead of 68–176
// (one pixel at a time, unprefetched).
static void gather_rows(const unsigned char *in, size_t stride, int w, int h, int o, int px, int row0, int rows,
                        unsigned char *const *out) {
    const Turn t = turn_of(o);
    if (!t.quarter) {
        gather_upright_rows(in, stride, w, h, t, px, row0, rows, out);
        return;
    }
    // Turned a quarter: upright (x, y) is stored row `x` (or `h - 1 - x` across back),
    // stored column `y` (or `w - 1 - y` lines back).
    const int uw = h, uh = w;
    Quarter q = {in, stride, h, t.across_back, t.lines_back, {0}};
    for (int i = 0; i < rows; i++) {
        const int y = row0 + i < uh ? row0 + i : uh - 1;
        q.column[i] = (size_t)(q.columns_back ? w - 1 - y : y) * (size_t)px;
    }
    int x = 0;
    if (px == 1 && (rows == 16 || rows == 8) && row0 + rows <= uh) x = gather_tiles1(&q, uw, rows, out);
    if (px == 3 && rows == 16 && row0 + 16 <= uh) x = gather_tiles3(&q, uw, out);
    for (; x < uw; x++) {
        const unsigned char *src = quarter_row(&q, x);
        if (px == 1) {
            for (int i = 0; i < rows; i++) out[i][x] = src[q.column[i]];
        } else if (x + 1 < uw) {
            // Four bytes a pixel (the fourth is the next pixel's, written after), one move each way.
            for (int i = 0; i < rows; i++) memcpy(out[i] + (size_t)x * 3, src + q.column[i], 4);
        } else {
            for (int i = 0; i < rows; i++) copy3(out[i] + (size_t)x * 3, src + q.column[i]);
        }
    }
}

// Fills `rows` rows of `band` with upright rows [row0, row0 + rows) of a turned
// plane (gather_rows), each padded to the band's stride with its last sample.
static void gather(Plane in, int w, int h, int o, int row0, int rows, Plane band) {
    const int uw = turn_of(o).quarter ? h : w;
    unsigned char *out[16];
    for (int i = 0; i < rows; i++) out[i] = band.p + (size_t)i * band.stride;
    gather_rows(in.p, (size_t)in.stride, w, h, o, 1, row0, rows, out);
    for (int i = 0; i < rows; i++) memset(out[i] + uw, out[i][uw - 1], (size_t)(band.stride - uw));
}

// MARK: - The transcode

// Everything one transcode holds, on the heap (what setjmp's return may read
// must not live in the function's own registers).
typedef struct Work {
    struct jpeg_decompress_struct in;
    struct jpeg_compress_struct out;
    Errors errors;
    Sink sink;
    int in_made, out_made;
    unsigned char *bands;        // every band buffer, one allocation
    unsigned char *planes;       // a turned source's whole 4:2:0 planes, one allocation
    int64_t decode_ns, colour_ns, encode_ns;
    // A 4:2:0 source's blocks as coded: the row arrays a band is read into (to
    // place a block by the rows libjpeg hands its IDCT), the store's tables, and
    // whether (and with which IDCT) the tap's pixels are made.
    JSAMPARRAY rows[3];
    int32_t ratio[3][DCTSIZE2];         // 2^15 × source step / store step, rounded
    int16_t pairs[3][DCTSIZE2 / 8][16]; // (ratio, bias) in the AVX2 loop's order
    void (*requantize)(const struct Work *w, int ci, const JCOEF *in, JCOEF *out);
    int pixels;                     // whether libjpeg's IDCT runs (for the tap's pixels or the store's)
    inverse_DCT_method_ptr idct[3]; // libjpeg's own
    // The tap fed the blocks' sums (8 × dequantized DC + 8192, the sum of the
    // 64 samples decoding would give) of the iMCU row under way, per component.
    int32_t *sums[3];
    int sums_wide[3];
    // An upright source: one iMCU row of each component's blocks, requantized.
    JCOEF *coefs[3];
    size_t coef_stride[3]; // blocks a block row
    // A turned source's blocks, held until the decode ends: each turned and
    // requantized, packed as (count, then index and value for each coefficient
    // not zero) in `packed`, found by `places` (per component, one a source block).
    int turn;                       // the EXIF orientation the blocks are turned by (1: streamed)
    int imcu_row, out_imcu_row;     // the iMCU rows being decoded and encoded
    JDIMENSION wide[3], high[3];    // the source's components in blocks
    uint32_t *places[3];
    unsigned char *packed;
    size_t packed_size, packed_used;
    // A turned 4:2:0 source whose turn moves its block grid, held as coded: its
    // blocks packed as they came (not turned, not requantized), decoded after the
    // decode a block line at a time (`lines`: 8 rows of one component's line of
    // blocks, `line_of` which) and turned as pixels into the store's bands.
    int held;
    size_t held_cap; // the most the packed blocks may take: half as much again as the planes
    unsigned char *lines[3];
    int line_of[3];
    size_t source_size; // the JPEG's bytes
    unsigned char *ycc; // a converted, turned source held as the store's YCbCr (YccHold), one allocation
} Work;

static int refuse(char *error, size_t size, const char *why) {
    if (error && size) snprintf(error, size, "%s", why);
    return -1;
}

// Starts the store's encoder for a `UW × UH` image fed as `input`: the planes
// (JCS_YCbCr, raw data in) or RGB rows (libjpeg converts and downsamples).
// Either way a baseline YCbCr 4:2:0 JPEG at the job's quality, libjpeg's tables.
static void start_encoder(Work *w, const CJpegPlanesJob *job, int UW, int UH, J_COLOR_SPACE input) {
    struct jpeg_compress_struct *out = &w->out;
    out->err = &w->errors.pub;
    jpeg_create_compress(out);
    w->out_made = 1;
    w->sink.capacity = (size_t)UW * UH / 8 + 65536;
    w->sink.data = malloc(w->sink.capacity);
    if (!w->sink.data) stop((j_common_ptr)out, "out of memory for the store's bytes");
    w->sink.pub.init_destination = sink_init;
    w->sink.pub.empty_output_buffer = sink_grow;
    w->sink.pub.term_destination = sink_term;
    out->dest = &w->sink.pub;
    out->image_width = (JDIMENSION)UW;
    out->image_height = (JDIMENSION)UH;
    out->input_components = 3;
    out->in_color_space = input;
    jpeg_set_defaults(out); // YCbCr at 4:2:0, baseline, libjpeg's tables
    jpeg_set_quality(out, job->quality, TRUE);
    out->raw_data_in = input == JCS_YCbCr ? TRUE : FALSE;
    out->dct_method = JDCT_ISLOW;
    out->optimize_coding = job->optimize_coding ? TRUE : FALSE;
    jpeg_start_compress(out, TRUE);
}

// Writes the 16 luma rows of `y` and 8 chroma rows of `cb`, `cr` to the encoder.
static void write_band(Work *w, Plane y, Plane cb, Plane cr) {
    JSAMPROW yrows[16], cbrows[8], crrows[8];
    for (int i = 0; i < 16; i++) yrows[i] = y.p + (size_t)i * y.stride;
    for (int i = 0; i < 8; i++) {
        cbrows[i] = cb.p + (size_t)i * cb.stride;
        crrows[i] = cr.p + (size_t)i * cr.stride;
    }
    JSAMPARRAY image[3] = {yrows, cbrows, crrows};
    if (jpeg_write_raw_data(&w->out, image, 16) != 16) stop((j_common_ptr)&w->out, "the encoder took a short band");
}

// MARK: - A 4:2:0 source's blocks as coded

// A 4:2:0 source's store has the source's own block grid (upright, or turned
// so that the grid stays), so it needs no pixels: each block is entropy-decoded,
// its coefficients taken to the store's tables (and turned), and entropy-coded
// again; neither the forward DCT nor any chroma resampling runs. libjpeg's
// inverse DCT is wrapped by `keep_block`, which keeps the requantized block and
// runs the IDCT only when a thumbnail tap reads the rows (the same pixels
// decoding gives, so a thumbnail never depends on the store's route); its
// forward DCT is replaced by `give_block`, which hands the block back.
//
// Requantizing: q = (|c| × ratio + bias) >> 15, at most 1023 (baseline
// Huffman's largest, so a crafted block cannot stop the encoder), with c's
// sign; ratio = 2^15 × source step / store step, rounded. The bias rounds the
// DC to nearest and the ACs at 0.48 rather than 0.5: a source's steps often
// divide the store's so that many ACs land on a half, and rounding those away
// from zero made stores 1.4 % larger (the median of 38 photos) than decoding
// and encoding; at 0.48 they are 2.2 % smaller, for 0.025 dB of PSNR against
// the source (docs/BENCHMARKS.md).

static Work *work_of_decoder(j_decompress_ptr cinfo) { return (Work *)((char *)cinfo - offsetof(Work, in)); }
static Work *work_of_encoder(j_compress_ptr cinfo) { return (Work *)((char *)cinfo - offsetof(Work, out)); }

enum { DC_BIAS = 16384, AC_BIAS = 15729 }; // 0.5 and 0.48 of 2^15

static void requantize_block(const Work *w, int ci, const JCOEF *in, JCOEF *out) {
    const int32_t *ratio = w->ratio[ci];
    for (int k = 0; k < DCTSIZE2; k++) {
        const int c = in[k] < -32767 ? -32767 : in[k], m = c < 0 ? -c : c;
        int64_t q = ((int64_t)m * ratio[k] + (k ? AC_BIAS : DC_BIAS)) >> 15;
        q = q > 1023 ? 1023 : q;
        out[k] = (JCOEF)(c < 0 ? -q : q);
    }
}

// The same, 16 coefficients at a time (every ratio under 2^15): |c| paired with
// 1 and the ratio with the bias, so one multiply-add gives |c| × ratio + bias.
__attribute__((target("avx2"))) static void requantize_block_avx2(const Work *w, int ci, const JCOEF *in, JCOEF *out) {
    const __m256i one = _mm256_set1_epi16(1), top = _mm256_set1_epi16(1023), bottom = _mm256_set1_epi16(-32767);
    for (int v = 0; v < DCTSIZE2 / 16; v++) {
        const __m256i c = _mm256_max_epi16(_mm256_loadu_si256((const __m256i *)(const void *)(in + 16 * v)), bottom);
        const __m256i m = _mm256_abs_epi16(c);
        const __m256i lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(m, one),
                                             _mm256_loadu_si256((const __m256i *)(const void *)w->pairs[ci][2 * v]));
        const __m256i hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(m, one),
                                             _mm256_loadu_si256((const __m256i *)(const void *)w->pairs[ci][2 * v + 1]));
        const __m256i q = _mm256_min_epi16(_mm256_packs_epi32(_mm256_srai_epi32(lo, 15), _mm256_srai_epi32(hi, 15)), top);
        _mm256_storeu_si256((__m256i *)(void *)(out + 16 * v), _mm256_sign_epi16(q, c));
    }
}

// Sets component `ci`'s ratios and the AVX2 loop's pairs from the source's and
// the store's steps; returns whether every ratio is under 2^15 (the AVX2 loop's range).
static int set_tables(Work *w, int ci, const UINT16 *source, const UINT16 *store) {
    int narrow = 1;
    for (int k = 0; k < DCTSIZE2; k++) {
        const int64_t step = store[k] ? store[k] : 1;
        w->ratio[ci][k] = (int32_t)(((int64_t)source[k] * 65536 / step + 1) / 2);
        if (w->ratio[ci][k] > 32767) narrow = 0;
    }
    // (ratio, bias) pairs in the unpacking's order: per 128-bit lane, coefficients 0–3 then 4–7 of its 8.
    for (int v = 0; v < DCTSIZE2 / 16; v++)
        for (int half = 0; half < 2; half++)
            for (int j = 0; j < 8; j++) {
                const int k = 16 * v + (j < 4 ? j : j + 4) + 4 * half;
                w->pairs[ci][2 * v + half][2 * j] = (int16_t)(w->ratio[ci][k] > 32767 ? 32767 : w->ratio[ci][k]);
                w->pairs[ci][2 * v + half][2 * j + 1] = (int16_t)(k ? AC_BIAS : DC_BIAS);
            }
    return narrow;
}

// One row of a block's coefficients.
typedef JCOEF Coefs8 __attribute__((vector_size(16)));

// Turns a block's coefficients as EXIF orientation `o` turns its pixels (u the
// upright horizontal frequency, v the vertical): a quarter turn transposes, the
// columns back negate the odd u, the lines back the odd v. A row a register:
// the transpose is three rounds of interleaving row k with row k + 4 (as
// interleave_rounds does bytes), a negation (x ^ m) - m where m is all ones
// (7 ns a block against 65 for a coefficient at a time, in a standalone copy).
static void turn_block(int o, const JCOEF *in, JCOEF *out) {
    const Turn t = turn_of(o);
    Coefs8 r[DCTSIZE];
    memcpy(r, in, sizeof r);
    if (t.quarter)
        for (int round = 0; round < 3; round++) {
            Coefs8 s[DCTSIZE];
            for (int k = 0; k < DCTSIZE / 2; k++) {
                s[2 * k] = __builtin_shufflevector(r[k], r[k + 4], 0, 8, 1, 9, 2, 10, 3, 11);
                s[2 * k + 1] = __builtin_shufflevector(r[k], r[k + 4], 4, 12, 5, 13, 6, 14, 7, 15);
            }
            memcpy(r, s, sizeof r);
        }
    const Coefs8 odd = {0, -1, 0, -1, 0, -1, 0, -1}, none = {0}, all = none - 1;
    const Coefs8 across = t.across_back ? odd : none;
    for (int v = 0; v < DCTSIZE; v++) {
        const Coefs8 m = across ^ (t.lines_back && (v & 1) ? all : none);
        r[v] = (r[v] ^ m) - m;
    }
    memcpy(out, r, sizeof r);
}

// A bit for each of a block's coefficients that is not zero.
static inline uint64_t nonzero_coefficients(const JCOEF *block) {
    uint64_t mask = 0;
#if defined(__SSE2__)
    // 16 at a time: compared with zero, narrowed to bytes, one bit a byte.
    const __m128i zero = _mm_setzero_si128();
    for (int i = 0; i < DCTSIZE2 / 16; i++) {
        const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(block + 16 * i));
        const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(block + 16 * i + 8));
        const int zeros = _mm_movemask_epi8(_mm_packs_epi16(_mm_cmpeq_epi16(a, zero), _mm_cmpeq_epi16(b, zero)));
        mask |= (uint64_t)(uint16_t)~zeros << (16 * i);
    }
#else
    for (int k = 0; k < DCTSIZE2; k++) mask |= (uint64_t)(block[k] != 0) << k;
#endif
    return mask;
}

// Packs a turned source's block (`x`, `y`) of component `ci`: turned, then
// requantized to the store's steps where each coefficient lands (a quarter
// turn moves (u, v) to (v, u), whose step differs: the tables are not symmetric).
static void pack_block(Work *w, int ci, JDIMENSION x, JDIMENSION y, const JCOEF *block) {
    if (x >= w->wide[ci] || y >= w->high[ci]) stop((j_common_ptr)&w->in, "a block outside the source's grid");
    JCOEF moved[DCTSIZE2], turned[DCTSIZE2];
    if (w->held) {
        memcpy(turned, block, sizeof turned);
    } else {
        turn_block(w->turn, block, moved);
        w->requantize(w, ci, moved, turned);
    }
    if (w->packed_size - w->packed_used < 1 + 3 * DCTSIZE2) {
        size_t size = w->packed_size * 2;
        // Held blocks replace the planes: a file denser than its size promised (a crafted
        // one) is refused rather than held in more (the item takes libvips).
        if (w->held && size > w->held_cap) size = w->held_cap;
        if (size < w->packed_used + 1 + 3 * DCTSIZE2) stop((j_common_ptr)&w->in, "the blocks held outgrow the planes");
        unsigned char *grown = realloc(w->packed, size);
        if (!grown) stop((j_common_ptr)&w->in, "out of memory for the blocks");
        w->packed = grown;
        w->packed_size = size;
    }
    if (w->packed_used > UINT32_MAX - 1 - 3 * DCTSIZE2) stop((j_common_ptr)&w->in, "too many blocks");
    w->places[ci][(size_t)y * w->wide[ci] + x] = (uint32_t)w->packed_used;
    unsigned char *p = w->packed + w->packed_used;
    // Which coefficients are not zero, without a branch on each (a test a
    // coefficient mispredicted about once in two and took most of the packing).
    uint64_t nonzero = nonzero_coefficients(turned);
    *p++ = (unsigned char)__builtin_popcountll(nonzero);
    for (; nonzero; nonzero &= nonzero - 1) {
        const int k = __builtin_ctzll(nonzero);
        const uint16_t value = (uint16_t)turned[k];
        p[0] = (unsigned char)k;
        p[1] = (unsigned char)(value & 0xFF);
        p[2] = (unsigned char)(value >> 8);
        p += 3;
    }
    w->packed_used = (size_t)(p - w->packed);
}

// The sum of a block's 64 samples for the tap, as decoding gives them: 8 × its
// dequantized DC + 8192 (islow's scaling), or for a block at the image's right or
// bottom edge, whose DC counts the encoder's padding too, the mean of its samples
// inside × 64: `samples` are its decoded rows (from `column`), or NULL to decode them here.
static int32_t block_sum(Work *w, jpeg_component_info *compptr, JCOEFPTR block, JSAMPARRAY samples,
                         JDIMENSION column, size_t x, size_t y) {
    const size_t across = compptr->downsampled_width - x * DCTSIZE, down = compptr->downsampled_height - y * DCTSIZE;
    int64_t sum;
    if (across >= DCTSIZE && down >= DCTSIZE) {
        sum = 8 * (int64_t)block[0] * compptr->quant_table->quantval[0] + 8192;
    } else {
        JSAMPLE decoded[DCTSIZE][2 * DCTSIZE];
        JSAMPROW rows[DCTSIZE];
        if (!samples) {
            for (int i = 0; i < DCTSIZE; i++) rows[i] = decoded[i];
            w->idct[compptr->component_index](&w->in, compptr, block, rows, 0);
            samples = rows;
            column = 0;
        }
        const size_t n = across < DCTSIZE ? across : DCTSIZE, m = down < DCTSIZE ? down : DCTSIZE;
        int64_t inside = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) inside += samples[i][column + j];
        sum = (inside * DCTSIZE2 + (int64_t)(n * m) / 2) / (int64_t)(n * m);
    }
    // Held to 0…255 a sample, as decoding clips them (and within 32 bits whatever the tables).
    return (int32_t)(sum < 0 ? 0 : sum > 64 * 255 ? 64 * 255 : sum);
}

static void keep_block(j_decompress_ptr cinfo, jpeg_component_info *compptr, JCOEFPTR block, JSAMPARRAY output,
                       JDIMENSION column) {
    Work *w = work_of_decoder(cinfo);
    const int ci = compptr->component_index;
    // The block's place: its row in the band libjpeg hands over, and in the component.
    const size_t row = (size_t)(output - w->rows[ci]) / DCTSIZE, x = column / DCTSIZE;
    const size_t y = (size_t)w->imcu_row * (size_t)compptr->v_samp_factor + row;
    // The pixels, by libjpeg's own IDCT (the same pixels decoding gives), when the tap or the store reads them.
    if (w->pixels) w->idct[ci](cinfo, compptr, block, output, column);
    if (w->sums[0]) {
        if (row >= (size_t)compptr->v_samp_factor || x >= (size_t)w->sums_wide[ci])
            stop((j_common_ptr)cinfo, "a block outside the band");
        w->sums[ci][row * (size_t)w->sums_wide[ci] + x] =
            block_sum(w, compptr, block, w->pixels ? output : NULL, column, x, y);
    }
    if (w->places[0]) {
        pack_block(w, ci, (JDIMENSION)x, (JDIMENSION)y, block);
    } else if (w->coefs[0]) {
        w->requantize(w, ci, block, w->coefs[ci] + (row * w->coef_stride[ci] + x) * DCTSIZE2);
    }
}

// The packed block (`x`, `y`) of component `ci` (an empty one where the decoder never handed it over).
static void unpack_block(Work *w, int ci, JDIMENSION x, JDIMENSION y, JCOEF *out) {
    if (x >= w->wide[ci] || y >= w->high[ci]) stop((j_common_ptr)&w->out, "a block outside the source's grid");
    const unsigned char *p = w->packed + w->places[ci][(size_t)y * w->wide[ci] + x];
    memset(out, 0, sizeof(JBLOCK));
    for (int n = *p++; n > 0; n--, p += 3) out[p[0] & 63] = (JCOEF)(int16_t)(uint16_t)(p[1] | p[2] << 8);
}

static void give_block(j_compress_ptr cinfo, jpeg_component_info *compptr, JSAMPARRAY samples, JBLOCKROW blocks,
                       JDIMENSION start_row, JDIMENSION start_col, JDIMENSION count) {
    (void)samples;
    Work *w = work_of_encoder(cinfo);
    const int ci = compptr->component_index;
    if (w->places[0]) {
        // The upright block (x, y) is the source's block as the turn maps it.
        const JDIMENSION y = (JDIMENSION)w->out_imcu_row * (JDIMENSION)compptr->v_samp_factor + start_row / DCTSIZE;
        const JDIMENSION W = w->wide[ci], H = w->high[ci];
        const Turn t = turn_of(w->turn);
        // The block line (a stored block row, or column turned a quarter), and the block along it.
        const JDIMENSION line = t.lines_back ? (t.quarter ? W : H) - 1 - y : y;
        for (JDIMENSION i = 0; i < count; i++) {
            const JDIMENSION x = start_col / DCTSIZE + i, along = t.across_back ? (t.quarter ? H : W) - 1 - x : x;
            unpack_block(w, ci, t.quarter ? line : along, t.quarter ? along : line, blocks[i]);
        }
        return;
    }
    const JCOEF *from =
        w->coefs[ci] + ((size_t)(start_row / DCTSIZE) * w->coef_stride[ci] + start_col / DCTSIZE) * DCTSIZE2;
    memcpy(blocks, from, (size_t)count * sizeof(JBLOCK));
}

// Makes room for every block of the source, packed as keep_block hands them
// over, for a source turned by `turn`.
static void hold_blocks(Work *w, int turn) {
    struct jpeg_decompress_struct *in = &w->in;
    w->turn = turn;
    size_t blocks = 0;
    for (int ci = 0; ci < 3; ci++) {
        w->wide[ci] = in->comp_info[ci].width_in_blocks;
        w->high[ci] = in->comp_info[ci].height_in_blocks;
        blocks += (size_t)w->wide[ci] * w->high[ci];
    }
    w->places[0] = calloc(blocks, sizeof(uint32_t));
    w->packed_size = blocks * 16 + 4096;
    w->packed = malloc(w->packed_size);
    if (!w->places[0] || !w->packed) stop((j_common_ptr)in, "out of memory for the blocks");
    // Place 0 is an empty block: what a block the decoder never handed over would read.
    w->packed[0] = 0;
    w->packed_used = 1;
    w->places[1] = w->places[0] + (size_t)w->wide[0] * w->high[0];
    w->places[2] = w->places[1] + (size_t)w->wide[1] * w->high[1];
}

// Puts keep_block in place of libjpeg's IDCT (kept, for the pixels), once it has
// started: `rows` are the arrays each band is read into.
static void hook_idct(Work *w, JSAMPARRAY rows[3]) {
    struct jpeg_decompress_struct *in = &w->in;
    for (int ci = 0; ci < 3; ci++) {
        if (!in->comp_info[ci].quant_table) stop((j_common_ptr)in, "a component without its table");
        w->rows[ci] = rows[ci];
        w->idct[ci] = in->idct->inverse_DCT[ci];
        in->idct->inverse_DCT[ci] = keep_block;
    }
}

// Once both codecs have started: the tables, one iMCU row of blocks (or every
// block, packed, for a turned source), and the two DCTs replaced.
static void take_blocks(Work *w, JSAMPARRAY rows[3], int turn) {
    struct jpeg_decompress_struct *in = &w->in;
    struct jpeg_compress_struct *out = &w->out;
    hook_idct(w, rows);
    const int quarter = turn_of(turn).quarter;
    size_t total = 0;
    int narrow = 1; // every ratio under 2^15
    for (int ci = 0; ci < 3; ci++) {
        const jpeg_component_info *from = &in->comp_info[ci], *to = &out->comp_info[ci];
        // A quarter turn swaps the grid's sides.
        const JDIMENSION wide = quarter ? from->height_in_blocks : from->width_in_blocks;
        const JDIMENSION high = quarter ? from->width_in_blocks : from->height_in_blocks;
        if (wide != to->width_in_blocks || high != to->height_in_blocks ||
            from->h_samp_factor != to->h_samp_factor || from->v_samp_factor != to->v_samp_factor ||
            !out->quant_tbl_ptrs[to->quant_tbl_no])
            stop((j_common_ptr)in, "the store's block grid differs from the source's");
        // A quarter turn's coefficient at (u, v) had the source's step at (v, u).
        UINT16 source[DCTSIZE2];
        for (int k = 0; k < DCTSIZE2; k++)
            source[k] = from->quant_table->quantval[quarter ? (k % DCTSIZE) * DCTSIZE + k / DCTSIZE : k];
        if (!set_tables(w, ci, source, out->quant_tbl_ptrs[to->quant_tbl_no]->quantval)) narrow = 0;
        w->coef_stride[ci] = (size_t)from->width_in_blocks;
        total += w->coef_stride[ci] * (size_t)from->v_samp_factor;
    }
    if (turn == 1) {
        w->coefs[0] = malloc(total * sizeof(JBLOCK));
        if (!w->coefs[0]) stop((j_common_ptr)in, "out of memory for the blocks");
        w->coefs[1] = w->coefs[0] + w->coef_stride[0] * (size_t)in->comp_info[0].v_samp_factor * DCTSIZE2;
        w->coefs[2] = w->coefs[1] + w->coef_stride[1] * (size_t)in->comp_info[1].v_samp_factor * DCTSIZE2;
    } else {
        // Every block held, packed: 4.0 and 9.3 bytes a block on the bench's two such photos,
        // against 96 for the 4:2:0 planes the decoded path holds.
        hold_blocks(w, turn);
    }
    w->requantize = narrow && __builtin_cpu_supports("avx2") ? requantize_block_avx2 : requantize_block;
    out->fdct->forward_DCT = give_block;
}

// Fills `rows` upright rows [row0, row0 + rows) of component `ci` of a held
// source into `band`, as `gather` fills them from the decoded planes (rows past
// the last repeat it, each padded to the stride with its last sample): the
// same samples, by libjpeg's own IDCT, each line of blocks decoded once into
// `lines[ci]` (the bands come top to bottom) and turned there (a quarter turn's
// blocks transposed in registers: held_band's samples on 12 runs of a 21 Mpx
// photo turned 90° fell from 1,194–1,225 to 777–813 at 4 kHz, against a byte at a time).
static void held_band(Work *w, int ci, int row0, int rows, Plane band) {
    struct jpeg_decompress_struct *in = &w->in;
    jpeg_component_info *c = &in->comp_info[ci];
    const Turn t = turn_of(w->turn);
    const int swap = t.quarter, lines_back = t.lines_back, across_back = t.across_back;
    const int sw = (int)c->downsampled_width, sh = (int)c->downsampled_height;
    // A line is a stored row (a stored column when turned a quarter); across it, upright columns.
    const int uh = swap ? sw : sh, uw = swap ? sh : sw;
    const size_t blocks_across = swap ? w->high[ci] : w->wide[ci], stride = blocks_across * DCTSIZE;
    if ((size_t)uw > stride || uw > band.stride) stop((j_common_ptr)in, "a band narrower than the image");
    if (!w->lines[ci]) {
        w->lines[ci] = malloc(stride * DCTSIZE + 64);
        if (!w->lines[ci]) stop((j_common_ptr)in, "out of memory for a line of blocks");
        w->line_of[ci] = -1;
    }
    unsigned char *line = w->lines[ci];
    for (int i = 0; i < rows; i++) {
        const int y = row0 + i < uh ? row0 + i : uh - 1;
        const int at = lines_back ? uh - 1 - y : y, block_line = at / DCTSIZE;
        if (w->line_of[ci] != block_line) {
            // The line's blocks were packed a block row at a time: across a stored
            // column each is a cache miss (its place, then its bytes), so both are
            // fetched ahead. The line is within the grid: `at` is inside the image.
            const uint32_t *places = w->places[ci];
            const size_t step = swap ? w->wide[ci] : 1, first = swap ? (size_t)block_line : (size_t)block_line * w->wide[ci];
            for (size_t b = 0; b < blocks_across; b++) {
                if (b + 16 < blocks_across) __builtin_prefetch(places + first + (b + 16) * step);
                if (b + 8 < blocks_across) {
                    const unsigned char *ahead = w->packed + places[first + (b + 8) * step];
                    __builtin_prefetch(ahead);
                    __builtin_prefetch(ahead + 64);
                }
                JCOEF coefs[DCTSIZE2] __attribute__((aligned(32)));
                unpack_block(w, ci, swap ? (JDIMENSION)block_line : (JDIMENSION)b,
                             swap ? (JDIMENSION)b : (JDIMENSION)block_line, coefs);
                JSAMPLE turned[DCTSIZE][DCTSIZE];
                JSAMPROW out[DCTSIZE];
                for (int k = 0; k < DCTSIZE; k++) out[k] = swap ? turned[k] : line + (size_t)k * stride;
                w->idct[ci](in, c, coefs, out, swap ? 0 : (JDIMENSION)(b * DCTSIZE));
                // A stored column is the line: its samples go across the line's rows.
                if (swap) transpose8_into(turned[0], line + b * DCTSIZE, stride);
            }
            w->line_of[ci] = block_line;
        }
        const unsigned char *from = line + (size_t)(at % DCTSIZE) * stride;
        unsigned char *to = band.p + (size_t)i * band.stride;
        if (across_back) {
            for (int x = 0; x < uw; x++) to[x] = from[uw - 1 - x];
        } else {
            memcpy(to, from, (size_t)uw);
        }
        memset(to + uw, to[uw - 1], (size_t)(band.stride - uw));
    }
}

// One image's route through run(), decided from the job and the header before
// anything is allocated: which of the coded routes it takes (ItemPlan decided
// which the job allows; the sampling and the turn decide the rest), and the
// sizes and strides of its bands.
typedef struct {
    int W, H, hs, vs, is420, o, encode, swap, blocks, means, held, whole, upright, group;
    int cw, ch, UW, UH, ys, cs, scratch_stride, eys, ecs;
    size_t planes_bytes;
    Turn turn;
} Route;

static Route route_of(Work *w, const CJpegPlanesJob *job) {
    struct jpeg_decompress_struct *in = &w->in;
    Route r;
    r.W = (int)in->image_width, r.H = (int)in->image_height;
    r.hs = in->comp_info[0].h_samp_factor, r.vs = in->comp_info[0].v_samp_factor;
    r.is420 = r.hs == 2 && r.vs == 2; // its chroma is already the store's
    r.o = job->orientation >= 2 && job->orientation <= 8 ? job->orientation : 1;
    r.turn = turn_of(r.o);
    r.encode = job->quality > 0, r.swap = r.turn.quarter;
    // An upright 4:2:0 source (the job asks only for one in sRGB or untagged)
    // is taken as coded, and so is a turned one whose edges that turn to the
    // upright image's left and top are whole 16-pixel MCUs (so the turn keeps
    // the block grid): ItemPlan.turnKeepsBlocks.
    const int keeps = !(r.turn.across_back && (r.swap ? r.H : r.W) % 16) &&
                      !(r.turn.lines_back && (r.swap ? r.W : r.H) % 16);
    r.blocks = job->blocks && r.is420 && keeps && r.encode;
    // The tap from the blocks' sums: no IDCT at all unless the store is encoded from pixels.
    r.means = job->tap != NULL && job->tap_means;
    // Any other turned 4:2:0 source is held as coded, its pixels decoded and turned
    // once the decode is done; unless a tap reads its pixels (then as planes: below).
    // Held only when its packed blocks promise to be smaller than the planes: they take
    // 3.9–5.0 times the file's bytes (13 photos), and 5 bytes a block for its count and place.
    size_t blocks_in_all = 0;
    for (int ci = 0; ci < 3; ci++)
        blocks_in_all += (size_t)in->comp_info[ci].width_in_blocks * in->comp_info[ci].height_in_blocks;
    r.planes_bytes = (size_t)r.W * (size_t)r.H * 3 / 2;
    const int sparse = 5 * w->source_size + 5 * blocks_in_all <= r.planes_bytes;
    r.held = job->hold_turned && r.encode && r.o != 1 && r.is420 && !r.blocks && (job->tap == NULL || r.means) &&
             sparse;
    w->pixels = (job->tap != NULL && !r.means) || (r.encode && !r.blocks && !r.held);
    // A turned source decoded is held whole (its first upright row may be its
    // last stored column); an upright one streams, and so do blocks taken as coded.
    r.whole = r.encode && r.o != 1 && !r.blocks && !r.held;
    // The store's bands are upright rows, not the source's.
    r.upright = r.whole || r.held;
    r.group = r.vs * DCTSIZE; // luma rows per read
    r.cw = (r.W + 1) / 2, r.ch = (r.H + 1) / 2;
    r.UW = r.swap ? r.H : r.W, r.UH = r.swap ? r.W : r.H;
    // Strides: at least the decoder's blocks and the encoder's, in 16s.
    const int dcs = (int)in->comp_info[1].width_in_blocks * DCTSIZE;
    const int dys = (int)in->comp_info[0].width_in_blocks * DCTSIZE;
    r.ys = round_up(dys > r.W ? dys : r.W, 16);
    r.cs = round_up(dcs > r.cw ? dcs : r.cw, 16);
    r.scratch_stride = round_up(dcs, 16);
    r.eys = round_up(r.UW, 16), r.ecs = round_up((r.UW + 1) / 2, 16);
    return r;
}

// What run() decodes into: the band (the store's, or the streamed source's),
// scratch chroma rows at the source's own sampling when it is not 4:2:0, a
// turned source's whole 4:2:0 planes, and the rows handed to the decoder.
typedef struct {
    Band band;
    Plane scb, scr, py, pcb, pcr;
    JSAMPROW yrows[16], cbrows[DCTSIZE], crrows[DCTSIZE];
    int block_width[3], block_height[3];
} Buffers;

static void buffers_for(Work *w, const Route *r, Buffers *b) {
    // One allocation for the bands: 16 luma and 8 chroma rows (the store's
    // band, or the streamed source's), the source's chroma rows at its own
    // sampling when not 4:2:0, and 64 bytes of slack for vector reads.
    const size_t bands_size = r->upright ? band_bytes(r->eys, r->ecs) : band_bytes(r->ys, r->cs);
    const size_t scratch_bytes = r->is420 ? 0 : (size_t)2 * DCTSIZE * r->scratch_stride;
    w->bands = malloc(bands_size + scratch_bytes + 64);
    if (!w->bands) stop((j_common_ptr)&w->in, "out of memory for the bands");
    b->band = r->upright ? band_at(w->bands, r->eys, r->ecs) : band_at(w->bands, r->ys, r->cs);
    b->scb = (Plane){w->bands + bands_size, r->scratch_stride};
    b->scr = (Plane){b->scb.p + (size_t)DCTSIZE * r->scratch_stride, r->scratch_stride};
    // A turned source's 4:2:0 planes, rows in 16s (the decoder writes whole
    // blocks). Not kept for the next image: measured over 40 photos (8 turned),
    // keeping up to 40 MB a worker saved 5 % of the time and cost 30 MB of PSS.
    if (r->whole) {
        const size_t rows = (size_t)round_up(r->H, 16), luma = (size_t)r->ys * rows;
        const size_t chroma = (size_t)r->cs * (rows / 2);
        w->planes = malloc(luma + 2 * chroma + 64);
        if (!w->planes) stop((j_common_ptr)&w->in, "out of memory for the planes");
        b->py = (Plane){w->planes, r->ys};
        b->pcb = (Plane){w->planes + luma, r->cs};
        b->pcr = (Plane){w->planes + luma + chroma, r->cs};
    }
    // The blocks' sums of one iMCU row, and the source pixels a block of each component covers
    // (8 of its samples: 16 pixels where it is subsampled; hs and vs are the largest factors).
    for (int ci = 0; ci < 3 && r->means; ci++) {
        const jpeg_component_info *c = &w->in.comp_info[ci];
        w->sums_wide[ci] = (int)c->width_in_blocks;
        w->sums[ci] = calloc((size_t)c->width_in_blocks * (size_t)c->v_samp_factor, sizeof(int32_t));
        if (!w->sums[ci]) stop((j_common_ptr)&w->in, "out of memory for the blocks' sums");
        b->block_width[ci] = DCTSIZE * r->hs / c->h_samp_factor;
        b->block_height[ci] = DCTSIZE * r->vs / c->v_samp_factor;
    }
}

// One read of `group` luma rows (and their chroma) from the decoder, at source
// row `row`: into the band or the planes, tapped, downsampled to 4:2:0 where the
// source is not, and a streamed band encoded once its 16 rows are in.
static void decode_group(Work *w, const CJpegPlanesJob *job, const Route *r, Buffers *b, int row) {
    struct jpeg_decompress_struct *in = &w->in;
    const int valid = r->group < r->H - row ? r->group : r->H - row;
    const int ys = r->ys, cs = r->cs;
    const int64_t start = now_ns();
    // Luma goes where the store reads it: the band (streamed) or the planes (turned).
    // A held source's rows are never written (no IDCT runs): every one is the band's first.
    const Plane by = b->band.y, bcb = b->band.cb, bcr = b->band.cr;
    Plane ty = r->whole ? (Plane){b->py.p + (size_t)row * ys, ys} : (Plane){by.p + (size_t)(row % 16) * ys, ys};
    Plane tcb = r->whole ? (Plane){b->pcb.p + (size_t)(row / 2) * cs, cs}
                         : (Plane){bcb.p + (size_t)((row % 16) / 2) * cs, cs};
    Plane tcr = r->whole ? (Plane){b->pcr.p + (size_t)(row / 2) * cs, cs}
                         : (Plane){bcr.p + (size_t)((row % 16) / 2) * cs, cs};
    if (r->held) ty = (Plane){by.p, 0}, tcb = (Plane){bcb.p, 0}, tcr = (Plane){bcr.p, 0};
    for (int i = 0; i < r->group; i++) b->yrows[i] = ty.p + (size_t)i * ty.stride;
    // Chroma: a 4:2:0 source's straight into place too; any other's to the scratch rows.
    for (int i = 0; i < DCTSIZE; i++) {
        b->cbrows[i] = r->is420 ? tcb.p + (size_t)i * tcb.stride : b->scb.p + (size_t)i * b->scb.stride;
        b->crrows[i] = r->is420 ? tcr.p + (size_t)i * tcr.stride : b->scr.p + (size_t)i * b->scr.stride;
    }
    w->imcu_row = row / r->group;
    JSAMPARRAY image[3] = {b->yrows, b->cbrows, b->crrows};
    if ((int)jpeg_read_raw_data(in, image, (JDIMENSION)r->group) != r->group)
        stop((j_common_ptr)in, "the decoder gave a short band");
    const int32_t *const sums[3] = {w->sums[0], w->sums[1], w->sums[2]};
    if (r->means) {
        if (CThumbKernels_tap_add_block_sums(job->tap, row, valid, sums, w->sums_wide, b->block_width,
                                             b->block_height))
            stop((j_common_ptr)in, "the tap refused the blocks' sums");
    } else if (job->tap && CThumbKernels_tap_add_ycbcr_rows(job->tap, row, valid, b->yrows, b->cbrows, b->crrows,
                                                          r->hs - 1, r->vs - 1, (int)ys,
                                                          (int)(r->is420 ? cs : b->scb.stride))) {
        stop((j_common_ptr)in, "the tap refused the planes");
    }
    if (r->encode && !r->is420) {
        // Chroma rows made of these luma rows: 4:2:0 rows row / 2 onwards.
        unsigned char *chroma_rows[DCTSIZE];
        const int made = ((row + valid + 1) / 2) - row / 2;
        for (int t = 0; t < made; t++) chroma_rows[t] = tcb.p + (size_t)t * cs;
        const int last_row = r->vs == 2 ? r->ch - 1 : r->H - 1;
        const int last_col = r->hs == 2 ? r->cw - 1 : r->W - 1;
        downsample(&b->scb, r->hs, r->vs, row, last_row, last_col, chroma_rows, made, r->cw);
        for (int t = 0; t < made; t++) chroma_rows[t] = tcr.p + (size_t)t * cs;
        downsample(&b->scr, r->hs, r->vs, row, last_row, last_col, chroma_rows, made, r->cw);
    }
    const int64_t decoded = now_ns();
    w->decode_ns += decoded - start;
    // A streamed band goes to the encoder once its 16 rows are in (or the image ends).
    if (r->encode && !r->whole && !w->places[0] && (row % 16 + r->group == 16 || row + r->group >= r->H)) {
        const int band_rows = row % 16 + valid;
        if (!r->blocks) {
            pad_band(by, r->W, band_rows, 16);
            pad_band(bcb, r->cw, (band_rows + 1) / 2, 8);
            pad_band(bcr, r->cw, (band_rows + 1) / 2, 8);
        }
        write_band(w, by, bcb, bcr);
        w->encode_ns += now_ns() - decoded;
    }
}

// After the decode: a turned source's store written upright, band by band, from
// its blocks placed upright or from its whole planes; then the encoder finished.
static void write_turned(Work *w, const Route *r, const Buffers *b) {
    const Plane by = b->band.y, bcb = b->band.cb, bcr = b->band.cr;
    const int64_t start = now_ns();
    if (w->places[0] && !r->held) {
        // A turned source's blocks, upright: the band's rows are never read.
        for (int row = 0; row < r->UH; row += 16) {
            w->out_imcu_row = row / 16;
            write_band(w, by, bcb, bcr);
        }
    }
    if (r->whole) {
        // Upright bands gathered from the turned planes (chroma turned as its own grid).
        for (int row = 0; row < r->UH; row += 16) {
            gather(b->py, r->W, r->H, r->o, row, 16, by);
            gather(b->pcb, r->cw, r->ch, r->o, row / 2, 8, bcb);
            gather(b->pcr, r->cw, r->ch, r->o, row / 2, 8, bcr);
            write_band(w, by, bcb, bcr);
        }
    }
    w->encode_ns += now_ns() - start;
}

static void run(Work *w, const CJpegPlanesJob *job, CJpegPlanesResult *result) {
    struct jpeg_decompress_struct *in = &w->in;
    const Route r = route_of(w, job);
    Buffers b = {0};
    buffers_for(w, &r, &b);
    if (r.encode) start_encoder(w, job, r.UW, r.UH, JCS_YCbCr);
    JSAMPARRAY image[3] = {b.yrows, b.cbrows, b.crrows};
    if (r.blocks) take_blocks(w, image, r.o);
    else if (r.means || r.held) hook_idct(w, image);
    if (r.held) {
        hold_blocks(w, r.o);
        w->held = 1;
        w->held_cap = r.planes_bytes + r.planes_bytes / 2 + 65536;
    }
    result->held = r.held;
    result->requantized = r.blocks;
    while (in->output_scanline < in->output_height) decode_group(w, job, &r, &b, (int)in->output_scanline);
    if (r.held) {
        // Before the decoder finishes: its IDCT's tables go with it.
        const int64_t start = now_ns();
        for (int row = 0; row < r.UH; row += 16) {
            held_band(w, 0, row, 16, b.band.y);
            held_band(w, 1, row / 2, 8, b.band.cb);
            held_band(w, 2, row / 2, 8, b.band.cr);
            write_band(w, b.band.y, b.band.cb, b.band.cr);
        }
        w->encode_ns += now_ns() - start;
    }
    jpeg_finish_decompress(in);
    if (!r.encode) return;
    write_turned(w, &r, &b);
    const int64_t start = now_ns();
    jpeg_finish_compress(&w->out);
    w->encode_ns += now_ns() - start;
    result->size = (unsigned long)(w->sink.capacity - w->sink.pub.free_in_buffer);
}

// The converting path: RGB scanlines a band at a time, turned to sRGB in place,
// tapped, and encoded from RGB (libjpeg's own YCbCr conversion and 4:2:0
// downsampling, as libvips's encoder has them); a turned source is held whole:
// as the store's own YCbCr (YccHold) when its sides are even, else as RGB.

// libjpeg's RGB → YCbCr, as jccolor.c's rgb_ycc_convert computes it (and
// libjpeg-turbo's SIMD, bit for bit): 16-bit fixed point, Cb and Cr rounded at
// a half less one (so that they never reach 256).
// Built twice, the loader picking the AVX2 copy where the CPU has it (twice as wide).
#define YCC_FIX(x) ((int32_t)((x) * 65536.0 + 0.5))
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void ycc_row(const unsigned char *restrict rgb, int n, unsigned char *restrict y, unsigned char *restrict cb,
                    unsigned char *restrict cr) {
    const int32_t half = 1 << 15, offset = (128 << 16) + half - 1;
    for (int x = 0; x < n; x++) {
        const int32_t r = rgb[3 * x], g = rgb[3 * x + 1], b = rgb[3 * x + 2];
        y[x] = (unsigned char)((YCC_FIX(0.29900) * r + YCC_FIX(0.58700) * g + YCC_FIX(0.11400) * b + half) >> 16);
        cb[x] = (unsigned char)((-YCC_FIX(0.16874) * r - YCC_FIX(0.33126) * g + YCC_FIX(0.50000) * b + offset) >> 16);
        cr[x] = (unsigned char)((YCC_FIX(0.50000) * r - YCC_FIX(0.41869) * g - YCC_FIX(0.08131) * b + offset) >> 16);
    }
}

// A turned source with even sides, held until its decode ends as what libjpeg's
// encoder would make of its upright RGB: luma, and 4:2:0 chroma, 1.5 bytes a
// pixel instead of RGB's 3 (a 22 Mpx photo held in 33 MB, not 67). With even
// sides a turn maps the stored 2 × 2 blocks onto the upright ones, so each
// chroma sample is the same four pixels' (h2v2_downsample's (sum + bias) >> 2),
// its bias (1, 2, 1, … across) taken from the upright column it lands in. The
// one thing a 2 × 2 block cannot give is the encoder's padding past the
// upright right edge (its last pixel repeated: pairs of it), so the stored line
// that turns into the upright last column is kept pixel by pixel (`edge`).
typedef struct {
    Plane y, chroma[2];        // the stored frame: W × H luma, W/2 × H/2 Cb and Cr
    unsigned char *edge[2];    // the upright last column's Cb and Cr, by position along its stored line
    unsigned char *row[2];     // one stored row's Cb and Cr
    uint16_t *sum[2];          // a chroma row's pair sums from its first stored row
    Turn turn;
    int W, H;
} YccHold;

// The stored rows [r, r + n) of converted RGB `rows` into the hold (built twice, as ycc_row).
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void ycc_hold_rows(YccHold *h, JSAMPROW *rows, int r, int n) {
    const Turn t = h->turn;
    const int cw = h->W / 2;
    // The upright column a chroma sample lands in: a quarter turn's is its stored row's.
    const int flip = t.across_back ? cw - 1 : 0, edge_row = t.across_back ? 0 : h->H - 1;
    const int edge_column = t.across_back ? 0 : h->W - 1;
    for (int i = 0; i < n; i++) {
        const int sy = r + i;
        ycc_row(rows[i], h->W, h->y.p + (size_t)sy * (size_t)h->y.stride, h->row[0], h->row[1]);
        for (int c = 0; c < 2; c++) {
            const unsigned char *v = h->row[c];
            uint16_t *restrict sum = h->sum[c];
            if (sy % 2 == 0) {
                for (int j = 0; j < cw; j++) sum[j] = (uint16_t)(v[2 * j] + v[2 * j + 1]);
            } else {
                unsigned char *restrict out = h->chroma[c].p + (size_t)(sy / 2) * (size_t)h->chroma[c].stride;
                if (t.quarter) {
                    const int k = sy / 2, bias = 1 + ((t.across_back ? h->H / 2 - 1 - k : k) & 1);
                    for (int j = 0; j < cw; j++)
                        out[j] = (unsigned char)((sum[j] + v[2 * j] + v[2 * j + 1] + bias) >> 2);
                } else {
                    for (int j = 0; j < cw; j++)
                        out[j] = (unsigned char)((sum[j] + v[2 * j] + v[2 * j + 1] + 1 + ((j ^ flip) & 1)) >> 2);
                }
            }
            if (t.quarter) {
                if (sy == edge_row) memcpy(h->edge[c], v, (size_t)h->W);
            } else {
                h->edge[c][sy] = v[edge_column];
            }
        }
    }
}

// The upright band of 16 luma and 8 chroma rows from `row` on, as libjpeg's
// encoder pads them: luma's last sample repeated rightward, the last rows down;
// chroma past the right edge from pairs of the last upright pixel.
static void ycc_hold_band(const YccHold *h, int o, int row, Band band) {
    const int swap = h->turn.quarter, UW = swap ? h->H : h->W, UH = swap ? h->W : h->H, ucw = UW / 2;
    gather(h->y, h->W, h->H, o, row, 16, band.y);
    const Plane chroma[2] = {band.cb, band.cr};
    for (int c = 0; c < 2; c++) {
        unsigned char *out[DCTSIZE];
        for (int i = 0; i < DCTSIZE; i++) out[i] = chroma[c].p + (size_t)i * (size_t)chroma[c].stride;
        gather_rows(h->chroma[c].p, (size_t)h->chroma[c].stride, h->W / 2, h->H / 2, o, 1, row / 2, DCTSIZE, out);
        for (int i = 0; i < DCTSIZE; i++) {
            const int yc = row / 2 + i < UH / 2 ? row / 2 + i : UH / 2 - 1;
            const int y0 = h->turn.lines_back ? UH - 1 - 2 * yc : 2 * yc, y1 = h->turn.lines_back ? y0 - 1 : y0 + 1;
            const int pair = 2 * (h->edge[c][y0] + h->edge[c][y1]);
            for (int xc = ucw; xc < chroma[c].stride; xc++) out[i][xc] = (unsigned char)((pair + 1 + (xc & 1)) >> 2);
        }
    }
}

// Where run_rgb's RGB rows come from: libjpeg's decoder (a JPEG converted to
// sRGB), or decoded YCbCr planes (a HEIC's, CJpegPlanes_encode_ycc). `read`
// fills rows [r, r + n) and stops the run (longjmp) when it cannot.
typedef struct RowSource {
    int width, height;
    void (*read)(Work *w, const struct RowSource *source, JSAMPROW *rows, int r, int n);
    const CJpegPlanesYcc *ycc;
} RowSource;

static void read_jpeg_rows(Work *w, const RowSource *source, JSAMPROW *rows, int r, int want) {
    (void)source;
    (void)r;
    int got = 0;
    while (got < want) {
        const int n = (int)jpeg_read_scanlines(&w->in, rows + got, (JDIMENSION)(want - got));
        if (n <= 0) stop((j_common_ptr)&w->in, "the decoder gave a short band");
        got += n;
    }
}

// Sets up `hold` for a turned source of even sides (run_rgb's compact case):
// in the source's own planes, in their strides, when the caller lets them go
// (each stored row is written after it was read, its chroma row after its
// second luma row; gather_rows reads 16 bytes past a row's last sample, which a
// stride of 16-byte multiples has), else in w->ycc; with the upright last
// column's edges, a stored row's Cb and Cr, and a chroma row's pair sums beside them.
static void start_hold(Work *w, const RowSource *source, int o, YccHold *hold) {
    const int W = source->width, H = source->height, UH = turn_of(o).quarter ? W : H;
    const int ys = round_up(W, 16), cs = round_up(W / 2, 16);
    const CJpegPlanesYcc *p = source->ycc;
    const int in_place = p && p->writable && p->y_stride >= (size_t)ys && p->c_stride >= (size_t)cs &&
                         p->y_stride <= INT_MAX && p->c_stride <= INT_MAX;
    const size_t luma = in_place ? 0 : (size_t)ys * H, chroma = in_place ? 0 : (size_t)cs * (H / 2);
    w->ycc = malloc(luma + 2 * chroma + 2 * (size_t)UH + 2 * (size_t)W + (size_t)W * sizeof(uint16_t) + 64);
    if (!w->ycc) stop((j_common_ptr)&w->in, "out of memory for the planes");
    hold->turn = turn_of(o);
    hold->W = W;
    hold->H = H;
    hold->y = in_place ? (Plane){(unsigned char *)p->y, (int)p->y_stride} : (Plane){w->ycc, ys};
    hold->chroma[0] = in_place ? (Plane){(unsigned char *)p->cb, (int)p->c_stride} : (Plane){w->ycc + luma, cs};
    hold->chroma[1] =
        in_place ? (Plane){(unsigned char *)p->cr, (int)p->c_stride} : (Plane){w->ycc + luma + chroma, cs};
    unsigned char *rest = w->ycc + luma + 2 * chroma;
    hold->edge[0] = rest;
    hold->edge[1] = rest + UH;
    hold->row[0] = rest + 2 * (size_t)UH;
    hold->row[1] = hold->row[0] + W;
    hold->sum[0] = (uint16_t *)(void *)(hold->row[1] + W);
    hold->sum[1] = hold->sum[0] + W / 2;
}

// Encodes a turned source held whole as RGB rows (w->planes, W × H) upright,
// 16 rows at a time gathered into w->bands.
static void write_turned_rgb(Work *w, int W, int H, int o) {
    const int swap = turn_of(o).quarter, UW = swap ? H : W, UH = swap ? W : H;
    JSAMPROW upright[16];
    for (int i = 0; i < 16; i++) upright[i] = w->bands + (size_t)UW * 3 * (size_t)i;
    for (int row = 0; row < UH; row += 16) {
        const int n = 16 < UH - row ? 16 : UH - row;
        gather_rows(w->planes, (size_t)W * 3, W, H, o, 3, row, n, upright);
        if ((int)jpeg_write_scanlines(&w->out, upright, (JDIMENSION)n) != n)
            stop((j_common_ptr)&w->out, "the encoder took a short band");
    }
}

// Rows [r, r + got) of RGB: read from the source, turned to sRGB by the job's
// shaper, tapped; each step's time on its clock.
static void rgb_band(Work *w, const CJpegPlanesJob *job, const RowSource *source, JSAMPROW *rows, int r, int got) {
    int64_t start = now_ns();
    source->read(w, source, rows, r, got);
    int64_t t = now_ns();
    w->decode_ns += t - start;
    if (job->shaper)
        for (int i = 0; i < got; i++) CThumbKernels_shaper_rgb(job->shaper, rows[i], (size_t)source->width);
    start = now_ns();
    w->colour_ns += start - t;
    if (job->tap && CThumbKernels_tap_add_rgb_rows(job->tap, r, got, rows, source->width))
        stop((j_common_ptr)&w->in, "the tap refused the rows");
    w->decode_ns += now_ns() - start;
}

static void run_rgb(Work *w, const CJpegPlanesJob *job, const RowSource *source, CJpegPlanesResult *result) {
    struct jpeg_decompress_struct *in = &w->in;
    const int W = source->width, H = source->height;
    const int o = job->orientation >= 2 && job->orientation <= 8 ? job->orientation : 1;
    const int encode = job->quality > 0, swap = turn_of(o).quarter, whole = encode && o != 1;
    const int compact = whole && job->hold_turned && W % 2 == 0 && H % 2 == 0;
    const int UW = swap ? H : W, UH = swap ? W : H;
    const size_t row_bytes = (size_t)W * 3;
    enum { BAND = 16 };
    // The band's rows (the whole image's for a turned source held as RGB), and the
    // upright rows to encode: 16 of RGB, or a band of planes for a YCbCr hold.
    const int rgb_whole = whole && !compact;
    const int eys = round_up(UW, 16), ecs = round_up(UW / 2, 16);
    w->planes = malloc(row_bytes * (size_t)(rgb_whole ? H : BAND) + 64);
    const size_t upright_bytes = compact ? band_bytes(eys, ecs) : (size_t)UW * 3 * BAND;
    w->bands = whole ? malloc(upright_bytes + 64) : NULL;
    if (!w->planes || (whole && !w->bands)) stop((j_common_ptr)in, "out of memory for the bands");
    YccHold hold = {0};
    if (compact) {
        start_hold(w, source, o, &hold);
        result->held = 1;
    }
    if (encode) start_encoder(w, job, UW, UH, compact ? JCS_YCbCr : JCS_RGB);
    JSAMPROW rows[BAND];
    for (int r = 0; r < H; r += BAND) {
        const int got = BAND < H - r ? BAND : H - r;
        for (int i = 0; i < got; i++) rows[i] = w->planes + row_bytes * (size_t)(rgb_whole ? r + i : i);
        rgb_band(w, job, source, rows, r, got);
        const int64_t t = now_ns();
        if (compact) {
            ycc_hold_rows(&hold, rows, r, got);
            w->encode_ns += now_ns() - t;
        } else if (encode && !whole) {
            if ((int)jpeg_write_scanlines(&w->out, rows, (JDIMENSION)got) != got)
                stop((j_common_ptr)&w->out, "the encoder took a short band");
            w->encode_ns += now_ns() - t;
        }
    }
    if (source->read == read_jpeg_rows) jpeg_finish_decompress(in);
    if (!encode) return;
    int64_t start = now_ns();
    if (compact) {
        const Band band = band_at(w->bands, eys, ecs);
        for (int row = 0; row < UH; row += 16) {
            ycc_hold_band(&hold, o, row, band);
            write_band(w, band.y, band.cb, band.cr);
        }
    } else if (whole) {
        write_turned_rgb(w, W, H, o);
    }
    jpeg_finish_compress(&w->out);
    w->encode_ns += now_ns() - start;
    result->size = (unsigned long)(w->sink.capacity - w->sink.pub.free_in_buffer);
}

static int finish(Work *w, int status, const CJpegPlanesJob *job, CJpegPlanesResult *result);

int CJpegPlanes_transcode(const unsigned char *jpeg, size_t size, const CJpegPlanesJob *job,
                          CJpegPlanesResult *result, char *error, size_t error_size) {
    memset(result, 0, sizeof *result);
    Work *w = calloc(1, sizeof *w);
    if (!w) return refuse(error, error_size, "out of memory");
    int status = -1;
    w->in.err = jpeg_std_error(&w->errors.pub);
    w->errors.pub.error_exit = on_error;
    w->errors.pub.emit_message = on_message;
    w->errors.error = error;
    w->errors.error_size = error_size;
    if (setjmp(w->errors.jump)) goto done;
    jpeg_create_decompress(&w->in);
    w->in_made = 1;
    jpeg_mem_src(&w->in, jpeg, (unsigned long)size);
    w->source_size = size;
    jpeg_read_header(&w->in, TRUE);
    const jpeg_component_info *c = w->in.comp_info;
    if (w->in.jpeg_color_space != JCS_YCbCr || w->in.num_components != 3 || w->in.data_precision != 8) {
        refuse(error, error_size, "not an 8-bit YCbCr JPEG");
        goto done;
    }
    if (w->in.arith_code) {
        refuse(error, error_size, "arithmetic coding");
        goto done;
    }
    if (c[0].h_samp_factor < 1 || c[0].h_samp_factor > 2 || c[0].v_samp_factor < 1 || c[0].v_samp_factor > 2 ||
        c[1].h_samp_factor != 1 || c[1].v_samp_factor != 1 || c[2].h_samp_factor != 1 || c[2].v_samp_factor != 1) {
        refuse(error, error_size, "chroma sampling other than 4:2:0, 4:2:2, 4:4:0 or 4:4:4");
        goto done;
    }
    if ((int)w->in.image_width != job->width || (int)w->in.image_height != job->height) {
        refuse(error, error_size, "the size differs from the header's");
        goto done;
    }
    w->in.dct_method = JDCT_ISLOW;
    if (job->shaper) {
        w->in.out_color_space = JCS_RGB;
        jpeg_start_decompress(&w->in);
        const RowSource source = {job->width, job->height, read_jpeg_rows, NULL};
        run_rgb(w, job, &source, result);
    } else {
        w->in.raw_data_out = TRUE;
        w->in.do_block_smoothing = FALSE; // the coefficients as stored, for requantizing
        jpeg_start_decompress(&w->in);
        run(w, job, result);
    }
    status = 0;
done:
    return finish(w, status, job, result);
}

// Frees what a run made, and hands the caller the store's bytes when it succeeded.
static int finish(Work *w, int status, const CJpegPlanesJob *job, CJpegPlanesResult *result) {
    if (w->in_made) jpeg_destroy_decompress(&w->in);
    if (w->out_made) jpeg_destroy_compress(&w->out);
    free(w->bands);
    free(w->planes);
    free(w->ycc);
    free(w->coefs[0]);
    free(w->places[0]);
    free(w->packed);
    for (int ci = 0; ci < 3; ci++) {
        free(w->sums[ci]);
        free(w->lines[ci]);
    }
    result->decode_ns = w->decode_ns;
    result->colour_ns = w->colour_ns;
    result->encode_ns = w->encode_ns;
    if (status == 0 && job->quality > 0) {
        result->jpeg = w->sink.data;
    } else {
        free(w->sink.data);
        result->size = 0;
    }
    free(w);
    return status;
}

// MARK: - Decoded YCbCr planes (a HEIC's)

static inline unsigned char clamp8(int32_t v) { return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v); }

// The matrix and range as 16-bit fixed-point factors: R = Y' + rcr·V, G = Y' −
// gcb·U − gcr·V, B = Y' + bcb·U, with Y' = yk·(Y − yoff), U = Cb − 128, V = Cr − 128.
typedef struct {
    int32_t yk, yoff, rcr, bcb, gcb, gcr;
} YccFactors;

static YccFactors ycc_factors(const CJpegPlanesYcc *p) {
    const double kg = 1.0 - p->kr - p->kb;
    const double ys = p->full_range ? 1.0 : 255.0 / 219.0, cs = p->full_range ? 1.0 : 255.0 / 224.0;
    return (YccFactors){
        .yk = (int32_t)(ys * 65536.0 + 0.5),
        .yoff = p->full_range ? 0 : 16,
        .rcr = (int32_t)(cs * 2.0 * (1.0 - p->kr) * 65536.0 + 0.5),
        .bcb = (int32_t)(cs * 2.0 * (1.0 - p->kb) * 65536.0 + 0.5),
        .gcb = (int32_t)(cs * 2.0 * p->kb * (1.0 - p->kb) / kg * 65536.0 + 0.5),
        .gcr = (int32_t)(cs * 2.0 * p->kr * (1.0 - p->kr) / kg * 65536.0 + 0.5),
    };
}

// One RGB row from a luma row and its chroma row: each chroma sample serves a
// pair of pixels (nearest, as libheif 1.15 converts), its three terms computed
// once for both. Written pair by pair so that the compiler vectorizes it (ten
// times the per-pixel loop's speed on a 12 Mpx photo, the same bytes).
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void ycc_to_rgb_row(const unsigned char *restrict luma, const unsigned char *restrict cb,
                           const unsigned char *restrict cr, int width, const YccFactors *k,
                           unsigned char *restrict out) {
    const int32_t yk = k->yk, yoff = k->yoff, rcr = k->rcr, bcb = k->bcb, gcb = k->gcb, gcr = k->gcr;
    for (int j = 0; j < width / 2; j++) {
        const int32_t u = cb[j] - 128, v = cr[j] - 128;
        const int32_t dr = rcr * v + 32768, dg = 32768 - gcb * u - gcr * v, db = bcb * u + 32768;
        const int32_t l0 = yk * (luma[2 * j] - yoff), l1 = yk * (luma[2 * j + 1] - yoff);
        out[6 * j] = clamp8((l0 + dr) >> 16);
        out[6 * j + 1] = clamp8((l0 + dg) >> 16);
        out[6 * j + 2] = clamp8((l0 + db) >> 16);
        out[6 * j + 3] = clamp8((l1 + dr) >> 16);
        out[6 * j + 4] = clamp8((l1 + dg) >> 16);
        out[6 * j + 5] = clamp8((l1 + db) >> 16);
    }
    if (width & 1) {
        const int x = width - 1;
        const int32_t u = cb[x / 2] - 128, v = cr[x / 2] - 128, l = yk * (luma[x] - yoff) + 32768;
        out[3 * x] = clamp8((l + rcr * v) >> 16);
        out[3 * x + 1] = clamp8((l - gcb * u - gcr * v) >> 16);
        out[3 * x + 2] = clamp8((l + bcb * u) >> 16);
    }
}

// One band of RGB rows from 4:2:0 planes, in the matrix and range the picture says.
static void read_ycc_rows(Work *w, const RowSource *source, JSAMPROW *rows, int r, int n) {
    (void)w;
    const CJpegPlanesYcc *p = source->ycc;
    const YccFactors k = ycc_factors(p);
    for (int i = 0; i < n; i++) {
        const int y = r + i;
        ycc_to_rgb_row(p->y + (size_t)y * p->y_stride, p->cb + (size_t)(y / 2) * p->c_stride,
                       p->cr + (size_t)(y / 2) * p->c_stride, source->width, &k, rows[i]);
    }
}

// Planes in JPEG's own YCbCr (BT.601, full range) of an upright image without a
// profile to convert are the store's planes already: no RGB is made. They go to
// the encoder as raw data band by band (each band's right edge repeated in place
// in the planes' stride when they are writable, else in a copy; the last band
// copied and its last row repeated down, as libjpeg pads), and the tap reads the
// same bands (JFIF's conversion of each block's means, as the JPEG planes' tap).
static int planes_are_jfif(const CJpegPlanesYcc *p) {
    return p->full_range && fabs(p->kr - 0.299) < 1e-9 && fabs(p->kb - 0.114) < 1e-9;
}

static void run_jfif_planes(Work *w, const CJpegPlanesJob *job, const CJpegPlanesYcc *p, CJpegPlanesResult *result) {
    const int W = job->width, H = job->height, cw = (W + 1) / 2;
    const int eys = round_up(W, 16), ecs = round_up(cw, 16);
    const int in_place = p->writable && p->y_stride >= (size_t)eys && p->c_stride >= (size_t)ecs;
    w->bands = malloc(band_bytes(eys, ecs) + 64);
    if (!w->bands) stop((j_common_ptr)&w->in, "out of memory for the bands");
    const Band copy = band_at(w->bands, eys, ecs);
    if (job->quality > 0) start_encoder(w, job, W, H, JCS_YCbCr);
    for (int r = 0; r < H; r += 16) {
        const int64_t start = now_ns();
        const int rows = H - r < 16 ? H - r : 16, chroma_rows = (rows + 1) / 2;
        Band band = {{(unsigned char *)p->y + (size_t)r * p->y_stride, (int)p->y_stride},
                     {(unsigned char *)p->cb + (size_t)(r / 2) * p->c_stride, (int)p->c_stride},
                     {(unsigned char *)p->cr + (size_t)(r / 2) * p->c_stride, (int)p->c_stride}};
        if (rows < 16 || !in_place) {
            for (int i = 0; i < rows; i++) memcpy(copy.y.p + (size_t)i * eys, band.y.p + (size_t)i * band.y.stride, W);
            for (int i = 0; i < chroma_rows; i++) {
                memcpy(copy.cb.p + (size_t)i * ecs, band.cb.p + (size_t)i * band.cb.stride, cw);
                memcpy(copy.cr.p + (size_t)i * ecs, band.cr.p + (size_t)i * band.cr.stride, cw);
            }
            band = copy;
        }
        JSAMPROW yrows[16], cbrows[8], crrows[8];
        for (int i = 0; i < 16; i++) yrows[i] = band.y.p + (size_t)i * band.y.stride;
        for (int i = 0; i < 8; i++) {
            cbrows[i] = band.cb.p + (size_t)i * band.cb.stride;
            crrows[i] = band.cr.p + (size_t)i * band.cr.stride;
        }
        if (job->tap && CThumbKernels_tap_add_ycbcr_rows(job->tap, r, rows, yrows, cbrows, crrows, 1, 1,
                                                         band.y.stride, band.cb.stride))
            stop((j_common_ptr)&w->in, "the tap refused the planes");
        const int64_t tapped = now_ns();
        w->decode_ns += tapped - start;
        if (job->quality <= 0) continue;
        pad_band(band.y, W, rows, 16);
        pad_band(band.cb, cw, chroma_rows, 8);
        pad_band(band.cr, cw, chroma_rows, 8);
        write_band(w, band.y, band.cb, band.cr);
        w->encode_ns += now_ns() - tapped;
    }
    if (job->quality <= 0) return;
    const int64_t start = now_ns();
    jpeg_finish_compress(&w->out);
    w->encode_ns += now_ns() - start;
    result->size = (unsigned long)(w->sink.capacity - w->sink.pub.free_in_buffer);
    result->jfif = 1;
}

int CJpegPlanes_encode_ycc(const CJpegPlanesYcc *planes, const CJpegPlanesJob *job, CJpegPlanesResult *result,
                           char *error, size_t error_size) {
    memset(result, 0, sizeof *result);
    if (job->width < 1 || job->height < 1 || !planes->y || !planes->cb || !planes->cr ||
        planes->y_stride < (size_t)job->width || planes->c_stride < (size_t)(job->width + 1) / 2 ||
        !(planes->kr > 0 && planes->kb > 0 && planes->kr + planes->kb < 1))
        return refuse(error, error_size, "planes that do not fit the job");
    Work *w = calloc(1, sizeof *w);
    if (!w) return refuse(error, error_size, "out of memory");
    // Only the error manager of the decoder's half is used: stop() finds it there.
    w->in.err = jpeg_std_error(&w->errors.pub);
    w->errors.pub.error_exit = on_error;
    w->errors.pub.emit_message = on_message;
    w->errors.error = error;
    w->errors.error_size = error_size;
    int status = -1;
    if (setjmp(w->errors.jump) == 0) {
        const int upright = job->orientation < 2 || job->orientation > 8;
        if (!job->shaper && upright && planes_are_jfif(planes)) {
            run_jfif_planes(w, job, planes, result);
        } else {
            const RowSource source = {job->width, job->height, read_ycc_rows, planes};
            run_rgb(w, job, &source, result);
        }
        status = 0;
    }
    return finish(w, status, job, result);
}

void CJpegPlanes_free_buffer(unsigned char *jpeg) { free(jpeg); }

// The tables of one component from the callers' steps, for the two test entries.
static Work *test_work(const unsigned short source[64], const unsigned short store[64], int *narrow) {
    Work *w = calloc(1, sizeof *w);
    if (w) *narrow = set_tables(w, 0, source, store); // UINT16 is unsigned short
    return w;
}

long CJpegPlanes_requantize(const short *in, short *out, size_t count, const unsigned short source[64],
                            const unsigned short store[64]) {
    int narrow;
    Work *w = test_work(source, store, &narrow);
    if (!w) return -1;
    for (size_t b = 0; b < count; b++) requantize_block(w, 0, in + b * DCTSIZE2, out + b * DCTSIZE2);
    free(w);
    return 0;
}

long CJpegPlanes_requantize_mismatches(const short *blocks, size_t count, const unsigned short source[64],
                                       const unsigned short store[64]) {
    int narrow;
    Work *w = test_work(source, store, &narrow);
    if (!w) return -1;
    long mismatches = -1;
    if (narrow && __builtin_cpu_supports("avx2")) {
        mismatches = 0;
        for (size_t b = 0; b < count; b++) {
            JCOEF scalar[DCTSIZE2], vector[DCTSIZE2];
            requantize_block(w, 0, blocks + b * DCTSIZE2, scalar);
            requantize_block_avx2(w, 0, blocks + b * DCTSIZE2, vector);
            for (int k = 0; k < DCTSIZE2; k++) mismatches += scalar[k] != vector[k];
        }
    }
    free(w);
    return mismatches;
}
