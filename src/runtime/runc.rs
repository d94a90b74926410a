//! Driver of the runc-compatible CLI (`runc` by default, `crun` selectable): every call the
//! daemon makes to the OCI runtime goes through here.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::str::FromStr;

use serde::Deserialize;
use tokio::process::Command;

use crate::runtime::RuntimeError;
use crate::runtime::criu::PrivateRun;

/// Which OCI runtime CLI runs the sandboxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// runc (Debian's package): the default.
    #[default]
    Runc,
    /// crun: faster; on cgroup v1/v2 hybrid hosts it needs the hugetlb fix-up.
    Crun,
}

impl RuntimeKind {
    /// Binary name.
    pub fn binary(self) -> &'static str {
        match self {
            RuntimeKind::Runc => "runc",
            RuntimeKind::Crun => "crun",
        }
    }
}

impl FromStr for RuntimeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "runc" => Ok(RuntimeKind::Runc),
            "crun" => Ok(RuntimeKind::Crun),
            _ => Err(format!("unknown OCI runtime '{s}': expected runc or crun")),
        }
    }
}

/// State of a container as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ContainerState {
    /// Container id.
    pub id: String,
    /// `created`, `running`, `paused` or `stopped`.
    pub status: String,
    /// Host pid of the container's init (0 when stopped).
    #[serde(default)]
    pub pid: i32,
}

/// A runc-compatible CLI with its own state root.
#[derive(Debug, Clone)]
pub struct Runc {
    kind: RuntimeKind,
    binary: PathBuf,
    root: PathBuf,
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

impl Runc {
    /// Finds the runtime binary and prepares its state root (and, for crun on a hybrid
    /// cgroup host, the hugetlb hierarchy it insists on).
    pub fn new(kind: RuntimeKind, root: &Path) -> Result<Runc, RuntimeError> {
        let binary = which(kind.binary()).ok_or_else(|| {
            RuntimeError::Unavailable(format!(
                "the OCI runtime '{}' is not installed (apt-get install {})",
                kind.binary(),
                kind.binary()
            ))
        })?;
        std::fs::create_dir_all(root).map_err(|e| RuntimeError::io("create runtime root", e))?;
        if kind == RuntimeKind::Crun {
            crun_hybrid_fixup()?;
        }
        Ok(Runc {
            kind,
            binary,
            root: root.to_path_buf(),
        })
    }

    /// Which runtime this is.
    pub fn kind(&self) -> RuntimeKind {
        self.kind
    }

    /// The binary's path.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The runtime's state root (`--root`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A command `<runtime> --root <root> <args…>` with null stdin.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--root")
            .arg(&self.root)
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(false);
        cmd
    }

    async fn run(&self, args: &[&str]) -> Result<String, RuntimeError> {
        self.output(self.command(args), args).await
    }

    /// Runs `cmd` (made by [`Runc::command`] with `args`): its stdout, or its stderr as the
    /// error.
    async fn output(&self, mut cmd: Command, args: &[&str]) -> Result<String, RuntimeError> {
        let output = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|e| RuntimeError::io(&format!("spawn {}", self.binary.display()), e))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(RuntimeError::Command {
                command: format!("{} {}", self.kind.binary(), args.join(" ")),
                message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            })
        }
    }

    /// Starts a created container.
    pub async fn start(&self, id: &str) -> Result<(), RuntimeError> {
        self.run(&["start", id]).await.map(drop)
    }

    /// Freezes every process of the container.
    pub async fn pause(&self, id: &str) -> Result<(), RuntimeError> {
        self.run(&["pause", id]).await.map(drop)
    }

    /// Dumps the container's processes with CRIU into `images` and leaves them running. The
    /// network namespace's links, addresses and rules are not dumped (`--empty-ns network`):
    /// a clone gets a network of its own. `private_run` gives CRIU a `/run` to keep its kernel
    /// probe in. On failure the message ends with the errors of CRIU's own log.
    pub async fn checkpoint(
        &self,
        id: &str,
        criu: &Path,
        images: &Path,
        private_run: Option<PrivateRun>,
    ) -> Result<(), RuntimeError> {
        let (criu, images) = (criu.display().to_string(), images.display().to_string());
        let args = [
            "--criu",
            &criu,
            "checkpoint",
            "--leave-running",
            "--empty-ns",
            "network",
            "--image-path",
            &images,
            "--work-path",
            &images,
            id,
        ];
        let mut cmd = self.command(&args);
        if let Some(private_run) = private_run {
            // SAFETY: `enter` makes raw system calls only.
            unsafe {
                cmd.pre_exec(move || private_run.enter());
            }
        }
        self.output(cmd, &args)
            .await
            .map(drop)
            .map_err(|e| match e {
                RuntimeError::Command { command, message } => {
                    let log = std::fs::read_to_string(Path::new(&images).join("dump.log"))
                        .unwrap_or_default();
                    let errors: Vec<&str> = log
                        .lines()
                        .filter(|l| l.contains("Error") && !l.contains("RLIMIT_NOFILE"))
                        .take(3)
                        .collect();
                    RuntimeError::Command {
                        command,
                        message: format!("{message} {}", errors.join("; "))
                            .trim()
                            .to_string(),
                    }
                }
                other => other,
            })
    }

    /// Thaws a paused container.
    pub async fn resume(&self, id: &str) -> Result<(), RuntimeError> {
        self.run(&["resume", id]).await.map(drop)
    }

    /// Sends a signal to the container's init (`all`: to every process).
    pub async fn kill(&self, id: &str, signal: &str, all: bool) -> Result<(), RuntimeError> {
        if all {
            self.run(&["kill", "--all", id, signal]).await.map(drop)
        } else {
            self.run(&["kill", id, signal]).await.map(drop)
        }
    }

    /// Deletes the container (`force`: kills it first). A missing container is not an error.
    pub async fn delete(&self, id: &str, force: bool) -> Result<(), RuntimeError> {
        let args: &[&str] = if force {
            &["delete", "--force", id]
        } else {
            &["delete", id]
        };
        match self.run(args).await {
            Ok(_) => Ok(()),
            Err(RuntimeError::Command { message, .. })
                if message.contains("does not exist") || message.contains("not found") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The container's state, or `None` when the runtime does not know it.
    pub async fn state(&self, id: &str) -> Result<Option<ContainerState>, RuntimeError> {
        match self.run(&["state", id]).await {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| RuntimeError::Corrupt(format!("runtime state of {id}: {e}"))),
            Err(RuntimeError::Command { message, .. })
                if message.contains("does not exist") || message.contains("not found") =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Every container the runtime knows under our root.
    pub async fn list(&self) -> Result<Vec<ContainerState>, RuntimeError> {
        let text = self.run(&["list", "--format", "json"]).await?;
        let text = text.trim();
        if text.is_empty() || text == "null" {
            return Ok(Vec::new());
        }
        serde_json::from_str(text).map_err(|e| RuntimeError::Corrupt(format!("runtime list: {e}")))
    }
}

/// crun refuses cgroup v1/v2 hybrid hosts unless the v2 hierarchy holds no controller it
/// also sees in v1; mounting hugetlb as a v1 hierarchy moves it out of v2.
fn crun_hybrid_fixup() -> Result<(), RuntimeError> {
    let hybrid = Path::new("/sys/fs/cgroup/unified/cgroup.controllers");
    let Ok(controllers) = std::fs::read_to_string(hybrid) else {
        return Ok(());
    };
    if !controllers.split_whitespace().any(|c| c == "hugetlb") {
        return Ok(());
    }
    let target = Path::new("/sys/fs/cgroup/hugetlb");
    std::fs::create_dir_all(target)
        .map_err(|e| RuntimeError::io("create hugetlb mount point", e))?;
    nix::mount::mount(
        Some("cgroup"),
        target,
        Some("cgroup"),
        nix::mount::MsFlags::empty(),
        Some("hugetlb"),
    )
    .map_err(|e| RuntimeError::Unavailable(format!("crun needs hugetlb as a v1 hierarchy: {e}")))?;
    tracing::info!("mounted the hugetlb cgroup v1 hierarchy so that crun accepts this hybrid host");
    Ok(())
}
