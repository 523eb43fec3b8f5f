#define _GNU_SOURCE
#include "CSystem.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>

int CSystem_rename_noreplace(const char *from, const char *to) {
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

int CSystem_start_writeback(int fd, int64_t offset, int64_t count) {
    return sync_file_range(fd, offset, count, SYNC_FILE_RANGE_WRITE);
}

int CSystem_set_top_pad(int bytes) { return mallopt(M_TOP_PAD, bytes); }
int CSystem_set_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }
int CSystem_set_arena_max(int arenas) { return mallopt(M_ARENA_MAX, arenas); }
