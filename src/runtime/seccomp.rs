//! The default seccomp profile of sandboxes: an allow-list equivalent to the containerd/moby
//! default (`seccomp/default.json` of github.com/moby/profiles, 3c28324 of 2026-05-06).
//! Anything not listed fails with EPERM; a few syscalls are allowed only when the sandbox
//! holds the capability that makes them legitimate; `clone` is allowed without namespace
//! flags unless the sandbox holds SYS_ADMIN; `clone3` (unless SYS_ADMIN) and io_uring fail
//! with ENOSYS, so that libc and runtimes fall back to `clone` and to epoll or threads
//! instead of failing. Where it departs from moby's: io_uring is ENOSYS rather than EPERM,
//! and the filter covers the native architecture only (see `architectures`).
//!
//! Names the runtime's libseccomp does not know (newer or other-architecture syscalls) are
//! skipped by the runtime; runc makes syscalls newer than the profile's newest return ENOSYS.
use std::collections::HashSet;

use oci_spec::runtime::{
    Arch, Capability, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder,
    LinuxSeccompBuilder, LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};

use crate::runtime::RuntimeError;
use crate::shared::capabilities::parse_capability;

/// Syscalls every sandbox may make (moby's unconditional list).
#[rustfmt::skip]
pub const ALLOWED: &[&str] = &[
    "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk", "cachestat", "capget",
    "capset", "chdir", "chmod", "chown", "chown32", "clock_adjtime", "clock_adjtime64",
    "clock_getres", "clock_getres_time64", "clock_gettime", "clock_gettime64", "clock_nanosleep",
    "clock_nanosleep_time64", "close", "close_range", "connect", "copy_file_range", "creat", "dup",
    "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
    "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat",
    "exit", "exit_group", "faccessat", "faccessat2", "fadvise64", "fadvise64_64", "fallocate",
    "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchown32", "fchownat",
    "fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr",
    "fsetxattr", "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate",
    "ftruncate64", "futex", "futex_requeue", "futex_time64", "futex_wait", "futex_waitv",
    "futex_wake", "futimesat", "getcpu", "getcwd", "getdents", "getdents64", "getegid",
    "getegid32", "geteuid", "geteuid32", "getgid", "getgid32", "getgroups", "getgroups32",
    "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
    "getrandom", "getresgid", "getresgid32", "getresuid", "getresuid32", "getrlimit",
    "get_robust_list", "getrusage", "getsid", "getsockname", "getsockopt", "get_thread_area",
    "gettid", "gettimeofday", "getuid", "getuid32", "getxattr", "getxattrat", "inotify_add_watch",
    "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel", "ioctl", "io_destroy",
    "io_getevents", "io_pgetevents", "io_pgetevents_time64", "ioprio_get", "ioprio_set",
    "io_setup", "io_submit", "ipc", "kill", "landlock_add_rule", "landlock_create_ruleset",
    "landlock_restrict_self", "lchown", "lchown32", "lgetxattr", "link", "linkat", "listen",
    "listmount", "listxattr", "listxattrat", "llistxattr", "_llseek", "lremovexattr", "lseek",
    "lsetxattr", "lstat", "lstat64", "madvise", "map_shadow_stack", "membarrier", "memfd_create",
    "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2",
    "mlockall", "mmap", "mmap2", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
    "mq_timedreceive", "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64",
    "mq_unlink", "mremap", "mseal", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock",
    "munlockall", "munmap", "name_to_handle_at", "nanosleep", "newfstatat", "_newselect", "open",
    "openat", "openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc",
    "pkey_free", "pkey_mprotect", "poll", "ppoll", "ppoll_time64", "prctl", "pread64", "preadv",
    "preadv2", "prlimit64", "process_mrelease", "pselect6", "pselect6_time64", "pwrite64",
    "pwritev", "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recv",
    "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages", "removexattr",
    "removexattrat", "rename", "renameat", "renameat2", "restart_syscall", "riscv_hwprobe",
    "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
    "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo", "sched_getaffinity", "sched_getattr", "sched_getparam",
    "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
    "sched_rr_get_interval", "sched_rr_get_interval_time64", "sched_setaffinity", "sched_setattr",
    "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select", "semctl", "semget",
    "semop", "semtimedop", "semtimedop_time64", "send", "sendfile", "sendfile64", "sendmmsg",
    "sendmsg", "sendto", "setfsgid", "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32",
    "setgroups", "setgroups32", "setitimer", "setpgid", "setpriority", "setregid", "setregid32",
    "setresgid", "setresgid32", "setresuid", "setresuid32", "setreuid", "setreuid32", "setrlimit",
    "set_robust_list", "setsid", "setsockopt", "set_thread_area", "set_tid_address", "setuid",
    "setuid32", "setxattr", "setxattrat", "shmat", "shmctl", "shmdt", "shmget", "shutdown",
    "sigaltstack", "signalfd", "signalfd4", "sigprocmask", "sigreturn", "socketcall", "socketpair",
    "splice", "stat", "stat64", "statfs", "statfs64", "statmount", "statx", "symlink", "symlinkat",
    "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create",
    "timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64", "timer_settime",
    "timer_settime64", "timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime",
    "timerfd_settime64", "times", "tkill", "truncate", "truncate64", "ugetrlimit", "umask",
    "uname", "unlink", "unlinkat", "uretprobe", "utime", "utimensat", "utimensat_time64", "utimes",
    "vfork", "vmsplice", "wait4", "waitid", "waitpid", "write", "writev",
];

/// Allowed by moby from kernel 4.8 on, where ptrace can no longer be used to bypass seccomp
/// (every kernel sbx runs on is newer). The kernel still confines them to processes of the
/// same user in the sandbox's own pid namespace.
const ALLOWED_SINCE_4_8: &[&str] = &["process_vm_readv", "process_vm_writev", "ptrace"];

/// Architecture-specific syscalls, by `std::env::consts::ARCH` of the host.
const ALLOWED_BY_ARCH: &[(&str, &[&str])] = &[
    ("x86_64", &["arch_prctl", "modify_ldt"]),
    ("x86", &["modify_ldt"]),
    (
        "aarch64",
        &[
            "arm_fadvise64_64",
            "arm_sync_file_range",
            "sync_file_range2",
            "breakpoint",
            "cacheflush",
            "set_tls",
        ],
    ),
    ("powerpc64", &["sync_file_range2", "swapcontext"]),
    (
        "s390x",
        &[
            "s390_pci_mmio_read",
            "s390_pci_mmio_write",
            "s390_runtime_instr",
        ],
    ),
    ("riscv64", &["riscv_flush_icache"]),
];

/// Syscalls allowed only when the sandbox holds the capability (a syscall may be listed under
/// several). Without it they fail with EPERM, as they would for lack of the capability.
const ALLOWED_WITH_CAPABILITY: &[(&str, &[&str])] = &[
    ("DAC_READ_SEARCH", &["open_by_handle_at"]),
    (
        "SYS_ADMIN",
        &[
            "bpf",
            "clone",
            "clone3",
            "fanotify_init",
            "fsconfig",
            "fsmount",
            "fsopen",
            "fspick",
            "lookup_dcookie",
            "lsm_get_self_attr",
            "lsm_list_modules",
            "lsm_set_self_attr",
            "mount",
            "mount_setattr",
            "move_mount",
            "open_tree",
            "perf_event_open",
            "quotactl",
            "quotactl_fd",
            "setdomainname",
            "sethostname",
            "setns",
            "syslog",
            "umount",
            "umount2",
            "unshare",
        ],
    ),
    ("SYS_BOOT", &["reboot"]),
    ("SYS_CHROOT", &["chroot"]),
    (
        "SYS_MODULE",
        &["delete_module", "init_module", "finit_module"],
    ),
    ("SYS_PACCT", &["acct"]),
    (
        "SYS_PTRACE",
        &[
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "process_vm_readv",
            "process_vm_writev",
            "ptrace",
        ],
    ),
    ("SYS_RAWIO", &["iopl", "ioperm"]),
    (
        "SYS_TIME",
        &["settimeofday", "stime", "clock_settime", "clock_settime64"],
    ),
    ("SYS_TTY_CONFIG", &["vhangup"]),
    (
        "SYS_NICE",
        &[
            "get_mempolicy",
            "mbind",
            "set_mempolicy",
            "set_mempolicy_home_node",
        ],
    ),
    ("SYSLOG", &["syslog"]),
    ("BPF", &["bpf"]),
    ("PERFMON", &["perf_event_open"]),
];

/// The flags of `clone` that make new namespaces: CLONE_NEWNS | CLONE_NEWCGROUP |
/// CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET. Without
/// SYS_ADMIN, `clone` is allowed only when none of them is set (threads and forks are).
pub const CLONE_NAMESPACE_FLAGS: u64 = 0x7E02_0000;

/// Refused with ENOSYS for every sandbox: io_uring bypasses the syscall filter (its
/// operations are not syscalls) and has been a steady source of kernel exploits; programs
/// that probe for it fall back to epoll or threads on ENOSYS.
const ENOSYS: &[&str] = &["io_uring_setup", "io_uring_enter", "io_uring_register"];

/// Socket families allowed, as moby does: everything but AF_ALG (38) and AF_VSOCK (40).
const SOCKET_RULES: &[(LinuxSeccompOperator, u64)] = &[
    (LinuxSeccompOperator::ScmpCmpLt, 38),
    (LinuxSeccompOperator::ScmpCmpEq, 39),
    (LinuxSeccompOperator::ScmpCmpGt, 40),
];

/// Personalities allowed (moby's): PER_LINUX, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32,
/// and the query 0xffffffff.
const PERSONALITIES: &[u64] = &[0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

/// The seccomp architecture of this host, alone: moby also lists the 32-bit ones a 64-bit
/// kernel can run (x86 and x32, arm), but libseccomp 2.5 takes about ten times as long to
/// compile this profile for three architectures as for one (9.8 against 1.0 ms of CPU here),
/// and the runtime compiles it at every create and every exec (about 20 ms). The 32-bit
/// entry points are also a kernel surface sandboxes do without: a 32-bit syscall does not
/// match the filter and the kernel kills the thread (SIGSYS).
fn architectures() -> Vec<Arch> {
    match std::env::consts::ARCH {
        "x86_64" => vec![Arch::ScmpArchX86_64],
        "aarch64" => vec![Arch::ScmpArchAarch64],
        "s390x" => vec![Arch::ScmpArchS390x],
        "riscv64" => vec![Arch::ScmpArchRiscv64],
        "powerpc64" => vec![Arch::ScmpArchPpc64le],
        "loongarch64" => vec![Arch::ScmpArchLoongarch64],
        _ => vec![Arch::ScmpArchNative],
    }
}

fn rule(
    names: Vec<String>,
    action: LinuxSeccompAction,
    errno: Option<i32>,
    args: Vec<LinuxSeccompArg>,
) -> Result<LinuxSyscall, RuntimeError> {
    let mut builder = LinuxSyscallBuilder::default().names(names).action(action);
    if let Some(errno) = errno {
        builder = builder.errno_ret(errno as u32);
    }
    if !args.is_empty() {
        builder = builder.args(args);
    }
    builder.build().map_err(RuntimeError::spec)
}

fn arg(
    index: usize,
    op: LinuxSeccompOperator,
    value: u64,
) -> Result<LinuxSeccompArg, RuntimeError> {
    LinuxSeccompArgBuilder::default()
        .index(index)
        .op(op)
        .value(value)
        .build()
        .map_err(RuntimeError::spec)
}

/// The profile of a sandbox holding `capabilities`.
pub fn default_seccomp(capabilities: &[Capability]) -> Result<LinuxSeccomp, RuntimeError> {
    let holds = |name: &str| parse_capability(name).is_ok_and(|c| capabilities.contains(&c));
    let mut seen: HashSet<&str> = HashSet::new();
    let mut allowed: Vec<String> = Vec::new();
    let arch_specific = ALLOWED_BY_ARCH
        .iter()
        .filter(|(arch, _)| *arch == std::env::consts::ARCH)
        .flat_map(|(_, names)| names.iter());
    let by_capability = ALLOWED_WITH_CAPABILITY
        .iter()
        .filter(|(cap, _)| holds(cap))
        .flat_map(|(_, names)| names.iter());
    for name in ALLOWED
        .iter()
        .chain(ALLOWED_SINCE_4_8)
        .chain(arch_specific)
        .chain(by_capability)
    {
        if seen.insert(name) {
            allowed.push(name.to_string());
        }
    }
    let allow = LinuxSeccompAction::ScmpActAllow;
    let errno = LinuxSeccompAction::ScmpActErrno;
    let mut syscalls = vec![rule(allowed, allow, None, Vec::new())?];
    for (op, value) in SOCKET_RULES {
        syscalls.push(rule(
            vec!["socket".into()],
            allow,
            None,
            vec![arg(0, *op, *value)?],
        )?);
    }
    for value in PERSONALITIES {
        let eq = LinuxSeccompOperator::ScmpCmpEq;
        syscalls.push(rule(
            vec!["personality".into()],
            allow,
            None,
            vec![arg(0, eq, *value)?],
        )?);
    }
    if !holds("SYS_ADMIN") {
        // clone's flags are its first argument, except on s390 where it is the second.
        let index: usize = if cfg!(target_arch = "s390x") { 1 } else { 0 };
        // Allowed when (flags & CLONE_NAMESPACE_FLAGS) == 0.
        let no_namespaces = LinuxSeccompArgBuilder::default()
            .index(index)
            .op(LinuxSeccompOperator::ScmpCmpMaskedEq)
            .value(CLONE_NAMESPACE_FLAGS)
            .value_two(0u64)
            .build()
            .map_err(RuntimeError::spec)?;
        syscalls.push(rule(
            vec!["clone".into()],
            allow,
            None,
            vec![no_namespaces],
        )?);
        // clone3 passes its flags in memory, out of seccomp's reach: ENOSYS makes glibc (2.34+)
        // and others fall back to clone, where the rule above applies.
        syscalls.push(rule(
            vec!["clone3".into()],
            errno,
            Some(libc::ENOSYS),
            Vec::new(),
        )?);
    }
    let enosys = ENOSYS.iter().map(|s| s.to_string()).collect();
    syscalls.push(rule(enosys, errno, Some(libc::ENOSYS), Vec::new())?);
    LinuxSeccompBuilder::default()
        .default_action(errno)
        .default_errno_ret(libc::EPERM as u32)
        .architectures(architectures())
        .syscalls(syscalls)
        .build()
        .map_err(RuntimeError::spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::capabilities::capability_set;

    fn profile(add: &[&str]) -> serde_json::Value {
        let add: Vec<String> = add.iter().map(|s| s.to_string()).collect();
        let caps = capability_set(None, Some(&add)).unwrap();
        serde_json::to_value(default_seccomp(&caps).unwrap()).unwrap()
    }

    /// The rules naming `syscall`.
    fn rules<'a>(profile: &'a serde_json::Value, syscall: &str) -> Vec<&'a serde_json::Value> {
        profile["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["names"].as_array().unwrap().iter().any(|n| n == syscall))
            .collect()
    }

    #[test]
    fn default_is_an_allow_list() {
        let p = profile(&[]);
        assert_eq!(p["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(p["defaultErrnoRet"], libc::EPERM);
        for denied in [
            "mount",
            "umount2",
            "unshare",
            "setns",
            "mount_setattr",
            "open_by_handle_at",
            "bpf",
            "perf_event_open",
            "userfaultfd",
            "keyctl",
            "add_key",
            "request_key",
            "kexec_load",
            "init_module",
            "reboot",
        ] {
            assert!(rules(&p, denied).is_empty(), "{denied} is allowed");
        }
        for allowed in [
            "read", "execve", "fork", "vfork", "wait4", "futex", "ptrace",
        ] {
            assert_eq!(rules(&p, allowed)[0]["action"], "SCMP_ACT_ALLOW");
        }
        // chroot comes with SYS_CHROOT (one of the runtime's defaults), not without.
        assert!(rules(&p, "chroot").is_empty());
        assert_eq!(rules(&profile(&["SYS_CHROOT"]), "chroot").len(), 1);
    }

    #[test]
    fn clone_without_namespaces_clone3_and_io_uring_enosys() {
        let p = profile(&[]);
        let clone = rules(&p, "clone");
        assert_eq!(clone.len(), 1);
        assert_eq!(
            clone[0]["args"],
            serde_json::json!([{"index": 0, "value": CLONE_NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}])
        );
        for call in [
            "clone3",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
        ] {
            let r = rules(&p, call);
            assert_eq!(r.len(), 1, "{call}");
            assert_eq!(r[0]["action"], "SCMP_ACT_ERRNO");
            assert_eq!(r[0]["errnoRet"], libc::ENOSYS);
        }
    }

    #[test]
    fn a_capability_lifts_only_its_own_blocks() {
        let p = profile(&["SYS_ADMIN"]);
        for call in ["mount", "unshare", "setns", "clone", "clone3"] {
            let r = rules(&p, call);
            assert_eq!(r.len(), 1, "{call}");
            assert_eq!(r[0]["action"], "SCMP_ACT_ALLOW");
            assert!(r[0].get("args").is_none());
        }
        // io_uring stays refused, and SYS_ADMIN does not bring SYS_MODULE's.
        assert_eq!(rules(&p, "io_uring_setup")[0]["errnoRet"], libc::ENOSYS);
        assert!(rules(&p, "init_module").is_empty());
        assert_eq!(rules(&profile(&["SYS_MODULE"]), "init_module").len(), 1);
        assert_eq!(rules(&profile(&["SYS_TIME"]), "settimeofday").len(), 1);
        assert!(rules(&profile(&[]), "settimeofday").is_empty());
    }

    #[test]
    fn no_syscall_is_both_allowed_and_refused() {
        let unconditional: HashSet<&str> = ALLOWED.iter().copied().collect();
        assert_eq!(unconditional.len(), ALLOWED.len(), "a duplicate in ALLOWED");
        for (_, names) in ALLOWED_WITH_CAPABILITY {
            for name in *names {
                let since_4_8 = ALLOWED_SINCE_4_8.contains(name);
                assert!(!unconditional.contains(name) || since_4_8, "{name}");
            }
        }
        for name in ENOSYS
            .iter()
            .chain(&["clone", "clone3", "socket", "personality"])
        {
            assert!(!unconditional.contains(name), "{name}");
        }
    }
}
