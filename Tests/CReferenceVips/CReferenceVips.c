#include "CReferenceVips.h"
#include <math.h>
#include <string.h>
#include <vips/vips.h>

/* Replaces *image with the result of a step, or fails. */
#define STEP(call)                                                                                                     \
    do {                                                                                                               \
        VipsImage *next = NULL;                                                                                        \
        VipsImage *in = image;                                                                                         \
        if ((call) != 0) goto fail;                                                                                    \
        g_object_unref(in);                                                                                            \
        image = next;                                                                                                  \
    } while (0)

int reference_thumbnail(const char *path, int width, int height, float **pixels, char *error, size_t error_size) {
    if (VIPS_INIT("reference")) goto fail_noimage;
    VipsImage *image = vips_image_new_from_file(path, "access", VIPS_ACCESS_RANDOM, NULL);
    if (!image) goto fail_noimage;
    STEP(vips_autorot(in, &next, NULL));
    int cmyk = vips_image_get_interpretation(image) == VIPS_INTERPRETATION_CMYK;
    // Floats are read as scRGB (linear sRGB) by vips_colourspace, not through a
    // profile: libvips's ICC import takes floats as 0-255 and makes them black.
    // (The float fixture's profile is linear with sRGB's primaries: the same reading.)
    VipsBandFormat format = vips_image_get_format(image);
    int floats = format == VIPS_FORMAT_FLOAT || format == VIPS_FORMAT_DOUBLE;
    if ((vips_image_get_typeof(image, VIPS_META_ICC_NAME) || cmyk) && !floats) {
        VipsImage *next = NULL;
        if (vips_icc_transform(image, &next, "srgb", "embedded", TRUE, "input_profile", cmyk ? "cmyk" : "srgb",
                               "intent", VIPS_INTENT_RELATIVE, "depth", 8, NULL) == 0) {
            g_object_unref(image);
            image = next;
        } else {
            vips_error_clear();
        }
    }
    STEP(vips_colourspace(in, &next, VIPS_INTERPRETATION_sRGB, NULL));
    if (vips_image_get_format(image) == VIPS_FORMAT_USHORT) {
        STEP(vips_linear1(in, &next, 1.0 / 257.0, 0.0, NULL));
    } else {
        STEP(vips_cast(in, &next, VIPS_FORMAT_FLOAT, NULL));
    }
    if (vips_image_get_bands(image) > 4) STEP(vips_extract_band(in, &next, 0, "n", 4, NULL));
    if (vips_image_get_bands(image) == 3) STEP(vips_bandjoin_const1(in, &next, 255.0, NULL));
    STEP(vips_premultiply(in, &next, NULL));
    /* Everything in memory before the (slow, random-access) kernels. */
    {
        VipsImage *copy = vips_image_copy_memory(image);
        if (!copy) goto fail;
        g_object_unref(image);
        image = copy;
    }
    double w = vips_image_get_width(image), h = vips_image_get_height(image);
    double ratio = fmax(width / w, height / h);
    if (ratio < 1) STEP(vips_reduce(in, &next, 1 / ratio, 1 / ratio, "kernel", VIPS_KERNEL_LANCZOS3, NULL));
    int rw = vips_image_get_width(image), rh = vips_image_get_height(image);
    if (rw < width || rh < height) {
        /* Smaller than the canvas (or rounded just under it): enlarge by one factor
           until both sides cover it, as aspect fill does. */
        double up = fmax((double)width / rw, (double)height / rh);
        double hs = fmax(width, round(rw * up)) / rw, vs = fmax(height, round(rh * up)) / rh;
        STEP(vips_resize(in, &next, hs, "vscale", vs, "kernel", VIPS_KERNEL_LANCZOS3, NULL));
        rw = vips_image_get_width(image);
        rh = vips_image_get_height(image);
    }
    STEP(vips_crop(in, &next, (rw - width) / 2, (rh - height) / 2, width, height, NULL));
    STEP(vips_cast(in, &next, VIPS_FORMAT_FLOAT, NULL));
    size_t size = 0;
    void *memory = vips_image_write_to_memory(image, &size);
    g_object_unref(image);
    if (!memory || size != (size_t)width * height * 4 * sizeof(float)) goto fail_noimage;
    *pixels = memory;
    return 0;
fail:
    g_object_unref(image);
fail_noimage:
    snprintf(error, error_size, "%s", vips_error_buffer());
    vips_error_clear();
    return -1;
}

void reference_free(void *pixels) { g_free(pixels); }

int reference_make_image(const char *source, const char *destination, int width, int height, char *error,
                         size_t error_size) {
    if (VIPS_INIT("reference")) goto fail;
    VipsImage *image = NULL;
    if (vips_thumbnail(source, &image, width, "height", height, "crop", VIPS_INTERESTING_CENTRE, "size",
                       VIPS_SIZE_FORCE, NULL))
        goto fail;
    int status = vips_image_write_to_file(image, destination, NULL);
    g_object_unref(image);
    if (status) goto fail;
    return 0;
fail:
    snprintf(error, error_size, "%s", vips_error_buffer());
    vips_error_clear();
    return -1;
}

int reference_convert(const char *source, const char *destination, const char *interpretation, int alpha, char *error,
                      size_t error_size) {
    if (VIPS_INIT("reference")) goto fail;
    VipsImage *image = vips_image_new_from_file(source, NULL);
    if (!image) goto fail;
    int space = vips_enum_from_nick("reference", VIPS_TYPE_INTERPRETATION, interpretation);
    VipsImage *next = NULL;
    if (space < 0 || vips_colourspace(image, &next, space, NULL)) {
        g_object_unref(image);
        goto fail;
    }
    g_object_unref(image);
    image = next;
    if (alpha) {
        double max = vips_image_get_format(image) == VIPS_FORMAT_USHORT ? 65535 : 255;
        if (vips_image_get_format(image) == VIPS_FORMAT_FLOAT) max = 1;
        if (vips_bandjoin_const1(image, &next, max, NULL)) {
            g_object_unref(image);
            goto fail;
        }
        g_object_unref(image);
        image = next;
    }
    int status = vips_image_write_to_file(image, destination, NULL);
    g_object_unref(image);
    if (status) goto fail;
    return 0;
fail:
    snprintf(error, error_size, "%s", vips_error_buffer());
    vips_error_clear();
    return -1;
}
