//! Leaving the agent's container for the host (`sbx agent --enter-host`, what
//! `deploy/agent.yaml` runs): the sbxd runtime must run sandboxes where the host's OCI
//! runtime, CRIU, `/run/netns` and cgroups are, and its sandboxes and their shims must outlive
//! a restart of the agent's Pod. So, before any thread starts, the agent joins the mount and
//! cgroup namespaces of the host's PID 1 (the Pod has `hostPID`; or of the container runtime's
//! shim that started it, where PID 1's cannot be read), copies its own binary to
//! `<data dir>/bin/sbx` on the host (the shims run that file, not one inside an image that a
//! Pod restart removes), starts the agent out of its Pod's cgroup, in `sbx-agent` at the root
//! of every hierarchy (the container runtime kills what is left in a host-PID Pod's cgroup
//! when it stops; sandboxes and shims the agent starts stay out of it), keeps a descriptor of the container's root file system open (its service
//! account token and CA stay readable there, [`CONTAINER_ROOT_ENV`]) and executes the host's
//! copy with the same arguments. The new process sees it is on the host and starts. The
//! process that entered stays behind in the Pod's cgroup as the agent's parent: the Pod's
//! stop signals go through it, and its death (a SIGKILL of the Pod's cgroup) ends the agent.
use std::ffi::CString;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nix::sched::{CloneFlags, setns};

/// Set for the process executed on the host: where the container's root file system is still
/// reachable (`/proc/self/fd/N`), for the service account files the kubelet mounted there.
pub const CONTAINER_ROOT_ENV: &str = "SBX_AGENT_CONTAINER_ROOT";

/// Set for the process executed on the host: the descriptor that keeps the container's mount
/// namespace alive (with no process left in it, the kernel would take its mounts down, the
/// service account's among them).
pub const CONTAINER_NS_ENV: &str = "SBX_AGENT_CONTAINER_NS";

/// The search path on the host (its OCI runtime, CRIU, `nft`, `ip`, `lvs`).
const HOST_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The cgroup (at the root of every hierarchy) the agent and what it starts move to.
const AGENT_CGROUP: &str = "sbx-agent";

/// A process in the host's namespaces: PID 1, or where its namespaces cannot be read (an init
/// that is not dumpable, as in some micro-VMs) the container runtime's shim that started this
/// process (its parent: with `hostPID` the shim is visible, and it runs on the host).
fn host_process() -> Option<String> {
    let readable = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).is_ok();
    if readable("1") {
        return Some("1".into());
    }
    let parent = nix::unistd::getppid().as_raw();
    (parent > 0 && readable(&parent.to_string())).then(|| parent.to_string())
}

/// Whether this process already runs in the host's mount namespace.
pub fn on_host() -> bool {
    let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok();
    match (ns("self"), host_process().and_then(|pid| ns(&pid))) {
        (Some(own), Some(host)) => own == host,
        _ => false,
    }
}

/// Enters the host and executes the agent's host copy there; returns only on failure. Must be
/// called while the process has one thread (`setns` of a mount namespace requires it).
pub fn enter(data_dir: &Path) -> Result<std::convert::Infallible> {
    let exe = std::fs::File::open("/proc/self/exe").context("open this binary")?;
    // The container's root, kept open across the exec (no close-on-exec).
    let host = host_process().context(
        "no process of the host to join: the agent's Pod needs hostPID: true and privileges",
    )?;
    let root_fd = nix::fcntl::open(
        "/",
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .context("open the container's root")?;
    let ns_fd = nix::fcntl::open(
        "/proc/self/ns/mnt",
        nix::fcntl::OFlag::O_RDONLY,
        nix::sys::stat::Mode::empty(),
    )
    .context("open the container's mount namespace")?;
    for (name, flag) in [
        ("cgroup", CloneFlags::CLONE_NEWCGROUP),
        ("mnt", CloneFlags::CLONE_NEWNS),
    ] {
        let path = format!("/proc/{host}/ns/{name}");
        let ns = std::fs::File::open(&path).with_context(|| {
            format!("open {path} (the agent's Pod needs hostPID: true and privileges)")
        })?;
        setns(&ns, flag).with_context(|| format!("join the host's {name} namespace"))?;
    }
    std::env::set_current_dir("/").context("chdir / on the host")?;
    let binary = install_copy(exe, data_dir)?;
    let args: Vec<CString> = std::env::args_os()
        .map(|a| CString::new(a.into_encoded_bytes()))
        .collect::<Result<_, _>>()
        .context("arguments")?;
    let program = CString::new(binary.as_os_str().as_encoded_bytes()).context("binary path")?;
    // SAFETY: single-threaded (see above); the environment is changed before the exec only.
    // The image's PATH names its own directories: the host's tools are in the usual ones.
    unsafe {
        std::env::set_var("PATH", HOST_PATH);
        std::env::set_var(CONTAINER_ROOT_ENV, format!("/proc/self/fd/{root_fd}"));
        std::env::set_var(CONTAINER_NS_ENV, ns_fd.to_string());
    }
    // This process stays in the Pod's cgroup as the container's init, and the agent runs as
    // its child out of it: stopping the Pod (a SIGKILL to what is left in its cgroup, with
    // hostPID) reaches this process, and the kernel tells the agent (PDEATHSIG) — the agent
    // itself out there would outlive its Pod.
    let parent = nix::unistd::getpid();
    // SAFETY: single-threaded (see above): the child may allocate before it executes.
    match unsafe { nix::unistd::fork() }.context("start the agent on the host")? {
        nix::unistd::ForkResult::Child => {
            leave_pod_cgroup();
            // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number; no memory is shared.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
            if nix::unistd::getppid() != parent {
                std::process::exit(1);
            }
            let error = nix::unistd::execv(&program, &args).unwrap_err();
            eprintln!(
                "sbx agent: execute {} on the host: {error}",
                binary.display()
            );
            std::process::exit(127);
        }
        nix::unistd::ForkResult::Parent { child } => supervise(child),
    }
}

/// The agent's pid, for [`forward`].
static AGENT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    let pid = AGENT.load(std::sync::atomic::Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe and takes no pointers.
        unsafe { libc::kill(pid, signal) };
    }
}

/// The container's init while the agent runs on the host: passes the Pod's stop signals on to
/// it and ends as it ends.
fn supervise(agent: nix::unistd::Pid) -> ! {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    use nix::sys::wait::{WaitStatus, waitpid};
    AGENT.store(agent.as_raw(), std::sync::atomic::Ordering::SeqCst);
    let action = SigAction::new(
        SigHandler::Handler(forward),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: the handler only loads an atomic and calls kill (async-signal-safe).
        let _ = unsafe { sigaction(signal, &action) };
    }
    loop {
        match waitpid(agent, None) {
            Ok(WaitStatus::Exited(_, code)) => std::process::exit(code),
            Ok(WaitStatus::Signaled(_, signal, _)) => std::process::exit(128 + signal as i32),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                eprintln!("sbx agent: waiting for the agent on the host: {e}");
                std::process::exit(1);
            }
        }
    }
}

/// Copies this binary to `<data_dir>/bin/sbx` on the host (atomically: shims running the
/// previous copy keep it).
fn install_copy(mut exe: std::fs::File, data_dir: &Path) -> Result<PathBuf> {
    let bin = data_dir.join("bin");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&bin)
        .with_context(|| format!("create {} on the host", bin.display()))?;
    let target = bin.join("sbx");
    let partial = bin.join(format!(".sbx.{}", std::process::id()));
    let copied = (|| -> std::io::Result<()> {
        let mut out = std::fs::File::create(&partial)?;
        std::io::copy(&mut exe, &mut out)?;
        out.flush()?;
        out.sync_all()?;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
        std::fs::rename(&partial, &target)
    })();
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(e).with_context(|| format!("copy sbx to {} on the host", target.display()));
    }
    Ok(target)
}

/// Moves this process into `sbx-agent` at the root of every cgroup hierarchy (best effort:
/// a hierarchy it cannot join is logged, on stderr since no log subscriber runs yet).
fn leave_pod_cgroup() {
    let root = Path::new("/sys/fs/cgroup");
    let hierarchies: Vec<PathBuf> = if root.join("cgroup.controllers").exists() {
        vec![root.to_path_buf()]
    } else {
        std::fs::read_dir(root)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.join("cgroup.procs").exists())
                    .collect()
            })
            .unwrap_or_default()
    };
    let pid = std::process::id().to_string();
    for hierarchy in hierarchies {
        let dir = hierarchy.join(AGENT_CGROUP);
        let joined = (|| -> std::io::Result<()> {
            if !dir.exists() {
                std::fs::create_dir(&dir)?;
            }
            // A v1 cpuset starts empty and takes no process until given its parent's sets.
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let own = dir.join(file);
                if own.exists() && std::fs::read_to_string(&own)?.trim().is_empty() {
                    std::fs::write(&own, std::fs::read_to_string(hierarchy.join(file))?)?;
                }
            }
            std::fs::write(dir.join("cgroup.procs"), &pid)
        })();
        if let Err(e) = joined {
            eprintln!(
                "sbx agent: cannot move to cgroup {}: {e}; sandboxes may stop with the agent's Pod",
                dir.display()
            );
        }
    }
}

/// The kube client of an agent executed on the host by [`enter`]: the in-cluster settings,
/// with the service account's token and CA read through the container's root (the token file
/// is read again as the kubelet rotates it).
pub fn in_cluster_kubeconfig(container_root: &Path) -> Result<kube::config::Kubeconfig> {
    use kube::config::{
        AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
    };
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .context("KUBERNETES_SERVICE_HOST is not set (not in a Pod?)")?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    // `/var/run` is often a link to `/run`, which must resolve in the container, not the host.
    let var_run = match std::fs::read_link(container_root.join("var/run")) {
        Ok(target) => container_root.join(
            target
                .strip_prefix("/")
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| Path::new("var").join(&target)),
        ),
        Err(_) => container_root.join("var/run"),
    };
    let account = var_run.join("secrets/kubernetes.io/serviceaccount");
    let path = |file: &str| account.join(file).to_string_lossy().into_owned();
    Ok(Kubeconfig {
        clusters: vec![NamedCluster {
            name: "in-cluster".into(),
            cluster: Some(Cluster {
                server: Some(format!("https://{host}:{port}")),
                certificate_authority: Some(path("ca.crt")),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: "agent".into(),
            auth_info: Some(AuthInfo {
                token_file: Some(path("token")),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: "in-cluster".into(),
            context: Some(Context {
                cluster: "in-cluster".into(),
                user: Some("agent".into()),
                ..Default::default()
            }),
            other: Default::default(),
        }],
        current_context: Some("in-cluster".into()),
        ..Default::default()
    })
}

/// The agent's kube client: through the container's root when [`enter`] executed it on the
/// host, else the usual in-cluster config or `KUBECONFIG`.
pub async fn kube_client() -> Result<kube::Client> {
    let Some(root) = std::env::var_os(CONTAINER_ROOT_ENV) else {
        return kube::Client::try_default().await.context(
            "no Kubernetes API to check callers' tokens with (in-cluster config or KUBECONFIG)",
        );
    };
    let kubeconfig = in_cluster_kubeconfig(Path::new(&root))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .context("the in-cluster settings read through the container's root")?;
    kube::Client::try_from(config).context("a client of the Kubernetes API")
}

/// Keeps the container's descriptors (from [`enter`]) from leaking into the processes the
/// agent starts.
pub fn close_on_exec_container_root() {
    let root = std::env::var_os(CONTAINER_ROOT_ENV).and_then(|root| {
        Path::new(&root)
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse::<i32>().ok())
    });
    let ns = std::env::var(CONTAINER_NS_ENV)
        .ok()
        .and_then(|n| n.parse::<i32>().ok());
    for fd in [root, ns].into_iter().flatten() {
        // SAFETY: fcntl on a descriptor number; F_SETFD with FD_CLOEXEC changes only flags.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
}
