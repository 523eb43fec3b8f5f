#include "CHevc.h"
#include <dlfcn.h>
#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/pixdesc.h>
#include <pthread.h>
#include <stdio.h>
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
    int (*new_packet)(AVPacket *, int);
    void (*packet_unref)(AVPacket *);
    int (*send_packet)(AVCodecContext *, const AVPacket *);
    int (*receive_frame)(AVCodecContext *, AVFrame *);
    void (*flush_buffers)(AVCodecContext *);
    AVFrame *(*frame_alloc)(void);
    void (*frame_free)(AVFrame **);
    void (*frame_unref)(AVFrame *);
    void *(*mallocz)(size_t);
    void (*free)(void *);
    int (*strerror)(int, char *, size_t);
    const char *(*pix_fmt_name)(enum AVPixelFormat);
} av;

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
    FIND(new_packet, codec, "av_new_packet");
    FIND(packet_unref, codec, "av_packet_unref");
    FIND(send_packet, codec, "avcodec_send_packet");
    FIND(receive_frame, codec, "avcodec_receive_frame");
    FIND(flush_buffers, codec, "avcodec_flush_buffers");
    FIND(frame_alloc, util, "av_frame_alloc");
    FIND(frame_free, util, "av_frame_free");
    FIND(frame_unref, util, "av_frame_unref");
    FIND(mallocz, util, "av_mallocz");
    FIND(free, util, "av_free");
    FIND(strerror, util, "av_strerror");
    FIND(pix_fmt_name, util, "av_get_pix_fmt_name");
#undef FIND
    void **all = (void **)&av.find_decoder;
    for (size_t i = 0; i < (sizeof av - offsetof(__typeof__(av), find_decoder)) / sizeof(void *); i++)
        if (!all[i]) return;
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
};

void CHevc_close(CHevcDecoder *d) {
    if (!d) return;
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
    // A damaged slice is an error where the decoder can tell (the item then takes libvips's route, or fails).
    d->context->err_recognition = AV_EF_EXPLODE | AV_EF_CRCCHECK | AV_EF_BITSTREAM;
    if (av.open2(d->context, codec, NULL) < 0) {
        CHevc_close(d);
        return NULL;
    }
    return d;
}

static int refuse(char *error, size_t size, const char *what, int code) {
    if (error && size) {
        char text[AV_ERROR_MAX_STRING_SIZE] = "";
        if (code) av.strerror(code, text, sizeof text);
        snprintf(error, size, code ? "%s (%s)" : "%s", what, text);
    }
    return -1;
}

int CHevc_decode(CHevcDecoder *d, const uint8_t *data, size_t size, CHevcPicture *picture, char *error,
                 size_t error_size) {
    memset(picture, 0, sizeof *picture);
    // The previous picture's frame and the draining state go.
    av.frame_unref(d->frame);
    av.flush_buffers(d->context);
    if (size == 0 || size > INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE)
        return refuse(error, error_size, "an empty or huge picture", 0);
    int rc = av.new_packet(d->packet, (int)size); // zeroed padding after the bytes, as the parser reads past them
    if (rc < 0) return refuse(error, error_size, "no memory for the picture", rc);
    memcpy(d->packet->data, data, size);
    rc = av.send_packet(d->context, d->packet);
    av.packet_unref(d->packet);
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
    for (int i = 0; i < 3; i++) {
        picture->plane[i] = d->frame->data[i];
        picture->stride[i] = d->frame->linesize[i];
    }
    picture->width = d->frame->width;
    picture->height = d->frame->height;
    picture->yuv420 = 1;
    picture->full_range = d->frame->color_range == AVCOL_RANGE_JPEG || format == AV_PIX_FMT_YUVJ420P ? 1
                          : d->frame->color_range == AVCOL_RANGE_MPEG                             ? 0
                                                                                                  : -1;
    picture->matrix = d->frame->colorspace == AVCOL_SPC_UNSPECIFIED ? 2 : (int)d->frame->colorspace;
    return 0;
}
