//! The sbxd engine: provisions, execs in, pauses and tears down sandboxes from a
//! [`SandboxSpec`], over the runtime CLI, the image store and the network manager.
use std::os::fd::AsRawFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::runtime::bundle::{self, BundleConfig};
use crate::runtime::idmap::{self, IdMap};
use crate::runtime::images::{Image, ImageStore};
use crate::runtime::network::{self, Egress, NetworkConfig, NetworkError, NetworkManager};
use crate::runtime::overlay::{self, RootFs};
use crate::runtime::runc::{Runc, RuntimeKind};
use crate::runtime::shim::{ExitRecord, ShimReport};
use crate::runtime::{RuntimeError, cgroup, logs, process};
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
    /// Run every sandbox in a user namespace (its root is an unprivileged host id). Needed
    /// for warm fork; `false` runs sandboxes with host ids, as plain runc does.
    #[serde(default = "default_true")]
    pub user_namespace: bool,
    /// Host id of a sandbox's root in its user namespace; ids `0..65535` inside map to
    /// `idMapBase..idMapBase+65535` on the host.
    #[serde(default = "default_id_map_base")]
    pub id_map_base: u32,
    /// The CRIU binary used for warm fork (a name looked up in `PATH`, or a path).
    #[serde(default = "default_criu")]
    pub criu: PathBuf,
}

fn default_true() -> bool {
    true
}
fn default_id_map_base() -> u32 {
    100_000
}
fn default_criu() -> PathBuf {
    PathBuf::from("criu")
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
            user_namespace: true,
            id_map_base: default_id_map_base(),
            criu: default_criu(),
        }
    }
}

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
    /// Network slot (address pool index); the platform gives each slot to one sandbox at a time.
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
    /// Nodes the sandbox may run on (`None`: any).
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
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
    /// The user namespace mapping of sandboxes (None: `userNamespace = false`).
    id_map: Option<IdMap>,
    /// Where the idmapped view of the image layer store is mounted (on the first create).
    layers_view: PathBuf,
    layers_view_ready: tokio::sync::OnceCell<()>,
    /// CRIU images of warm forks in progress (emptied at start-up).
    checkpoints_dir: PathBuf,
    /// Whether CRIU can serve warm forks here, or why not (found out on first use).
    criu_check: tokio::sync::OnceCell<Result<(), String>>,
}

/// Result of a started sandbox.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    /// Host pid of the sandbox's init.
    pub pid: i32,
}

/// Checks that `criu` runs and is version 4 or later (3.x fails on current kernels).
async fn check_criu(criu: &Path) -> Result<(), String> {
    let output = tokio::process::Command::new(criu)
        .arg("--version")
        .output()
        .await
        .map_err(|e| {
            format!(
                "warm fork needs CRIU 4 and `{}` cannot run ({e}); install it with \
                 scripts/install-criu or set [runtime] criu",
                criu.display()
            )
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    if major < 4 {
        return Err(format!(
            "warm fork needs CRIU 4 or later; `{}` is version {:?}",
            criu.display(),
            version
        ));
    }
    Ok(())
}

/// Sets the hostname in the UTS namespace of `pid` (a restored sandbox comes back with its
/// source's).
async fn set_hostname(pid: i32, name: &str) -> Result<(), RuntimeError> {
    let name = name.to_string();
    let set = std::thread::spawn(move || -> std::io::Result<()> {
        let uts = std::fs::File::open(format!("/proc/{pid}/ns/uts"))?;
        // The namespace switch is this thread's alone, and the thread ends right after.
        nix::sched::setns(&uts, nix::sched::CloneFlags::CLONE_NEWUTS)?;
        nix::unistd::sethostname(&name)?;
        Ok(())
    });
    tokio::task::spawn_blocking(move || set.join())
        .await
        .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
        .map_err(|_| RuntimeError::Unavailable("setting the hostname panicked".into()))?
        .map_err(|e| RuntimeError::io("set the restored sandbox's hostname", e))
}

/// With user namespaces the runtime mounts a sandbox's root as the sandbox's own root, an
/// unprivileged host id, which must be able to reach it: the data dir and the sandboxes dir
/// get search (not read) permission for others, and every dir above must have it already.
fn open_path_for_sandbox_roots(data_dir: &Path, sandboxes_dir: &Path) -> Result<(), RuntimeError> {
    use std::os::unix::fs::PermissionsExt;
    for dir in [data_dir, sandboxes_dir] {
        let meta = std::fs::metadata(dir)
            .map_err(|e| RuntimeError::io(&format!("stat {}", dir.display()), e))?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o001 == 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o011))
                .map_err(|e| RuntimeError::io(&format!("chmod {}", dir.display()), e))?;
        }
    }
    let absolute = std::path::absolute(data_dir)
        .map_err(|e| RuntimeError::io(&format!("resolve {}", data_dir.display()), e))?;
    for dir in absolute.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(dir) else {
            continue;
        };
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o001 == 0 {
            return Err(RuntimeError::Invalid(format!(
                "sandboxes run in user namespaces and their root ids must reach the data dir, \
                 but {} is mode {mode:o}: give it search permission (chmod o+x) or set \
                 [runtime] userNamespace = false",
                dir.display()
            )));
        }
    }
    Ok(())
}

fn mkdir_private(dir: &Path) -> Result<(), RuntimeError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| RuntimeError::io(&format!("create {}", dir.display()), e))
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
        let id_map = if config.user_namespace {
            if config.id_map_base == 0
                || config.id_map_base.checked_add(idmap::ID_MAP_SIZE).is_none()
            {
                return Err(RuntimeError::Invalid(format!(
                    "[runtime] idMapBase {} must be between 1 and {}",
                    config.id_map_base,
                    u32::MAX - idmap::ID_MAP_SIZE
                )));
            }
            open_path_for_sandbox_roots(data_dir, &sandboxes_dir)?;
            Some(IdMap::new(config.id_map_base))
        } else {
            None
        };
        let checkpoints_dir = data_dir.join("checkpoints");
        // Images of forks a crash interrupted are of no use any more.
        let _ = std::fs::remove_dir_all(&checkpoints_dir);
        mkdir_private(&checkpoints_dir)?;
        if config.user_namespace {
            std::fs::set_permissions(
                &checkpoints_dir,
                std::os::unix::fs::PermissionsExt::from_mode(0o711),
            )
            .map_err(|e| RuntimeError::io("chmod the checkpoints dir", e))?;
        }
        Ok(Sbxd {
            checkpoints_dir,
            criu_check: tokio::sync::OnceCell::new(),
            id_map,
            layers_view: data_dir.join("images-idmapped"),
            layers_view_ready: tokio::sync::OnceCell::new(),
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
            tokio::task::spawn_blocking(move || crate::runtime::flatten::copy_entry(&upper, &tmp))
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
                crate::runtime::flatten::merge_layers(&dirs, &tmp)?;
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
        self.provision_from(spec, None).await
    }

    /// Like [`Sbxd::provision`]; with `checkpoint`, the sandbox's processes are restored from
    /// those CRIU images (a warm fork) instead of started afresh.
    pub async fn provision_from(
        &self,
        spec: &SandboxSpec,
        checkpoint: Option<&Path>,
    ) -> Result<Started, RuntimeError> {
        match self.provision_inner(spec, checkpoint).await {
            Ok(started) => Ok(started),
            Err(e) => {
                if let Err(cleanup) = self.teardown(spec, false).await {
                    tracing::warn!(sandbox = %spec.id, error = %cleanup, "clean-up after a failed create");
                }
                Err(e)
            }
        }
    }

    async fn provision_inner(
        &self,
        spec: &SandboxSpec,
        checkpoint: Option<&Path>,
    ) -> Result<Started, RuntimeError> {
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
        let attachment = network.attachment(&spec.id, spec.slot)?;

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
        if let Some(map) = self.id_map {
            // The runtime sets up mounts as the sandbox's root, an unprivileged host id: it
            // needs its way into the sandbox dir (nobody else gets one).
            let root = Some(nix::unistd::Uid::from_raw(map.host_id(0)));
            let group = Some(nix::unistd::Gid::from_raw(map.host_id(0)));
            for path in [&dir, &etc] {
                nix::unistd::chown(path, root, group)
                    .map_err(|e| RuntimeError::io("chown the sandbox dir", e.into()))?;
            }
        }

        let rootfs = RootFs::under(&dir);
        let owner = match self.id_map {
            Some(map) => Some((map.host_id(spec.uid), map.host_id(spec.gid))),
            None => (spec.uid != 0).then_some((spec.uid, spec.gid)),
        };
        let mut lowers = self.image_lowers(&image).await?;
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
            netns: None,
            id_map: self.id_map,
            cgroups_path: cgroup::cgroups_path(&spec.id),
            etc_files,
        };
        let oci = bundle::spec(&config)?;
        let bundle_dir = dir.join("bundle");
        let json = serde_json::to_vec(&oci).map_err(|e| RuntimeError::Spec(e.to_string()))?;
        write_private(&bundle_dir.join("config.json"), &json)?;

        let pid = self.spawn_shim(spec, checkpoint).await?;
        // A restored sandbox comes back with the source's eth0 (and address): replace it.
        let attach = || {
            network.attach_to_pid(
                &spec.id,
                spec.slot,
                &egress,
                pid as u32,
                checkpoint.is_some(),
            )
        };
        match attach().await {
            // The platform gives each slot to one sandbox at a time: whatever holds it is left
            // over from a removal a crash or a failure cut short. A dirty slot is cleaned,
            // never a failed sandbox.
            Err(NetworkError::SlotInUse(slot)) => {
                tracing::warn!(sandbox = %spec.id, slot, "the sandbox's network slot held objects no sandbox owns; removing them");
                network.clear_slot(slot).await?;
                attach().await?;
            }
            other => {
                other?;
            }
        }
        if checkpoint.is_some() {
            set_hostname(pid, &spec.name).await?;
        } else {
            self.runc.start(&spec.id).await?;
        }
        Ok(Started { pid })
    }

    /// Why a warm fork of the sandbox `spec` cannot be done here, if it cannot: CRIU 4 must
    /// run, the runtime must be runc, and the sandbox must have its own user namespace.
    pub async fn warm_fork_unsupported(&self, spec: &SandboxSpec) -> Option<String> {
        if self.runc.kind() != RuntimeKind::Runc {
            return Some(format!(
                "warm fork needs runc with CRIU; this daemon runs sandboxes with {}",
                self.runc.kind().binary()
            ));
        }
        let config = tokio::fs::read(self.dir(&spec.id).join("bundle").join("config.json"))
            .await
            .ok()
            .and_then(|b| serde_json::from_slice::<oci_spec::runtime::Spec>(&b).ok());
        let has_userns = config
            .as_ref()
            .and_then(|c| c.linux().as_ref())
            .and_then(|l| l.namespaces().clone())
            .is_some_and(|ns| {
                ns.iter().any(|n| {
                    n.typ() == oci_spec::runtime::LinuxNamespaceType::User && n.path().is_none()
                })
            });
        if !has_userns {
            return Some(
                "warm fork needs the sandbox to run in its own user namespace \
                 ([runtime] userNamespace = true when it was created)"
                    .to_string(),
            );
        }
        let criu = self.config.criu.clone();
        self.criu_check
            .get_or_init(|| async move { check_criu(&criu).await })
            .await
            .clone()
            .err()
    }

    /// Warm-fork capture: with the sandbox frozen, dumps its processes with CRIU into a new
    /// checkpoint dir (leaving them running) and copies its writable layer, so memory and
    /// files are of the same instant; thaws it. Returns the checkpoint dir, layer id and size.
    pub async fn capture_warm(
        &self,
        spec: &SandboxSpec,
    ) -> Result<(PathBuf, String, u64), RuntimeError> {
        let id = spec.id.as_str();
        let images = self.checkpoints_dir.join(format!("{:016x}", rand_u64()));
        mkdir_private(&images)?;
        if let Some(map) = self.id_map {
            // CRIU's restored task reads some images from inside the sandbox's new user
            // namespace: before CRIU has written its id maps (still host root, but with no
            // capability over unmapped files: the owner bits) and after (the sandbox's root,
            // host id 100000: the group bits). Owner root, group the sandbox's root, 0750,
            // serves both; the images hold its memory, so nobody else gets in. (Owned by the
            // sandbox's root alone, a restore failed now and then with "Unable to open
            // timens-0.img: Permission denied", when the task read it before the maps.)
            let root = map.host_id(0);
            nix::unistd::chown(&images, None, Some(nix::unistd::Gid::from_raw(root)))
                .map_err(|e| RuntimeError::io("chown the checkpoint dir", e.into()))?;
            std::fs::set_permissions(&images, std::os::unix::fs::PermissionsExt::from_mode(0o750))
                .map_err(|e| RuntimeError::io("chmod the checkpoint dir", e))?;
        }
        let cgroup_path = cgroup::cgroups_path(id);
        let freeze = !cgroup::is_frozen(&cgroup_path);
        if freeze {
            self.runc.pause(id).await?;
        }
        let captured = async {
            self.runc.checkpoint(id, &self.config.criu, &images).await?;
            self.copy_upper(spec).await
        }
        .await;
        if freeze {
            if let Err(e) = self.runc.resume(id).await {
                tracing::error!(sandbox = %id, error = %e, "thawing after a warm-fork checkpoint");
            }
        }
        match captured {
            Ok((layer, size)) => Ok((images, layer, size)),
            Err(e) => {
                self.remove_checkpoint(&images).await;
                Err(e)
            }
        }
    }

    /// Removes a checkpoint dir made by [`Sbxd::capture_warm`].
    pub async fn remove_checkpoint(&self, images: &Path) {
        if images.starts_with(&self.checkpoints_dir) {
            let _ = tokio::fs::remove_dir_all(images).await;
        }
    }

    /// The image's layer dirs as the sandbox's lower dirs: through the idmapped view of the
    /// store when sandboxes have a user namespace.
    async fn image_lowers(&self, image: &Image) -> Result<Vec<PathBuf>, RuntimeError> {
        let dirs = self.images.layer_dirs(image);
        let Some(map) = self.id_map else {
            return Ok(dirs);
        };
        let store = self.images.layers_root();
        self.layers_view_ready
            .get_or_try_init(|| {
                let (store, view) = (store.clone(), self.layers_view.clone());
                async move {
                    tokio::task::spawn_blocking(move || idmap::mount_view(&store, &view, map))
                        .await
                        .map_err(|e| RuntimeError::Unavailable(e.to_string()))?
                }
            })
            .await?;
        Ok(dirs
            .into_iter()
            .map(|dir| match dir.strip_prefix(&store) {
                Ok(rel) => self.layers_view.join(rel),
                Err(_) => dir,
            })
            .collect())
    }

    /// Unmounts what the engine mounted for all sandboxes (at daemon shutdown; running
    /// sandboxes keep their own mounts).
    pub fn shutdown(&self) {
        if self.layers_view_ready.initialized() {
            idmap::unmount_view(&self.layers_view);
        }
    }

    /// Starts the sandbox's shim, which creates the container (or, with `restore_from`,
    /// restores it from a CRIU checkpoint); returns the container init's pid.
    async fn spawn_shim(
        &self,
        spec: &SandboxSpec,
        restore_from: Option<&Path>,
    ) -> Result<i32, RuntimeError> {
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
            .arg("--criu")
            .arg(&self.config.criu)
            .env_remove("SBX_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(shim_log))
            .kill_on_drop(false);
        if let Some(images) = restore_from {
            cmd.arg("--restore-from").arg(images);
        }
        if let Some(map) = self.id_map {
            cmd.arg("--stdio-owner").arg(map.host_id(0).to_string());
        }
        // CRIU brings the sandbox's veth back with its other end in CRIU's own network
        // namespace: run a restore on the host side of the sandbox network, where that end is
        // replaced at once.
        let host_netns = match (restore_from, self.network_config.host_netns.as_deref()) {
            (Some(_), Some(name)) => Some(
                std::fs::File::open(Path::new(network::NETNS_DIR).join(name))
                    .map_err(|e| RuntimeError::io("open the host-side netns", e))?,
            ),
            _ => None,
        };
        let host_netns_fd = host_netns.as_ref().map(|f| f.as_raw_fd());
        // SAFETY: setsid and setns are async-signal-safe; the shim must leave the daemon's
        // session so that it survives the daemon. The netns file stays open until `spawn`.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(fd) = host_netns_fd {
                    if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
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
            .map(|s| tokio::spawn(crate::shared::io::read_capped(s, cap)));
        let stderr = child
            .stderr
            .take()
            .map(|s| tokio::spawn(crate::shared::io::read_capped(s, cap)));
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

    /// Whether sandbox network pieces may be left on the host side (to clean even when no
    /// sandbox record remains): see [`network::leftovers_exist`].
    pub async fn has_network_leftovers(&self) -> bool {
        network::leftovers_exist(&self.network_config).await
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
