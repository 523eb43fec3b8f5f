// codec-floor: the least any correct JPEG store can cost, as a benchmark peer.
//
// For each JPEG in a listing: TurboJPEG decodes it to its native Y, Cb, Cr
// planes (no upsampling, no colour conversion) and encodes those planes at
// quality 50 with the same chroma sampling, into OUT/<name>.jpg. No colour
// management, no rotation, no thumbnail: only the codec's own work, which a
// store of the same photo cannot avoid. One process per core, each taking every
// N-th file of the listing, as thumbpipe's workers share a run.
//
// With `durable` as a fourth argument, each store file is written as a store
// that must not be lost is (thumbpipe's): to a temporary name, fsync'd, renamed
// into place, and the folder fsync'd once a process at the end. That peer
// (codec-floor-durable) shows how much of a gap is durability, not codec work.
//
// Usage: codec-floor LISTING OUT JOBS [durable]   (build: make bench, or
//        cc -O2 -o codec-floor codec-floor.c -lturbojpeg)
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "../floor-common.h"

// One file: decode to planes, encode the planes at Q50. Returns 0 or -1.
static int transcode(tjhandle decoder, tjhandle encoder, const char *path, const char *out_folder, int durable) {
    size_t size = 0;
    unsigned char *jpeg = read_file(path, &size);
    if (!jpeg) return -1;
    int width, height, sampling, colourspace, status = -1;
    unsigned char *planes[3] = {NULL, NULL, NULL}, *store = NULL;
    int strides[3];
    if (tjDecompressHeader3(decoder, jpeg, size, &width, &height, &sampling, &colourspace)) goto done;
    for (int c = 0; c < 3; c++) {
        strides[c] = tjPlaneWidth(c, width, sampling);
        const unsigned long bytes = tjPlaneSizeYUV(c, width, strides[c], height, sampling);
        if (bytes == (unsigned long)-1 || !(planes[c] = malloc(bytes))) goto done;
    }
    if (tjDecompressToYUVPlanes(decoder, jpeg, size, planes, width, strides, height, TJFLAG_ACCURATEDCT)) goto done;
    unsigned long store_size = 0;
    if (tjCompressFromYUVPlanes(encoder, (const unsigned char **)planes, width, strides, height, sampling, &store,
                                &store_size, 50, TJFLAG_ACCURATEDCT))
        goto done;
    const char *name = strrchr(path, '/');
    char out[4096];
    if (snprintf(out, sizeof out, "%s/%s.jpg", out_folder, name ? name + 1 : path) >= (int)sizeof out) goto done;
    char temporary[4200];
    snprintf(temporary, sizeof temporary, "%s.tmp", out);
    FILE *f = fopen(durable ? temporary : out, "wb");
    if (f && fwrite(store, 1, store_size, f) == store_size && fflush(f) == 0 && (!durable || fsync(fileno(f)) == 0) &&
        fclose(f) == 0)
        status = durable && rename(temporary, out) ? -1 : 0;
    else if (f) fclose(f);
done:
    for (int c = 0; c < 3; c++) free(planes[c]);
    tjFree(store);
    free(jpeg);
    return status;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "durable"))) {
        fprintf(stderr, "usage: codec-floor LISTING OUT JOBS [durable]\n");
        return 64;
    }
    const int durable = argc == 5;
    const int jobs = atoi(argv[3]) > 0 ? atoi(argv[3]) : 1;
    for (int job = 0; job < jobs; job++) {
        pid_t pid = fork();
        if (pid < 0) return 71;
        if (pid > 0) continue;
        FILE *listing = fopen(argv[1], "r");
        if (!listing) _exit(66);
        tjhandle decoder = tjInitDecompress(), encoder = tjInitCompress();
        char line[4096];
        int index = 0, failed = 0;
        while (fgets(line, sizeof line, listing)) {
            line[strcspn(line, "\n")] = 0;
            if (!line[0] || index++ % jobs != job) continue;
            if (transcode(decoder, encoder, line, argv[2], durable)) {
                fprintf(stderr, "codec-floor: %s: %s\n", line, tjGetErrorStr2(decoder));
                failed = 1;
            }
        }
        if (durable) {
            const int folder = open(argv[2], O_RDONLY | O_DIRECTORY);
            if (folder < 0 || fsync(folder) != 0) failed = 1;
            if (folder >= 0) close(folder);
        }
        _exit(failed);
    }
    int status = 0, child;
    while (wait(&child) > 0)
        if (!WIFEXITED(child) || WEXITSTATUS(child)) status = 1;
    return status;
}
