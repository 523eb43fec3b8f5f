#define _GNU_SOURCE
#include "CSandbox.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

// Landlock rights and scopes newer than Debian 12's headers (ABI 4: TCP, 5:
// device ioctls, 6: scopes).
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#define SANDBOX_FS_IOCTL_DEV (1ULL << 15)
#define SANDBOX_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define SANDBOX_SCOPE_SIGNAL (1ULL << 1)

#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 2U
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1U
#endif

// The ruleset attribute as ABI 6 knows it; older kernels are given its first fields.
struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

static void say(char *why, size_t size, const char *what, int code) {
    if (why == NULL || size == 0) return;
    size_t used = strlen(why);
    if (used + 1 >= size) return;
    snprintf(why + used, size - used, "%s%s: %s", used ? "; " : "", what, strerror(code));
}

// MARK: - Landlock

int CSandbox_landlock_abi(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? -errno : (int)abi;
}

static int add_path(int ruleset, const char *path, uint64_t access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -errno;  // a system folder this machine lacks needs no rule
    struct stat info;
    // Rights that only make sense on folders are refused by the kernel on a file.
    if (fstat(fd, &info) == 0 && !S_ISDIR(info.st_mode))
        access &= LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_EXECUTE |
                  LANDLOCK_ACCESS_FS_TRUNCATE | SANDBOX_FS_IOCTL_DEV;
    struct landlock_path_beneath_attr rule = {.allowed_access = access, .parent_fd = fd};
    long result = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int saved = errno;
    close(fd);
    return result < 0 ? -saved : 0;
}

int CSandbox_landlock(const char *const *readable, int count, const char *writable, const char *extra) {
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
    if (abi >= 5) all |= SANDBOX_FS_IOCTL_DEV;  // granted nowhere
    struct ruleset_attr attr = {.handled_access_fs = all};
    size_t size = sizeof(attr.handled_access_fs);
    if (abi >= 4) {
        attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
        size = 2 * sizeof(uint64_t);
    }
    if (abi >= 6) {
        attr.scoped = SANDBOX_SCOPE_ABSTRACT_UNIX_SOCKET | SANDBOX_SCOPE_SIGNAL;
        size = sizeof(attr);
    }
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ruleset < 0) return -errno;
    int result = 0;
    for (int i = 0; i < count && result == 0; i++) result = add_path(ruleset, readable[i], read);
    if (result == 0) result = add_path(ruleset, writable, read | write);
    if (result == 0 && extra != NULL) result = add_path(ruleset, extra, read | write);
    if (result == 0) result = add_path(ruleset, "/dev/null", LANDLOCK_ACCESS_FS_WRITE_FILE);
    if (result == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) result = -errno;
    if (result == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) result = -errno;
    close(ruleset);
    return result == 0 ? abi : result;
}

// MARK: - seccomp

int CSandbox_seccomp_available(void) {
    // PR_GET_SECCOMP fails with EINVAL where the kernel has no seccomp.
    return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 ? 1 : 0;
}

// System calls newer than libseccomp 2.5.4's tables (x86_64 numbers).
#ifdef __x86_64__
#define SANDBOX_NR_FCHMODAT2 452
#define SANDBOX_NR_SETXATTRAT 463
#define SANDBOX_NR_REMOVEXATTRAT 466
#endif

// What a decoder never needs, and why it is refused. A deny-list, as glycin
// moved to after an allow-list broke on library updates: libvips, its loaders
// and GLib call what they like among the rest (measured: every fixture format
// passes through this filter in the suite).
//
// | calls                                              | why refused                                   |
// |----------------------------------------------------|-----------------------------------------------|
// | ioctl TIOCSTI, TIOCLINUX                           | typing into a terminal (CVE-2017-5226's class) |
// | io_uring_setup, _enter, _register                  | a second system-call path no filter sees       |
// | socket, socketpair, connect, bind, listen, accept*  | no network, no UNIX socket of the desktop      |
// | sendto, sendmsg, sendmmsg, recvfrom, recvmsg,       | only on the control socket                     |
// |   recvmmsg on any other descriptor                 |                                               |
// | chmod, fchmod*, chown*, utime*, futimesat,         | no file's metadata changed (an mtime reset     |
// |   *setxattr*, *removexattr*                        |   hides a change from every later night)       |
// | kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo   | signals to itself only                         |
// |   to another process; tkill, pidfd_*               |                                               |
// | execve, execveat, fork, vfork, clone (no thread),  | no new program, no new process                 |
// |   clone3 (ENOSYS)                                  |                                               |
// | ptrace, process_vm_readv/writev, personality       | no other process's memory, no ASLR switch-off  |
// | mount, umount2, pivot_root, chroot, fsopen, fsmount,| no new view of the file system               |
// |   move_mount, open_tree, unshare, setns            |   (after the jail is made)                     |
// | keyctl, add_key, request_key, bpf, perf_event_open,| kernel attack surface no decoder uses          |
// |   userfaultfd, open_by_handle_at, name_to_handle_at|                                               |
// | kexec_*, *_module, reboot, swapon, swapoff, acct,  | machine-wide state                             |
// |   syslog, quotactl                                 |                                               |
int CSandbox_seccomp(int control_fd) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL) return -ENOMEM;
    const uint32_t refuse = SCMP_ACT_ERRNO(EPERM);
    const uint64_t self = (uint64_t)getpid();
    int rc = 0;
    rc |= seccomp_rule_add(ctx, refuse, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, TIOCSTI));
    rc |= seccomp_rule_add(ctx, refuse, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, TIOCLINUX));
    const int on_control_only[] = {SCMP_SYS(sendto),   SCMP_SYS(sendmsg),  SCMP_SYS(sendmmsg),
                                   SCMP_SYS(recvfrom), SCMP_SYS(recvmsg), SCMP_SYS(recvmmsg)};
    for (size_t i = 0; i < sizeof(on_control_only) / sizeof(on_control_only[0]); i++)
        rc |= seccomp_rule_add(ctx, refuse, on_control_only[i], 1, SCMP_A0(SCMP_CMP_NE, (uint64_t)control_fd));
    const int to_self_only[] = {SCMP_SYS(kill), SCMP_SYS(tgkill), SCMP_SYS(rt_sigqueueinfo),
                                SCMP_SYS(rt_tgsigqueueinfo)};
    for (size_t i = 0; i < sizeof(to_self_only) / sizeof(to_self_only[0]); i++)
        rc |= seccomp_rule_add(ctx, refuse, to_self_only[i], 1, SCMP_A0(SCMP_CMP_NE, self));
    // New programs and processes; threads (clone with CLONE_THREAD) stay allowed.
    rc |= seccomp_rule_add(ctx, refuse, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    // personality(0xffffffff) only asks.
    rc |= seccomp_rule_add(ctx, refuse, SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_NE, 0xFFFFFFFF));
    const int refused[] = {
        SCMP_SYS(io_uring_setup), SCMP_SYS(io_uring_enter), SCMP_SYS(io_uring_register),
        SCMP_SYS(socket), SCMP_SYS(socketpair), SCMP_SYS(connect), SCMP_SYS(bind), SCMP_SYS(listen),
        SCMP_SYS(accept), SCMP_SYS(accept4),
        SCMP_SYS(chmod), SCMP_SYS(fchmod), SCMP_SYS(fchmodat), SCMP_SYS(chown), SCMP_SYS(fchown),
        SCMP_SYS(lchown), SCMP_SYS(fchownat), SCMP_SYS(utime), SCMP_SYS(utimes), SCMP_SYS(utimensat),
        SCMP_SYS(futimesat), SCMP_SYS(setxattr), SCMP_SYS(lsetxattr), SCMP_SYS(fsetxattr),
        SCMP_SYS(removexattr), SCMP_SYS(lremovexattr), SCMP_SYS(fremovexattr),
        SCMP_SYS(tkill), SCMP_SYS(pidfd_send_signal), SCMP_SYS(pidfd_open), SCMP_SYS(pidfd_getfd),
        SCMP_SYS(execve), SCMP_SYS(execveat), SCMP_SYS(fork), SCMP_SYS(vfork),
        SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev),
        SCMP_SYS(mount), SCMP_SYS(umount2), SCMP_SYS(pivot_root), SCMP_SYS(chroot), SCMP_SYS(unshare),
        SCMP_SYS(setns), SCMP_SYS(fsopen), SCMP_SYS(fsmount), SCMP_SYS(move_mount), SCMP_SYS(open_tree),
        SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(bpf), SCMP_SYS(perf_event_open),
        SCMP_SYS(userfaultfd), SCMP_SYS(open_by_handle_at), SCMP_SYS(name_to_handle_at),
        SCMP_SYS(kexec_load), SCMP_SYS(kexec_file_load), SCMP_SYS(init_module), SCMP_SYS(finit_module),
        SCMP_SYS(delete_module), SCMP_SYS(reboot), SCMP_SYS(swapon), SCMP_SYS(swapoff), SCMP_SYS(acct),
        SCMP_SYS(syslog), SCMP_SYS(quotactl),
#ifdef __x86_64__
        SANDBOX_NR_FCHMODAT2, SANDBOX_NR_SETXATTRAT, SANDBOX_NR_REMOVEXATTRAT,
#endif
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

// MARK: - Capabilities

// A worker started by root leaves uid 0 for CSANDBOX_WORKER_ID (no groups), so
// that nothing it does is done as root even where a file's mode would let root
// through; not dumpable, so no other process of that id may trace it or read its
// /proc files. A worker started by another user keeps that user's id (mapped to
// itself in its user namespace). 0, or a negative errno.
static int leave_root(void) {
    if (getuid() != 0 && geteuid() != 0) return 0;
    pid_t parent = getppid();
    if (setgroups(0, NULL) != 0) return -errno;
    if (setresgid(CSANDBOX_WORKER_ID, CSANDBOX_WORKER_ID, CSANDBOX_WORKER_ID) != 0) return -errno;
    if (setresuid(CSANDBOX_WORKER_ID, CSANDBOX_WORKER_ID, CSANDBOX_WORKER_ID) != 0) return -errno;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return -errno;
    // A change of credentials clears the parent-death signal: set again, so the
    // worker still dies with the process that started it.
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return -errno;
    if (getppid() != parent) _exit(70);
    return 0;
}

int CSandbox_leave_root(void) { return leave_root(); }

static int drop_capabilities(void) {
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL && errno != EPERM) return -errno;
    }
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    // After the bounding set (which takes CAP_SETPCAP), before the rest: leaving
    // uid 0 clears the permitted set on its own.
    int left = leave_root();
    if (left != 0) return left;
    struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &header, data) != 0) return -errno;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -errno;
    return 0;
}

// MARK: - Namespaces and a root of its own

static int namespace_flags(void) {
    int flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWUTS;
    if (geteuid() != 0) flags |= CLONE_NEWUSER;
    return flags;
}

int CSandbox_namespaces_available(char *why, size_t why_size) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return 0;
    pid_t child = fork();
    if (child == 0) {
        int code = unshare(namespace_flags()) == 0 ? 0 : errno;
        (void)!write(report[1], &code, sizeof(code));
        _exit(0);
    }
    close(report[1]);
    int code = EAGAIN;
    if (child > 0) {
        if (read(report[0], &code, sizeof(code)) != sizeof(code)) code = EIO;
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    close(report[0]);
    if (code != 0) say(why, why_size, "unshare", code);
    return code == 0;
}

static int write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int saved = errno;
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -saved;
}

static int mkdir_p(const char *path) {
    char buffer[4096];
    if (strlen(path) >= sizeof(buffer)) return -ENAMETOOLONG;
    strcpy(buffer, path);
    for (char *p = buffer + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buffer, 0755) != 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    if (mkdir(buffer, 0755) != 0 && errno != EEXIST) return -errno;
    return 0;
}

// The flags a bind mount keeps from the mount it copies: in a user namespace a
// remount may not clear them (they are locked).
static unsigned long kept_flags(const char *path) {
    struct statvfs info;
    if (statvfs(path, &info) != 0) return 0;
    unsigned long flags = 0;
    if (info.f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (info.f_flag & ST_NODEV) flags |= MS_NODEV;
    if (info.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (info.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (info.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (info.f_flag & ST_RELATIME) flags |= MS_RELATIME;
    return flags;
}

enum { READ_ONLY, WRITABLE, DEVICE };

// Binds the file or folder open as `fd` at `target` (relative to the new root):
// read-only, writable (no devices, nothing executed) or a device node.
static int bind_at(int fd, const char *target, int kind, int folder) {
    if (folder) {
        int made = mkdir_p(target);
        if (made != 0) return made;
    } else {
        int file = open(target, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (file < 0) return -errno;
        close(file);
    }
    char source[64];
    snprintf(source, sizeof(source), "/proc/self/fd/%d", fd);
    if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) != 0) return -errno;
    unsigned long flags = MS_BIND | MS_REMOUNT | kept_flags(target) | MS_NOSUID;
    if (kind == READ_ONLY) flags |= MS_RDONLY;
    else if (kind == WRITABLE) flags |= MS_NODEV | MS_NOEXEC;
    else flags |= MS_NOEXEC;
    if (mount(NULL, target, NULL, flags, NULL) != 0) return -errno;
    return 0;
}

typedef struct {
    const char *path;
    int folder;
    int kind;
    int fd;
} Binding;

// A root of its own, on a tmpfs: /usr (and the merged-/usr links), the loader's
// cache, the time zone, four devices, a /proc of its PID namespace, and the
// scratch folder; the user's files are not in it. Entered with pivot_root.
static int build_root(const CSandboxJail *jail, char *why, size_t why_size) {
    char localtime[4096];
    const char *zone = realpath("/etc/localtime", localtime) ? localtime : NULL;
    Binding bindings[] = {
        {"/usr", 1, READ_ONLY, -1},        {"/etc/ld.so.cache", 0, READ_ONLY, -1}, {zone, 0, READ_ONLY, -1},
        {"/dev/null", 0, DEVICE, -1},      {"/dev/zero", 0, DEVICE, -1},           {"/dev/urandom", 0, DEVICE, -1},
        {"/dev/random", 0, DEVICE, -1},    {jail->scratch, 1, WRITABLE, -1},       {jail->extra, 1, WRITABLE, -1},
    };
    const size_t count = sizeof(bindings) / sizeof(bindings[0]);
    // Open everything first: the tmpfs below may hide the paths themselves (a scratch folder under /tmp).
    for (size_t i = 0; i < count; i++) {
        if (bindings[i].path != NULL) bindings[i].fd = open(bindings[i].path, O_PATH | O_CLOEXEC);
    }
    int rc = 0;
    const char *base = "/tmp";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) rc = -errno;
    if (rc == 0 && mount("tmpfs", base, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") != 0) rc = -errno;
    if (rc == 0 && chdir(base) != 0) rc = -errno;
    for (size_t i = 0; i < count && rc == 0; i++) {
        if (bindings[i].fd < 0) continue;
        const char *relative = bindings[i].path + 1;
        if (bindings[i].path == zone) relative = "etc/localtime";
        if (strncmp(relative, "etc/", 4) == 0 && mkdir("etc", 0755) != 0 && errno != EEXIST) rc = -errno;
        if (strncmp(relative, "dev/", 4) == 0 && mkdir("dev", 0755) != 0 && errno != EEXIST) rc = -errno;
        if (rc == 0) rc = bind_at(bindings[i].fd, relative, bindings[i].kind, bindings[i].folder);
        if (rc != 0) say(why, why_size, bindings[i].path, -rc);
    }
    // Debian's merged /usr: /lib, /lib64, /bin, /sbin are links into it.
    const char *links[] = {"lib", "lib64", "lib32", "libx32", "bin", "sbin"};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]) && rc == 0; i++) {
        char host[64], target[4096];
        snprintf(host, sizeof(host), "/%s", links[i]);
        ssize_t n = readlink(host, target, sizeof(target) - 1);
        if (n <= 0) continue;
        target[n] = 0;
        if (symlink(target, links[i]) != 0) rc = -errno;
    }
    if (rc == 0 && (mkdir("proc", 0555) != 0 ||
                    mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)) {
        // Some containers hide parts of /proc, and then refuse a new one: go on without it.
        say(why, why_size, "a /proc of its own", errno);
    }
    for (size_t i = 0; i < count; i++) {
        if (bindings[i].fd >= 0) close(bindings[i].fd);
    }
    if (rc == 0 && syscall(SYS_pivot_root, ".", ".") != 0) rc = -errno;
    if (rc == 0 && umount2(".", MNT_DETACH) != 0) rc = -errno;
    if (rc == 0 && chdir("/") != 0) rc = -errno;
    if (rc == 0 && mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) != 0)
        rc = -errno;
    if (rc != 0) say(why, why_size, "a root of its own", -rc);
    return rc;
}

// The process outside the PID namespace: it waits for the worker and ends as it
// does, so the supervisor sees a crash as a crash.
static void wait_and_mirror(pid_t child) {
    syscall(SYS_close_range, 0U, ~0U, 0);
    drop_capabilities();
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) _exit(70);
    }
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    int number = WTERMSIG(status);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    signal(number, SIG_DFL);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, number);
    sigprocmask(SIG_UNBLOCK, &mask, NULL);
    kill(getpid(), number);
    _exit(128 + number);
}

int CSandbox_parent_death_signal(void) {
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) return -errno;
    if (getppid() != parent) _exit(70);
    return 0;
}

int CSandbox_jail(const CSandboxJail *jail, char *why, size_t why_size) {
    if (why && why_size) why[0] = 0;
    int layers = 0;
    // Ended with its parent, even one SIGKILLed.
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() != parent) _exit(70);
    if (getsid(0) == getpid() || setsid() >= 0) layers |= CSANDBOX_SESSION;
    if (jail->namespaces) {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        int flags = namespace_flags();
        if (unshare(flags) != 0) {
            say(why, why_size, "namespaces", errno);
        } else {
            int rc = 0;
            if (flags & CLONE_NEWUSER) {
                char map[64];
                rc = write_file("/proc/self/setgroups", "deny");
                snprintf(map, sizeof(map), "%u %u 1\n", uid, uid);
                if (rc == 0) rc = write_file("/proc/self/uid_map", map);
                snprintf(map, sizeof(map), "%u %u 1\n", gid, gid);
                if (rc == 0) rc = write_file("/proc/self/gid_map", map);
            }
            if (rc != 0) return rc;
            pid_t child = fork();
            if (child < 0) return -errno;
            // The process that waits outside holds nothing, and not uid 0 either.
            if (child > 0) {
                leave_root();
                wait_and_mirror(child);
            }
            // The worker: process 1 of its PID namespace, ended with the process that waits for it.
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
            setsid();
            layers |= CSANDBOX_NAMESPACES;
            if (build_root(jail, why, why_size) == 0) layers |= CSANDBOX_MOUNTS;
        }
    }
    int dropped = drop_capabilities();
    if (dropped == 0) layers |= CSANDBOX_CAPABILITIES;
    else say(why, why_size, "capabilities", -dropped);
    if (getuid() != 0 && geteuid() != 0) layers |= CSANDBOX_NOT_ROOT;
    else say(why, why_size, "uid 0", EPERM);
    // Only 0–2 (stdin on /dev/null, stdout and stderr on the supervisor's pipe) and the control socket stay.
    int keep = jail->control_fd;
    if (keep > 3) syscall(SYS_close_range, 3U, (unsigned)keep - 1, 0);
    syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0);
    return layers;
}

// MARK: - Descriptors over a socket, sealed memory files

ssize_t CSandbox_send(int socket, const void *bytes, size_t length, int fd) {
    struct iovec io = {.iov_base = (void *)bytes, .iov_len = length};
    struct msghdr message = {.msg_iov = &io, .msg_iovlen = 1};
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    if (fd >= 0) {
        memset(&control, 0, sizeof(control));
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof(control.buffer);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &fd, sizeof(int));
    }
    ssize_t sent;
    do {
        sent = sendmsg(socket, &message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    return sent < 0 ? -errno : sent;
}

ssize_t CSandbox_receive(int socket, void *bytes, size_t length, int *fd) {
    *fd = -1;
    struct iovec io = {.iov_base = bytes, .iov_len = length};
    union {
        char buffer[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr message = {
        .msg_iov = &io, .msg_iovlen = 1, .msg_control = control.buffer, .msg_controllen = sizeof(control.buffer)};
    ssize_t received;
    do {
        received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    } while (received < 0 && errno == EINTR);
    if (received < 0) return -errno;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int passed;
            memcpy(&passed, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (*fd < 0) *fd = passed;
            else close(passed);
        }
    }
    if (message.msg_flags & MSG_CTRUNC) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
        return -EMSGSIZE;
    }
    return received;
}

int CSandbox_memfd(const char *name) {
    int fd = (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    return fd < 0 ? -errno : fd;
}

static const int all_seals = F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;

int CSandbox_seal(int fd) { return fcntl(fd, F_ADD_SEALS, all_seals) == 0 ? 0 : -errno; }

int CSandbox_is_sealed(int fd) {
    int seals = fcntl(fd, F_GET_SEALS);
    return seals >= 0 && (seals & all_seals) == all_seals;
}
