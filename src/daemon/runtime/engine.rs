//! The sbxd engine: provisions, execs in, pauses and tears down sandboxes from a
//! [`SandboxSpec`], over the runtime CLI, the image store and the network manager.
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

use crate::daemon::runtime::bundle::{self, BundleConfig};
use crate::daemon::runtime::images::ImageStore;
use crate::daemon::runtime::network::{Egress, NetworkConfig, NetworkManager};
use crate::daemon::runtime::overlay::{self, RootFs};
use crate::daemon::runtime::runc::{Runc, RuntimeKind};
use crate::daemon::runtime::shim::{ExitRecord, ShimReport};
use crate::daemon::runtime::{RuntimeError, cgroup, logs, process};
use crate::shared::models::sandbox::ExecResponse;

/// Runtime settings (config file section `[runtime]`, camelCase keys).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimeConfig {
    /// `runc` (default) or `crun`.
    #[serde(default)]
    pub oci_runtime: RuntimeKind,
    /// Log size cap per sandbox before rotation, bytes.
    #[serde(default = "default_max_log_bytes")]
    pub max_log_bytes: u64,
    /// Longest exec allowed, seconds (requests ask for less with `timeout_seconds`).
    #[serde(default = "default_max_exec_seconds")]
    pub max_exec_seconds: u64,
    /// Output kept per exec stream, bytes.
    #[serde(default = "default_exec_output_cap")]
    pub exec_output_cap: usize,
    /// How often writable layers are measured against `ephemeral-storage`, seconds.
    #[serde(default = "default_eviction_check_seconds")]
    pub eviction_check_seconds: u64,
}

fn default_max_log_bytes() -> u64 {
    10 * 1024 * 1024
}
fn default_max_exec_seconds() -> u64 {
    3600
}
fn default_exec_output_cap() -> usize {
    10 * 1024 * 1024
}
fn default_eviction_check_seconds() -> u64 {
    10
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            oci_runtime: RuntimeKind::default(),
            max_log_bytes: default_max_log_bytes(),
            max_exec_seconds: default_max_exec_seconds(),
            exec_output_cap: default_exec_output_cap(),
            eviction_check_seconds: default_eviction_check_seconds(),
        }
    }
}

/// Default exec timeout (DESIGN.md §4).
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(300);

/// Everything needed to (re)create a sandbox's runtime resources; stored by the platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Short unique id (container id, netns key).
    pub id: String,
    /// Namespace.
    pub namespace: String,
    /// Name (the hostname inside).
    pub name: String,
    /// Image reference as requested.
    pub image: String,
    /// Extra environment from the env file (`KEY=VALUE`).
    #[serde(default)]
    pub env: Vec<String>,
    /// Shell commands run before the sandbox is Ready.
    #[serde(default)]
    pub before_script: Option<String>,
    /// CPU limit, millicores.
    #[serde(default)]
    pub cpu_millis: Option<u64>,
    /// Memory limit, bytes.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Writable-layer limit, bytes (enforced by eviction).
    #[serde(default)]
    pub ephemeral_bytes: Option<u64>,
    /// `egress_whitelist` as given (None: unrestricted).
    #[serde(default)]
    pub egress: Option<Vec<String>>,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Supplementary groups.
    #[serde(default)]
    pub additional_gids: Vec<u32>,
    /// Capabilities kept, `CAP_*` names.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Network slot (address pool index).
    pub slot: u32,
    /// Snapshot layers stacked on the image's, lowest first (a restored or forked sandbox).
    #[serde(default)]
    pub layers: Vec<String>,
    /// Replaces the image's entrypoint (restore overrides).
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    /// Replaces the image's cmd (restore overrides).
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
}

/// The engine: runtime CLI, images, network, and the sandboxes' directories.
pub struct Sbxd {
    runc: Runc,
    /// The image store.
    pub images: Arc<ImageStore>,
    network_config: NetworkConfig,
    /// Set up on first use, so that a daemon that never runs a sandbox never touches the
    /// host's network configuration.
    network: tokio::sync::OnceCell<NetworkManager>,
    sandboxes_dir: PathBuf,
    layers_dir: PathBuf,
    config: RuntimeConfig,
    shim_exe: PathBuf,
}

/// Result of a started sandbox.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    /// Host pid of the sandbox's init.
    pub pid: i32,
}

fn mkdir_private(dir: &Path) -> Result<(), RuntimeError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| RuntimeError::io(&format!("create {}", dir.display()), e))
}

async fn read_capped<R: AsyncRead + Unpin>(mut reader: R, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

impl Sbxd {
    /// Prepares the engine under `data_dir` over the platform's image store: runtime root
    /// and network host side.
    pub async fn new(
        data_dir: &Path,
        config: RuntimeConfig,
        network: NetworkConfig,
        images: Arc<ImageStore>,
    ) -> Result<Sbxd, RuntimeError> {
        let runc = Runc::new(
            config.oci_runtime,
            &data_dir.join("runtime").join(config.oci_runtime.binary()),
        )?;
        let sandboxes_dir = data_dir.join("sandboxes");
        mkdir_private(&sandboxes_dir)?;
        let layers_dir = data_dir.join("snapshot-layers");
        mkdir_private(&layers_dir)?;
        let shim_exe = std::env::current_exe()
            .map_err(|e| RuntimeError::io("find the sbx binary for the shim", e))?;
        Ok(Sbxd {
            runc,
            images,
            network_config: network,
            network: tokio::sync::OnceCell::new(),
            sandboxes_dir,
            layers_dir,
            config,
            shim_exe,
        })
    }

    /// Sandbox networking, set up on the first call.
    pub async fn network(&self) -> Result<&NetworkManager, RuntimeError> {
        self.network
            .get_or_try_init(|| NetworkManager::new(self.network_config.clone()))
            .await
            .map_err(RuntimeError::from)
    }

    /// Whether sandbox networking was ever set up by this process.
    pub fn network_started(&self) -> bool {
        self.network.initialized()
    }

    /// The runtime settings.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// The runtime CLI.
    pub fn runc(&self) -> &Runc {
        &self.runc
    }

    /// The directory of one sandbox.
    pub fn dir(&self, id: &str) -> PathBuf {
        self.sandboxes_dir.join(id)
    }

    /// Freezes the sandbox (unless it is paused already), flushes its writable layer to disk,
    /// copies it into a new read-only snapshot layer and thaws it again: a consistent copy of
    /// a running sandbox's files. Returns the layer id and its size on disk.
    pub async fn capture_layer(&self, spec: &SandboxSpec) -> Result<(String, u64), RuntimeError> {
        let id = spec.id.as_str();
        let cgroup_path = cgroup::cgroups_path(id);
        let freeze = !cgroup::is_frozen(&cgroup_path);
        if freeze {
            self.runc.pause(id).await?;
        }
        let copied = self.copy_upper(spec).await;
        if freeze {
            if let Err(e) = self.runc.resume(id).await {
                tracing::error!(sandbox = %id, error = %e, "thawing after a snapshot");
            }
        }
        copied
    }

    async fn copy_upper(&self, spec: &SandboxSpec) -> Result<(String, u64), RuntimeError> {
        let upper = RootFs::under(&self.dir(&spec.id)).upper;
        let layer = format!("{:016x}", rand_u64());
        let tmp = self.layers_dir.join(format!(".tmp-{layer}"));
        let target = self.layer_dir(&layer);
        {
            let upper = upper.clone();
            tokio::task::spawn_blocking(move || {
                let dir = std::fs::File::open(&upper)?;
                // SAFETY: syncfs takes a valid open fd, held by `dir` for the call.
                let rc = unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
            .map_err(|e| RuntimeError::io("flush the writable layer", e))?;
        }
        let copied = {
            let (upper, tmp) = (upper.clone(), tmp.clone());
            tokio::task::spawn_blocking(move || {
                crate::daemon::runtime::flatten::copy_entry(&upper, &tmp)
            })
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
        };
        if let Err(e) = copied {
            let _ = tokio::fs::remove_dir_all(&tmp).await;
            return Err(RuntimeError::io("copy the writable layer", e));
        }
        tokio::fs::rename(&tmp, &target)
            .await
            .map_err(|e| RuntimeError::io("store the snapshot layer", e))?;
        let size = {
            let target = target.clone();
            tokio::task::spawn_blocking(move || overlay::disk_usage(&target))
                .await
                .unwrap_or(0)
        };
        Ok((layer, size))
    }

    /// Merges snapshot layers (lowest first) into one new equivalent layer; returns its id
    /// and size.
    pub async fn flatten_layers(&self, layers: &[String]) -> Result<(String, u64), RuntimeError> {
        let dirs: Vec<PathBuf> = layers.iter().map(|l| self.layer_dir(l)).collect();
        let layer = format!("{:016x}", rand_u64());
        let tmp = self.layers_dir.join(format!(".tmp-{layer}"));
        let target = self.layer_dir(&layer);
        let merged = {
            let tmp = tmp.clone();
            tokio::task::spawn_blocking(move || {
                crate::daemon::runtime::flatten::merge_layers(&dirs, &tmp)?;
                Ok::<u64, std::io::Error>(overlay::disk_usage(&tmp))
            })
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
        };
        let size = match merged {
            Ok(size) => size,
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&tmp).await;
                return Err(RuntimeError::io("flatten snapshot layers", e));
            }
        };
        tokio::fs::rename(&tmp, &target)
            .await
            .map_err(|e| RuntimeError::io("store the flattened layer", e))?;
        Ok((layer, size))
    }

    /// Removes snapshot layers that nothing references any more.
    pub async fn remove_layers(&self, layers: &[String]) {
        for layer in layers {
            if let Err(e) = tokio::fs::remove_dir_all(self.layer_dir(layer)).await {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(%layer, error = %e, "removing a snapshot layer");
                }
            }
        }
    }

    /// The directory of a snapshot layer.
    pub fn layer_dir(&self, layer: &str) -> PathBuf {
        self.layers_dir.join(layer)
    }

    /// Where every snapshot layer lives.
    pub fn layers_dir(&self) -> &Path {
        &self.layers_dir
    }

    /// Where every sandbox's directory lives.
    pub fn sandboxes_dir(&self) -> &Path {
        &self.sandboxes_dir
    }

    fn log_path(&self, id: &str) -> PathBuf {
        self.dir(id).join("sandbox.log")
    }

    fn exit_path(&self, id: &str) -> PathBuf {
        self.dir(id).join("exit.json")
    }

    /// Creates and starts a sandbox: image, network, root filesystem, bundle, shim, start.
    /// On failure, everything made so far is removed again.
    pub async fn provision(&self, spec: &SandboxSpec) -> Result<Started, RuntimeError> {
        match self.provision_inner(spec).await {
            Ok(started) => Ok(started),
            Err(e) => {
                if let Err(cleanup) = self.teardown(spec, false).await {
                    tracing::warn!(sandbox = %spec.id, error = %cleanup, "clean-up after a failed create");
                }
                Err(e)
            }
        }
    }

    async fn provision_inner(&self, spec: &SandboxSpec) -> Result<Started, RuntimeError> {
        let image = self.images.ensure(&spec.image).await?;
        let entrypoint = spec.entrypoint.as_ref().unwrap_or(&image.config.entrypoint);
        // As in Kubernetes: a new entrypoint drops the image's cmd unless cmd is given too.
        let cmd = match (&spec.entrypoint, &spec.cmd) {
            (_, Some(cmd)) => cmd,
            (Some(_), None) => &Vec::new(),
            (None, None) => &image.config.cmd,
        };
        let args: Vec<String> = entrypoint.iter().chain(cmd.iter()).cloned().collect();
        if args.is_empty() {
            return Err(RuntimeError::Invalid(format!(
                "image {} has no entrypoint or cmd to run",
                spec.image
            )));
        }
        let dir = self.dir(&spec.id);
        mkdir_private(&dir)?;
        let _ = std::fs::remove_file(self.exit_path(&spec.id));
        let egress =
            Egress::from_whitelist(spec.egress.as_deref()).map_err(RuntimeError::Invalid)?;
        let network = self.network().await?;
        let attachment = network.attach(&spec.id, spec.slot, &egress).await?;

        let etc = dir.join("etc");
        mkdir_private(&etc)?;
        let files = [
            ("resolv.conf", network.resolv_conf()),
            (
                "hosts",
                format!(
                    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n{}\t{}\n",
                    attachment.address, spec.name
                ),
            ),
            ("hostname", format!("{}\n", spec.name)),
        ];
        let mut etc_files = Vec::new();
        for (name, content) in files {
            let path = etc.join(name);
            std::fs::write(&path, content).map_err(|e| RuntimeError::io("write /etc files", e))?;
            etc_files.push((name.to_string(), path));
        }

        let rootfs = RootFs::under(&dir);
        let owner = (spec.uid != 0).then_some((spec.uid, spec.gid));
        let mut lowers = self.images.layer_dirs(&image);
        for layer in &spec.layers {
            let dir = self.layer_dir(layer);
            if !dir.is_dir() {
                return Err(RuntimeError::Invalid(format!(
                    "snapshot layer {layer} of this sandbox is missing"
                )));
            }
            lowers.push(dir);
        }
        let mount_rootfs = {
            let rootfs = rootfs.clone();
            tokio::task::spawn_blocking(move || rootfs.mount(&lowers, owner))
        };
        mount_rootfs
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))??;

        let capabilities = spec
            .capabilities
            .iter()
            .map(|c| bundle::parse_capability(c).map_err(RuntimeError::Invalid))
            .collect::<Result<Vec<_>, _>>()?;
        let config = BundleConfig {
            hostname: spec.name.clone(),
            rootfs: rootfs.merged.clone(),
            args,
            env: bundle::merge_env(&[&image.config.env, &spec.env]),
            cwd: image
                .config
                .working_dir
                .clone()
                .filter(|d| d.starts_with('/'))
                .unwrap_or_else(|| "/".to_string()),
            uid: spec.uid,
            gid: spec.gid,
            additional_gids: spec.additional_gids.clone(),
            capabilities,
            cpu_millis: spec.cpu_millis,
            memory_bytes: spec.memory_bytes,
            netns: attachment.netns_path.clone(),
            cgroups_path: cgroup::cgroups_path(&spec.id),
            etc_files,
        };
        let oci = bundle::spec(&config)?;
        let bundle_dir = dir.join("bundle");
        let json = serde_json::to_vec(&oci).map_err(|e| RuntimeError::Spec(e.to_string()))?;
        write_private(&bundle_dir.join("config.json"), &json)?;

        let pid = self.spawn_shim(spec).await?;
        self.runc.start(&spec.id).await?;
        Ok(Started { pid })
    }

    async fn spawn_shim(&self, spec: &SandboxSpec) -> Result<i32, RuntimeError> {
        let dir = self.dir(&spec.id);
        let shim_log = std::fs::File::create(dir.join("shim.log"))
            .map_err(|e| RuntimeError::io("create shim log", e))?;
        let mut cmd = tokio::process::Command::new(&self.shim_exe);
        cmd.arg("shim")
            .arg("--id")
            .arg(&spec.id)
            .arg("--bundle")
            .arg(dir.join("bundle"))
            .arg("--runtime")
            .arg(self.runc.binary())
            .arg("--root")
            .arg(self.runc.root())
            .arg("--log")
            .arg(self.log_path(&spec.id))
            .arg("--max-log-bytes")
            .arg(self.config.max_log_bytes.to_string())
            .arg("--exit-file")
            .arg(self.exit_path(&spec.id))
            .env_remove("SBX_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(shim_log))
            .kill_on_drop(false);
        // SAFETY: setsid is async-signal-safe; the shim must leave the daemon's session so
        // that it survives the daemon.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()
                    .map(drop)
                    .map_err(std::io::Error::from)
            });
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| RuntimeError::io("start the sandbox shim", e))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| RuntimeError::Unavailable("shim has no stdout".into()))?;
        let shim_pid = child.id().unwrap_or(0);
        std::fs::write(dir.join("shim.pid"), shim_pid.to_string())
            .map_err(|e| RuntimeError::io("write shim pid", e))?;
        // The shim runs on after we stop waiting for it; reap it when it ends.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let mut line = String::new();
        let read = tokio::time::timeout(
            Duration::from_secs(60),
            BufReader::new(stdout).read_line(&mut line),
        )
        .await;
        match read {
            Ok(Ok(_)) => {}
            _ => {
                return Err(RuntimeError::Unavailable(
                    "the sandbox shim did not report".into(),
                ));
            }
        }
        match serde_json::from_str::<ShimReport>(line.trim()) {
            Ok(ShimReport::Created { pid }) => Ok(pid),
            Ok(ShimReport::Failed { error }) => Err(RuntimeError::Command {
                command: format!("{} create", self.runc.kind().binary()),
                message: error,
            }),
            Err(_) => Err(RuntimeError::Corrupt(format!(
                "unexpected shim report: {}",
                line.trim()
            ))),
        }
    }

    /// Runs `command` with `/bin/sh -c` in the sandbox as its user, in its namespaces and
    /// cgroup; kills the command's process tree on timeout; caps each stream.
    pub async fn exec(
        &self,
        id: &str,
        command: &str,
        timeout: Duration,
    ) -> Result<ExecResponse, RuntimeError> {
        let started = Instant::now();
        let dir = self.dir(id);
        let config_bytes = tokio::fs::read(dir.join("bundle").join("config.json"))
            .await
            .map_err(|e| RuntimeError::io("read sandbox config", e))?;
        let mut spec: oci_spec::runtime::Spec = serde_json::from_slice(&config_bytes)
            .map_err(|e| RuntimeError::Corrupt(format!("sandbox config: {e}")))?;
        let mut process = spec
            .process_mut()
            .take()
            .ok_or_else(|| RuntimeError::Corrupt("sandbox config has no process".into()))?;
        process.set_args(Some(vec!["/bin/sh".into(), "-c".into(), command.into()]));
        let nonce = format!("{:016x}", rand_u64());
        let process_path = dir.join(format!("exec-{nonce}.json"));
        let pid_path = dir.join(format!("exec-{nonce}.pid"));
        let json = serde_json::to_vec(&process).map_err(|e| RuntimeError::Spec(e.to_string()))?;
        write_private(&process_path, &json)?;
        let process_arg = process_path.display().to_string();
        let pid_arg = pid_path.display().to_string();
        let mut child = self
            .runc
            .command(&[
                "exec",
                "--process",
                &process_arg,
                "--pid-file",
                &pid_arg,
                id,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| RuntimeError::io("spawn runtime exec", e))?;
        let cap = self.config.exec_output_cap;
        let stdout = child
            .stdout
            .take()
            .map(|s| tokio::spawn(read_capped(s, cap)));
        let stderr = child
            .stderr
            .take()
            .map(|s| tokio::spawn(read_capped(s, cap)));
        let (status, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
            Ok(status) => (status.ok(), false),
            Err(_) => {
                if let Some(pid) = std::fs::read_to_string(&pid_path)
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
                {
                    process::kill_tree(pid);
                }
                let status = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                (status.ok().and_then(Result::ok), true)
            }
        };
        let collect = |handle: Option<tokio::task::JoinHandle<(Vec<u8>, bool)>>| async move {
            match handle {
                // Descendants that outlive the command may hold the pipe: don't wait forever.
                Some(h) => tokio::time::timeout(
                    Duration::from_millis(if timed_out { 200 } else { 2000 }),
                    h,
                )
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default(),
                None => (Vec::new(), false),
            }
        };
        let (out, out_cut) = collect(stdout).await;
        let (err, err_cut) = collect(stderr).await;
        let _ = std::fs::remove_file(&process_path);
        let _ = std::fs::remove_file(&pid_path);
        let exit_code = if timed_out {
            124
        } else {
            match status {
                Some(s) => s.code().unwrap_or_else(|| {
                    128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(0)
                }),
                None => -1,
            }
        };
        Ok(ExecResponse {
            exit_code,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
            duration_ms: started.elapsed().as_millis() as u64,
            timed_out,
            truncated: out_cut || err_cut,
        })
    }

    /// Freezes the sandbox.
    pub async fn pause(&self, id: &str) -> Result<(), RuntimeError> {
        self.runc.pause(id).await
    }

    /// Thaws the sandbox.
    pub async fn resume(&self, id: &str) -> Result<(), RuntimeError> {
        self.runc.resume(id).await
    }

    /// The recorded exit of the main process, if it ended.
    pub fn exit_record(&self, id: &str) -> Option<ExitRecord> {
        ExitRecord::read(&self.exit_path(id))
    }

    /// Pid of the sandbox's shim, if recorded and alive.
    pub fn shim_pid(&self, id: &str) -> Option<i32> {
        std::fs::read_to_string(self.dir(id).join("shim.pid"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|&pid| process::alive(pid))
    }

    /// A snapshot of the sandbox's log.
    pub fn logs(&self, id: &str, tail: usize, since_secs: u64) -> String {
        logs::read(
            &self.log_path(id),
            tail,
            since_secs,
            time::OffsetDateTime::now_utc(),
        )
    }

    /// The sandbox's cgroup readings.
    pub fn stats(&self, id: &str) -> Option<cgroup::CgroupStats> {
        cgroup::stats(&cgroup::cgroups_path(id))
    }

    /// Bytes the writable layer uses.
    pub fn writable_layer_bytes(&self, id: &str) -> u64 {
        overlay::disk_usage(&RootFs::under(&self.dir(id)).upper)
    }

    /// Stops the sandbox and removes its processes, mounts, cgroups and network; with
    /// `remove_files`, its directory too. Idempotent.
    pub async fn teardown(
        &self,
        spec: &SandboxSpec,
        remove_files: bool,
    ) -> Result<(), RuntimeError> {
        // Killing the container and removing its network are independent; the kernel's veth
        // removal is slow, so do both at once.
        let (stopped, detached) = tokio::join!(
            self.teardown_except_network(spec, remove_files),
            self.detach_network(spec)
        );
        stopped?;
        detached
    }

    /// Removes the sandbox's network (veth, netns, nftables rules). Idempotent.
    pub async fn detach_network(&self, spec: &SandboxSpec) -> Result<(), RuntimeError> {
        Ok(self.network().await?.detach(&spec.id, spec.slot).await?)
    }

    /// Whether sandbox network namespaces of this daemon's prefix exist (leftovers to clean
    /// even when no sandbox record remains).
    pub fn has_network_leftovers(&self) -> bool {
        std::fs::read_dir("/run/netns").is_ok_and(|entries| {
            entries.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&self.network_config.netns_prefix)
            })
        })
    }

    /// Stops the sandbox and removes its processes, mounts and cgroups (and with
    /// `remove_files` its directory), leaving its network for [`Sbxd::detach_network`].
    pub async fn teardown_except_network(
        &self,
        spec: &SandboxSpec,
        remove_files: bool,
    ) -> Result<(), RuntimeError> {
        let id = spec.id.as_str();
        // Frozen processes cannot die: thaw first (a file read, not a runtime call).
        if cgroup::is_frozen(&cgroup::cgroups_path(id)) {
            let _ = self.runc.resume(id).await;
        }
        self.runc.delete(id, true).await?;
        if let Some(shim) = self.shim_pid(id) {
            let _ = tokio::time::timeout(Duration::from_secs(5), process::wait_exit(shim)).await;
            if process::alive(shim) {
                process::kill_tree(shim);
            }
        }
        let rootfs = RootFs::under(&self.dir(id));
        tokio::task::spawn_blocking(move || rootfs.unmount())
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))??;
        cgroup::remove_dirs(&cgroup::cgroups_path(id));
        if remove_files {
            let dir = self.dir(id);
            for mount in overlay::mounts_under(&dir) {
                let _ = nix::mount::umount2(&mount, nix::mount::MntFlags::MNT_DETACH);
            }
            match tokio::fs::remove_dir_all(&dir).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(RuntimeError::io("remove sandbox files", e)),
            }
        }
        Ok(())
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), RuntimeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = path.parent() {
        mkdir_private(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| RuntimeError::io(&format!("write {}", path.display()), e))?;
    file.write_all(bytes)
        .map_err(|e| RuntimeError::io(&format!("write {}", path.display()), e))
}

fn rand_u64() -> u64 {
    let mut buf = [0u8; 8];
    let _ = getrandom::fill(&mut buf);
    u64::from_le_bytes(buf)
}
