#include "CHevc.h"
#include <dlfcn.h>
#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/pixdesc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

// The functions used, looked up once from the libraries of the major versions
// the headers describe (their ABI).
static struct {
    int loaded;
    const AVCodec *(*find_decoder)(enum AVCodecID);
    AVCodecContext *(*alloc_context3)(const AVCodec *);
    int (*open2)(AVCodecContext *, const AVCodec *, AVDictionary **);
    void (*free_context)(AVCodecContext **);
    AVPacket *(*packet_alloc)(void);
    void (*packet_free)(AVPacket **);
    void (*packet_unref)(AVPacket *);
    int (*send_packet)(AVCodecContext *, const AVPacket *);
    int (*receive_frame)(AVCodecContext *, AVFrame *);
    void (*flush_buffers)(AVCodecContext *);
    AVFrame *(*frame_alloc)(void);
    void (*frame_free)(AVFrame **);
    void (*frame_unref)(AVFrame *);
    AVBufferRef *(*buffer_alloc)(size_t);
    AVBufferRef *(*buffer_ref)(const AVBufferRef *);
    void (*buffer_unref)(AVBufferRef **);
    int (*buffer_is_writable)(const AVBufferRef *);
    void *(*mallocz)(size_t);
    void (*free)(void *);
    int (*strerror)(int, char *, size_t);
    const char *(*pix_fmt_name)(enum AVPixelFormat);
    int (*default_get_buffer2)(AVCodecContext *, AVFrame *, int);
    void (*align_dimensions2)(AVCodecContext *, int *, int *, int[AV_NUM_DATA_POINTERS]);
    AVBufferRef *(*buffer_create)(uint8_t *, size_t, void (*)(void *, uint8_t *), void *, int);
    void (*log_set_callback)(void (*)(void *, int, const char *, va_list));
    void (*log_default_callback)(void *, int, const char *, va_list);
} av;

// libavcodec's log: its errors about the picture being decoded (a crafted or
// damaged tile: "The cu_qp_delta 50 is outside the valid range") are kept, the
// last one a thread, for the refusal's reason; nothing reaches stderr, where a
// worker's lines would reach the user's terminal (THUMBPIPE_AV_LOG=1 lets
// libavcodec print as it would, to look into a file).
static _Thread_local char last_error[160];
static int print_log;

static void on_log(void *context, int level, const char *format, va_list arguments) {
    if (print_log) {
        va_list copy;
        va_copy(copy, arguments);
        av.log_default_callback(context, level, format, copy);
        va_end(copy);
    }
    if (level > AV_LOG_ERROR) return;
    vsnprintf(last_error, sizeof last_error, format, arguments);
    const size_t n = strlen(last_error);
    if (n && last_error[n - 1] == '\n') last_error[n - 1] = 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load_once(void) {
    void *codec = dlopen("libavcodec.so." STRINGIFY(LIBAVCODEC_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL);
    void *util = dlopen("libavutil.so." STRINGIFY(LIBAVUTIL_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL);
    if (!codec || !util) return;
#define FIND(field, library, name) *(void **)(&av.field) = dlsym(library, name)
    FIND(find_decoder, codec, "avcodec_find_decoder");
    FIND(alloc_context3, codec, "avcodec_alloc_context3");
    FIND(open2, codec, "avcodec_open2");
    FIND(free_context, codec, "avcodec_free_context");
    FIND(packet_alloc, codec, "av_packet_alloc");
    FIND(packet_free, codec, "av_packet_free");
    FIND(packet_unref, codec, "av_packet_unref");
    FIND(send_packet, codec, "avcodec_send_packet");
    FIND(receive_frame, codec, "avcodec_receive_frame");
    FIND(flush_buffers, codec, "avcodec_flush_buffers");
    FIND(frame_alloc, util, "av_frame_alloc");
    FIND(frame_free, util, "av_frame_free");
    FIND(frame_unref, util, "av_frame_unref");
    FIND(buffer_alloc, util, "av_buffer_alloc");
    FIND(buffer_ref, util, "av_buffer_ref");
    FIND(buffer_unref, util, "av_buffer_unref");
    FIND(buffer_is_writable, util, "av_buffer_is_writable");
    FIND(mallocz, util, "av_mallocz");
    FIND(free, util, "av_free");
    FIND(strerror, util, "av_strerror");
    FIND(pix_fmt_name, util, "av_get_pix_fmt_name");
    FIND(default_get_buffer2, codec, "avcodec_default_get_buffer2");
    FIND(align_dimensions2, codec, "avcodec_align_dimensions2");
    FIND(buffer_create, util, "av_buffer_create");
    FIND(log_set_callback, util, "av_log_set_callback");
    FIND(log_default_callback, util, "av_log_default_callback");
#undef FIND
    void **all = (void **)&av.find_decoder;
    for (size_t i = 0; i < (sizeof av - offsetof(__typeof__(av), find_decoder)) / sizeof(void *); i++)
        if (!all[i]) return;
    const char *print = getenv("THUMBPIPE_AV_LOG");
    print_log = print && *print && strcmp(print, "0") != 0;
    av.log_set_callback(on_log);
    av.loaded = 1;
}

int CHevc_load(void) {
    pthread_once(&once, load_once);
    return av.loaded ? 0 : -1;
}

unsigned CHevc_libavcodecVersion(void) { return LIBAVCODEC_VERSION_INT; }

struct CHevcDecoder {
    AVCodecContext *context;
    AVPacket *packet;
    AVFrame *frame;
    // The current call's target, and whether a frame was already put there.
    const CHevcTarget *target;
    int target_taken;
    // The pictures' bytes, kept for the next (send_bytes).
    AVBufferRef *bytes;
};

// The target's memory is the caller's: the decoder's references to it free nothing.
static void keep_memory(void *opaque, uint8_t *data) {
    (void)opaque;
    (void)data;
}

// Whether a `format` frame of `width` × `height` fits the target as libavcodec
// would allocate it: its size aligned as avcodec_align_dimensions2 says (the
// decoder may write that far), with a row to spare below (libavcodec's own
// buffers end with a few dozen bytes past the last row), pointers and strides
// at its alignment.
static int fits_target(AVCodecContext *c, const CHevcTarget *t, int format, int width, int height) {
    if (format != AV_PIX_FMT_YUV420P && format != AV_PIX_FMT_YUVJ420P) return 0;
    int w = width, h = height, align[AV_NUM_DATA_POINTERS] = {0};
    av.align_dimensions2(c, &w, &h, align);
    if (w <= 0 || h <= 0 || w > t->width || h + 2 > t->height || w > t->stride[0] || (w + 1) / 2 > t->stride[1] ||
        (w + 1) / 2 > t->stride[2] || t->stride[1] < 128 || t->stride[2] < 128)
        return 0;
    for (int i = 0; i < 3; i++) {
        const int a = align[i] > 0 ? align[i] : 1;
        if (t->stride[i] % a || (uintptr_t)t->plane[i] % (uintptr_t)a) return 0;
    }
    return 1;
}

// FFmpeg's get_buffer2: the call's first frame in the target when it fits
// there, every other (a second picture, a reference the stream lacks) where
// libavcodec puts it.
static int get_buffer(AVCodecContext *c, AVFrame *frame, int flags) {
    CHevcDecoder *d = c->opaque;
    const CHevcTarget *t = d->target;
    if (t && !d->target_taken && fits_target(c, t, frame->format, frame->width, frame->height)) {
        frame->buf[0] = av.buffer_create(t->plane[0], (size_t)t->stride[0] * (size_t)t->height, keep_memory, NULL, 0);
        if (frame->buf[0]) {
            for (int i = 0; i < 3; i++) {
                frame->data[i] = t->plane[i];
                frame->linesize[i] = t->stride[i];
            }
            d->target_taken = 1;
            return 0;
        }
    }
    return av.default_get_buffer2(c, frame, flags);
}

void CHevc_close(CHevcDecoder *d) {
    if (!d) return;
    av.buffer_unref(&d->bytes);
    av.frame_free(&d->frame);
    av.packet_free(&d->packet);
    av.free_context(&d->context);
    av.free(d);
}

CHevcDecoder *CHevc_open(void) {
    if (CHevc_load() != 0) return NULL;
    const AVCodec *codec = av.find_decoder(AV_CODEC_ID_HEVC);
    if (!codec) return NULL;
    CHevcDecoder *d = av.mallocz(sizeof *d);
    if (!d) return NULL;
    d->context = av.alloc_context3(codec);
    d->packet = av.packet_alloc();
    d->frame = av.frame_alloc();
    if (!d->context || !d->packet || !d->frame) {
        CHevc_close(d);
        return NULL;
    }
    // One thread: the worker is one of several processes, and a thread pool would
    // start threads inside the sandbox for no gain.
    d->context->thread_count = 1;
    // No frame threading asked for either: libavcodec warns on stderr when a custom
    // get_buffer2 (below) comes with a request for it, even for one thread.
    d->context->thread_type = 0;
    // A damaged slice is an error where the decoder can tell (the item then takes libvips's route, or fails).
    d->context->err_recognition = AV_EF_EXPLODE | AV_EF_CRCCHECK | AV_EF_BITSTREAM;
    // Pictures decoded into the caller's planes where they fit (no frame pool to fault
    // in for each new decoder, no copy of each tile).
    d->context->opaque = d;
    d->context->get_buffer2 = get_buffer;
    if (av.open2(d->context, codec, NULL) < 0) {
        CHevc_close(d);
        return NULL;
    }
    return d;
}

// The reason: `what`, libavcodec's error `code` and its last logged error, if any.
static int refuse(char *error, size_t size, const char *what, int code) {
    if (error && size) {
        char text[AV_ERROR_MAX_STRING_SIZE] = "";
        if (code) av.strerror(code, text, sizeof text);
        if (code && last_error[0])
            snprintf(error, size, "%s (%s: %s)", what, text, last_error);
        else if (code || last_error[0])
            snprintf(error, size, "%s (%s)", what, code ? text : last_error);
        else
            snprintf(error, size, "%s", what);
    }
    return -1;
}

// Hands the decoder the picture's bytes (with the zeroed padding its parser reads
// past them) from one buffer kept from picture to picture while nothing else
// holds it: a tile's bytes in a fresh allocation each time faulted its pages in.
static int send_bytes(CHevcDecoder *d, const uint8_t *data, size_t size) {
    const size_t need = size + AV_INPUT_BUFFER_PADDING_SIZE;
    if (!d->bytes || d->bytes->size < need || !av.buffer_is_writable(d->bytes)) {
        av.buffer_unref(&d->bytes);
        d->bytes = av.buffer_alloc(need + need / 4);
        if (!d->bytes) return AVERROR(ENOMEM);
    }
    memcpy(d->bytes->data, data, size);
    memset(d->bytes->data + size, 0, AV_INPUT_BUFFER_PADDING_SIZE);
    d->packet->buf = av.buffer_ref(d->bytes);
    if (!d->packet->buf) return AVERROR(ENOMEM);
    d->packet->data = d->bytes->data;
    d->packet->size = (int)size;
    const int rc = av.send_packet(d->context, d->packet);
    av.packet_unref(d->packet);
    return rc;
}

void CHevc_move_planes(const CHevcTarget *t, const uint8_t *const from[3], int width, int height) {
    for (int i = 0; i < 3; i++) {
        const int columns = i ? (width + 1) / 2 : width, rows = i ? (height + 1) / 2 : height;
        if (from[i] == t->plane[i]) continue;
        for (int y = 0; y < rows; y++)
            memmove(t->plane[i] + (size_t)y * (size_t)t->stride[i], from[i] + (size_t)y * (size_t)t->stride[i],
                    (size_t)columns);
    }
}

// The decoded frame's planes and colour description into `picture`.
static void describe(const AVFrame *frame, const CHevcTarget *target, int direct, CHevcPicture *picture) {
    for (int i = 0; i < 3; i++) {
        picture->plane[i] = direct ? target->plane[i] : frame->data[i];
        picture->stride[i] = frame->linesize[i];
    }
    picture->width = frame->width;
    picture->height = frame->height;
    picture->direct = direct;
    picture->yuv420 = 1;
    picture->full_range = frame->color_range == AVCOL_RANGE_JPEG || frame->format == AV_PIX_FMT_YUVJ420P ? 1
                          : frame->color_range == AVCOL_RANGE_MPEG                                   ? 0
                                                                                                     : -1;
    picture->matrix = frame->colorspace == AVCOL_SPC_UNSPECIFIED ? 2 : (int)frame->colorspace;
}

static int decode(CHevcDecoder *d, const uint8_t *data, size_t size, CHevcPicture *picture, char *error,
                  size_t error_size) {
    if (size == 0 || size > INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE)
        return refuse(error, error_size, "an empty or huge picture", 0);
    int rc = send_bytes(d, data, size);
    if (rc < 0) return refuse(error, error_size, "the HEVC decoder refused the picture", rc);
    rc = av.send_packet(d->context, NULL);
    if (rc < 0) return refuse(error, error_size, "the HEVC decoder refused the picture", rc);
    rc = av.receive_frame(d->context, d->frame);
    if (rc < 0) return refuse(error, error_size, "the HEVC decoder gave no picture", rc);
    if (d->frame->decode_error_flags || (d->frame->flags & AV_FRAME_FLAG_CORRUPT))
        return refuse(error, error_size, "the HEVC picture is damaged", 0);
    const enum AVPixelFormat format = d->frame->format;
    if (format != AV_PIX_FMT_YUV420P && format != AV_PIX_FMT_YUVJ420P) {
        const char *name = av.pix_fmt_name(format);
        char what[96];
        snprintf(what, sizeof what, "a %s picture, not 8-bit 4:2:0", name ? name : "unknown");
        return refuse(error, error_size, what, 0);
    }
    const CHevcTarget *t = d->target;
    const int direct = t && d->frame->buf[0] && d->frame->buf[0]->data == t->plane[0];
    if (direct) CHevc_move_planes(t, (const uint8_t *const *)d->frame->data, d->frame->width, d->frame->height);
    describe(d->frame, t, direct, picture);
    return 0;
}

int CHevc_decode(CHevcDecoder *d, const uint8_t *data, size_t size, const CHevcTarget *target,
                 CHevcPicture *picture, char *error, size_t error_size) {
    memset(picture, 0, sizeof *picture);
    // The previous picture's frame and the draining state go.
    av.frame_unref(d->frame);
    av.flush_buffers(d->context);
    d->target = target;
    d->target_taken = 0;
    last_error[0] = 0;
    const int rc = decode(d, data, size, picture, error, error_size);
    if (d->target_taken) {
        // Nothing of the decoder's refers to the target after the call: a picture
        // decoded there is the caller's now, and any other frame stays in d->frame.
        if (rc == 0 && picture->direct) av.frame_unref(d->frame);
        av.flush_buffers(d->context);
    }
    d->target = NULL;
    return rc;
}
