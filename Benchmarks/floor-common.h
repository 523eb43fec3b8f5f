// What the floors (Benchmarks/CodecFloor, Benchmarks/HevcFloor) share: a
// whole file read into memory, outside what they time per image.
#ifndef FLOOR_COMMON_H
#define FLOOR_COMMON_H
#include <stdio.h>
#include <stdlib.h>

/// The bytes of the file at `path` (malloc'd; NULL when it cannot be read or is empty).
static unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = n > 0 ? malloc((size_t)n) : NULL;
    if (bytes && fread(bytes, 1, (size_t)n, f) != (size_t)n) {
        free(bytes);
        bytes = NULL;
    }
    fclose(f);
    *size = n > 0 ? (size_t)n : 0;
    return bytes;
}

#endif
