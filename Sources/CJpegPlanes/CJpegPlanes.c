#include "CJpegPlanes.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

// Plane buffers are kept for the next image: a worker decodes one photo after
// another, and each fresh 10-40 MB buffer is a fresh mapping whose every page
// faults in (and is zeroed) again. A few are kept, each with its capacity in a
// header before it, at most KEPT_BYTES in all (a 12 Mpx 4:2:0 photo's planes
// and its turned copy).
#define KEPT_BUFFERS 4
#define KEPT_BYTES ((size_t)40 << 20)
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *kept[KEPT_BUFFERS];

typedef struct {
    size_t capacity;
    size_t pad;
} BufferHeader;

static unsigned char *plane_alloc(size_t size) {
    pthread_mutex_lock(&kept_lock);
    int best = -1;
    for (int i = 0; i < KEPT_BUFFERS; i++) {
        if (!kept[i]) continue;
        size_t capacity = ((BufferHeader *)kept[i] - 1)->capacity;
        if (capacity >= size && (best < 0 || capacity < ((BufferHeader *)kept[best] - 1)->capacity)) best = i;
    }
    unsigned char *buffer = NULL;
    if (best >= 0) {
        buffer = kept[best];
        kept[best] = NULL;
    }
    pthread_mutex_unlock(&kept_lock);
    if (buffer) return buffer;
    BufferHeader *header = malloc(sizeof(BufferHeader) + size);
    if (!header) return NULL;
    header->capacity = size;
    return (unsigned char *)(header + 1);
}

static void plane_free(unsigned char *buffer) {
    if (!buffer) return;
    pthread_mutex_lock(&kept_lock);
    size_t held = ((BufferHeader *)buffer - 1)->capacity;
    for (int i = 0; i < KEPT_BUFFERS; i++) {
        if (kept[i]) held += ((BufferHeader *)kept[i] - 1)->capacity;
    }
    if (held > KEPT_BYTES) {
        pthread_mutex_unlock(&kept_lock);
        free((BufferHeader *)buffer - 1);
        return;
    }
    for (int i = 0; i < KEPT_BUFFERS; i++) {
        if (!kept[i]) {
            kept[i] = buffer;
            buffer = NULL;
            break;
        }
    }
    if (buffer) {
        // Full: keep the larger of it and the smallest kept.
        int smallest = 0;
        for (int i = 1; i < KEPT_BUFFERS; i++) {
            if (((BufferHeader *)kept[i] - 1)->capacity < ((BufferHeader *)kept[smallest] - 1)->capacity) smallest = i;
        }
        if (((BufferHeader *)kept[smallest] - 1)->capacity < ((BufferHeader *)buffer - 1)->capacity) {
            unsigned char *old = kept[smallest];
            kept[smallest] = buffer;
            buffer = old;
        }
    }
    pthread_mutex_unlock(&kept_lock);
    if (buffer) free((BufferHeader *)buffer - 1);
}

static int fail(char *error, size_t size, const char *what, tjhandle handle) {
    if (error && size) snprintf(error, size, "%s%s%s", what, handle ? ": " : "", handle ? tjGetErrorStr2(handle) : "");
    return -1;
}

void CJpegPlanes_free(CJpegPlanes *p) {
    if (!p) return;
    plane_free(p->y);
    plane_free(p->cb);
    plane_free(p->cr);
    p->y = p->cb = p->cr = NULL;
}

void CJpegPlanes_free_buffer(unsigned char *jpeg) { tjFree(jpeg); }

int CJpegPlanes_decode(const unsigned char *jpeg, size_t size, CJpegPlanes *out, char *error, size_t error_size) {
    memset(out, 0, sizeof *out);
    tjhandle handle = tjInitDecompress();
    if (!handle) return fail(error, error_size, "TurboJPEG did not start", NULL);
    int width = 0, height = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(handle, jpeg, (unsigned long)size, &width, &height, &subsamp, &colorspace)) {
        int status = fail(error, error_size, "header", handle);
        tjDestroy(handle);
        return status;
    }
    if (colorspace != TJCS_YCbCr || subsamp != TJSAMP_420) {
        tjDestroy(handle);
        return fail(error, error_size, "not a 4:2:0 YCbCr JPEG", NULL);
    }
    unsigned char *native[3] = {NULL, NULL, NULL};
    int widths[3], heights[3];
    for (int c = 0; c < 3; c++) {
        widths[c] = tjPlaneWidth(c, width, subsamp);
        heights[c] = tjPlaneHeight(c, height, subsamp);
        native[c] = (widths[c] > 0 && heights[c] > 0) ? plane_alloc((size_t)widths[c] * heights[c]) : NULL;
        if (!native[c]) {
            for (int i = 0; i < c; i++) plane_free(native[i]);
            tjDestroy(handle);
            return fail(error, error_size, "out of memory for the planes", NULL);
        }
    }
    // Strict: a warning (corrupt data, a truncated file) leaves the source to libvips.
    if (tjDecompressToYUVPlanes(handle, jpeg, (unsigned long)size, native, width, widths, height,
                                TJFLAG_STOPONWARNING)) {
        int status = fail(error, error_size, "decode", handle);
        for (int c = 0; c < 3; c++) plane_free(native[c]);
        tjDestroy(handle);
        return status;
    }
    tjDestroy(handle);
    out->width = width;
    out->height = height;
    // TurboJPEG's 4:2:0 geometry: Y rows padded to an even width and count,
    // chroma of half each side, rounded up.
    out->y = native[0];
    out->cb = native[1];
    out->cr = native[2];
    out->y_stride = widths[0];
    out->y_rows = heights[0];
    out->chroma_width = widths[1];
    out->chroma_height = heights[1];
    return 0;
}

// The `w × h` samples of plane `in` (rows of `stride`) turned by EXIF
// orientation `o` into a new plane of `out_stride × out_rows` (at least the
// turned size; the padding repeats the edge); the stored sample shown at upright
// (x, y), as AspectFillScale.storedPixel says.
static unsigned char *turn(const unsigned char *in, int stride, int w, int h, int o, int out_stride, int out_rows) {
    const int swap = o >= 5;
    const int uw = swap ? h : w, uh = swap ? w : h;
    unsigned char *out = plane_alloc((size_t)out_stride * out_rows);
    if (!out) return NULL;
    for (int y = 0; y < uh; y++) {
        unsigned char *row = out + (size_t)y * out_stride;
        switch (o) {
        case 2:
            for (int x = 0; x < uw; x++) row[x] = in[(size_t)y * stride + (w - 1 - x)];
            break;
        case 3:
            for (int x = 0; x < uw; x++) row[x] = in[(size_t)(h - 1 - y) * stride + (w - 1 - x)];
            break;
        case 4:
            memcpy(row, in + (size_t)(h - 1 - y) * stride, (size_t)w);
            break;
        case 5:
            for (int x = 0; x < uw; x++) row[x] = in[(size_t)x * stride + y];
            break;
        case 6:
            for (int x = 0; x < uw; x++) row[x] = in[(size_t)(h - 1 - x) * stride + y];
            break;
        case 7:
            for (int x = 0; x < uw; x++) row[x] = in[(size_t)(h - 1 - x) * stride + (w - 1 - y)];
            break;
        case 8:
            for (int x = 0; x < uw; x++) row[x] = in[(size_t)x * stride + (w - 1 - y)];
            break;
        default:
            memcpy(row, in + (size_t)y * stride, (size_t)w);
        }
        for (int x = uw; x < out_stride; x++) row[x] = row[uw - 1];
    }
    for (int y = uh; y < out_rows; y++) memcpy(out + (size_t)y * out_stride, out + (size_t)(uh - 1) * out_stride, (size_t)out_stride);
    return out;
}

int CJpegPlanes_orient(CJpegPlanes *p, int orientation, char *error, size_t error_size) {
    if (orientation < 2 || orientation > 8) return 0;
    const int swap = orientation >= 5;
    const int w = swap ? p->height : p->width, h = swap ? p->width : p->height;
    const int y_stride = tjPlaneWidth(0, w, TJSAMP_420), y_rows = tjPlaneHeight(0, h, TJSAMP_420);
    const int cw = tjPlaneWidth(1, w, TJSAMP_420), ch = tjPlaneHeight(1, h, TJSAMP_420);
    // Chroma covers ceil(side / 2) samples a side, so it turns as its own grid.
    unsigned char *y = turn(p->y, p->y_stride, p->width, p->height, orientation, y_stride, y_rows);
    unsigned char *cb = turn(p->cb, p->chroma_width, p->chroma_width, p->chroma_height, orientation, cw, ch);
    unsigned char *cr = turn(p->cr, p->chroma_width, p->chroma_width, p->chroma_height, orientation, cw, ch);
    if (!y || !cb || !cr) {
        plane_free(y);
        plane_free(cb);
        plane_free(cr);
        return fail(error, error_size, "out of memory turning the planes", NULL);
    }
    CJpegPlanes_free(p);
    p->y = y;
    p->cb = cb;
    p->cr = cr;
    p->width = w;
    p->height = h;
    p->y_stride = y_stride;
    p->y_rows = y_rows;
    p->chroma_width = cw;
    p->chroma_height = ch;
    return 0;
}

int CJpegPlanes_encode(const CJpegPlanes *p, int quality, unsigned char **jpeg, unsigned long *size, char *error,
                       size_t error_size) {
    tjhandle handle = tjInitCompress();
    if (!handle) return fail(error, error_size, "TurboJPEG did not start", NULL);
    const unsigned char *planes[3] = {p->y, p->cb, p->cr};
    int strides[3] = {p->y_stride, p->chroma_width, p->chroma_width};
    *jpeg = NULL;
    *size = 0;
    int status = tjCompressFromYUVPlanes(handle, planes, p->width, strides, p->height, TJSAMP_420, jpeg, size, quality, 0);
    if (status) status = fail(error, error_size, "encode", handle);
    tjDestroy(handle);
    return status;
}
