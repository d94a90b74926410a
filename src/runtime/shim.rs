//! The per-sandbox shim (`sbx shim`, hidden), like conmon: it creates the container with its
//! stdio on pipes it owns, becomes the subreaper of the container's init, writes stdout and
//! stderr to the sandbox log with rotation, and records the exit status. It outlives restarts
//! of `sbx serve`.
//!
//! Protocol with the daemon: one JSON line on the shim's stdout — `{"pid": N}` once the
//! container is created, or `{"error": "..."}` — then stdout is closed.
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::runtime::logs::{LogWriter, Stream};

/// Arguments of `sbx shim`; only the daemon starts it.
#[derive(Debug, Clone, Args)]
pub struct ShimArgs {
    /// Container id.
    #[arg(long)]
    pub id: String,
    /// OCI bundle dir.
    #[arg(long)]
    pub bundle: PathBuf,
    /// Runtime binary (runc or crun).
    #[arg(long)]
    pub runtime: PathBuf,
    /// Runtime state root.
    #[arg(long)]
    pub root: PathBuf,
    /// Log file.
    #[arg(long)]
    pub log: PathBuf,
    /// Log size cap before rotation, bytes.
    #[arg(long, default_value_t = 10 * 1024 * 1024)]
    pub max_log_bytes: u64,
    /// Where the exit status is recorded.
    #[arg(long)]
    pub exit_file: PathBuf,
    /// Restore the container from this CRIU checkpoint (a warm fork) instead of creating it;
    /// the restored processes run at once.
    #[arg(long)]
    pub restore_from: Option<PathBuf>,
    /// Host uid/gid of the sandbox's root (user namespaces): the stdio pipes are given to it,
    /// so that the sandbox's root can reopen them (`/proc/1/fd/1`) as host root could.
    #[arg(long)]
    pub stdio_owner: Option<u32>,
    /// CRIU binary for `--restore-from`.
    #[arg(long, default_value = "criu")]
    pub criu: PathBuf,
    /// For `--restore-from`: a dir of a tmpfs that the restore sees as `/run`, where CRIU
    /// keeps its kernel probe (a host whose `/run` is no tmpfs).
    #[arg(long)]
    pub criu_run: Option<PathBuf>,
}

/// The shim's one-line report to the daemon.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ShimReport {
    /// The container was created; its init's host pid.
    Created {
        /// Host pid of the container's init.
        pid: i32,
    },
    /// Creation failed.
    Failed {
        /// What the runtime said.
        error: String,
    },
}

/// How the main process ended, as recorded in the exit file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExitRecord {
    /// Exit code (128 + signal when killed by one).
    pub exit_code: i32,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// When, unix seconds.
    pub finished_at: i64,
}

impl ExitRecord {
    /// Reads an exit file, if present and valid.
    pub fn read(path: &Path) -> Option<ExitRecord> {
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }
}

fn report(line: &ShimReport) {
    let mut out = std::io::stdout();
    let _ = serde_json::to_writer(&mut out, line);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
    // Close stdout so the daemon's read ends; keep fd 1 valid.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2(null.as_raw_fd(), 1);
    }
}

fn pump(
    mut reader: std::fs::File,
    stream: Stream,
    writer: Arc<Mutex<LogWriter>>,
    tail: Arc<Mutex<Vec<u8>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Ok(mut w) = writer.lock() {
                        let _ = w.write(stream, &buf[..n]);
                    }
                    if stream == Stream::Stderr {
                        if let Ok(mut t) = tail.lock() {
                            t.extend_from_slice(&buf[..n]);
                            let excess = t.len().saturating_sub(2048);
                            t.drain(..excess);
                        }
                    }
                }
            }
        }
        if let Ok(mut w) = writer.lock() {
            let _ = w.flush_stream(stream);
        }
    })
}

fn pipe() -> std::io::Result<(std::fs::File, OwnedFd)> {
    let (r, w) = nix::unistd::pipe().map_err(std::io::Error::from)?;
    Ok((std::fs::File::from(r), w))
}

/// Runs the shim; returns the process exit code.
pub fn run(args: &ShimArgs) -> i32 {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes plain integers.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let fail = |message: String| {
        report(&ShimReport::Failed { error: message });
        1
    };
    let writer = match LogWriter::open(&args.log, args.max_log_bytes) {
        Ok(w) => Arc::new(Mutex::new(w)),
        Err(e) => return fail(format!("cannot open log {}: {e}", args.log.display())),
    };
    let (Ok((out_r, out_w)), Ok((err_r, err_w))) = (pipe(), pipe()) else {
        return fail("cannot create stdio pipes".into());
    };
    let pid_file = args.bundle.join("init.pid");
    let _ = std::fs::remove_file(&pid_file);
    let tail = Arc::new(Mutex::new(Vec::new()));
    // stdin is a pipe with no writer (reads see end of file, as from /dev/null): a sandbox
    // whose stdio are pipes can be checkpointed, one holding a host file cannot.
    let (in_r, in_w) = match pipe() {
        Ok(p) => p,
        Err(_) => return fail("cannot create stdio pipes".into()),
    };
    drop(in_w);
    if let Some(owner) = args.stdio_owner {
        let id = (
            Some(nix::unistd::Uid::from_raw(owner)),
            Some(nix::unistd::Gid::from_raw(owner)),
        );
        for fd in [out_r.as_fd(), err_r.as_fd(), in_r.as_fd()] {
            if let Err(e) = nix::unistd::fchown(fd.as_raw_fd(), id.0, id.1) {
                return fail(format!("cannot give the stdio pipes to the sandbox: {e}"));
            }
        }
    }
    // The sandbox gets a session keyring of its own, made here and owned by root, instead of
    // one the runtime makes as the sandbox's root: sandboxes share that host id (their user
    // namespaces map the same range), and the kernel's per-user key quota (200 keys) would
    // cap the host at 200 sandboxes.
    let own_keyring = join_new_session_keyring();
    if let Err(e) = &own_keyring {
        eprintln!("sbx shim: cannot make a session keyring ({e}); the runtime makes one");
    }
    let mut runtime = Command::new(&args.runtime);
    runtime.arg("--root").arg(&args.root);
    match &args.restore_from {
        None => {
            runtime.arg("create");
            if own_keyring.is_ok() {
                runtime.arg("--no-new-keyring");
            }
        }
        Some(images) => {
            runtime
                .arg("--criu")
                .arg(&args.criu)
                .arg("restore")
                .arg("--detach")
                // The network comes from sbx, not the checkpoint.
                .arg("--empty-ns")
                .arg("network")
                .arg("--image-path")
                .arg(images)
                .arg("--work-path")
                .arg(images);
            if let Some(private_run) = args
                .criu_run
                .as_deref()
                .and_then(crate::runtime::criu::PrivateRun::new)
            {
                // SAFETY: `enter` makes raw system calls only.
                unsafe {
                    std::os::unix::process::CommandExt::pre_exec(&mut runtime, move || {
                        private_run.enter()
                    });
                }
            }
        }
    }
    let status = runtime
        .arg("--bundle")
        .arg(&args.bundle)
        .arg("--pid-file")
        .arg(&pid_file)
        .arg(&args.id)
        .stdin(Stdio::from(in_r))
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(err_w))
        .status();
    // The command holds our copies of the pipes' write ends: close them.
    drop(runtime);
    // The write ends now live only in the container's init (and died with a failed create).
    let readers = [
        pump(out_r, Stream::Stdout, writer.clone(), tail.clone()),
        pump(err_r, Stream::Stderr, writer.clone(), tail.clone()),
    ];
    let created = matches!(&status, Ok(s) if s.success());
    if !created {
        for r in readers {
            let _ = r.join();
        }
        let mut said: String = tail
            .lock()
            .map(|t| {
                String::from_utf8_lossy(&t)
                    .lines()
                    .filter(|l| !l.contains("level=warning"))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        if let Some(images) = &args.restore_from {
            // runc only points at CRIU's log: quote its errors.
            let log = std::fs::read_to_string(images.join("restore.log")).unwrap_or_default();
            for line in log
                .lines()
                .filter(|l| l.contains("Error") && !l.contains("RLIMIT_NOFILE"))
                .take(3)
            {
                said.push_str("; ");
                said.push_str(line.trim());
            }
        }
        let said = said.trim().to_string();
        return fail(match status {
            Ok(s) => format!(
                "{} {} failed ({s}): {said}",
                args.runtime.display(),
                if args.restore_from.is_some() {
                    "restore"
                } else {
                    "create"
                }
            ),
            Err(e) => format!("cannot run {}: {e}", args.runtime.display()),
        });
    }
    let pid = match std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    {
        Some(pid) => pid,
        None => return fail("the runtime wrote no init pid".into()),
    };
    report(&ShimReport::Created { pid });

    let (exit_code, signal) = reap(pid);
    let record = ExitRecord {
        exit_code,
        signal,
        finished_at: crate::shared::timestamp::now_unix(),
    };
    for r in readers {
        let _ = r.join();
    }
    let tmp = args.exit_file.with_extension("tmp");
    if let Ok(bytes) = serde_json::to_vec(&record) {
        if std::fs::write(&tmp, bytes).is_ok() {
            let _ = std::fs::rename(&tmp, &args.exit_file);
        }
    }
    0
}

/// Replaces this process's session keyring with a new, empty, anonymous one.
fn join_new_session_keyring() -> std::io::Result<()> {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: keyctl(JOIN_SESSION_KEYRING, NULL) takes no pointers we own.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Waits for `pid` (our child as subreaper) and returns its exit code and signal; reaps any
/// other orphan on the way.
fn reap(pid: i32) -> (i32, Option<i32>) {
    use nix::sys::wait::{WaitStatus, waitpid};
    use nix::unistd::Pid;
    loop {
        match waitpid(Pid::from_raw(-1), None) {
            Ok(WaitStatus::Exited(p, code)) if p.as_raw() == pid => return (code, None),
            Ok(WaitStatus::Signaled(p, sig, _)) if p.as_raw() == pid => {
                return (128 + sig as i32, Some(sig as i32));
            }
            Ok(_) => continue,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => {
                // Not our child (no subreaper): watch it instead.
                while crate::runtime::process::alive(pid) {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                return (-1, None);
            }
        }
    }
}
