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
use crate::runtime::idmap::{self, IdMap, IdRanges};
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
    /// Host id of the root of the first sandbox range: range `n` maps ids `0..65535` inside
    /// to `idMapBase + n * 65536 ..` on the host.
    #[serde(default = "default_id_map_base")]
    pub id_map_base: u32,
    /// How many id ranges of 65,536 ids there are: the bound on sandboxes and prepared
    /// sandboxes on the host at once (each has a range of its own).
    #[serde(default = "default_id_map_ranges")]
    pub id_map_ranges: u32,
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
fn default_id_map_ranges() -> u32 {
    idmap::DEFAULT_RANGES
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
            id_map_ranges: default_id_map_ranges(),
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
    /// Host id range (with user namespaces): from the engine's [`IdRanges`], one sandbox's
    /// at a time. `None` in the records of a daemon from before ranges: range 0.
    #[serde(default)]
    pub id_range: Option<u32>,
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
    /// The host id ranges of sandboxes in use (with `userNamespace`).
    id_ranges: IdRanges,
    /// User namespaces of ranges, for idmapped views of the layer stores.
    namespaces: Arc<idmap::Namespaces>,
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
        layers::migrate_layers(&layers_dir, config.id_map_base)?;
        let shim_exe = std::env::current_exe()
            .map_err(|e| RuntimeError::io("find the sbx binary for the shim", e))?;
        if config.user_namespace {
            idmap::check_layout(config.id_map_base, config.id_map_ranges)
                .map_err(RuntimeError::Invalid)?;
            open_path_for_sandbox_roots(data_dir, &sandboxes_dir)?;
        }
        // A daemon from before per-sandbox ranges left this view mounted.
        let old_view = data_dir.join("images-idmapped");
        idmap::detach_view(&old_view);
        let _ = std::fs::remove_dir(&old_view);
        // A snapshot the daemon was killed in left its view of the writable layer mounted.
        for sandbox in std::fs::read_dir(&sandboxes_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let view = sandbox.path().join(layers::UPPER_VIEW);
            idmap::detach_view(&view);
            let _ = std::fs::remove_dir(&view);
        }
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
            id_ranges: IdRanges::new(config.id_map_ranges),
            namespaces: Arc::new(idmap::Namespaces::default()),
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

    /// The host id range allocator (with `userNamespace`; ranges are handed out by the
    /// platform for sandboxes and by the pool for prepared containers).
    pub fn id_ranges(&self) -> &IdRanges {
        &self.id_ranges
    }

    /// A new id range for a sandbox (`None` without user namespaces).
    pub fn allocate_id_range(&self) -> Result<Option<u32>, RuntimeError> {
        if self.config.user_namespace {
            self.id_ranges.allocate().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Counts the range of a sandbox found at start-up as in use, and gives its dir the
    /// owners of [`provision::give_way_in`] (an older sbx gave it to the sandbox's root).
    pub fn adopt_id_range(&self, spec: &SandboxSpec) {
        let Some(map) = self.id_map(spec) else {
            return;
        };
        self.id_ranges.adopt(spec.id_range.unwrap_or(0));
        let (dir, etc) = (self.dir(&spec.id), self.dir(&spec.id).join("etc"));
        let dirs: Vec<&Path> = [&dir, &etc]
            .into_iter()
            .filter(|d| d.is_dir())
            .map(PathBuf::as_path)
            .collect();
        if let Err(e) = provision::give_way_in(&dirs, map) {
            tracing::warn!(sandbox = %spec.id, error = %e, "the owners of a sandbox dir");
        }
    }

    /// Gives back the range of a sandbox whose processes are dead and files removed.
    pub fn release_id_range(&self, spec: &SandboxSpec) {
        if self.config.user_namespace {
            self.id_ranges.release(spec.id_range.unwrap_or(0));
        }
    }

    /// The user namespace mapping of the sandbox `spec` (None: `userNamespace = false`).
    pub fn id_map(&self, spec: &SandboxSpec) -> Option<IdMap> {
        self.config
            .user_namespace
            .then(|| IdMap::of_range(self.config.id_map_base, spec.id_range.unwrap_or(0)))
    }

    /// What the root filesystem of the sandbox `spec` is made of: the image's layers, then
    /// its snapshot layers (checked to exist), and the id mapping to see them through.
    fn lowers(&self, spec: &SandboxSpec, image: &Image) -> Result<Lowers, RuntimeError> {
        let mut snapshot_layers = Vec::new();
        for layer in &spec.layers {
            if !self.layer_dir(layer).is_dir() {
                return Err(RuntimeError::Invalid(format!(
                    "snapshot layer {layer} of this sandbox is missing"
                )));
            }
            snapshot_layers.push(layer.clone());
        }
        Ok(Lowers {
            image_layers: self.images.layer_dirs(image),
            image_store: self.images.layers_root(),
            snapshot_layers,
            snapshot_store: self.layers_dir.clone(),
            map: self.id_map(spec),
            namespaces: self.namespaces.clone(),
        })
    }
}

/// The lower layers of a sandbox's root filesystem, and how it sees them.
struct Lowers {
    /// The image's layer dirs, lowest first (in `image_store`).
    image_layers: Vec<PathBuf>,
    image_store: PathBuf,
    /// Snapshot layer ids, lowest first (in `snapshot_store`).
    snapshot_layers: Vec<String>,
    snapshot_store: PathBuf,
    /// The sandbox's id mapping: the stores hold container ids, seen through views of them
    /// for this mapping.
    map: Option<IdMap>,
    namespaces: Arc<idmap::Namespaces>,
}

impl Lowers {
    /// Mounts `rootfs` over these layers. With a mapping, the stores are seen through
    /// idmapped views mounted in a new dir under `<dir>/.views` for the time of the overlay
    /// mount: the overlay holds its layers, so the views can go right after. Returns that
    /// dir, for the caller to remove ([`idmap::remove_view_set`]) off the create's path;
    /// views a crash left are removed first. No mount per sandbox is left but its overlay.
    fn mount(
        self,
        dir: &Path,
        rootfs: &RootFs,
        owner: Option<(u32, u32)>,
    ) -> Result<Option<PathBuf>, RuntimeError> {
        let Some(map) = self.map else {
            let mut lowers = self.image_layers;
            lowers.extend(
                self.snapshot_layers
                    .iter()
                    .map(|l| self.snapshot_store.join(l)),
            );
            return rootfs.mount(&lowers, owner).map(|()| None);
        };
        let all_views = dir.join(".views");
        idmap::remove_view_sets(&all_views);
        let set = all_views.join(format!("{:016x}", rand_u64()));
        let views = [set.join("images"), set.join("layers")];
        let mounted = (|| {
            self.namespaces
                .mount_view(&self.image_store, &views[0], map, false)?;
            let mut lowers: Vec<PathBuf> = self
                .image_layers
                .iter()
                .map(|layer| match layer.strip_prefix(&self.image_store) {
                    Ok(rel) => views[0].join(rel),
                    Err(_) => layer.clone(),
                })
                .collect();
            if !self.snapshot_layers.is_empty() {
                self.namespaces
                    .mount_view(&self.snapshot_store, &views[1], map, false)?;
                lowers.extend(self.snapshot_layers.iter().map(|l| views[1].join(l)));
            }
            rootfs.mount(&lowers, owner)
        })();
        match mounted {
            Ok(()) => Ok(Some(set)),
            Err(e) => {
                idmap::remove_view_set(&set);
                Err(e)
            }
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
