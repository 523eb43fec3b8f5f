#include "CVipsShim.h"
#include <gmodule.h>
#include <math.h>
#include <string.h>
#include <vips/vips.h>

// libvips and its loaders report recoverable oddities (libjpeg's "Corrupt
// JPEG data", libpng's CRC and profile complaints, libheif's ignored nclx
// profile) through GLib warnings. They are collected here, per process, and
// handed to Swift one item at a time (a worker runs one item at a time), so
// they reach the report instead of interleaving with thumbpipe's own stderr.
static void quiet_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain; (void)level; (void)message; (void)data;
}

static GMutex warnings_lock;
static GString *warnings = NULL;

static void collect_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)level; (void)data;
    g_mutex_lock(&warnings_lock);
    if (!warnings) warnings = g_string_new(NULL);
    if (warnings->len < 16384) {
        if (domain && strcmp(domain, "VIPS") != 0) g_string_append_printf(warnings, "%s: ", domain);
        g_string_append(warnings, message ? message : "");
        g_string_append_c(warnings, '\n');
    }
    g_mutex_unlock(&warnings_lock);
}

char *CVipsShim_take_warnings(void) {
    g_mutex_lock(&warnings_lock);
    char *text = NULL;
    if (warnings && warnings->len > 0) {
        text = g_strdup(warnings->str);
        g_string_truncate(warnings, 0);
    }
    g_mutex_unlock(&warnings_lock);
    return text;
}

int CVipsShim_init(const char *argv0, int threads_per_image) {
    if (VIPS_INIT(argv0)) return -1;
    if (!g_getenv("THUMBPIPE_VIPS_WARNINGS")) {
        // Warnings are collected; libvips's info chatter (what it reduces by) is dropped.
        GLogLevelFlags levels = G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE;
        const char *domains[] = {"VIPS", NULL, "GLib-GObject", "GLib"};
        for (int i = 0; i < 4; i++) {
            g_log_set_handler(domains[i], levels, collect_log, NULL);
            g_log_set_handler(domains[i], G_LOG_LEVEL_INFO | G_LOG_LEVEL_DEBUG, quiet_log, NULL);
        }
    }
    // Batch work: every image is new, so caching operations only costs memory.
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    if (threads_per_image > 0) vips_concurrency_set(threads_per_image);
    return 0;
}

int CVipsShim_load_module(const char *path) {
    // As libvips loads its modules at start: the module registers its
    // operations when opened, and must then stay loaded.
    GModule *module = g_module_open(path, G_MODULE_BIND_LAZY);
    if (!module) {
        vips_error("load_module", "%s", g_module_error());
        return -1;
    }
    g_module_make_resident(module);
    return 0;
}

void CVipsShim_restrict_loaders(const char *const *allowed, int count) {
    // Loaders libvips marks untrusted (ImageMagick, matload, ...) first, then
    // every loader, then the allowed ones back: a blocked loader is never even
    // asked whether it recognises a file.
    vips_block_untrusted_set(TRUE);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    for (int i = 0; i < count; i++) vips_operation_block_set(allowed[i], FALSE);
}

static unsigned long find_loader_calls;

const char *CVipsShim_find_loader(const char *path) {
    __atomic_add_fetch(&find_loader_calls, 1, __ATOMIC_RELAXED);
    return vips_foreign_find_load(path);
}

unsigned long CVipsShim_find_loader_calls(void) {
    return __atomic_load_n(&find_loader_calls, __ATOMIC_RELAXED);
}

static int has_property(VipsOperation *op, const char *name) {
    return g_object_class_find_property(G_OBJECT_GET_CLASS(op), name) != NULL;
}

int CVipsShim_loader_shrink_kind(const char *loader) {
    VipsOperation *op = vips_operation_new(loader);
    if (!op) return -1;
    int kind = 0;
    if (has_property(op, "shrink")) kind = 1;
    else if (has_property(op, "scale")) kind = 2;
    g_object_unref(op);
    return kind;
}

int CVipsShim_load(const char *path, int shrink, double scale, int fail_on,
                   int sequential, VipsImage **out) {
    const char *loader = vips_foreign_find_load(path);
    if (!loader) return -1;
    VipsOperation *op = vips_operation_new(loader);
    if (!op) return -1;
    g_object_set(op, "filename", path, NULL);
    g_object_set(op, "access", sequential ? VIPS_ACCESS_SEQUENTIAL : VIPS_ACCESS_RANDOM, NULL);
    if (has_property(op, "fail_on")) g_object_set(op, "fail_on", (VipsFailOn)fail_on, NULL);
    if (shrink > 1 && has_property(op, "shrink")) g_object_set(op, "shrink", shrink, NULL);
    if (scale > 0 && scale < 1.0 && has_property(op, "scale")) g_object_set(op, "scale", scale, NULL);
    if (vips_cache_operation_buildp(&op)) {
        vips_object_unref_outputs(VIPS_OBJECT(op));
        g_object_unref(op);
        return -1;
    }
    VipsImage *image = NULL;
    g_object_get(op, "out", &image, NULL);
    vips_object_unref_outputs(VIPS_OBJECT(op));
    g_object_unref(op);
    if (!image) return -1;
    *out = image;
    return 0;
}

int CVipsShim_icc_to_srgb(VipsImage *in, VipsImage **out, const char *fallback_profile) {
    return vips_icc_transform(in, out, "srgb",
                              "embedded", TRUE,
                              "input_profile", fallback_profile,
                              "intent", VIPS_INTENT_RELATIVE,
                              "depth", 8,
                              NULL);
}

int CVipsShim_colourspace_srgb(VipsImage *in, VipsImage **out) {
    return vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, NULL);
}

int CVipsShim_cast_uchar(VipsImage *in, VipsImage **out, int shift) {
    return vips_cast(in, out, VIPS_FORMAT_UCHAR, "shift", shift ? TRUE : FALSE, NULL);
}

int CVipsShim_bandjoin_const1(VipsImage *in, VipsImage **out, double c) {
    return vips_bandjoin_const1(in, out, c, NULL);
}

int CVipsShim_extract_bands(VipsImage *in, VipsImage **out, int band, int n) {
    return vips_extract_band(in, out, band, "n", n, NULL);
}

int CVipsShim_premultiply(VipsImage *in, VipsImage **out) {
    return vips_premultiply(in, out, NULL);
}

int CVipsShim_resize(VipsImage *in, VipsImage **out, double hscale, double vscale) {
    return vips_resize(in, out, hscale, "vscale", vscale, "kernel", VIPS_KERNEL_LANCZOS3, NULL);
}

int CVipsShim_autorot(VipsImage *in, VipsImage **out) {
    return vips_autorot(in, out, NULL);
}

int CVipsShim_crop(VipsImage *in, VipsImage **out, int left, int top, int width, int height) {
    return vips_crop(in, out, left, top, width, height, NULL);
}

int CVipsShim_pngsave_buffer(VipsImage *in, void **buf, size_t *len, int compression) {
    return vips_pngsave_buffer(in, buf, len,
                               "compression", compression,
                               "interlace", FALSE,
                               "strip", TRUE,
                               NULL);
}

int CVipsShim_jpegsave_fd(VipsImage *in, int fd, int quality, int optimize_coding) {
    VipsTarget *target = vips_target_new_to_descriptor(fd);
    if (!target) return -1;
    int result = vips_jpegsave_target(in, target,
                                      "Q", quality,
                                      "interlace", FALSE,
                                      "optimize_coding", optimize_coding ? TRUE : FALSE,
                                      "subsample_mode", VIPS_FOREIGN_SUBSAMPLE_AUTO,
                                      NULL);
    if (result == 0 && vips_target_end(target)) result = -1;
    g_object_unref(target);
    return result;
}

int CVipsShim_remove_metadata(VipsImage *in, VipsImage **out, int keep_all_but_profile) {
    if (vips_copy(in, out, NULL)) return -1;
    gchar **fields = vips_image_get_fields(*out);
    for (int i = 0; fields[i]; i++) {
        const char *name = fields[i];
        if (strcmp(name, VIPS_META_ORIENTATION) == 0) continue;
        if (keep_all_but_profile && strcmp(name, VIPS_META_ICC_NAME) != 0) continue;
        // Header fields (width, bands, ...) are not removable metadata.
        if (vips_image_get_typeof(*out, name) == 0) continue;
        vips_image_remove(*out, name);
    }
    g_strfreev(fields);
    return 0;
}

const char *CVipsShim_get_string(VipsImage *image, const char *name) {
    const char *value = NULL;
    if (vips_image_get_typeof(image, name) == 0) return NULL;
    if (vips_image_get_string(image, name, &value)) {
        vips_error_clear();
        return NULL;
    }
    return value;
}

int CVipsShim_get_int(VipsImage *image, const char *name, int fallback) {
    int value = fallback;
    if (vips_image_get_typeof(image, name) == 0) return fallback;
    if (vips_image_get_int(image, name, &value)) {
        vips_error_clear();
        return fallback;
    }
    return value;
}

int CVipsShim_has_field(VipsImage *image, const char *name) {
    return vips_image_get_typeof(image, name) != 0;
}

void CVipsShim_unref(VipsImage *image) {
    if (image) g_object_unref(image);
}

void CVipsShim_free(void *p) {
    g_free(p);
}

int CVipsShim_text(VipsImage **out, const char *text, const char *font, int width, int dpi) {
    return vips_text(out, text, "font", font, "width", width, "dpi", dpi, "wrap", VIPS_TEXT_WRAP_WORD_CHAR, NULL);
}

int CVipsShim_pngload_buffer(const void *buf, size_t len, VipsImage **out) {
    return vips_pngload_buffer((void *)buf, len, out, NULL);
}

// MARK: - The thumbnail tap

struct CVipsShimTap {
    int width, height, bands, factor;
    int out_width, out_height;
    guint64 *sums;            // out_width × out_height × 4: Σ c·a for c = R, G, B, then Σ a
    size_t sums_capacity;     // how many the array holds (a reused one may hold more)
    unsigned char *rows_done; // per input row, once accumulated by a full-width strip
    unsigned char *pixels_done; // per input pixel, for other rectangles (allocated when first needed)
    // 3-band images, full-width rows: per block row, the column sums of its rows
    // so far (one vectorisable add per byte), folded into `sums` when the block row is whole.
    // 16-bit sums while a block row cannot overflow them (factor ≤ 257), else 32-bit.
    void **column_sums;
    int *rows_in_block;
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

CVipsShimTap *CVipsShim_tap_new(int width, int height, int bands, int factor) {
    if (width < 1 || height < 1 || (bands != 3 && bands != 4) || factor < 1) return NULL;
    CVipsShimTap *tap = g_new0(CVipsShimTap, 1);
    tap->width = width;
    tap->height = height;
    tap->bands = bands;
    tap->factor = factor;
    tap->out_width = (width + factor - 1) / factor;
    tap->out_height = (height + factor - 1) / factor;
    tap->sums = sums_new((size_t)tap->out_width * tap->out_height * 4, &tap->sums_capacity);
    tap->rows_done = g_new0(unsigned char, height);
    tap->column_sums = g_new0(void *, tap->out_height);
    tap->rows_in_block = g_new0(int, tap->out_height);
    g_mutex_init(&tap->lock);
    return tap;
}

void CVipsShim_tap_free(CVipsShimTap *tap) {
    if (!tap) return;
    sums_free(tap->sums, tap->sums_capacity);
    g_free(tap->rows_done);
    g_free(tap->pixels_done);
    for (int i = 0; i < tap->out_height; i++) g_free(tap->column_sums[i]);
    g_free(tap->column_sums);
    g_free(tap->rows_in_block);
    g_mutex_clear(&tap->lock);
    g_free(tap);
}

// Adds the pixels of one row span [left, left + count) of row y, block by block.
static void tap_add_span(CVipsShimTap *tap, const VipsPel *p, int left, int count, int y) {
    const int f = tap->factor, bands = tap->bands;
    guint64 *row = tap->sums + (size_t)(y / f) * tap->out_width * 4;
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
        guint64 *sum = row + (size_t)block * 4;
        sum[0] += r;
        sum[1] += g;
        sum[2] += b;
        sum[3] += a;
    }
}

static void tap_fold(CVipsShimTap *tap, int oy);

// Adds one whole row of a 3-band image to its block row's column sums, and folds
// the block row into the block sums once all its rows are in. Built twice, the
// loader picking the AVX2 copy where the CPU has it: the column adds are the
// tap's whole cost, and twice as wide there.
#if defined(__x86_64__) && defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void tap_add_row3(CVipsShimTap *tap, const VipsPel *p, int y) {
    const int f = tap->factor, oy = y / f, n = tap->width * 3;
    if (f <= 257) {
        if (!tap->column_sums[oy]) tap->column_sums[oy] = g_new0(guint16, n);
        guint16 *restrict columns = tap->column_sums[oy];
        for (int i = 0; i < n; i++) columns[i] += p[i];
    } else {
        if (!tap->column_sums[oy]) tap->column_sums[oy] = g_new0(guint32, n);
        guint32 *restrict columns = tap->column_sums[oy];
        for (int i = 0; i < n; i++) columns[i] += p[i];
    }
    if (++tap->rows_in_block[oy] < MIN(f, tap->height - oy * f)) return;
    tap_fold(tap, oy);
}

// Folds the column sums of block row `oy` (the rows added so far) into the block sums.
static void tap_fold(CVipsShimTap *tap, int oy) {
    const int f = tap->factor, rows = tap->rows_in_block[oy];
    const void *columns = tap->column_sums[oy];
    if (!columns) return;
    const guint16 *narrow = f <= 257 ? columns : NULL;
    const guint32 *wide = f <= 257 ? NULL : columns;
    guint64 *row = tap->sums + (size_t)oy * tap->out_width * 4;
    for (int block = 0; block < tap->out_width; block++) {
        int start = block * f, stop = MIN(tap->width, start + f);
        guint64 r = 0, g = 0, b = 0;
        // One loop per width, without a test per sample.
        if (narrow) {
            for (const guint16 *p = narrow + start * 3, *end = narrow + stop * 3; p < end; p += 3) {
                r += p[0];
                g += p[1];
                b += p[2];
            }
        } else {
            for (const guint32 *p = wide + start * 3, *end = wide + stop * 3; p < end; p += 3) {
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
    g_free(tap->column_sums[oy]);
    tap->column_sums[oy] = NULL;
    tap->rows_in_block[oy] = 0;
}

static void tap_accumulate(CVipsShimTap *tap, VipsRegion *region, const VipsRect *r) {
    const int bands = tap->bands;
    g_mutex_lock(&tap->lock);
    for (int y = r->top; y < r->top + r->height; y++) {
        if (r->left == 0 && r->width == tap->width) {
            if (tap->rows_done[y]) continue;
            tap->rows_done[y] = 1;
            if (bands == 3 && !tap->pixels_done) {
                tap_add_row3(tap, VIPS_REGION_ADDR(region, 0, y), y);
            } else {
                tap_add_span(tap, VIPS_REGION_ADDR(region, 0, y), 0, r->width, y);
            }
        } else {
            // A rectangle that is not a full-width strip: count each pixel once.
            if (tap->rows_done[y]) continue;
            if (!tap->pixels_done) {
                tap->pixels_done = g_new0(unsigned char, (size_t)tap->width * tap->height);
                // From now on every pixel goes straight to the block sums: fold what waits.
                for (int oy = 0; oy < tap->out_height; oy++) tap_fold(tap, oy);
            }
            unsigned char *done = tap->pixels_done + (size_t)y * tap->width;
            const VipsPel *p = VIPS_REGION_ADDR(region, r->left, y);
            for (int x = r->left; x < r->left + r->width; x++, p += bands) {
                if (done[x]) continue;
                done[x] = 1;
                tap_add_span(tap, p, x, 1, y);
            }
        }
    }
    g_mutex_unlock(&tap->lock);
}

static int tap_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
    (void)a; (void)stop;
    VipsRegion *in = (VipsRegion *)seq;
    const VipsRect *r = &out->valid;
    if (vips_region_prepare(in, r)) return -1;
    if (vips_region_region(out, in, r, r->left, r->top)) return -1;
    tap_accumulate((CVipsShimTap *)b, in, r);
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

int CVipsShim_tap(VipsImage *in, VipsImage **out, CVipsShimTap *tap) {
    if (vips_image_get_format(in) != VIPS_FORMAT_UCHAR || vips_image_get_bands(in) != tap->bands ||
        vips_image_get_width(in) != tap->width || vips_image_get_height(in) != tap->height) {
        vips_error("tap", "%s", "the tap needs the 8-bit image it was made for");
        return -1;
    }
    return strip_image(in, out, tap_generate, tap);
}

// The block means so far, newly allocated: premultiplied RGBA floats on 0…255,
// out_width × out_height.
static float *tap_means(CVipsShimTap *tap) {
    const int f = tap->factor, w = tap->out_width, h = tap->out_height;
    g_mutex_lock(&tap->lock);
    for (int oy = 0; oy < h; oy++) tap_fold(tap, oy);
    g_mutex_unlock(&tap->lock);
    float *pixels = g_new(float, (size_t)w * h * 4);
    for (int oy = 0; oy < h; oy++) {
        int bh = MIN(f, tap->height - oy * f);
        for (int ox = 0; ox < w; ox++) {
            int bw = MIN(f, tap->width - ox * f);
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

// One axis of a resample: for each output position, the first input index and
// `taps` normalised weights (indices past the edges clamped, as libvips's copy
// extension does).
typedef struct {
    int taps;
    int *first;      // per output position
    double *weights; // per output position, `taps` weights
} Axis;

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

static inline int clamp_index(int i, int size) { return i < 0 ? 0 : i >= size ? size - 1 : i; }

// The window [left, left + width) × [top, top + height) of `in` (RGBA floats,
// w × h) resampled with Lanczos3 by hscale × vscale, into `out` (RGBA floats,
// width × height): horizontally over the rows the window needs, then vertically.
static void lanczos3_window(const float *in, int w, int h, double hscale, double vscale, int left, int top,
                            int width, int height, float *out) {
    Axis ax = axis_new(hscale, left, width), ay = axis_new(vscale, top, height);
    const int row0 = ay.first[0], rows = ay.first[height - 1] + ay.taps - row0;
    float *across = g_new(float, (size_t)rows * width * 4);
    for (int r = 0; r < rows; r++) {
        const float *line = in + (size_t)clamp_index(row0 + r, h) * w * 4;
        for (int x = 0; x < width; x++) {
            const double *wt = ax.weights + (size_t)x * ax.taps;
            double sum[4] = {0, 0, 0, 0};
            for (int t = 0; t < ax.taps; t++) {
                const float *p = line + (size_t)clamp_index(ax.first[x] + t, w) * 4;
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

int CVipsShim_tap_resample(CVipsShimTap *tap, double hscale, double vscale, int left, int top, int width,
                           int height, float *out) {
    if (width < 1 || height < 1 || !(hscale > 0) || !(vscale > 0)) {
        vips_error("tap", "%s", "bad resample window");
        return -1;
    }
    float *means = tap_means(tap);
    lanczos3_window(means, tap->out_width, tap->out_height, hscale, vscale, left, top, width, height, out);
    g_free(means);
    return 0;
}

static int discard_strip(VipsRegion *region, VipsRect *area, void *a) {
    (void)region; (void)area; (void)a;
    return 0;
}

int CVipsShim_drain(VipsImage *in) {
    return vips_sink_disc(in, discard_strip, NULL);
}

// MARK: - Matrix/TRC profiles to sRGB

// What lcms computes for a matrix/TRC ("matrix-shaper") RGB profile to sRGB,
// relative intent, as a table-driven pass: per channel a table from the 8-bit
// value to linear light, one 3×3 matrix (source colorants to sRGB's, both in
// the D50 PCS), and one table from linear light (in CVIPSSHIM_SHAPER_STEPS
// steps) back to 8-bit sRGB.
typedef struct {
    // terms[out][in][v]: matrix[out][in] × linear[in][v], scaled so that the sum
    // of a row's three terms >> 8 is an index into `encode`.
    gint32 terms[3][3][256];
    guint8 encode[CVIPSSHIM_SHAPER_STEPS];
} Shaper;

// The encode table's index for a sum (8 fraction bits): rounded, clipped to the
// table (out of sRGB's gamut: clipped per channel, as lcms does).
static inline int shaper_index(gint32 sum) {
    int index = (sum + 128) >> 8;
    index = index < 0 ? 0 : index;
    return index > CVIPSSHIM_SHAPER_STEPS - 1 ? CVIPSSHIM_SHAPER_STEPS - 1 : index;
}

static int shaper_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
    (void)a; (void)stop;
    VipsRegion *in = (VipsRegion *)seq;
    const Shaper *s = (const Shaper *)b;
    const VipsRect *r = &out->valid;
    if (vips_region_prepare(in, r)) return -1;
    const int bands = out->im->Bands;
    // restrict: stores through the byte pointer could otherwise alias the
    // tables, and the compiler would reload them for every pixel.
    const gint32 *restrict rr = s->terms[0][0], *restrict rg = s->terms[0][1], *restrict rb = s->terms[0][2];
    const gint32 *restrict gr = s->terms[1][0], *restrict gg = s->terms[1][1], *restrict gb = s->terms[1][2];
    const gint32 *restrict br = s->terms[2][0], *restrict bg = s->terms[2][1], *restrict bb = s->terms[2][2];
    const guint8 *restrict encode = s->encode;
    for (int y = r->top; y < r->top + r->height; y++) {
        const VipsPel *restrict p = VIPS_REGION_ADDR(in, r->left, y);
        VipsPel *restrict q = VIPS_REGION_ADDR(out, r->left, y);
        for (int x = 0; x < r->width; x++, p += bands, q += bands) {
            const int red = p[0], green = p[1], blue = p[2];
            q[0] = encode[shaper_index(rr[red] + rg[green] + rb[blue])];
            q[1] = encode[shaper_index(gr[red] + gg[green] + gb[blue])];
            q[2] = encode[shaper_index(br[red] + bg[green] + bb[blue])];
            if (bands == 4) q[3] = p[3];
        }
    }
    return 0;
}

int CVipsShim_shaper_to_srgb(VipsImage *in, VipsImage **out, const float *linear, const float *matrix,
                             const unsigned char *encode) {
    const int bands = vips_image_get_bands(in);
    if (vips_image_get_format(in) != VIPS_FORMAT_UCHAR || (bands != 3 && bands != 4)) {
        vips_error("shaper", "%s", "needs an 8-bit RGB or RGBA image");
        return -1;
    }
    Shaper *shaper = g_new(Shaper, 1);
    // A term is at most |entry| × 16383 × 256: three of them stay far inside
    // 32 bits for entries up to ±10 (real colorants give ±2 at most).
    for (int i = 0; i < 9; i++) {
        if (!(fabsf(matrix[i]) <= 10.0f)) {
            g_free(shaper);
            vips_error("shaper", "%s", "matrix out of range");
            return -1;
        }
    }
    for (int o = 0; o < 3; o++)
        for (int c = 0; c < 3; c++)
            for (int v = 0; v < 256; v++)
                shaper->terms[o][c][v] = (gint32)lrint((double)matrix[o * 3 + c] * linear[c * 256 + v] *
                                                       (CVIPSSHIM_SHAPER_STEPS - 1) * 256.0);
    memcpy(shaper->encode, encode, sizeof shaper->encode);
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

int CVipsShim_profile_load(const char *name, const void **data, size_t *length, void **blob) {
    VipsBlob *profile = NULL;
    if (vips_profile_load(name, &profile, NULL)) return -1;
    if (!profile) {
        vips_error("profile_load", "no profile named %s", name);
        return -1;
    }
    *data = vips_blob_get(profile, length);
    *blob = profile;
    return 0;
}

void CVipsShim_blob_unref(void *blob) {
    vips_area_unref((VipsArea *)blob);
}

// MARK: - Pipeline clocks

#include <time.h>

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
    __atomic_fetch_add((gint64 *)b, now_ns() - start, __ATOMIC_RELAXED);
    if (status) return -1;
    return vips_region_region(out, in, r, r->left, r->top);
}

int CVipsShim_timer(VipsImage *in, VipsImage **out, int64_t *nanoseconds) {
    return strip_image(in, out, timer_generate, nanoseconds);
}
