//! The sbxd engine: provisions, execs in, pauses and tears down sandboxes from a
//! [`SandboxSpec`], over the runtime CLI, the image store and the network manager.
mod checkpoint;
mod exec;
mod layers;
pub mod pool;
mod provision;
mod stream;
mod teardown;

pub use stream::StreamRequest;

use checkpoint::set_hostname;
use pool::{Pool, PoolConfig, PoolMetrics, Prepared};

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::runtime::bundle::{self, BundleConfig};
use crate::runtime::criu::CheckpointStore;
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
    /// The tenant's deny list, taken out of `egress` when the policy is written.
    #[serde(default)]
    pub egress_deny: Vec<String>,
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

impl SandboxSpec {
    /// The egress policy to enforce: the sandbox's list without its tenant's deny list.
    pub fn egress_policy(&self) -> Result<Egress, RuntimeError> {
        let egress =
            Egress::from_whitelist(self.egress.as_deref()).map_err(RuntimeError::Invalid)?;
        let deny = crate::shared::egress::tenant_denied_ranges(&self.egress_deny)
            .map_err(RuntimeError::Invalid)?;
        Ok(egress.without(&deny))
    }
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
    checkpoints: CheckpointStore,
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
        let (memory, disk) = (
            data_dir.join("checkpoints"),
            data_dir.join("checkpoints.disk"),
        );
        // Images of forks a crash interrupted are of no use any more, once the checkpoints
        // the crash left running are over.
        // (A checkpoint or restore in flight always has its images dir: with none, there is
        // nothing to wait for and no process list to read.)
        if CheckpointStore::has_leftovers(&memory, &disk) {
            checkpoint::wait_for_orphaned_checkpoints(runc.root(), ORPHANED_CHECKPOINT_PATIENCE)
                .await;
        }
        let checkpoints = CheckpointStore::prepare(
            &memory,
            &disk,
            if config.user_namespace { 0o711 } else { 0o700 },
        )?;
        Ok(Sbxd {
            pool: Pool::new(config.pool.clone(), pool_metrics),
            checkpoints,
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
