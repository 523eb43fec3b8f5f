// Why this target exists: three glibc calls that Swift's Glibc module does not
// export, because glibc declares them only under _GNU_SOURCE: renameat2 (a
// rename that never replaces), sync_file_range (start a file's writeback
// without waiting) and mallopt (the allocator's settings). One line each, so
// the Swift side calls them by name instead of binding symbols by hand.
#ifndef CSYSTEM_H
#define CSYSTEM_H

#include <stdint.h>

/// Renames `from` to `to` unless `to` exists (renameat2 with RENAME_NOREPLACE).
/// Returns 0, or -1 with errno set (EEXIST when `to` exists; EINVAL where the
/// file system cannot do it).
int CSystem_rename_noreplace(const char *from, const char *to);

/// Starts writing `count` bytes from `offset` of `fd` to disk without waiting
/// (sync_file_range with SYNC_FILE_RANGE_WRITE). Returns 0, or -1 with errno set.
int CSystem_start_writeback(int fd, int64_t offset, int64_t count);

/// The allocator settings thumbpipe makes (mallopt's M_TOP_PAD, M_MMAP_THRESHOLD,
/// M_ARENA_MAX). Each returns 1 on success and 0 on failure, as mallopt does.
int CSystem_set_top_pad(int bytes);
int CSystem_set_mmap_threshold(int bytes);
int CSystem_set_arena_max(int arenas);

#endif
