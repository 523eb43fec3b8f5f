#include "CJpegPlanes.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

static int fail(char *error, size_t size, const char *what, tjhandle handle) {
    if (error && size) snprintf(error, size, "%s%s%s", what, handle ? ": " : "", handle ? tjGetErrorStr2(handle) : "");
    return -1;
}

void CJpegPlanes_free(CJpegPlanes *p) {
    if (!p) return;
    free(p->y);
    free(p->cb);
    free(p->cr);
    p->y = p->cb = p->cr = NULL;
}

void CJpegPlanes_free_buffer(unsigned char *jpeg) { tjFree(jpeg); }

// A `w × h` plane box-averaged by `fx × fy` (1 or 2 each) into `ow × oh`; an odd
// edge averages the samples it has.
static unsigned char *downsample(const unsigned char *in, int w, int h, int fx, int fy, int ow, int oh) {
    unsigned char *out = malloc((size_t)ow * oh);
    if (!out) return NULL;
    for (int y = 0; y < oh; y++) {
        for (int x = 0; x < ow; x++) {
            int sum = 0, n = 0;
            for (int dy = 0; dy < fy; dy++) {
                int sy = y * fy + dy;
                if (sy >= h) continue;
                for (int dx = 0; dx < fx; dx++) {
                    int sx = x * fx + dx;
                    if (sx >= w) continue;
                    sum += in[(size_t)sy * w + sx];
                    n++;
                }
            }
            out[(size_t)y * ow + x] = (unsigned char)((sum + n / 2) / n);
        }
    }
    return out;
}

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
    if (colorspace != TJCS_YCbCr ||
        (subsamp != TJSAMP_420 && subsamp != TJSAMP_444 && subsamp != TJSAMP_422 && subsamp != TJSAMP_440)) {
        tjDestroy(handle);
        return fail(error, error_size, "not a YCbCr JPEG of 4:2:0, 4:2:2, 4:4:0 or 4:4:4 subsampling", NULL);
    }
    unsigned char *native[3] = {NULL, NULL, NULL};
    int widths[3], heights[3];
    for (int c = 0; c < 3; c++) {
        widths[c] = tjPlaneWidth(c, width, subsamp);
        heights[c] = tjPlaneHeight(c, height, subsamp);
        native[c] = (widths[c] > 0 && heights[c] > 0) ? malloc((size_t)widths[c] * heights[c]) : NULL;
        if (!native[c]) {
            for (int i = 0; i < c; i++) free(native[i]);
            tjDestroy(handle);
            return fail(error, error_size, "out of memory for the planes", NULL);
        }
    }
    // Strict: a warning (corrupt data, a truncated file) leaves the source to libvips.
    if (tjDecompressToYUVPlanes(handle, jpeg, (unsigned long)size, native, width, widths, height,
                                TJFLAG_STOPONWARNING)) {
        int status = fail(error, error_size, "decode", handle);
        for (int c = 0; c < 3; c++) free(native[c]);
        tjDestroy(handle);
        return status;
    }
    tjDestroy(handle);
    out->width = width;
    out->height = height;
    out->chroma_width = tjPlaneWidth(1, width, TJSAMP_420);
    out->chroma_height = tjPlaneHeight(1, height, TJSAMP_420);
    // Y as 4:2:0 lays it out: rows padded to an even width and count (a 4:4:4
    // source's Y is unpadded, so it is copied into that shape).
    const int y_stride = tjPlaneWidth(0, width, TJSAMP_420), y_rows = tjPlaneHeight(0, height, TJSAMP_420);
    if (widths[0] == y_stride && heights[0] == y_rows) {
        out->y = native[0];
    } else {
        out->y = malloc((size_t)y_stride * y_rows);
        if (!out->y) {
            for (int c = 0; c < 3; c++) free(native[c]);
            return fail(error, error_size, "out of memory for the planes", NULL);
        }
        for (int row = 0; row < y_rows; row++) {
            const unsigned char *from = native[0] + (size_t)(row < heights[0] ? row : heights[0] - 1) * widths[0];
            unsigned char *to = out->y + (size_t)row * y_stride;
            const int n = widths[0] < y_stride ? widths[0] : y_stride;
            memcpy(to, from, (size_t)n);
            for (int x = n; x < y_stride; x++) to[x] = to[n - 1];
        }
        free(native[0]);
    }
    out->y_stride = y_stride;
    out->y_rows = y_rows;
    if (subsamp == TJSAMP_420) {
        out->cb = native[1];
        out->cr = native[2];
    } else {
        int fx = widths[1] == width ? 2 : 1, fy = heights[1] == height ? 2 : 1;
        out->cb = downsample(native[1], widths[1], heights[1], fx, fy, out->chroma_width, out->chroma_height);
        out->cr = downsample(native[2], widths[2], heights[2], fx, fy, out->chroma_width, out->chroma_height);
        free(native[1]);
        free(native[2]);
        if (!out->cb || !out->cr) {
            CJpegPlanes_free(out);
            return fail(error, error_size, "out of memory for the planes", NULL);
        }
    }
    return 0;
}

// The `w × h` samples of plane `in` (rows of `stride`) turned by EXIF
// orientation `o` into a new plane of `out_stride × out_rows` (at least the
// turned size; the padding repeats the edge); the stored sample shown at upright
// (x, y), as AspectFillScale.storedPixel says.
static unsigned char *turn(const unsigned char *in, int stride, int w, int h, int o, int out_stride, int out_rows) {
    const int swap = o >= 5;
    const int uw = swap ? h : w, uh = swap ? w : h;
    unsigned char *out = malloc((size_t)out_stride * out_rows);
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
        free(y);
        free(cb);
        free(cr);
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
