// hevc-floor: the least any HEIC thumbnailer can cost, as a benchmark peer.
//
// For each file of a listing (the coded pictures of a HEIC's primary image,
// as heif_tiles.py writes them: a 4-byte big-endian length, then the picture's
// parameter sets and NAL units in Annex B form), the HEVC decoder decodes every
// picture (a grid's tiles, or the one image) to its YCbCr planes, and nothing
// more: no tile assembly, no colour conversion, no scaling, no encode, no
// store. Each decoder runs one thread; one process per job, each taking every
// N-th file, as thumbpipe's workers share a run.
//
// DECODER is `libavcodec` (FFmpeg's HEVC decoder, Debian's libavcodec) or
// `libde265` (the decoder Debian's libheif 1.15 uses), to compare the two on
// the same pictures.
//
// Usage: hevc-floor DECODER LISTING JOBS   (build: make bench, or
//        cc -O2 -o hevc-floor hevc-floor.c -lavcodec -lavutil -lde265)
#include <libavcodec/avcodec.h>
#include <libde265/de265.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../floor-common.h"

/// Decodes each picture with libavcodec: one packet a picture, one frame out.
static int decode_avcodec(const unsigned char *data, size_t size) {
    const AVCodec *codec = avcodec_find_decoder(AV_CODEC_ID_HEVC);
    int frames = 0;
    for (size_t at = 0; at + 4 <= size;) {
        size_t length = (size_t)data[at] << 24 | (size_t)data[at + 1] << 16 | (size_t)data[at + 2] << 8 | data[at + 3];
        at += 4;
        if (length > size - at) return -1;
        // A context a picture, as a tile decoder sees each tile alone.
        AVCodecContext *context = avcodec_alloc_context3(codec);
        context->thread_count = 1;
        if (avcodec_open2(context, codec, NULL) < 0) return -1;
        AVPacket *packet = av_packet_alloc();
        AVFrame *frame = av_frame_alloc();
        av_new_packet(packet, (int)length);
        memcpy(packet->data, data + at, length);
        if (avcodec_send_packet(context, packet) == 0 && avcodec_send_packet(context, NULL) == 0)
            while (avcodec_receive_frame(context, frame) == 0) frames++;
        av_frame_free(&frame);
        av_packet_free(&packet);
        avcodec_free_context(&context);
        at += length;
    }
    return frames;
}

/// Decodes each picture with libde265 (as libheif 1.15 does: one decoder a picture).
static int decode_de265(const unsigned char *data, size_t size) {
    int frames = 0;
    for (size_t at = 0; at + 4 <= size;) {
        size_t length = (size_t)data[at] << 24 | (size_t)data[at + 1] << 16 | (size_t)data[at + 2] << 8 | data[at + 3];
        at += 4;
        if (length > size - at) return -1;
        de265_decoder_context *decoder = de265_new_decoder();
        de265_push_data(decoder, data + at, (int)length, 0, NULL);
        de265_flush_data(decoder);
        int more = 1;
        while (more) {
            de265_error error = de265_decode(decoder, &more);
            if (error != DE265_OK && error != DE265_ERROR_WAITING_FOR_INPUT_DATA) break;
            while (de265_get_next_picture(decoder)) frames++;
        }
        de265_free_decoder(decoder);
        at += length;
    }
    return frames;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[1], "libavcodec") && strcmp(argv[1], "libde265"))) {
        fprintf(stderr, "usage: hevc-floor libavcodec|libde265 LISTING JOBS\n");
        return 64;
    }
    int avcodec = !strcmp(argv[1], "libavcodec");
    int jobs = atoi(argv[3]);
    for (int job = 0; job < jobs; job++) {
        pid_t pid = fork();
        if (pid < 0) return 71;
        if (pid > 0) continue;
        FILE *listing = fopen(argv[2], "r");
        if (!listing) _exit(66);
        char line[4096];
        int index = 0, status = 0;
        while (fgets(line, sizeof line, listing)) {
            line[strcspn(line, "\n")] = 0;
            if (!line[0] || index++ % jobs != job) continue;
            size_t size = 0;
            unsigned char *data = read_file(line, &size);
            int frames = data ? (avcodec ? decode_avcodec(data, size) : decode_de265(data, size)) : -1;
            if (frames <= 0) {
                fprintf(stderr, "hevc-floor: %s: no picture decoded\n", line);
                status = 65;
            }
            free(data);
        }
        fclose(listing);
        _exit(status);
    }
    int failed = 0;
    for (int job = 0; job < jobs; job++) {
        int status = 0;
        wait(&status);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) failed = 1;
    }
    return failed ? 65 : 0;
}
