#define _GNU_SOURCE
#include "CSandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

// The network rights came with ABI 4 (Linux 6.7); Debian 12's headers predate them.
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif

// The ruleset attribute as ABI 4 knows it; older kernels are given its first field.
struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
};

int CSandbox_landlock_abi(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? -errno : (int)abi;
}

static int add_path(int ruleset, const char *path, uint64_t access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct landlock_path_beneath_attr rule = {.allowed_access = access, .parent_fd = fd};
    long result = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int saved = errno;
    close(fd);
    return result < 0 ? -saved : 0;
}

int CSandbox_landlock(const char *writable, const char *also) {
    int abi = CSandbox_landlock_abi();
    if (abi < 0) return abi;
    const uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
    uint64_t write = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG;
    uint64_t all = read | write | LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                   LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                   LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM;
    if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) {
        all |= LANDLOCK_ACCESS_FS_TRUNCATE;
        write |= LANDLOCK_ACCESS_FS_TRUNCATE;
    }
    struct ruleset_attr attr = {.handled_access_fs = all, .handled_access_net = 0};
    size_t size = sizeof(attr.handled_access_fs);
    if (abi >= 4) {
        attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        size = sizeof(attr);
    }
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ruleset < 0) return -errno;
    int result = add_path(ruleset, "/", read);
    if (result == 0) result = add_path(ruleset, writable, read | write);
    if (result == 0 && also != NULL) result = add_path(ruleset, also, read | write);
    if (result == 0) result = add_path(ruleset, "/dev/null", LANDLOCK_ACCESS_FS_WRITE_FILE);
    if (result == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) result = -errno;
    if (result == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) result = -errno;
    close(ruleset);
    return result;
}

int CSandbox_seccomp_available(void) {
    // PR_GET_SECCOMP fails with EINVAL where the kernel has no seccomp.
    return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 ? 1 : 0;
}

int CSandbox_seccomp(void) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) return -ENOMEM;
    const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
    int rc = 0;
    // Sockets: only AF_UNIX (nothing here needs even that, but libraries may ask).
    rc |= seccomp_rule_add(ctx, refuse, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    rc |= seccomp_rule_add(ctx, refuse, SCMP_SYS(socketpair), 1, SCMP_A0(SCMP_CMP_NE, AF_UNIX));
    // New programs and processes; threads (clone with CLONE_THREAD) stay allowed.
    rc |= seccomp_rule_add(ctx, refuse, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    const int refused[] = {
        SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(ptrace),
        SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev), SCMP_SYS(mount), SCMP_SYS(umount2),
        SCMP_SYS(pivot_root), SCMP_SYS(chroot), SCMP_SYS(unshare), SCMP_SYS(setns), SCMP_SYS(kexec_load),
        SCMP_SYS(kexec_file_load), SCMP_SYS(init_module), SCMP_SYS(finit_module), SCMP_SYS(delete_module),
        SCMP_SYS(bpf), SCMP_SYS(perf_event_open), SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key),
        SCMP_SYS(reboot), SCMP_SYS(swapon), SCMP_SYS(swapoff), SCMP_SYS(userfaultfd), SCMP_SYS(open_by_handle_at),
        SCMP_SYS(fsopen), SCMP_SYS(fsmount), SCMP_SYS(move_mount), SCMP_SYS(open_tree),
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) rc |= seccomp_rule_add(ctx, refuse, refused[i], 0);
    if (rc != 0) {
        seccomp_release(ctx);
        return -EINVAL;
    }
    // libseccomp sets no_new_privs itself (SCMP_FLTATR_CTL_NNP defaults on).
    rc = seccomp_load(ctx);
    seccomp_release(ctx);
    return rc;
}
