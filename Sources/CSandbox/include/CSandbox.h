// Why this target exists: a worker confines itself before it reads an untrusted
// byte, with two kernel features Swift cannot reach directly: Landlock (three
// raw system calls and their structures, which glibc does not wrap) and a
// seccomp filter (built with libseccomp, whose rule calls are variadic). Each
// function returns 0 or a negative errno; nothing else lives here.
#ifndef CSANDBOX_H
#define CSANDBOX_H

/// The kernel's Landlock ABI version (1 and up), or a negative errno when
/// Landlock is missing or disabled.
int CSandbox_landlock_abi(void);

/// 1 when the kernel can install seccomp filters, else 0 (prctl is variadic:
/// Swift cannot call it).
int CSandbox_seccomp_available(void);

/// Restricts this process (and its threads) with Landlock: files and folders
/// may be read anywhere, written, created and removed only under `writable`
/// (and `/dev/null` written); nothing may be executed; with ABI 4 and later,
/// no TCP port may be bound or connected to. Sets no_new_privs first.
/// `also` (may be NULL) is a second writable folder: the tests' fault marker.
int CSandbox_landlock(const char *writable, const char *also);

/// Installs the seccomp filter: no sockets but AF_UNIX, no execve/execveat, no
/// new processes (fork, vfork, clone without CLONE_THREAD; clone3 is answered
/// ENOSYS so threads fall back to clone), no ptrace or process_vm_*, no mount,
/// namespace, module, BPF, keyring or reboot calls. Refused calls fail with EPERM.
int CSandbox_seccomp(void);

#endif
