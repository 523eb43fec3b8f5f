#include "CHevc.h"
#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/pixdesc.h>
#include <stdio.h>
#include <string.h>

struct CHevcDecoder {
    AVCodecContext *context;
    AVPacket *packet;
    AVFrame *frame;
};

unsigned CHevc_libavcodecVersion(void) { return avcodec_version(); }

void CHevc_close(CHevcDecoder *d) {
    if (!d) return;
    av_frame_free(&d->frame);
    av_packet_free(&d->packet);
    avcodec_free_context(&d->context);
    av_free(d);
}

CHevcDecoder *CHevc_open(void) {
    const AVCodec *codec = avcodec_find_decoder(AV_CODEC_ID_HEVC);
    if (!codec) return NULL;
    CHevcDecoder *d = av_mallocz(sizeof *d);
    if (!d) return NULL;
    d->context = avcodec_alloc_context3(codec);
    d->packet = av_packet_alloc();
    d->frame = av_frame_alloc();
    if (!d->context || !d->packet || !d->frame) {
        CHevc_close(d);
        return NULL;
    }
    // One thread: the worker is one of several processes, and a thread pool would
    // start threads inside the sandbox for no gain.
    d->context->thread_count = 1;
    // A damaged slice is an error, not a grey block (the item then takes libvips's route, or fails).
    d->context->err_recognition = AV_EF_EXPLODE | AV_EF_CRCCHECK | AV_EF_BITSTREAM;
    if (avcodec_open2(d->context, codec, NULL) < 0) {
        CHevc_close(d);
        return NULL;
    }
    return d;
}

static int refuse(char *error, size_t size, const char *what, int code) {
    if (error && size) {
        char text[AV_ERROR_MAX_STRING_SIZE] = "";
        if (code) av_strerror(code, text, sizeof text);
        snprintf(error, size, code ? "%s (%s)" : "%s", what, text);
    }
    return -1;
}

int CHevc_decode(CHevcDecoder *d, const uint8_t *data, size_t size, CHevcPicture *picture, char *error,
                 size_t error_size) {
    memset(picture, 0, sizeof *picture);
    // The previous picture's frame and the draining state go.
    av_frame_unref(d->frame);
    avcodec_flush_buffers(d->context);
    if (size == 0 || size > INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE) return refuse(error, error_size, "an empty or huge picture", 0);
    int rc = av_new_packet(d->packet, (int)size); // zeroed padding after the bytes, as the parser reads past them
    if (rc < 0) return refuse(error, error_size, "no memory for the picture", rc);
    memcpy(d->packet->data, data, size);
    rc = avcodec_send_packet(d->context, d->packet);
    av_packet_unref(d->packet);
    if (rc < 0) return refuse(error, error_size, "the HEVC decoder refused the picture", rc);
    rc = avcodec_send_packet(d->context, NULL);
    if (rc < 0) return refuse(error, error_size, "the HEVC decoder refused the picture", rc);
    rc = avcodec_receive_frame(d->context, d->frame);
    if (rc < 0) return refuse(error, error_size, "the HEVC decoder gave no picture", rc);
    if (d->frame->decode_error_flags || (d->frame->flags & AV_FRAME_FLAG_CORRUPT))
        return refuse(error, error_size, "the HEVC picture is damaged", 0);
    const enum AVPixelFormat format = d->frame->format;
    if (format != AV_PIX_FMT_YUV420P && format != AV_PIX_FMT_YUVJ420P) {
        const char *name = av_get_pix_fmt_name(format);
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
