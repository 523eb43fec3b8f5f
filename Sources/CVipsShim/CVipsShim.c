#define _GNU_SOURCE // dladdr
#include "CVipsShim.h"
#include <dlfcn.h>

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
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

const char *CVipsShim_library_file(void) {
    Dl_info info;
    return dladdr((const void *)&vips_init, &info) && info.dli_fname ? info.dli_fname : NULL;
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

static int free_bytes(void *data, void *client) {
    (void)client;
    g_free(data);
    return 0;
}

VipsBlob *CVipsShim_blob_read_fd(int fd, size_t max_bytes, int *error) {
    struct stat info;
    if (fstat(fd, &info) != 0) {
        *error = errno;
        return NULL;
    }
    if (!S_ISREG(info.st_mode) || info.st_size <= 0) {
        *error = S_ISDIR(info.st_mode) ? EISDIR : EINVAL;
        return NULL;
    }
    size_t size = (size_t)info.st_size;
    if (max_bytes > 0 && size > max_bytes) {
        *error = EFBIG;
        return NULL;
    }
    unsigned char *data = g_try_malloc(size);
    if (!data) {
        *error = ENOMEM;
        return NULL;
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = pread(fd, data + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // shorter than its size said: the bytes there are
        done += (size_t)n;
    }
    if (done == 0) {
        g_free(data);
        *error = EIO;
        return NULL;
    }
    return vips_blob_new(free_bytes, data, done);
}

const void *CVipsShim_blob_bytes(VipsBlob *blob, size_t *length) { return vips_blob_get(blob, length); }

void CVipsShim_blob_release(VipsBlob *blob) { vips_area_unref(VIPS_AREA(blob)); }

// The loader for a blob and whether it takes a source (1) or a buffer (0).
static const char *find_loader_blob(VipsBlob *blob, int *from_source) {
    VipsSource *source = vips_source_new_from_blob(blob);
    if (!source) return NULL;
    const char *loader = vips_foreign_find_load_source(source);
    g_object_unref(source);
    *from_source = loader != NULL;
    if (loader) return loader;
    size_t length = 0;
    const void *data = vips_blob_get(blob, &length);
    vips_error_clear();
    return vips_foreign_find_load_buffer(data, length);
}

const char *CVipsShim_find_loader_blob(VipsBlob *blob) {
    __atomic_add_fetch(&find_loader_calls, 1, __ATOMIC_RELAXED);
    int from_source = 0;
    return find_loader_blob(blob, &from_source);
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

// The load options every load takes, then the build: one place for both kinds
// of input (a file, a blob's bytes). Consumes `op`.
static int build_load(VipsOperation *op, int shrink, double scale, int fail_on, int sequential, VipsImage **out) {
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

int CVipsShim_load(const char *path, int shrink, double scale, int fail_on,
                   int sequential, VipsImage **out) {
    const char *loader = vips_foreign_find_load(path);
    if (!loader) return -1;
    VipsOperation *op = vips_operation_new(loader);
    if (!op) return -1;
    g_object_set(op, "filename", path, NULL);
    return build_load(op, shrink, scale, fail_on, sequential, out);
}

int CVipsShim_load_blob(VipsBlob *blob, int shrink, double scale, int fail_on, int sequential, VipsImage **out) {
    int from_source = 0;
    const char *loader = find_loader_blob(blob, &from_source);
    if (!loader) return -1;
    VipsOperation *op = vips_operation_new(loader);
    if (!op) return -1;
    VipsSource *source = NULL;
    if (from_source) {
        source = vips_source_new_from_blob(blob);
        g_object_set(op, "source", source, NULL);
    } else {
        g_object_set(op, "buffer", blob, NULL);
    }
    int status = build_load(op, shrink, scale, fail_on, sequential, out);
    if (source) g_object_unref(source);
    return status;
}

int CVipsShim_icc_to_srgb(VipsImage *in, VipsImage **out, const char *fallback_profile) {
    return vips_icc_transform(in, out, "srgb",
                              "embedded", TRUE,
                              "input_profile", fallback_profile,
                              "intent", VIPS_INTENT_RELATIVE,
                              "depth", 8,
                              NULL);
}

int CVipsShim_float_to_rgb16(VipsImage *in, VipsImage **out) {
    VipsImage *scaled = NULL, *cast = NULL;
    if (vips_linear1(in, &scaled, 65535.0, 0.0, NULL))
        return -1;
    int status = vips_cast(scaled, &cast, VIPS_FORMAT_USHORT, NULL);
    g_object_unref(scaled);
    if (status)
        return -1;
    status = vips_copy(cast, out, "interpretation", VIPS_INTERPRETATION_RGB16, NULL);
    g_object_unref(cast);
    return status;
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

static int discard_strip(VipsRegion *region, VipsRect *area, void *a) {
    (void)region; (void)area; (void)a;
    return 0;
}

int CVipsShim_drain(VipsImage *in) {
    return vips_sink_disc(in, discard_strip, NULL);
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
