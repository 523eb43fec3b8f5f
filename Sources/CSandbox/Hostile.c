// The tests' hostile worker: code that runs inside a confined worker and tries
// what an exploited decoder would (the fault-injection hook, THUMBPIPE_FAULT=
// hostile:TEXT). Compiled into debug builds only; a release build's
// CSandbox_hostile does nothing.
#define _GNU_SOURCE
#include "CSandbox.h"

#include <errno.h>

#ifndef THUMBPIPE_FAULTS

int CSandbox_hostile(const CSandboxHostile *targets, char *report, size_t report_size, char *leak, size_t leak_size) {
    (void)targets, (void)report, (void)report_size, (void)leak, (void)leak_size;
    return -ENOSYS;
}

#else

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

typedef struct {
    char *text;
    size_t size;
    int escaped;
} Report;

static void note(Report *r, const char *what, int ok) {
    size_t used = strlen(r->text);
    if (used + 1 >= r->size) return;
    if (ok) r->escaped++;
    snprintf(r->text + used, r->size - used, "%s%s %s%s%s", used ? "; " : "", ok ? "did" : "refused", what,
             ok ? "" : ": ", ok ? "" : strerror(errno));
}

static void try_tiocsti(Report *r) {
    const char *command = "echo thumbpipe-hostile-typed\n";
    char what[64];
    for (int fd = 0; fd <= 2; fd++) {
        int ok = 1;
        for (const char *c = command; *c && ok; c++) ok = ioctl(fd, TIOCSTI, c) == 0;
        snprintf(what, sizeof(what), "TIOCSTI on fd %d", fd);
        note(r, what, ok);
    }
    int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    int ok = tty >= 0;
    for (const char *c = command; *c && ok; c++) ok = ioctl(tty, TIOCSTI, c) == 0;
    note(r, "TIOCSTI on /dev/tty", ok);
    if (tty >= 0) close(tty);
}

static void try_metadata(Report *r, const char *victim) {
    if (!victim) return;
    note(r, "chmod", chmod(victim, 0777) == 0);
    note(r, "chown", chown(victim, 65534, 65534) == 0);
    struct timespec times[2] = {{0, 0}, {0, 0}};
    note(r, "utimensat", utimensat(AT_FDCWD, victim, times, 0) == 0);
    note(r, "setxattr", setxattr(victim, "user.thumbpipe-hostile", "1", 1, 0) == 0);
    int fd = open(victim, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        note(r, "fchmod", fchmod(fd, 0777) == 0);
        close(fd);
    }
    char beside[4096];
    snprintf(beside, sizeof(beside), "%s.thumbpipe-escape", victim);
    fd = open(beside, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    note(r, "create a file beside the victim", fd >= 0);
    if (fd >= 0) close(fd);
    note(r, "unlink the victim", unlink(victim) == 0);
}

static void try_signals(Report *r, pid_t process) {
    pid_t parent = getppid();
    if (parent > 1) {
        note(r, "SIGSTOP to the parent", kill(parent, SIGSTOP) == 0);
        kill(parent, SIGCONT);
    }
    if (process > 0) {
        note(r, "SIGSTOP to another process", kill(process, SIGSTOP) == 0);
        note(r, "SIGKILL to another process", kill(process, SIGKILL) == 0);
        note(r, "tgkill another process", syscall(SYS_tgkill, process, process, SIGKILL) == 0);
        note(r, "ptrace another process", ptrace(PTRACE_ATTACH, process, 0, 0) == 0);
    }
    // Not kill(-1) or kill(0): a regression there would take the test machine with it.
}

static void try_network(Report *r, int udp_port, const char *message) {
    long ring = syscall(SYS_io_uring_setup, 4, (char[120]){0});
    note(r, "io_uring_setup", ring >= 0);
    if (ring >= 0) close((int)ring);
    int udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    note(r, "a UDP socket", udp >= 0);
    if (udp >= 0 && udp_port > 0) {
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)udp_port)};
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        note(r, "sendto 127.0.0.1 over UDP",
             sendto(udp, message, strlen(message), 0, (struct sockaddr *)&to, sizeof(to)) >= 0);
    }
    if (udp >= 0) close(udp);
    int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    note(r, "a TCP socket", tcp >= 0);
    if (tcp >= 0) close(tcp);
}

static void try_unix(Report *r, const char *path, const char *abstract, const char *message) {
    for (int which = 0; which < 2; which++) {
        const char *name = which == 0 ? path : abstract;
        if (!name) continue;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un to = {.sun_family = AF_UNIX};
        size_t length = strlen(name);
        if (length > sizeof(to.sun_path) - 2) length = sizeof(to.sun_path) - 2;
        memcpy(to.sun_path + (which == 1), name, length);
        socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + length + (which == 1));
        int ok = fd >= 0 && connect(fd, (struct sockaddr *)&to, size) == 0;
        if (ok) (void)!write(fd, message, strlen(message));
        note(r, which == 0 ? "connect to a UNIX socket by path" : "connect to an abstract UNIX socket", ok);
        if (fd >= 0) close(fd);
    }
}

static void try_read(Report *r, const char *path, char *leak, size_t leak_size) {
    if (!path) return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char what[4200];
    snprintf(what, sizeof(what), "read %s", path);
    ssize_t n = fd >= 0 ? read(fd, leak, leak_size - 1) : -1;
    note(r, what, n > 0);
    if (n > 0) {
        leak[n] = 0;
        char *newline = strchr(leak, '\n');
        if (newline) *newline = 0;
    }
    if (fd >= 0) close(fd);
}

static void try_write(Report *r, const char *folder) {
    if (!folder) return;
    char path[4200];
    snprintf(path, sizeof(path), "%s/thumbpipe-planted", folder);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    note(r, "plant a file in another worker's scratch folder", fd >= 0);
    if (fd >= 0) close(fd);
}

static void try_exec(Report *r) {
    pid_t child = fork();
    if (child == 0) _exit(0);
    note(r, "fork", child > 0);
    if (child > 0) waitpid(child, NULL, 0);
    char *argv[] = {"/bin/true", NULL};
    execv("/bin/true", argv);
    note(r, "exec /bin/true", 0);
}

int CSandbox_hostile(const CSandboxHostile *targets, char *report, size_t report_size, char *leak, size_t leak_size) {
    Report r = {report, report_size, 0};
    report[0] = 0;
    leak[0] = 0;
    try_read(&r, targets->secret, leak, leak_size);
    char shadow[256] = {0};
    try_read(&r, "/etc/shadow", shadow, sizeof(shadow));
    if (!leak[0] && shadow[0]) snprintf(leak, leak_size, "%s", shadow);
    const char *message = leak[0] ? leak : "thumbpipe-hostile";
    try_tiocsti(&r);
    try_metadata(&r, targets->victim);
    try_signals(&r, targets->process);
    try_network(&r, targets->udp_port, message);
    try_unix(&r, targets->unix_path, targets->unix_abstract, message);
    try_write(&r, targets->other_scratch);
    try_exec(&r);
    return r.escaped;
}

#endif
