// Why this target exists: a worker confines itself before it reads an untrusted
// byte, with kernel features Swift cannot reach directly: namespaces and mounts
// (unshare, mount and pivot_root take flags and structures only C spells),
// capabilities (capset has no glibc wrapper), Landlock (three raw system calls
// whose structures Debian 12's headers predate), a seccomp filter (libseccomp's
// rule calls are variadic), descriptors passed over a socket (SCM_RIGHTS is
// built with the CMSG_* macros) and sealed memory files (memfd_create and
// F_ADD_SEALS). Each function says what it returns on success (0, a flag, the
// layers' bits, an ABI version, a count of bytes or a descriptor); every
// failure is a negative errno. Nothing else lives here.
#ifndef CSANDBOX_H
#define CSANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/// The kernel's Landlock ABI version (1 and up), or a negative errno when
/// Landlock is missing or disabled.
int CSandbox_landlock_abi(void);

/// 1 when the kernel can install seccomp filters, else 0 (prctl is variadic:
/// Swift cannot call it).
int CSandbox_seccomp_available(void);

/// 1 when this process could give a child its own user (unless root), mount,
/// network, IPC and PID namespaces, else 0; `why` gets the kernel's reason.
/// Tried in a short-lived child, so nothing here changes.
int CSandbox_namespaces_available(char *why, size_t why_size);

/// The layers a jail got (bits of CSandbox_jail's result).
enum {
    CSANDBOX_NAMESPACES = 1,  ///< user (unless root), mount, network, IPC and PID namespaces
    CSANDBOX_MOUNTS = 2,      ///< a root of its own: /usr read-only, the scratch folder, nothing else
    CSANDBOX_CAPABILITIES = 4,  ///< every capability dropped, no_new_privs set
    CSANDBOX_SESSION = 8,     ///< its own session: no controlling terminal, no shared process group
    CSANDBOX_NOT_ROOT = 16,   ///< not uid 0: a worker started by root runs as CSANDBOX_WORKER_ID
};

/// The user and group id a worker started by root runs as: nobody's, 65534.
#define CSANDBOX_WORKER_ID 65534

/// Leaves uid 0 for CSANDBOX_WORKER_ID when the process has it (a worker with
/// --sandbox off, where the jail does this); 0, or a negative errno.
int CSandbox_leave_root(void);

/// What a worker's jail holds.
typedef struct {
    /// The worker's private scratch folder (the only one it may write to).
    const char *scratch;
    /// A second writable folder (the tests' fault marker's), or NULL.
    const char *extra;
    /// Make namespaces (and a root of their own) when the kernel allows.
    int namespaces;
    /// The control socket, kept open; every other descriptor but 0–2 is closed.
    int control_fd;
} CSandboxJail;

/// Puts the calling process (a worker, before it has any thread) in its jail:
/// a session of its own, PR_SET_PDEATHSIG, and with `namespaces` new
/// namespaces; the PID namespace needs a fork, so the caller's process stays
/// outside, waits for its child and exits as it does (a signal included), and
/// only the child returns. Then a root of its own, every capability dropped,
/// no_new_privs, and every descriptor but 0–2 and `control_fd` closed.
/// Returns the CSANDBOX_* bits it got (`why` says why one is missing), or a
/// negative errno when the process cannot go on.
int CSandbox_jail(const CSandboxJail *jail, char *why, size_t why_size);

/// PR_SET_PDEATHSIG with SIGKILL, alone (a worker with --sandbox off); 0 or a negative errno.
int CSandbox_parent_death_signal(void);

/// Restricts this process (and its threads) with Landlock: files and folders
/// may be read only beneath the `count` paths of `readable`, written, created
/// and removed only beneath `writable` (and `extra`, which may be NULL);
/// `/dev/null` written; nothing executed; from ABI 4 on, no TCP port bound or
/// connected to; from ABI 5 on, no ioctl on a device opened after; from ABI 6
/// on, no signal to a process outside and no abstract UNIX socket outside.
/// Sets no_new_privs first. Returns the ABI used, or a negative errno.
int CSandbox_landlock(const char *const *readable, int count, const char *writable, const char *extra);

/// Installs the seccomp filter (the table in CSandbox.c): `control_fd` is the
/// one socket the worker may send and receive on. Refused calls fail with EPERM
/// (clone3 with ENOSYS, so threads fall back to clone). Returns 0, or a negative errno.
int CSandbox_seccomp(int control_fd);

/// Sends `length` bytes on a UNIX socket with `fd` attached (none when < 0).
/// Returns the bytes sent, or a negative errno.
ssize_t CSandbox_send(int socket, const void *bytes, size_t length, int fd);

/// Receives up to `length` bytes; a descriptor sent with them is stored in
/// `*fd` (else -1; extra descriptors are closed). Returns the bytes received
/// (0 at end of stream), or a negative errno.
ssize_t CSandbox_receive(int socket, void *bytes, size_t length, int *fd);

/// A new memory file (memfd, close-on-exec) that can be sealed; or a negative errno.
int CSandbox_memfd(const char *name);

/// Seals a memory file against every change (write, grow, shrink, more seals).
int CSandbox_seal(int fd);

/// 1 when `fd` is a memory file sealed against write, grow, shrink and more seals, else 0.
int CSandbox_is_sealed(int fd);

/// The targets of the tests' hostile worker (debug builds only): what an
/// exploited decoder would go for. Paths and names may be NULL, ports 0.
typedef struct {
    /// A file outside the sources and the output: its mode, owner, times and
    /// xattrs are attacked, and a file is created beside it.
    const char *victim;
    /// A file whose first line is to be read and leaked (as /etc/shadow is tried).
    const char *secret;
    /// A process that is not the worker's (to be stopped and killed), or 0.
    pid_t process;
    /// A UDP port on 127.0.0.1 to send the leak to, or 0.
    int udp_port;
    /// A UNIX socket by path, and one by abstract name, to connect to.
    const char *unix_path;
    const char *unix_abstract;
    /// Another worker's scratch folder, to plant a file in.
    const char *other_scratch;
} CSandboxHostile;

/// Runs, in this process, what an exploited decoder would try against
/// `targets`, and says in `report` what was refused and what went through
/// (the tests judge by what changed outside, never by this). `leak` gets the
/// first line of any secret that could be read. Returns how many went through;
/// -ENOSYS in a release build, where it does nothing.
int CSandbox_hostile(const CSandboxHostile *targets, char *report, size_t report_size, char *leak, size_t leak_size);

#endif
