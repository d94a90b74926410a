//! The sbxd engine: provisions, execs in, pauses and tears down sandboxes from a
//! [`SandboxSpec`], over the runtime CLI, the image store and the network manager.
mod checkpoint;
mod exec;
mod layers;
pub mod pool;
mod stream;
mod teardown;

pub use stream::StreamRequest;

use checkpoint::set_hostname;
use pool::{Pool, PoolConfig, PoolMetrics, Prepared};

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

/// How long a starting daemon waits for checkpoints its killed predecessor left running
/// before killing them (a dump takes well under a second here; CRIU's own limits are longer).
const ORPHANED_CHECKPOINT_PATIENCE: Duration = Duration::from_secs(60);

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
    /// Sandboxes prepared ahead of requests (`[runtime.pool]`).
    #[serde(default)]
    pub pool: PoolConfig,
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
            pool: PoolConfig::default(),
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
    /// Replaces the image's entrypoint (create, or restore overrides).
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    /// Replaces the image's cmd (create, or restore overrides).
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    /// Nodes the sandbox may run on (`None`: any).
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// The user's labels.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Unix seconds at which the platform deletes it.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// Seconds without activity before the platform pauses it.
    #[serde(default)]
    pub idle_timeout_seconds: Option<u64>,
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
    /// Containers prepared ahead of creates.
    pool: Pool,
}

/// Result of a started sandbox.
#[derive(Debug, Clone, Copy)]
pub struct Started {
    /// Host pid of the sandbox's init.
    pub pid: i32,
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
        pool_metrics: PoolMetrics,
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
        // Images of forks a crash interrupted are of no use any more, once the checkpoints
        // the crash left running are over.
        // (A checkpoint or restore in flight always has its images dir: with none, there is
        // nothing to wait for and no process list to read.)
        if std::fs::read_dir(&checkpoints_dir).is_ok_and(|mut d| d.next().is_some()) {
            checkpoint::wait_for_orphaned_checkpoints(runc.root(), ORPHANED_CHECKPOINT_PATIENCE)
                .await;
        }
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
            pool: Pool::new(config.pool.clone(), pool_metrics),
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
        if checkpoint.is_none() {
            if let Some(prepared) = self.pool.take_claimed(&spec.id) {
                return self.start_prepared(spec, prepared).await;
            }
        }
        self.provision_fresh(spec, checkpoint).await
    }

    /// Every step of a create, or of a warm fork's restore.
    async fn provision_fresh(
        &self,
        spec: &SandboxSpec,
        checkpoint: Option<&Path>,
    ) -> Result<Started, RuntimeError> {
        let mut phases = Phases::start();
        let image = self.images.ensure(&spec.image).await?;
        let egress =
            Egress::from_whitelist(spec.egress.as_deref()).map_err(RuntimeError::Invalid)?;
        let network = self.network().await?;
        let attachment = network.attachment(&spec.id, spec.slot)?;
        let dir = self.dir(&spec.id);
        mkdir_private(&dir)?;
        let _ = std::fs::remove_file(self.exit_path(&spec.id));
        // A prepared sandbox claimed before a crash is this sandbox's now.
        let _ = std::fs::remove_file(dir.join(pool::MARKER));
        self.make_container(
            spec,
            &image,
            network.resolv_conf(),
            Some(attachment.address),
            &mut phases,
        )
        .await?;
        // The host side of the network needs no process: it is made while the runtime
        // creates the container, and plugged into the container's namespace after.
        let (pid, attachment) = tokio::join!(
            self.spawn_shim(spec, checkpoint),
            self.prepare_network(network, spec, &egress)
        );
        let pid = pid?;
        let attachment = attachment?;
        phases.mark("create");
        // A restored sandbox comes back with the source's eth0 (and address): replace it.
        network
            .plug(&attachment, Some(pid as u32), checkpoint.is_some())
            .await?;
        phases.mark("network");
        if checkpoint.is_some() {
            set_hostname(pid, &spec.name).await?;
        } else {
            self.runc.start(&spec.id).await?;
        }
        phases.mark("start");
        tracing::debug!(sandbox = %spec.id, phases = %phases, "provisioned");
        Ok(Started { pid })
    }

    /// Starts a claimed prepared container as the sandbox `spec`: its name, its network,
    /// the runtime's start. One whose image reference names another image by now is
    /// replaced by a fresh create.
    async fn start_prepared(
        &self,
        spec: &SandboxSpec,
        prepared: Prepared,
    ) -> Result<Started, RuntimeError> {
        let mut phases = Phases::start();
        let image = self.images.ensure(&spec.image).await?;
        let pid = prepared.pid;
        if image.digest != prepared.image_digest || !process::alive(pid) {
            tracing::info!(sandbox = %spec.id, "the prepared sandbox is out of date (its image changed or it died): creating afresh");
            self.pool.discarded();
            self.teardown_id(&spec.id, true).await?;
            return self.provision_fresh(spec, None).await;
        }
        let dir = self.dir(&spec.id);
        std::fs::remove_file(dir.join(pool::MARKER))
            .map_err(|e| RuntimeError::io("claim a prepared sandbox", e))?;
        let egress =
            Egress::from_whitelist(spec.egress.as_deref()).map_err(RuntimeError::Invalid)?;
        let network = self.network().await?;
        let attachment = network.attachment(&spec.id, spec.slot)?;
        // In place: the container has these files bind-mounted since its create.
        write_etc_files(
            &dir.join("etc"),
            network.resolv_conf(),
            Some(attachment.address),
            &spec.name,
        )?;
        phases.mark("claim");
        let (named, attachment) = tokio::join!(
            set_hostname(pid, &spec.name),
            self.prepare_network(network, spec, &egress)
        );
        named?;
        let attachment = attachment?;
        network.plug(&attachment, Some(pid as u32), false).await?;
        phases.mark("network");
        self.runc.start(&spec.id).await?;
        phases.mark("start");
        tracing::debug!(sandbox = %spec.id, phases = %phases, "provisioned from the pool");
        Ok(Started { pid })
    }

    /// The host side of the sandbox's network (veth, addresses, rules), to be plugged into
    /// its namespace.
    async fn prepare_network(
        &self,
        network: &NetworkManager,
        spec: &SandboxSpec,
        egress: &Egress,
    ) -> Result<network::Attachment, RuntimeError> {
        match network.prepare(&spec.id, spec.slot, egress).await {
            // The platform gives each slot to one sandbox at a time: whatever holds it is
            // left over from a removal a crash or a failure cut short. A dirty slot is
            // cleaned, never a failed sandbox.
            Err(NetworkError::SlotInUse(slot)) => {
                tracing::warn!(sandbox = %spec.id, slot, "the sandbox's network slot held objects no sandbox owns; removing them");
                network.clear_slot(slot).await?;
                Ok(network.prepare(&spec.id, spec.slot, egress).await?)
            }
            other => Ok(other?),
        }
    }

    /// The container's files, up to its runtime config: `/etc` files (with `address` when
    /// the sandbox has one yet), the root filesystem, the bundle. The sandbox dir exists.
    async fn make_container(
        &self,
        spec: &SandboxSpec,
        image: &Image,
        resolv_conf: String,
        address: Option<std::net::Ipv4Addr>,
        phases: &mut Phases,
    ) -> Result<(), RuntimeError> {
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
        let etc = dir.join("etc");
        mkdir_private(&etc)?;
        let etc_files = write_etc_files(&etc, resolv_conf, address, &spec.name)?;
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
        let mut lowers = self.image_lowers(image).await?;
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
        phases.mark("prepare");
        mount_rootfs
            .await
            .map_err(|e| RuntimeError::Unavailable(e.to_string()))??;
        phases.mark("rootfs");

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
        let json = serde_json::to_vec(&oci).map_err(|e| RuntimeError::Spec(e.to_string()))?;
        write_private(&dir.join("bundle").join("config.json"), &json)?;
        phases.mark("bundle");
        Ok(())
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
}

/// Where a provisioning spent its time: each phase's duration, in order (for the debug log).
struct Phases {
    last: Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Phases {
    fn start() -> Phases {
        Phases {
            last: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Ends the phase `name` now.
    fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.done.push((name, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Phases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (name, took)) in self.done.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{name}={:.1}ms", took.as_secs_f64() * 1000.0)?;
        }
        Ok(())
    }
}

/// Writes the sandbox's `/etc` files into `etc` (in place: a container bind-mounts them)
/// and returns their names and paths. Without an address, `/etc/hosts` names the loopback
/// only.
fn write_etc_files(
    etc: &Path,
    resolv_conf: String,
    address: Option<std::net::Ipv4Addr>,
    name: &str,
) -> Result<Vec<(String, PathBuf)>, RuntimeError> {
    let mut hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n".to_string();
    if let Some(address) = address {
        hosts.push_str(&format!("{address}\t{name}\n"));
    }
    let files = [
        ("resolv.conf", resolv_conf),
        ("hosts", hosts),
        ("hostname", format!("{name}\n")),
    ];
    let mut written = Vec::new();
    for (file, content) in files {
        let path = etc.join(file);
        std::fs::write(&path, content).map_err(|e| RuntimeError::io("write /etc files", e))?;
        written.push((file.to_string(), path));
    }
    Ok(written)
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
