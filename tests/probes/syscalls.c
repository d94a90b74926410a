/*
 * Syscall probe for tests/syscalls.rs: run inside a sandbox, it makes each call raw (no libc
 * fallbacks) and prints one line per probe, `name=OK` or `name=<ERRNO NAME>`, flushed at
 * once, then `done`. A crash shows as a missing `done`, never as a refusal.
 * A probe run in a child (those that would change the probe itself) reports
 * `KILLED_BY_SIG<n>` when the child was killed. `probe mknod PATH c|b MAJOR MINOR` makes a
 * device node and opens it instead.
 *
 * Built by the test with `gcc -static -O2 -pthread`. Every probe is harmless where it is
 * allowed (nothing system-wide is changed), so running it on a host is safe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#define SYS_io_uring_enter 426
#define SYS_io_uring_register 427
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* An "errno" that says the child was killed by signal (errno - KILLED). */
#define KILLED 10000

static const char *errname(int e) {
    if (e > KILLED) {
        static char sig[32];
        snprintf(sig, sizeof sig, "KILLED_BY_SIG%d", e - KILLED);
        return sig;
    }
    switch (e) {
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    case EBADF: return "EBADF";
    case EFAULT: return "EFAULT";
    case ENOENT: return "ENOENT";
    case ENOMEM: return "ENOMEM";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EBUSY: return "EBUSY";
    case ESTALE: return "ESTALE";
    case ENODEV: return "ENODEV";
    case ENOTDIR: return "ENOTDIR";
    case EEXIST: return "EEXIST";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "E%d", e);
        return buf;
    }
    }
}

/* Prints `name=OK` when `ret` is not -1, else the errno's name. */
static void report(const char *name, long ret) {
    if (ret == -1)
        printf("%s=%s\n", name, errname(errno));
    else
        printf("%s=OK\n", name);
    fflush(stdout);
}

/* A raw clone (x86_64 argument order: flags, stack, parent_tid, child_tid, tls) whose child
 * exits at once; -1 and errno on failure. */
static long raw_clone(unsigned long flags) {
    long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid((pid_t)pid, NULL, 0);
    return pid;
}

struct clone3_args {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static long raw_clone3(uint64_t flags) {
    struct clone3_args args;
    memset(&args, 0, sizeof args);
    args.flags = flags;
    args.exit_signal = SIGCHLD;
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid((pid_t)pid, NULL, 0);
    return pid;
}

static void *thread_main(void *arg) {
    return arg;
}

static long run_thread(void) {
    pthread_t t;
    int e = pthread_create(&t, NULL, thread_main, NULL);
    if (e != 0) {
        errno = e;
        return -1;
    }
    pthread_join(t, NULL);
    return 0;
}

/* Runs `call` in a child, so that a call that succeeds (unshare, personality) does not change
 * the probe itself; its result as the child reports it through the exit status. */
static long in_child(long (*call)(void)) {
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(call() == -1 ? (errno & 0xff) : 0);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
        errno = KILLED + WTERMSIG(status);
        return -1;
    }
    if (WEXITSTATUS(status) == 0)
        return 0;
    errno = WEXITSTATUS(status);
    return -1;
}

/* getpid through the 32-bit entry (int 0x80, i386 number 20): what a 32-bit program does. */
static long compat_getpid(void) {
#if defined(__x86_64__)
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    if (ret < 0) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
#else
    return syscall(SYS_getpid);
#endif
}

static long unshare_user(void) {
    return syscall(SYS_unshare, CLONE_NEWUSER);
}

static long unshare_net(void) {
    return syscall(SYS_unshare, CLONE_NEWNET);
}

static long personality_exec(void) {
    return syscall(SYS_personality, 0x0400000UL /* READ_IMPLIES_EXEC */);
}

static long run_fork(void) {
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return pid;
}

static long write_file(void) {
    int fd = open("/tmp/probe-file", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    long n = write(fd, "x\n", 2);
    close(fd);
    return n == 2 ? 0 : -1;
}

static long map_anonymous(void) {
    void *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    memset(p, 1, 1 << 20);
    return munmap(p, 1 << 20);
}

static long socket_of(int family, int type) {
    int fd = socket(family, type, 0);
    if (fd >= 0)
        close(fd);
    return fd;
}

static long setns_net(void) {
    int fd = open("/proc/self/ns/net", O_RDONLY);
    if (fd < 0)
        return -1;
    long r = syscall(SYS_setns, fd, CLONE_NEWNET);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

static long probe_mount(void) {
    mkdir("/tmp/probe-mnt", 0755);
    long r = syscall(SYS_mount, "none", "/tmp/probe-mnt", "tmpfs", 0UL, NULL);
    if (r == 0)
        umount2("/tmp/probe-mnt", MNT_DETACH);
    return r;
}

static long io_uring(void) {
    struct io_uring_params params;
    memset(&params, 0, sizeof params);
    long fd = syscall(SYS_io_uring_setup, 8, &params);
    if (fd >= 0)
        close((int)fd);
    return fd;
}

static long bpf_map(void) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    if (fd >= 0)
        close((int)fd);
    return fd;
}

static long perf_event(void) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.exclude_kernel = 1;
    long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd >= 0)
        close((int)fd);
    return fd;
}

static long open_by_handle(void) {
    /* A handle of / as name_to_handle_at returns it; the refusal must come before the
     * kernel ever looks at it. */
    struct {
        unsigned int handle_bytes;
        int handle_type;
        unsigned char f_handle[128];
    } handle;
    int mount_id;
    memset(&handle, 0, sizeof handle);
    handle.handle_bytes = 128;
    if (syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &handle, &mount_id, 0) != 0)
        handle.handle_bytes = 8;
    int root = open("/", O_RDONLY | O_DIRECTORY);
    long fd = syscall(SYS_open_by_handle_at, root, &handle, O_RDONLY);
    int e = errno;
    if (fd >= 0)
        close((int)fd);
    close(root);
    errno = e;
    return fd;
}

static long probe_userfaultfd(void) {
    long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (fd >= 0)
        close((int)fd);
    return fd;
}

static long keyctl_join(void) {
    /* KEYCTL_JOIN_SESSION_KEYRING (1) with an anonymous keyring. */
    return syscall(SYS_keyctl, 1, 0, 0, 0, 0);
}

static long probe_add_key(void) {
    return syscall(SYS_add_key, "user", "probe", "x", 1, -3 /* KEY_SPEC_SESSION_KEYRING */);
}

static long probe_request_key(void) {
    return syscall(SYS_request_key, "user", "probe", NULL, 0);
}

static long probe_fsopen(void) {
    long fd = syscall(SYS_fsopen, "tmpfs", 0);
    if (fd >= 0)
        close((int)fd);
    return fd;
}

static long probe_open_tree(void) {
    long fd = syscall(SYS_open_tree, AT_FDCWD, "/tmp", 1 /* OPEN_TREE_CLONE */);
    if (fd >= 0)
        close((int)fd);
    return fd;
}

static long probe_mount_setattr(void) {
    /* struct mount_attr: attr_set, attr_clr, propagation, userns_fd. */
    uint64_t attr[4] = {0, 0, 0, 0};
    return syscall(SYS_mount_setattr, AT_FDCWD, "/tmp", 0, attr, sizeof attr);
}

/* `mknod PATH c|b MAJOR MINOR`: makes the node, then opens it for reading. */
static int make_and_open(char **argv) {
    mode_t kind = argv[3][0] == 'b' ? S_IFBLK : S_IFCHR;
    unsigned int major = (unsigned int)atoi(argv[4]), minor = (unsigned int)atoi(argv[5]);
    unlink(argv[2]);
    long made = mknod(argv[2], kind | 0666, makedev(major, minor));
    report("mknod", made);
    if (made == 0) {
        int fd = open(argv[2], O_RDONLY | O_NONBLOCK);
        report("open", fd);
        if (fd >= 0)
            close(fd);
        unlink(argv[2]);
    }
    printf("done\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 6 && strcmp(argv[1], "mknod") == 0)
        return make_and_open(argv);
    /* Controls: what every program does; these must succeed. */
    report("getpid", syscall(SYS_getpid));
    report("write_file", write_file());
    report("mmap", map_anonymous());
    report("fork", run_fork());
    report("clone_plain", raw_clone(0));
    report("thread", run_thread());
    report("socket_inet", socket_of(AF_INET, SOCK_STREAM));
    report("socket_unix", socket_of(AF_UNIX, SOCK_STREAM));
    report("personality_query", syscall(SYS_personality, 0xffffffffUL));
    report("compat_getpid", in_child(compat_getpid));

    /* Namespaces: clone's flags are filtered; unshare and setns need SYS_ADMIN. */
    report("clone_newuser", raw_clone(CLONE_NEWUSER));
    report("clone_newns", raw_clone(CLONE_NEWNS));
    report("clone_newnet", raw_clone(CLONE_NEWNET));
    report("clone_newpid", raw_clone(CLONE_NEWPID));
    report("clone3_plain", raw_clone3(0));
    report("clone3_newuser", raw_clone3(CLONE_NEWUSER));
    report("unshare_user", in_child(unshare_user));
    report("unshare_net", in_child(unshare_net));
    report("setns", setns_net());

    /* Mounts. */
    report("mount", probe_mount());
    report("umount", syscall(SYS_umount2, "/tmp/probe-not-a-mount", 0));
    report("fsopen", probe_fsopen());
    report("open_tree", probe_open_tree());
    report("mount_setattr", probe_mount_setattr());
    report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));

    /* Kernel attack surface. */
    report("io_uring_setup", io_uring());
    report("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
    report("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0));
    report("bpf", bpf_map());
    report("perf_event_open", perf_event());
    report("userfaultfd", probe_userfaultfd());
    report("open_by_handle_at", open_by_handle());
    report("keyctl", in_child(keyctl_join));
    report("add_key", probe_add_key());
    report("request_key", probe_request_key());
    report("socket_vsock", socket_of(AF_VSOCK, SOCK_STREAM));
    report("personality_exec", in_child(personality_exec));
    report("init_module", syscall(SYS_init_module, NULL, 0, ""));

    printf("done\n");
    return 0;
}
