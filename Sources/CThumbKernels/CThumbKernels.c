// CThumbKernels: thumbpipe's own pixel kernels, as libvips operations.
//
// Why this exists: three jobs need a loop over every pixel that no libvips
// operation does, and that would cost a full image pass (or a libvips pipeline
// build) if written in Swift over libvips's public calls:
// - the thumbnail tap, a pass-through that box-sums the pixels the store's
//   encoder pulls, so one decode feeds the store file and the thumbnail; and
//   its Lanczos3 resample of the few thousand block means a thumbnail needs;
// - the matrix/TRC ("shaper") conversion to sRGB, through tables, as lcms does it;
// - pass-through clocks that time what lies upstream of them.
// Each output image holds a reference to the state it reads or writes (the tap,
// the tables, the clock), so nothing here lives by a caller's convention.
#include "CThumbKernels.h"
#include <math.h>
#include <string.h>
#include <time.h>

// MARK: - The thumbnail tap

struct CThumbKernelsTap {
    gint refs;
    int width, height, bands, factor;
    int out_width, out_height; // the whole block grid
    // The blocks the resample reads (its window and the filter's support):
    // [bx0, bx0 + bw) × [by0, by0 + bh). Only these are summed.
    int bx0, by0, bw, bh;
    // The resample, fixed when the tap is made.
    double hscale, vscale;
    int left, top, rw, rh;
    guint64 *sums;            // bw × bh × 4: Σ c·a for c = R, G, B, then Σ a
    size_t sums_capacity;     // how many the array holds (a reused one may hold more)
    unsigned char *rows_done; // per input row, once accumulated
    unsigned char *pixels_done; // per input pixel of the window's rows, for rectangles that are not full rows
    // 3-band images, full-width rows: per block row of the window, the column
    // sums of its rows so far (one vectorisable add per byte) over the window's
    // columns, folded into `sums` when the block row is whole. 16-bit sums while
    // a block row cannot overflow them (factor ≤ 257), else 32-bit.
    void **column_sums;
    int *rows_in_block;
    // Fed from a JPEG's planes (rows in order): the column sums of Y, Cb and Cr
    // over the window's columns for the block row under way, its rows so far,
    // and the chroma's horizontal subsampling (a shift).
    guint32 *ycc_columns;
    int ycc_rows, ycc_hshift;
    // Fed a JPEG's block sums instead (CThumbKernels_tap_add_block_sums): per
    // window block, Σ of Y, Cb and Cr over the block row under way, × 64 (its
    // rows so far counted in `ycc_rows` too).
    gint64 *block_sums;
    GMutex lock;
};

// The block sums of the last tap freed, kept for the next: a worker taps one
// image after another, and a fresh array (about 1 MB for a 12 Mpx photo) is a
// fresh mapping whose every page faults in again. Up to 32 MB is kept.
G_LOCK_DEFINE_STATIC(spare_sums);
static guint64 *spare_sums = NULL;
static size_t spare_count = 0;
#define SPARE_SUMS_MAX ((size_t)32 << 20)

static guint64 *sums_new(size_t count, size_t *capacity) {
    guint64 *sums = NULL;
    G_LOCK(spare_sums);
    if (spare_sums && spare_count >= count) {
        sums = spare_sums;
        *capacity = spare_count;
        spare_sums = NULL;
    }
    G_UNLOCK(spare_sums);
    if (!sums) {
        *capacity = count;
        return g_new0(guint64, count);
    }
    memset(sums, 0, count * sizeof(guint64));
    return sums;
}

static void sums_free(guint64 *sums, size_t capacity) {
    if (capacity * sizeof(guint64) <= SPARE_SUMS_MAX) {
        G_LOCK(spare_sums);
        if (!spare_sums || spare_count < capacity) {
            guint64 *old = spare_sums;
            spare_sums = sums;
            spare_count = capacity;
            sums = old;
        }
        G_UNLOCK(spare_sums);
    }
    g_free(sums);
}

// One axis of a resample: for each output position, the first input index and
// `taps` normalised weights (indices past the edges clamped, as libvips's copy
// extension does).
typedef struct {
    int taps;
    int *first;      // per output position
    double *weights; // per output position, `taps` weights
} Axis;

static Axis axis_new(double scale, int start, int count);
static void axis_free(Axis *a);
static inline int clamp_index(int i, int size) { return i < 0 ? 0 : i >= size ? size - 1 : i; }

CThumbKernelsTap *CThumbKernels_tap_new(int width, int height, int bands, int factor, double hscale, double vscale,
                                        int left, int top, int rw, int rh) {
    if (width < 1 || height < 1 || (bands != 3 && bands != 4) || factor < 1 || rw < 1 || rh < 1 ||
        !(hscale > 0) || !(vscale > 0))
        return NULL;
    CThumbKernelsTap *tap = g_new0(CThumbKernelsTap, 1);
    tap->refs = 1;
    tap->width = width;
    tap->height = height;
    tap->bands = bands;
    tap->factor = factor;
    tap->out_width = (width + factor - 1) / factor;
    tap->out_height = (height + factor - 1) / factor;
    tap->hscale = hscale;
    tap->vscale = vscale;
    tap->left = left;
    tap->top = top;
    tap->rw = rw;
    tap->rh = rh;
    // The blocks the resample reads: from its first output's first tap to its
    // last output's last, clamped to the grid as the resample clamps them.
    Axis ax = axis_new(hscale, left, rw), ay = axis_new(vscale, top, rh);
    tap->bx0 = clamp_index(ax.first[0], tap->out_width);
    tap->bw = clamp_index(ax.first[rw - 1] + ax.taps - 1, tap->out_width) - tap->bx0 + 1;
    tap->by0 = clamp_index(ay.first[0], tap->out_height);
    tap->bh = clamp_index(ay.first[rh - 1] + ay.taps - 1, tap->out_height) - tap->by0 + 1;
    axis_free(&ax);
    axis_free(&ay);
    tap->sums = sums_new((size_t)tap->bw * tap->bh * 4, &tap->sums_capacity);
    tap->rows_done = g_new0(unsigned char, height);
    tap->column_sums = g_new0(void *, tap->bh);
    tap->rows_in_block = g_new0(int, tap->bh);
    g_mutex_init(&tap->lock);
    return tap;
}

CThumbKernelsTap *CThumbKernels_tap_ref(CThumbKernelsTap *tap) {
    g_atomic_int_inc(&tap->refs);
    return tap;
}

void CThumbKernels_tap_unref(CThumbKernelsTap *tap) {
    if (!tap || !g_atomic_int_dec_and_test(&tap->refs)) return;
    sums_free(tap->sums, tap->sums_capacity);
    g_free(tap->rows_done);
    g_free(tap->pixels_done);
    for (int i = 0; i < tap->bh; i++) g_free(tap->column_sums[i]);
    g_free(tap->column_sums);
    g_free(tap->rows_in_block);
    g_free(tap->ycc_columns);
    g_free(tap->block_sums);
    g_mutex_clear(&tap->lock);
    g_free(tap);
}

size_t CThumbKernels_tap_bytes(const CThumbKernelsTap *tap) {
    return tap->sums_capacity * sizeof(guint64) + (size_t)tap->height + (size_t)tap->bh * (sizeof(void *) + sizeof(int));
}

// The window's input columns [*x0, *x1) and block row index of input row y (-1 outside).
static inline int tap_block_row(const CThumbKernelsTap *tap, int y) {
    int oy = y / tap->factor - tap->by0;
    return oy >= 0 && oy < tap->bh ? oy : -1;
}

static inline void tap_columns(const CThumbKernelsTap *tap, int *x0, int *x1) {
    *x0 = tap->bx0 * tap->factor;
    *x1 = MIN(tap->width, (tap->bx0 + tap->bw) * tap->factor);
}

// Adds the pixels of one row span [left, left + count) of row y (in the
// window's block row oy), block by block; `p` points at pixel `left`.
static void tap_add_span(CThumbKernelsTap *tap, const VipsPel *p, int left, int count, int oy) {
    const int f = tap->factor, bands = tap->bands;
    guint64 *row = tap->sums + (size_t)oy * tap->bw * 4;
    int x = left, end = left + count;
    while (x < end) {
        int block = x / f;
        int stop = MIN(end, (block + 1) * f);
        guint64 r = 0, g = 0, b = 0, a = 0;
        if (bands == 4) {
            for (; x < stop; x++, p += 4) {
                guint64 alpha = p[3];
                r += p[0] * alpha;
                g += p[1] * alpha;
                b += p[2] * alpha;
                a += alpha;
            }
        } else {
            for (; x < stop; x++, p += 3) {
                r += p[0];
                g += p[1];
                b += p[2];
                a += 1;
            }
            r *= 255;
            g *= 255;
            b *= 255;
            a *= 255;
        }
        guint64 *sum = row + (size_t)(block - tap->bx0) * 4;
        sum[0] += r;
        sum[1] += g;
        sum[2] += b;
        sum[3] += a;
    }
}

static void tap_fold(CThumbKernelsTap *tap, int oy);

// Adds one whole row of a 3-band image (its window's columns, `p` at column 0)
// to its block row's column sums, and folds the block row into the block sums
// once all its rows are in. Built twice, the loader picking the AVX2 copy where
// the CPU has it: the column adds are the tap's whole cost, and twice as wide there.
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void tap_add_row3(CThumbKernelsTap *tap, const VipsPel *p, int y, int oy) {
    const int f = tap->factor;
    int x0, x1;
    tap_columns(tap, &x0, &x1);
    const int n = (x1 - x0) * 3;
    p += x0 * 3;
    if (f <= 257) {
        if (!tap->column_sums[oy]) tap->column_sums[oy] = g_new0(guint16, n);
        guint16 *restrict columns = tap->column_sums[oy];
        for (int i = 0; i < n; i++) columns[i] += p[i];
    } else {
        if (!tap->column_sums[oy]) tap->column_sums[oy] = g_new0(guint32, n);
        guint32 *restrict columns = tap->column_sums[oy];
        for (int i = 0; i < n; i++) columns[i] += p[i];
    }
    const int block_row = oy + tap->by0;
    if (++tap->rows_in_block[oy] < MIN(f, tap->height - block_row * f)) return;
    (void)y;
    tap_fold(tap, oy);
}

// Folds the column sums of window block row `oy` (the rows added so far) into the block sums.
static void tap_fold(CThumbKernelsTap *tap, int oy) {
    const int f = tap->factor, rows = tap->rows_in_block[oy];
    const void *columns = tap->column_sums[oy];
    if (!columns) return;
    int x0, x1;
    tap_columns(tap, &x0, &x1);
    const guint16 *narrow = f <= 257 ? columns : NULL;
    const guint32 *wide = f <= 257 ? NULL : columns;
    guint64 *row = tap->sums + (size_t)oy * tap->bw * 4;
    for (int block = 0; block < tap->bw; block++) {
        int start = (tap->bx0 + block) * f, stop = MIN(tap->width, start + f);
        int from = (start - x0) * 3, to = (stop - x0) * 3;
        guint64 r = 0, g = 0, b = 0;
        // One loop per width, without a test per sample.
        if (narrow) {
            for (const guint16 *p = narrow + from, *end = narrow + to; p < end; p += 3) {
                r += p[0];
                g += p[1];
                b += p[2];
            }
        } else {
            for (const guint32 *p = wide + from, *end = wide + to; p < end; p += 3) {
                r += p[0];
                g += p[1];
                b += p[2];
            }
        }
        guint64 *sum = row + (size_t)block * 4;
        sum[0] += r * 255;
        sum[1] += g * 255;
        sum[2] += b * 255;
        sum[3] += (guint64)(stop - start) * rows * 255;
    }
    (void)x1;
    g_free(tap->column_sums[oy]);
    tap->column_sums[oy] = NULL;
    tap->rows_in_block[oy] = 0;
}

static void tap_accumulate(CThumbKernelsTap *tap, VipsRegion *region, const VipsRect *r) {
    const int bands = tap->bands;
    int x0, x1;
    tap_columns(tap, &x0, &x1);
    g_mutex_lock(&tap->lock);
    for (int y = r->top; y < r->top + r->height; y++) {
        if (tap->rows_done[y]) continue;
        const int oy = tap_block_row(tap, y);
        const int whole = r->left == 0 && r->width == tap->width;
        if (oy < 0) {
            // A row no thumbnail pixel reads: passed through, not summed.
            if (whole) tap->rows_done[y] = 1;
            continue;
        }
        if (whole && !tap->pixels_done) {
            tap->rows_done[y] = 1;
            if (bands == 3) {
                tap_add_row3(tap, VIPS_REGION_ADDR(region, 0, y), y, oy);
            } else {
                tap_add_span(tap, VIPS_REGION_ADDR(region, x0, y), x0, x1 - x0, oy);
            }
            continue;
        }
        // A rectangle that is not a whole row, or a whole row after one: count
        // each pixel once (a row part of which was counted is not counted again).
        if (!tap->pixels_done) {
            tap->pixels_done = g_new0(unsigned char, (size_t)tap->width * tap->height);
            // From now on every pixel goes straight to the block sums: fold what waits.
            for (int i = 0; i < tap->bh; i++) tap_fold(tap, i);
        }
        unsigned char *done = tap->pixels_done + (size_t)y * tap->width;
        const int from = MAX(r->left, x0), to = MIN(r->left + r->width, x1);
        const VipsPel *p = VIPS_REGION_ADDR(region, from, y);
        for (int x = from; x < to; x++, p += bands) {
            if (done[x]) continue;
            done[x] = 1;
            tap_add_span(tap, p, x, 1, oy);
        }
        if (whole) tap->rows_done[y] = 1;
    }
    g_mutex_unlock(&tap->lock);
}

static int tap_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
    (void)a; (void)stop;
    VipsRegion *in = (VipsRegion *)seq;
    const VipsRect *r = &out->valid;
    if (vips_region_prepare(in, r)) return -1;
    if (vips_region_region(out, in, r, r->left, r->top)) return -1;
    tap_accumulate((CThumbKernelsTap *)b, in, r);
    return 0;
}

// An image of `in`'s size and format, computed strip by strip from `in` by
// `generate` (with `client` as its second argument), keeping `in` alive as long
// as itself: the tap and the clocks pass the pixels through, the shaper converts them.
static int strip_image(VipsImage *in, VipsImage **out, VipsGenerateFn generate, void *client) {
    VipsImage *image = vips_image_new();
    if (vips_image_pipelinev(image, VIPS_DEMAND_STYLE_THINSTRIP, in, NULL) ||
        vips_image_generate(image, vips_start_one, generate, vips_stop_one, in, client)) {
        g_object_unref(image);
        return -1;
    }
    // The output reads from `in`: keep it alive as long as the output.
    g_object_set_data_full(G_OBJECT(image), "thumbpipe-strip-input", g_object_ref(in), g_object_unref);
    *out = image;
    return 0;
}

int CThumbKernels_tap(VipsImage *in, VipsImage **out, CThumbKernelsTap *tap) {
    if (vips_image_get_format(in) != VIPS_FORMAT_UCHAR || vips_image_get_bands(in) != tap->bands ||
        vips_image_get_width(in) != tap->width || vips_image_get_height(in) != tap->height) {
        vips_error("tap", "%s", "the tap needs the 8-bit image it was made for");
        return -1;
    }
    if (strip_image(in, out, tap_generate, tap)) return -1;
    // The image sums into the tap: it holds the tap as long as it lives.
    g_object_set_data_full(G_OBJECT(*out), "thumbpipe-tap", CThumbKernels_tap_ref(tap),
                           (GDestroyNotify)CThumbKernels_tap_unref);
    return 0;
}

// MARK: - The tap from a JPEG's planes

// Adds `n` bytes to `n` column sums. Built twice, the loader picking the AVX2
// copy where the CPU has it.
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void add_columns(guint32 *restrict sums, const unsigned char *restrict p, int n) {
    for (int i = 0; i < n; i++) sums[i] += p[i];
}

// Sets a block's sums from its means of Y, Cb and Cr over `count` pixels, turned
// into RGB (JFIF's YCbCr; exact up to rounding and clipping, the conversion being affine).
static void tap_set_ycbcr_means(guint64 *sum, double count, double my, double mb, double mr) {
    mb -= 128;
    mr -= 128;
    const double rgb[3] = {my + 1.402 * mr, my - 0.344136 * mb - 0.714136 * mr, my + 1.772 * mb};
    for (int c = 0; c < 3; c++) {
        const double v = rgb[c] < 0 ? 0 : rgb[c] > 255 ? 255 : rgb[c];
        sum[c] = (guint64)(v * count * 255 + 0.5);
    }
    sum[3] = (guint64)count * 255;
}

// Folds the plane column sums of window block row `oy` into its block sums:
// per block the means of Y, Cb and Cr, turned into RGB.
static void tap_fold_ycbcr(CThumbKernelsTap *tap, int oy, int x0, int cx0, int n, int cn) {
    const int f = tap->factor, rows = tap->ycc_rows, h = tap->ycc_hshift;
    guint32 *ys = tap->ycc_columns, *bs = ys + n, *rs = bs + cn;
    guint64 *row = tap->sums + (size_t)oy * tap->bw * 4;
    for (int block = 0; block < tap->bw; block++) {
        const int start = (tap->bx0 + block) * f, stop = MIN(tap->width, start + f);
        guint64 sy = 0, sb = 0, sr = 0;
        for (int x = start; x < stop; x++) {
            sy += ys[x - x0];
            sb += bs[(x >> h) - cx0];
            sr += rs[(x >> h) - cx0];
        }
        const double count = (double)(stop - start) * rows;
        tap_set_ycbcr_means(row + (size_t)block * 4, count, sy / count, sb / count, sr / count);
    }
    memset(ys, 0, sizeof(guint32) * ((size_t)n + 2 * (size_t)cn));
    tap->ycc_rows = 0;
}

int CThumbKernels_tap_add_ycbcr_rows(CThumbKernelsTap *tap, int first, int count, unsigned char *const *y,
                                     unsigned char *const *cb, unsigned char *const *cr, int hshift, int vshift,
                                     int y_width, int c_width) {
    if (tap->bands != 3 || hshift < 0 || hshift > 1 || vshift < 0 || vshift > 1 || first < 0 || count < 0 ||
        first % (1 << vshift)) {
        vips_error("tap", "%s", "planes feed a 3-band tap, chroma at full or half resolution");
        return -1;
    }
    const int f = tap->factor;
    int x0, x1;
    tap_columns(tap, &x0, &x1);
    const int cx0 = x0 >> hshift, cx1 = ((x1 - 1) >> hshift) + 1, n = x1 - x0, cn = cx1 - cx0;
    // The columns read must be in the rows given, whatever the caller's sizes said.
    if (x1 > y_width || cx1 > c_width || x0 < 0) {
        vips_error("tap", "%s", "plane rows narrower than the tap's columns");
        return -1;
    }
    g_mutex_lock(&tap->lock);
    if (tap->block_sums) {
        g_mutex_unlock(&tap->lock);
        vips_error("tap", "%s", "one image's planes come as pixels or as block sums");
        return -1;
    }
    if (!tap->ycc_columns) {
        tap->ycc_columns = g_new0(guint32, (size_t)n + 2 * (size_t)cn);
        tap->ycc_hshift = hshift;
    } else if (tap->ycc_hshift != hshift) {
        g_mutex_unlock(&tap->lock);
        vips_error("tap", "%s", "one image's planes come at one chroma resolution");
        return -1;
    }
    guint32 *ys = tap->ycc_columns, *bs = ys + n, *rs = bs + cn;
    for (int i = 0; i < count && first + i < tap->height; i++) {
        const int row = first + i, oy = tap_block_row(tap, row);
        if (oy < 0 || tap->rows_done[row]) continue;
        tap->rows_done[row] = 1;
        const int c = (row >> vshift) - (first >> vshift);
        add_columns(ys, y[i] + x0, n);
        add_columns(bs, cb[c] + cx0, cn);
        add_columns(rs, cr[c] + cx0, cn);
        if (++tap->ycc_rows == MIN(f, tap->height - (oy + tap->by0) * f)) tap_fold_ycbcr(tap, oy, x0, cx0, n, cn);
    }
    g_mutex_unlock(&tap->lock);
    return 0;
}

// Why block sums cannot feed `tap` (NULL when they can): a 3-band tap with a
// factor of 16s, bands from a multiple of 8, whole blocks of 8 or 16 covering its width.
static const char *block_sums_refused(const CThumbKernelsTap *tap, int first, int count, const int wide[3],
                                      const int block_width[3], const int block_height[3]) {
    if (tap->bands != 3 || tap->factor % 16 || first < 0 || count < 1 || first % 8)
        return "block sums feed a 3-band tap whose factor is a multiple of 16, a band at a time";
    for (int c = 0; c < 3; c++)
        if ((block_width[c] != 8 && block_width[c] != 16) || (block_height[c] != 8 && block_height[c] != 16) ||
            first % block_height[c] || (first + count < tap->height && count % block_height[c]) || wide[c] < 0 ||
            (size_t)wide[c] * (size_t)block_width[c] < (size_t)tap->width)
            return "blocks of 8 or 16 pixels, whole, covering the tap's width";
    return NULL;
}

// Adds component `c`'s block sums of rows [first, first + count) (`wide` blocks
// of `bw` × `bh` a row of sums) to the tap's blocks, each weighted by the pixels it covers.
static void tap_add_component_sums(CThumbKernelsTap *tap, int c, int first, int count, const int32_t *sums, int wide,
                                   int bw, int bh) {
    // The tap's blocks start at multiples of the factor, so at a block's edge: `per` blocks in each.
    const int per = tap->factor / bw, inside = tap->width / bw;
    for (int j = 0; j * bh < count; j++) {
        const gint64 covered_rows = MIN(bh, tap->height - (first + j * bh));
        const int32_t *row = sums + (size_t)j * (size_t)wide;
        for (int block = 0; block < tap->bw; block++) {
            const int from = (tap->bx0 + block) * per, to = from + per, whole = MIN(to, inside);
            // A block's sum as decoded, before the samples are clipped: held to 0…255 a sample.
            gint64 sum = 0;
            for (int i = from; i < whole; i++) sum += MIN(MAX(row[i], 0), 64 * 255);
            sum *= bw;
            // The image's last block, when it ends inside: the pixels it covers.
            if (whole < to && whole * bw < tap->width)
                sum += (gint64)MIN(MAX(row[whole], 0), 64 * 255) * (tap->width - whole * bw);
            tap->block_sums[(size_t)block * 3 + (size_t)c] += sum * covered_rows;
        }
    }
}

// The tap's block row `oy` from its summed blocks, once all its rows came; the sums start again.
static void tap_fold_block_sums(CThumbKernelsTap *tap, int oy) {
    guint64 *out = tap->sums + (size_t)oy * tap->bw * 4;
    for (int block = 0; block < tap->bw; block++) {
        const int start = (tap->bx0 + block) * tap->factor, stop = MIN(tap->width, start + tap->factor);
        // Each component's blocks cover the block's pixels once: Σ (its sum × pixels covered) / 64.
        const double pixels = (double)(stop - start) * tap->ycc_rows, scale = 64 * pixels;
        const gint64 *s = tap->block_sums + (size_t)block * 3;
        tap_set_ycbcr_means(out + (size_t)block * 4, pixels, s[0] / scale, s[1] / scale, s[2] / scale);
    }
    memset(tap->block_sums, 0, sizeof(gint64) * (size_t)tap->bw * 3);
    tap->ycc_rows = 0;
}

int CThumbKernels_tap_add_block_sums(CThumbKernelsTap *tap, int first, int count, const int32_t *const sums[3],
                                     const int wide[3], const int block_width[3], const int block_height[3]) {
    const char *refused = block_sums_refused(tap, first, count, wide, block_width, block_height);
    if (refused) {
        vips_error("tap", "%s", refused);
        return -1;
    }
    if (first >= tap->height) return 0;
    count = MIN(count, tap->height - first);
    // A band lies in one block row of the tap: the factor is a multiple of 16, the bands' edges of 8.
    const int oy = tap_block_row(tap, first), end_oy = tap_block_row(tap, first + count - 1);
    if (oy < 0 || end_oy != oy) return 0;
    g_mutex_lock(&tap->lock);
    if (tap->ycc_columns) {
        g_mutex_unlock(&tap->lock);
        vips_error("tap", "%s", "one image's planes come as pixels or as block sums");
        return -1;
    }
    for (int y = first; y < first + count; y++)
        if (tap->rows_done[y]) {
            g_mutex_unlock(&tap->lock);
            return 0;
        }
    memset(tap->rows_done + first, 1, (size_t)count);
    if (!tap->block_sums) tap->block_sums = g_new0(gint64, (size_t)tap->bw * 3);
    for (int c = 0; c < 3; c++)
        tap_add_component_sums(tap, c, first, count, sums[c], wide[c], block_width[c], block_height[c]);
    tap->ycc_rows += count;
    if (tap->ycc_rows == MIN(tap->factor, tap->height - (oy + tap->by0) * tap->factor)) tap_fold_block_sums(tap, oy);
    g_mutex_unlock(&tap->lock);
    return 0;
}

int CThumbKernels_tap_add_rgb_rows(CThumbKernelsTap *tap, int first, int count, unsigned char *const *rows, int width) {
    int x0, x1;
    tap_columns(tap, &x0, &x1);
    if (tap->bands != 3 || first < 0 || count < 0 || x1 > width || x0 < 0) {
        vips_error("tap", "%s", "RGB rows feed a 3-band tap, at least as wide as its columns");
        return -1;
    }
    g_mutex_lock(&tap->lock);
    for (int i = 0; i < count && first + i < tap->height; i++) {
        const int row = first + i, oy = tap_block_row(tap, row);
        if (oy < 0 || tap->rows_done[row]) continue;
        tap->rows_done[row] = 1;
        tap_add_row3(tap, rows[i], row, oy);
    }
    g_mutex_unlock(&tap->lock);
    return 0;
}

// The window's block means so far, newly allocated: premultiplied RGBA floats
// on 0…255, bw × bh.
static float *tap_means(CThumbKernelsTap *tap) {
    const int f = tap->factor, w = tap->bw, h = tap->bh;
    g_mutex_lock(&tap->lock);
    for (int oy = 0; oy < h; oy++) tap_fold(tap, oy);
    g_mutex_unlock(&tap->lock);
    float *pixels = g_new(float, (size_t)w * h * 4);
    for (int oy = 0; oy < h; oy++) {
        int bh = MIN(f, tap->height - (tap->by0 + oy) * f);
        for (int ox = 0; ox < w; ox++) {
            int bw = MIN(f, tap->width - (tap->bx0 + ox) * f);
            const guint64 *sum = tap->sums + ((size_t)oy * w + ox) * 4;
            float *pixel = pixels + ((size_t)oy * w + ox) * 4;
            double n = (double)bw * bh;
            // Premultiplied means on 0…255: Σ c·a / (255 n) and Σ a / n.
            for (int c = 0; c < 3; c++) pixel[c] = (float)(sum[c] / (255.0 * n));
            pixel[3] = (float)(sum[3] / n);
        }
    }
    return pixels;
}

// MARK: - Lanczos3 on a small image

// The Lanczos3 kernel: sinc(x) sinc(x / 3) within ±3.
static double lanczos3(double x) {
    if (x == 0) return 1;
    if (x <= -3 || x >= 3) return 0;
    const double px = G_PI * x;
    return 3 * sin(px) * sin(px / 3) / (px * px);
}

// The axis for output positions [start, start + count) of an input scaled by
// `scale`: output pixel X samples around input (X + 0.5) / scale
// − 0.5 (centres aligned); shrinking stretches the kernel by 1 / scale.
static Axis axis_new(double scale, int start, int count) {
    const double stretch = scale < 1 ? 1 / scale : 1;
    const double radius = 3 * stretch;
    Axis a;
    a.taps = (int)ceil(2 * radius) + 1;
    a.first = g_new(int, count);
    a.weights = g_new0(double, (size_t)count * a.taps);
    for (int i = 0; i < count; i++) {
        const double centre = (start + i + 0.5) / scale - 0.5;
        const int first = (int)ceil(centre - radius);
        double *w = a.weights + (size_t)i * a.taps, total = 0;
        for (int t = 0; t < a.taps; t++) {
            w[t] = lanczos3((first + t - centre) / stretch);
            total += w[t];
        }
        for (int t = 0; t < a.taps; t++) w[t] /= total;
        a.first[i] = first;
    }
    return a;
}

static void axis_free(Axis *a) {
    g_free(a->first);
    g_free(a->weights);
}

// The window [left, left + width) × [top, top + height) of a w × h image
// resampled with Lanczos3 by hscale × vscale, into `out` (RGBA floats, width ×
// height): horizontally over the rows the window needs, then vertically. `in`
// holds only the blocks [x0, x0 + iw) × [y0, y0 + ih) of the image, which must
// cover every (clamped) index the window reads.
static void lanczos3_window(const float *in, int x0, int y0, int iw, int w, int h, double hscale, double vscale,
                            int left, int top, int width, int height, float *out) {
    Axis ax = axis_new(hscale, left, width), ay = axis_new(vscale, top, height);
    const int row0 = ay.first[0], rows = ay.first[height - 1] + ay.taps - row0;
    float *across = g_new(float, (size_t)rows * width * 4);
    for (int r = 0; r < rows; r++) {
        const float *line = in + (size_t)(clamp_index(row0 + r, h) - y0) * iw * 4;
        for (int x = 0; x < width; x++) {
            const double *wt = ax.weights + (size_t)x * ax.taps;
            double sum[4] = {0, 0, 0, 0};
            for (int t = 0; t < ax.taps; t++) {
                const float *p = line + (size_t)(clamp_index(ax.first[x] + t, w) - x0) * 4;
                for (int c = 0; c < 4; c++) sum[c] += wt[t] * p[c];
            }
            for (int c = 0; c < 4; c++) across[((size_t)r * width + x) * 4 + c] = (float)sum[c];
        }
    }
    for (int y = 0; y < height; y++) {
        const double *wt = ay.weights + (size_t)y * ay.taps;
        for (int x = 0; x < width; x++) {
            double sum[4] = {0, 0, 0, 0};
            for (int t = 0; t < ay.taps; t++) {
                const float *p = across + ((size_t)(ay.first[y] + t - row0) * width + x) * 4;
                for (int c = 0; c < 4; c++) sum[c] += wt[t] * p[c];
            }
            for (int c = 0; c < 4; c++) out[((size_t)y * width + x) * 4 + c] = (float)sum[c];
        }
    }
    g_free(across);
    axis_free(&ax);
    axis_free(&ay);
}

int CThumbKernels_tap_resample(CThumbKernelsTap *tap, float *out) {
    float *means = tap_means(tap);
    lanczos3_window(means, tap->bx0, tap->by0, tap->bw, tap->out_width, tap->out_height, tap->hscale, tap->vscale,
                    tap->left, tap->top, tap->rw, tap->rh, out);
    g_free(means);
    return 0;
}

// MARK: - Matrix/TRC profiles to sRGB

// What lcms computes for a matrix/TRC ("matrix-shaper") RGB profile to sRGB,
// relative intent, as a table-driven pass: per channel a table from the 8-bit
// value to linear light, one 3×3 matrix (source colorants to sRGB's, both in
// the D50 PCS), and one table from linear light (in CTHUMBKERNELS_SHAPER_STEPS
// steps) back to 8-bit sRGB.
//
// In integers, as lcms's own 8-bit matrix-shaper transforms are (its
// OptimizeMatrixShaper): linear light as 15 bits (0…32767), the matrix in
// fixed point, their products summed and shifted into an index of `encode`.
// Integers make the AVX-512 loop and the portable one give the same bytes on
// every machine, and 16-bit factors let AVX-512 look up and multiply 64
// pixels at a time: 1.1 ns a pixel against 1.8 for the portable loop (a
// standalone copy, 16.7 M pixels, best of 4 passes).
// Four 32-bit lanes: the three output channels' terms of one input value (and a zero).
typedef gint32 ShaperTerms __attribute__((vector_size(16)));

struct CThumbKernelsShaper {
    // terms[in][v][out]: matrix[out][in] × linear[in][v] as integers (exact
    // products), so a pixel's three sums are three vector loads and two adds.
    ShaperTerms terms[3][256];
    // Half of `1 << shift` (rounding) in every lane, and the shift that turns a
    // sum of terms into an index of `encode`.
    ShaperTerms bias;
    int shift;
    // The same factors for the AVX-512 loop: linear light's low and high bytes
    // per channel, and per output (matrix[out][0], matrix[out][1]) and
    // (matrix[out][2], the rounding) as pairs of 16-bit values.
    guint8 linear_low[3][256], linear_high[3][256];
    guint32 pairs[3][2];
    // Byte permutations: a plane's bytes out of 64 packed pixels (first from
    // the first 128 bytes, then from the last 64), and low and high bytes into words.
    guint8 planes[3][2][64], words[2][64];
    guint8 encode[CTHUMBKERNELS_SHAPER_STEPS];
};
typedef struct CThumbKernelsShaper Shaper;

// The `encode` indices of one pixel's three outputs, in the vector's first lanes:
// the three terms summed, rounded and clipped to the table (out of sRGB's gamut:
// clipped per channel, as lcms does).
static inline ShaperTerms shaper_index(const Shaper *s, unsigned r, unsigned g, unsigned b) {
    const ShaperTerms low = {0, 0, 0, 0};
    const ShaperTerms high = {CTHUMBKERNELS_SHAPER_STEPS - 1, CTHUMBKERNELS_SHAPER_STEPS - 1,
                              CTHUMBKERNELS_SHAPER_STEPS - 1, CTHUMBKERNELS_SHAPER_STEPS - 1};
    const ShaperTerms index = (s->terms[0][r] + s->terms[1][g] + s->terms[2][b] + s->bias) >> s->shift;
    return __builtin_elementwise_min(__builtin_elementwise_max(index, low), high);
}

// Converts `count` pixels of `bands` (3 or 4) from `p` into `q` (which may be
// `p`: each pixel is read whole before it is written); alpha passes through.
static void shaper_row(const Shaper *s, const VipsPel *p, VipsPel *q, size_t count, int bands) {
    const guint8 *restrict encode = s->encode;
    for (size_t x = 0; x < count; x++, p += bands, q += bands) {
        const ShaperTerms index = shaper_index(s, p[0], p[1], p[2]);
        const VipsPel alpha = bands == 4 ? p[3] : 0;
        q[0] = encode[index[0]];
        q[1] = encode[index[1]];
        q[2] = encode[index[2]];
        if (bands == 4) q[3] = alpha;
    }
}

// The same as shaper_row on 3-band pixels in place, 4 at a time (12 bytes read
// as three words, written as three): four pixels' lookups in flight at once
// instead of one pixel's loads and stores after another's (about 10 % faster on
// a 21 Mpx photo's pixels, in a standalone copy of both loops).
static void shaper_row3_portable(const Shaper *s, unsigned char *p, size_t count) {
    const guint8 *restrict encode = s->encode;
    size_t x = 0;
    for (; x + 4 <= count; x += 4, p += 12) {
        guint32 w0, w1, w2;
        memcpy(&w0, p, 4);
        memcpy(&w1, p + 4, 4);
        memcpy(&w2, p + 8, 4);
        const ShaperTerms a = shaper_index(s, w0 & 255, (w0 >> 8) & 255, (w0 >> 16) & 255);
        const ShaperTerms b = shaper_index(s, w0 >> 24, w1 & 255, (w1 >> 8) & 255);
        const ShaperTerms c = shaper_index(s, (w1 >> 16) & 255, w1 >> 24, w2 & 255);
        const ShaperTerms d = shaper_index(s, (w2 >> 8) & 255, (w2 >> 16) & 255, w2 >> 24);
        w0 = (guint32)encode[a[0]] | (guint32)encode[a[1]] << 8 | (guint32)encode[a[2]] << 16 | (guint32)encode[b[0]] << 24;
        w1 = (guint32)encode[b[1]] | (guint32)encode[b[2]] << 8 | (guint32)encode[c[0]] << 16 | (guint32)encode[c[1]] << 24;
        w2 = (guint32)encode[c[2]] | (guint32)encode[d[0]] << 8 | (guint32)encode[d[1]] << 16 | (guint32)encode[d[2]] << 24;
        memcpy(p, &w0, 4);
        memcpy(p + 4, &w1, 4);
        memcpy(p + 8, &w2, 4);
    }
    shaper_row(s, p, p, count - x, 3);
}

#if defined(__x86_64__)
#include <immintrin.h>
#define SHAPER_AVX512 __attribute__((target("avx512f,avx512bw,avx512vbmi")))

// A 256-entry byte table at `table` looked up for 64 indices: two 128-byte
// permutes, the index's top bit choosing between them.
SHAPER_AVX512 static inline __m512i shaper_lookup(const guint8 *table, __m512i index, __mmask64 top) {
    const __m512i low = _mm512_permutex2var_epi8(_mm512_loadu_si512(table), index, _mm512_loadu_si512(table + 64));
    const __m512i high =
        _mm512_permutex2var_epi8(_mm512_loadu_si512(table + 128), index, _mm512_loadu_si512(table + 192));
    return _mm512_mask_blend_epi8(top, low, high);
}

// shaper_row3_portable's sums, 64 pixels at a time: the planes pulled out of
// 192 packed bytes, linear light looked up as bytes, the matrix as pairs of
// 16-bit products (vpmaddwd); only `encode` is read a byte at a time.
SHAPER_AVX512 static void shaper_row3_avx512(const Shaper *s, unsigned char *p, size_t count) {
    // Per channel, the pixels (lanes) whose byte lies in the last 64 of the 192: from 43 on
    // for red and green (3 × 43 ≥ 128), from 42 on for blue (3 × 42 + 2 ≥ 128).
    const __mmask64 second[3] = {0xfffff80000000000ull, 0xfffff80000000000ull, 0xfffffc0000000000ull};
    const __m512i one = _mm512_set1_epi16(1), high = _mm512_set1_epi16(CTHUMBKERNELS_SHAPER_STEPS - 1);
    const __m128i shift = _mm_cvtsi32_si128(s->shift);
    __m512i pairs[3][2];
    for (int o = 0; o < 3; o++)
        for (int k = 0; k < 2; k++) pairs[o][k] = _mm512_set1_epi32((int)s->pairs[o][k]);
    const guint8 *restrict encode = s->encode;
    guint16 index[3][64] __attribute__((aligned(64)));
    size_t x = 0;
    for (; x + 64 <= count; x += 64, p += 192) {
        const __m512i a = _mm512_loadu_si512(p), b = _mm512_loadu_si512(p + 64), c = _mm512_loadu_si512(p + 128);
        __m512i linear[3][2];
        for (int ch = 0; ch < 3; ch++) {
            const __m512i plane = _mm512_mask_permutexvar_epi8(
                _mm512_permutex2var_epi8(a, _mm512_loadu_si512(s->planes[ch][0]), b), second[ch],
                _mm512_loadu_si512(s->planes[ch][1]), c);
            const __mmask64 top = _mm512_movepi8_mask(plane);
            const __m512i low = shaper_lookup(s->linear_low[ch], plane, top);
            const __m512i high_bytes = shaper_lookup(s->linear_high[ch], plane, top);
            linear[ch][0] = _mm512_permutex2var_epi8(low, _mm512_loadu_si512(s->words[0]), high_bytes);
            linear[ch][1] = _mm512_permutex2var_epi8(low, _mm512_loadu_si512(s->words[1]), high_bytes);
        }
        for (int h = 0; h < 2; h++) {
            const __m512i rg0 = _mm512_unpacklo_epi16(linear[0][h], linear[1][h]);
            const __m512i rg1 = _mm512_unpackhi_epi16(linear[0][h], linear[1][h]);
            const __m512i b0 = _mm512_unpacklo_epi16(linear[2][h], one);
            const __m512i b1 = _mm512_unpackhi_epi16(linear[2][h], one);
            for (int o = 0; o < 3; o++) {
                const __m512i sum0 = _mm512_sra_epi32(
                    _mm512_add_epi32(_mm512_madd_epi16(rg0, pairs[o][0]), _mm512_madd_epi16(b0, pairs[o][1])), shift);
                const __m512i sum1 = _mm512_sra_epi32(
                    _mm512_add_epi32(_mm512_madd_epi16(rg1, pairs[o][0]), _mm512_madd_epi16(b1, pairs[o][1])), shift);
                // Below 0 saturates to 0 in the pack; above the table, to its last step.
                _mm512_store_si512(index[o] + 32 * h, _mm512_min_epu16(_mm512_packus_epi32(sum0, sum1), high));
            }
        }
        unsigned char *q = p;
        for (int i = 0; i < 64; i += 4, q += 12) {
            const guint32 w0 = (guint32)encode[index[0][i]] | (guint32)encode[index[1][i]] << 8 |
                               (guint32)encode[index[2][i]] << 16 | (guint32)encode[index[0][i + 1]] << 24;
            const guint32 w1 = (guint32)encode[index[1][i + 1]] | (guint32)encode[index[2][i + 1]] << 8 |
                               (guint32)encode[index[0][i + 2]] << 16 | (guint32)encode[index[1][i + 2]] << 24;
            const guint32 w2 = (guint32)encode[index[2][i + 2]] | (guint32)encode[index[0][i + 3]] << 8 |
                               (guint32)encode[index[1][i + 3]] << 16 | (guint32)encode[index[2][i + 3]] << 24;
            memcpy(q, &w0, 4);
            memcpy(q + 4, &w1, 4);
            memcpy(q + 8, &w2, 4);
        }
    }
    shaper_row3_portable(s, p, count - x);
}
#endif

int CThumbKernels_shaper_vector(void) {
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}

// 3-band pixels in place: AVX-512 (with its byte permutes, VBMI) where the CPU
// has it, the portable loop elsewhere; the same bytes either way.
static void shaper_row3(const Shaper *s, unsigned char *p, size_t count) {
#if defined(__x86_64__)
    if (CThumbKernels_shaper_vector()) {
        shaper_row3_avx512(s, p, count);
        return;
    }
#endif
    shaper_row3_portable(s, p, count);
}

static int shaper_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
    (void)a; (void)stop;
    VipsRegion *in = (VipsRegion *)seq;
    const Shaper *s = (const Shaper *)b;
    const VipsRect *r = &out->valid;
    if (vips_region_prepare(in, r)) return -1;
    for (int y = r->top; y < r->top + r->height; y++) {
        VipsPel *from = VIPS_REGION_ADDR(in, r->left, y), *to = VIPS_REGION_ADDR(out, r->left, y);
        if (out->im->Bands == 3) {
            memcpy(to, from, (size_t)r->width * 3);
            shaper_row3(s, to, (size_t)r->width);
        } else {
            shaper_row(s, from, to, (size_t)r->width, out->im->Bands);
        }
    }
    return 0;
}

// The widest shift (the most fraction bits) at which every factor fits 16
// signed bits and each output's sum of products, rounding included, fits
// 32: 15 for real colorants (entries within ±2), down to 12 for entries of ±10;
// 0 when none does (the matrix is out of range). Linear light is 15 bits: a
// factor m becomes m × 2^shift × 16383 / 32767, so that the largest product
// >> shift is the table's last step.
static int shaper_factors(const float *matrix, gint32 factors[9]) {
    for (int i = 0; i < 9; i++)
        if (!(fabsf(matrix[i]) <= 10.0f)) return 0;
    const double scale = (double)(CTHUMBKERNELS_SHAPER_STEPS - 1) / 32767.0;
    for (int shift = 15; shift >= 12; shift--) {
        gboolean fits = TRUE;
        for (int o = 0; o < 3; o++) {
            gint64 row = 0;
            for (int c = 0; c < 3; c++) {
                factors[o * 3 + c] = (gint32)lrint(matrix[o * 3 + c] * scale * (double)(1 << shift));
                if (abs(factors[o * 3 + c]) > 32767) fits = FALSE;
                row += abs(factors[o * 3 + c]);
            }
            if (row * 32767 + (1 << (shift - 1)) > G_MAXINT32) fits = FALSE;
        }
        if (fits) return shift;
    }
    return 0;
}

int CThumbKernels_shaper_fits(const float *matrix) {
    gint32 factors[9];
    return shaper_factors(matrix, factors) != 0;
}

CThumbKernelsShaper *CThumbKernels_shaper_new(const float *linear, const float *matrix, const unsigned char *encode) {
    gint32 factors[9];
    const int shift = shaper_factors(matrix, factors);
    if (shift == 0) return NULL;
    Shaper *shaper = g_new0(Shaper, 1);
    shaper->shift = shift;
    const gint32 half = 1 << (shift - 1);
    shaper->bias = (ShaperTerms){half, half, half, half};
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) {
            // Linear light is 0…1: a table outside it (a crafted curve) is clamped here,
            // whatever the caller did.
            float l = linear[c * 256 + v];
            l = isnan(l) ? 0.0f : fminf(fmaxf(l, 0.0f), 1.0f);
            const gint32 light = (gint32)lrintf(l * 32767.0f);
            shaper->linear_low[c][v] = (guint8)(light & 255);
            shaper->linear_high[c][v] = (guint8)(light >> 8);
            for (int o = 0; o < 3; o++) shaper->terms[c][v][o] = factors[o * 3 + c] * light;
        }
    for (int o = 0; o < 3; o++) {
        shaper->pairs[o][0] = (guint16)factors[o * 3] | (guint32)(guint16)factors[o * 3 + 1] << 16;
        shaper->pairs[o][1] = (guint16)factors[o * 3 + 2] | (guint32)(guint16)half << 16;
    }
    for (int i = 0; i < 64; i++) {
        for (int c = 0; c < 3; c++) {
            shaper->planes[c][0][i] = (guint8)((3 * i + c) & 127);
            shaper->planes[c][1][i] = (guint8)((3 * i + c - 128) & 63);
        }
        shaper->words[0][i] = (guint8)((i & 1 ? 64 : 0) + i / 2);
        shaper->words[1][i] = (guint8)((i & 1 ? 64 : 0) + 32 + i / 2);
    }
    memcpy(shaper->encode, encode, sizeof shaper->encode);
    return shaper;
}

void CThumbKernels_shaper_free(CThumbKernelsShaper *shaper) { g_free(shaper); }

void CThumbKernels_shaper_rgb(const CThumbKernelsShaper *s, unsigned char *rgb, size_t count) {
    shaper_row3(s, rgb, count);
}

void CThumbKernels_shaper_rgb_portable(const CThumbKernelsShaper *s, unsigned char *rgb, size_t count) {
    shaper_row3_portable(s, rgb, count);
}

int CThumbKernels_shaper_to_srgb(VipsImage *in, VipsImage **out, const float *linear, const float *matrix,
                             const unsigned char *encode) {
    const int bands = vips_image_get_bands(in);
    if (vips_image_get_format(in) != VIPS_FORMAT_UCHAR || (bands != 3 && bands != 4)) {
        vips_error("shaper", "%s", "needs an 8-bit RGB or RGBA image");
        return -1;
    }
    Shaper *shaper = CThumbKernels_shaper_new(linear, matrix, encode);
    if (!shaper) {
        vips_error("shaper", "%s", "matrix out of range");
        return -1;
    }
    VipsImage *image;
    if (strip_image(in, &image, shaper_generate, shaper)) {
        g_free(shaper);
        return -1;
    }
    image->Type = VIPS_INTERPRETATION_sRGB;
    // The pixels are sRGB now: the source's profile would describe them wrongly.
    vips_image_remove(image, VIPS_META_ICC_NAME);
    g_object_set_data_full(G_OBJECT(image), "thumbpipe-shaper", shaper, g_free);
    *out = image;
    return 0;
}

// MARK: - Pipeline clocks

struct CThumbKernelsClock {
    gint refs;
    gint64 nanoseconds;
};

CThumbKernelsClock *CThumbKernels_clock_new(void) {
    CThumbKernelsClock *clock = g_new0(CThumbKernelsClock, 1);
    clock->refs = 1;
    return clock;
}

static CThumbKernelsClock *clock_ref(CThumbKernelsClock *clock) {
    g_atomic_int_inc(&clock->refs);
    return clock;
}

void CThumbKernels_clock_unref(CThumbKernelsClock *clock) {
    if (clock && g_atomic_int_dec_and_test(&clock->refs)) g_free(clock);
}

int64_t CThumbKernels_clock_nanoseconds(const CThumbKernelsClock *clock) {
    return __atomic_load_n(&clock->nanoseconds, __ATOMIC_RELAXED);
}

static gint64 now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (gint64)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int timer_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
    (void)a; (void)stop;
    VipsRegion *in = (VipsRegion *)seq;
    const VipsRect *r = &out->valid;
    gint64 start = now_ns();
    int status = vips_region_prepare(in, r);
    __atomic_fetch_add(&((CThumbKernelsClock *)b)->nanoseconds, now_ns() - start, __ATOMIC_RELAXED);
    if (status) return -1;
    return vips_region_region(out, in, r, r->left, r->top);
}

int CThumbKernels_timer(VipsImage *in, VipsImage **out, CThumbKernelsClock *clock) {
    if (strip_image(in, out, timer_generate, clock)) return -1;
    g_object_set_data_full(G_OBJECT(*out), "thumbpipe-clock", clock_ref(clock),
                           (GDestroyNotify)CThumbKernels_clock_unref);
    return 0;
}
