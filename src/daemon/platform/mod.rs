//! The platform seams (DESIGN.md §2): what the services need from the place where state and
//! sandboxes live, split by concern — [`IdentityStore`], [`TenantStore`], [`SandboxBackend`],
//! [`SnapshotBackend`], the [`images::ImageBackend`] — with [`Platform`] as their sum. `local`
//! is SQLite + sbxd on this host, `kubernetes` the cluster's objects; each has one file per
//! seam (`identity.rs`, `tenants.rs`, `sandboxes.rs`, `snapshots.rs`).
pub mod images;
pub mod install;
pub mod kubernetes;
mod lifetime;
pub mod local;

pub use lifetime::Lifetime;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::daemon::platform::images::ImageBackend;
use crate::shared::exec_stream::{ExecSession, ExecStreamQuery};
use crate::shared::models::identity::{ApiKey, RoleBindings};
use crate::shared::models::sandbox::{ExecResponse, Sandbox, SandboxMetrics};
use crate::shared::models::snapshot::{GcResult, Snapshot, SnapshotKind};
use crate::shared::models::tenant::{TenantSpec, TenantStatus};

/// A failure of the platform underneath a request. The first variants are the caller's
/// business (their messages are sent); the rest are logged and answered as 5xx.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// The object does not exist.
    #[error("{0}")]
    NotFound(String),
    /// An object of that name exists already.
    #[error("{0}")]
    AlreadyExists(String),
    /// The request cannot be carried out as given.
    #[error("{0}")]
    Invalid(String),
    /// The object's state does not allow the operation.
    #[error("{0}")]
    Conflict(String),
    /// A rule refused it whoever asks (a pull from a private address, a reserved namespace,
    /// a Pod the namespace's pod-security level would refuse): 403 naming the rule.
    #[error("{0}")]
    Forbidden(String),
    /// A quota of the platform's own refused it (e.g. a Kubernetes ResourceQuota).
    #[error("{0}")]
    QuotaExceeded(String),
    /// The platform cannot serve this now (runtime missing, cluster unreachable).
    #[error("{0}")]
    Unavailable(String),
    /// Another replica, serving at this URL, holds the lock the request needs (a tenant's
    /// quota Lease): the request is for it.
    #[error("the quota check is another replica's (at {0})")]
    Elsewhere(String),
    /// The operation did not finish in time and was undone.
    #[error("{0}")]
    Timeout(String),
    /// The service's deployment is not as its configuration says (e.g. the installer's image
    /// drifted from the pinned one): a 500 whose message the caller sees, since only an
    /// operator can fix it.
    #[error("{0}")]
    Misdeployed(String),
    /// The state store failed.
    #[error("state store: {0}")]
    Store(String),
    /// The image store failed.
    #[error("image store: {0}")]
    ImageStore(String),
    /// A file under the data dir could not be written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

/// Result of a platform call.
pub type PlatformResult<T> = Result<T, PlatformError>;

impl PlatformError {
    /// The error as a node's agent sends it (5xx kinds keep their message: the service logs
    /// it and answers with its own).
    pub fn to_fault(&self) -> crate::shared::agent::AgentFault {
        let kind = match self {
            PlatformError::NotFound(_) => "not_found",
            PlatformError::AlreadyExists(_) => "already_exists",
            PlatformError::Invalid(_) => "invalid",
            PlatformError::Conflict(_) => "conflict",
            PlatformError::QuotaExceeded(_) => "quota_exceeded",
            PlatformError::Forbidden(_) => "forbidden",
            PlatformError::Unavailable(_) => "unavailable",
            PlatformError::Timeout(_) => "timeout",
            _ => "internal",
        };
        crate::shared::agent::AgentFault {
            kind: kind.to_string(),
            message: self.to_string(),
        }
    }

    /// The error an agent's fault stands for.
    pub fn from_fault(fault: crate::shared::agent::AgentFault) -> PlatformError {
        let message = fault.message;
        match fault.kind.as_str() {
            "not_found" => PlatformError::NotFound(message),
            "already_exists" => PlatformError::AlreadyExists(message),
            "invalid" => PlatformError::Invalid(message),
            "conflict" => PlatformError::Conflict(message),
            "quota_exceeded" => PlatformError::QuotaExceeded(message),
            "forbidden" => PlatformError::Forbidden(message),
            "unavailable" => PlatformError::Unavailable(message),
            "timeout" => PlatformError::Timeout(message),
            _ => PlatformError::Store(message),
        }
    }

    /// The HTTP status an agent answers this error with.
    pub fn agent_status(&self) -> u16 {
        match self {
            PlatformError::NotFound(_) => 404,
            PlatformError::AlreadyExists(_) | PlatformError::Conflict(_) => 409,
            PlatformError::Invalid(_) => 400,
            PlatformError::QuotaExceeded(_) | PlatformError::Forbidden(_) => 403,
            PlatformError::Unavailable(_) => 503,
            PlatformError::Timeout(_) => 504,
            _ => 500,
        }
    }
}

/// An API key as stored: the record without a token, and the SHA-256 of its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// The record (its `token` is always `None`).
    pub key: ApiKey,
    /// SHA-256 of the secret part of the token.
    pub secret_sha256: [u8; 32],
}

/// A validated sandbox create, platform-neutral (also what the service sends a node's agent).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NewSandbox {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Image reference.
    pub image: String,
    /// Environment from the env file (`KEY=VALUE`), never logged.
    pub env: Vec<String>,
    /// Run before the sandbox reads Ready.
    pub before_script: Option<String>,
    /// CPU limit, millicores.
    pub cpu_millis: Option<u64>,
    /// Memory limit, bytes.
    pub memory_bytes: Option<u64>,
    /// Writable-layer limit, bytes.
    pub ephemeral_bytes: Option<u64>,
    /// Egress allow-list (None: unrestricted; empty: none).
    pub egress: Option<Vec<String>>,
    /// The tenant's `limits.network.egressDeny`: taken out of `egress` where it is enforced.
    #[serde(default)]
    pub egress_deny: Vec<String>,
    /// User id of the main process and execs.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
    /// Supplementary groups (fsGroup).
    pub additional_gids: Vec<u32>,
    /// Capabilities kept, `CAP_*` names.
    pub capabilities: Vec<String>,
    /// Backend name.
    pub backend: String,
    /// Nodes the sandbox may run on (its tenant's `spec.nodes`, narrowed by the key's
    /// `nodes`); `None`: any.
    pub nodes: Option<Vec<String>>,
    /// Replaces the image's entrypoint.
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    /// Replaces the image's cmd.
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    /// The user's labels.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// When it is deleted, and when it is paused for want of activity.
    #[serde(default)]
    pub lifetime: Lifetime,
    /// The tenant owning the namespace, as the service found it when it checked the quotas
    /// (`None`: no tenant owns it). Never sent to an agent nor stored.
    #[serde(skip)]
    pub owner: Option<SandboxOwner>,
}

/// What a platform needs of a new sandbox's tenant: its name (a label of the sandbox's
/// objects) and its network limits (the Pod's bandwidth).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxOwner {
    /// The tenant's name.
    pub name: String,
    /// Its `spec.limits.network`.
    pub network: Option<crate::shared::models::tenant::NetworkLimits>,
    /// Its `spec.limits.egressDeny`, parsed.
    pub egress_deny: Vec<crate::shared::egress::Ipv4Net>,
    /// Its `spec.limits.allowedCapabilities` (the pod-security level of its namespaces on
    /// Kubernetes follows from it).
    pub allowed_capabilities: Option<Vec<String>>,
    /// Its `spec.limits.allowDind`.
    pub allow_dind: bool,
}

/// A validated restore: the new sandbox's name and namespace, and overrides of the values
/// recorded with the snapshot (`None`: take the snapshot's).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestorePlan {
    /// Namespace of the snapshot and of the new sandbox.
    pub namespace: String,
    /// The new sandbox's name.
    pub new_name: String,
    /// Image override.
    pub image: Option<String>,
    /// CPU override, millicores.
    pub cpu_millis: Option<u64>,
    /// Memory override, bytes.
    pub memory_bytes: Option<u64>,
    /// Ephemeral storage override, bytes.
    pub ephemeral_bytes: Option<u64>,
    /// Entrypoint override.
    pub entrypoint: Option<Vec<String>>,
    /// Cmd override.
    pub cmd: Option<Vec<String>>,
    /// before_script override (`Some(None)`: none at all).
    pub before_script: Option<Option<String>>,
    /// Root disk size override, bytes (kql).
    pub root_disk_bytes: Option<u64>,
    /// Sidecar override (`dind` or `none`; kql).
    pub sidecar: Option<String>,
    /// Nodes the new sandbox may run on (`None`: any).
    pub nodes: Option<Vec<String>>,
}

/// What a quota check read of the usage ([`TenantStore::reservation_under`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    /// What the namespaces hold.
    pub held: Reservation,
    /// Read afresh (else from memory: it may still count something deleted meanwhile).
    pub exact: bool,
    /// What the read covered, in the platform's terms, for the lock's next holder
    /// ([`HeldLock::based_on`]); `None`: nothing to pass on.
    pub basis: Option<String>,
}

/// A lock shared with other replicas (a tenant's quota Lease), held until released; one
/// dropped unreleased (a cancelled request) is released in the background.
pub struct HeldLock {
    release: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    writes: Option<String>,
    doubted: Arc<std::sync::atomic::AtomicBool>,
    basis: Arc<std::sync::Mutex<Option<String>>>,
}

impl HeldLock {
    /// A lock that `release` gives up.
    pub fn new(release: impl std::future::Future<Output = ()> + Send + 'static) -> HeldLock {
        HeldLock {
            release: Some(Box::pin(release)),
            writes: None,
            doubted: Arc::default(),
            basis: Arc::default(),
        }
    }

    /// No lock to give up (a single replica's in-process lock is enough).
    pub fn none() -> HeldLock {
        HeldLock {
            release: None,
            writes: None,
            doubted: Arc::default(),
            basis: Arc::default(),
        }
    }

    /// The lock with what its previous holder recorded of the writes made under it (in the
    /// platform's own terms), when it recorded something.
    pub fn with_writes(mut self, writes: Option<String>) -> HeldLock {
        self.writes = writes;
        self
    }

    /// What the previous holder recorded of the writes made under the lock; `None`: nothing
    /// is known (the platform reads what it needs afresh).
    pub fn writes(&self) -> Option<&str> {
        self.writes.as_deref()
    }

    /// The lock whose [`HeldLock::doubt`] sets `flag` (its release reads it).
    pub fn with_doubt(mut self, flag: Arc<std::sync::atomic::AtomicBool>) -> HeldLock {
        self.doubted = flag;
        self
    }

    /// The lock whose [`HeldLock::based_on`] fills `basis` (its release reads it).
    pub fn with_basis(mut self, basis: Arc<std::sync::Mutex<Option<String>>>) -> HeldLock {
        self.basis = basis;
        self
    }

    /// What the quota check under the lock read ([`Usage::basis`]): the release passes it on,
    /// with the writes made under the lock, to the next holder.
    pub fn based_on(&self, basis: Option<String>) {
        *self.basis.lock().unwrap_or_else(|e| e.into_inner()) = basis;
    }

    /// Says that a write under the lock may have been made without its maker seeing it (a
    /// create that failed or was cancelled midway): the release records nothing of the writes
    /// then, and the next holder reads what it needs afresh.
    pub fn doubt(&self) {
        self.doubted
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Gives the lock up.
    pub async fn release(mut self) {
        if let Some(release) = self.release.take() {
            release.await;
        }
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(release);
            }
        }
    }
}

/// A tenant as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTenant {
    /// Name.
    pub name: String,
    /// Desired state.
    pub spec: TenantSpec,
    /// Bumped on every spec change.
    pub generation: i64,
    /// Unix seconds.
    pub created: i64,
    /// The status last written (by the leader's refresh, or by the write that changed the
    /// spec); `None` before the first.
    pub status: Option<TenantStatus>,
    /// Labels (checked with `names::validate_labels`).
    pub labels: std::collections::BTreeMap<String, String>,
}

/// What the sandboxes and snapshots of some namespaces hold against tenant quotas. A
/// sandbox's reservation stands while it exists, paused or not.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reservation {
    /// Sandboxes.
    pub sandboxes: u64,
    /// CPU limits, millicores.
    pub cpu_millis: u64,
    /// Memory limits, bytes.
    pub memory_bytes: u64,
    /// Disk, bytes: ephemeral-storage limits plus root volumes (the `disk` quota counts both).
    pub disk_bytes: u64,
    /// Of `disk_bytes`, what root volumes hold (kql's root PVC), bytes.
    pub root_disk_bytes: u64,
    /// Snapshot storage on disk, bytes.
    pub snapshot_bytes: u64,
}

impl std::ops::AddAssign for Reservation {
    fn add_assign(&mut self, other: Reservation) {
        self.sandboxes += other.sandboxes;
        self.cpu_millis += other.cpu_millis;
        self.memory_bytes += other.memory_bytes;
        self.disk_bytes += other.disk_bytes;
        self.root_disk_bytes += other.root_disk_bytes;
        self.snapshot_bytes += other.snapshot_bytes;
    }
}

/// What one sandbox holds now, for metering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterSample {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Backend.
    pub backend: String,
    /// Lower-case status (`running`, `paused`, `pending`, `failed`, `terminating`).
    pub state: String,
    /// CPU limit, millicores (0: none).
    pub cpu_millis: u64,
    /// Memory limit, bytes (0: none).
    pub memory_bytes: u64,
    /// Disk limit, bytes (0: none).
    pub disk_bytes: u64,
    /// Bytes the sandbox has sent out so far (a counter), when known.
    pub egress_bytes: Option<u64>,
}

/// Everything the platform meters at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metering {
    /// Every sandbox.
    pub sandboxes: Vec<MeterSample>,
    /// Snapshot storage per (namespace, backend of the snapshots' source), bytes.
    pub snapshot_bytes: std::collections::BTreeMap<(String, String), u64>,
}

/// Identity: API keys (hashes only), role bindings and the first admin token.
#[async_trait]
pub trait IdentityStore: Send + Sync {
    /// Every stored key.
    async fn list_keys(&self) -> PlatformResult<Vec<StoredKey>>;

    /// Stores a new key.
    async fn insert_key(&self, key: &StoredKey) -> PlatformResult<()>;

    /// Deletes every key with this name, returning their ids.
    async fn delete_keys_named(&self, name: &str) -> PlatformResult<Vec<String>>;

    /// Records a successful authentication of a key.
    async fn touch_key(&self, id: &str, at: i64) -> PlatformResult<()>;

    /// The role-binding document (empty when never written).
    async fn role_bindings(&self) -> PlatformResult<RoleBindings>;

    /// Replaces the role-binding document.
    async fn put_role_bindings(&self, document: &RoleBindings) -> PlatformResult<()>;

    /// Stores the first admin token where only the service's operator can read it; returns
    /// a description of where (for the log and `sbx login --bootstrap`).
    async fn store_bootstrap_token(&self, token: &str) -> PlatformResult<String>;

    /// A lock held while the first admin key is decided on and minted, so that replicas
    /// starting together mint one, not one each (of which all but one token would be lost).
    /// None is needed where one process serves.
    async fn lock_bootstrap(&self) -> PlatformResult<HeldLock> {
        Ok(HeldLock::none())
    }

    /// A counter that moves whenever the stored keys may have changed (a watch), when the
    /// store can tell; `None`: the key service re-reads the store on a timer.
    fn key_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

/// Tenancy: tenants, nodes and their dedications, placement facts, quota usage and locks,
/// metering samples.
#[async_trait]
pub trait TenantStore: Send + Sync {
    /// Why sandboxes, snapshots and tenants may not use this namespace on this platform (the
    /// cluster's own, sbx's own), if so; `for_tenant`: as a namespace a tenant claims.
    fn namespace_refused(&self, _namespace: &str, _for_tenant: bool) -> Option<String> {
        None
    }

    /// Whether production mode keeps sandboxes and snapshots to namespaces a tenant owns
    /// (the Kubernetes platform: the daemon's RBAC reaches only those).
    fn tenant_namespaces_only(&self) -> bool {
        false
    }

    /// Whether a tenant of this name exists.
    async fn tenant_exists(&self, name: &str) -> PlatformResult<bool>;

    /// Every tenant, by name.
    async fn list_tenants(&self) -> PlatformResult<Vec<StoredTenant>>;

    /// Stores a new tenant (`AlreadyExists` when the name is taken).
    async fn insert_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()>;

    /// Replaces a tenant's spec and generation (`NotFound` when absent).
    async fn update_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()>;

    /// Removes a tenant and what the platform made for it (`NotFound` when absent).
    async fn delete_tenant(&self, name: &str) -> PlatformResult<()>;

    /// Writes a tenant's observed state (a tenant deleted meanwhile is not an error).
    async fn write_tenant_status(&self, name: &str, status: &TenantStatus) -> PlatformResult<()>;

    /// The cluster's node names (local: this host).
    async fn node_names(&self) -> PlatformResult<Vec<String>>;

    /// Storage pools per node.
    async fn node_storage(&self) -> PlatformResult<crate::shared::models::node::NodeStorage>;

    /// Nodes dedicated to a tenant: node -> tenant.
    async fn node_dedications(&self) -> PlatformResult<std::collections::BTreeMap<String, String>>;

    /// Dedicates a node to a tenant (`None`: undedicates it).
    async fn set_node_dedication(&self, node: &str, tenant: Option<&str>) -> PlatformResult<()>;

    /// What every sandbox and snapshot holds now (usage metering).
    async fn metering(&self) -> PlatformResult<Metering>;

    /// What the sandboxes and snapshots of these namespaces reserve.
    async fn reservation(&self, namespaces: &[String]) -> PlatformResult<Reservation>;

    /// [`TenantStore::reservation`] as this replica sees it: a platform may answer from what
    /// it holds in memory, which may lag the store by a watch's delay (for `status.usage`,
    /// never for a quota decision).
    async fn reservation_seen(&self, namespaces: &[String]) -> PlatformResult<Reservation> {
        self.reservation(namespaces).await
    }

    /// [`TenantStore::reservation`] for a quota check under the tenant's lock (from
    /// [`TenantStore::lock_tenant`]; `writes`: its [`HeldLock::writes`]). A platform may
    /// answer from what it holds in memory when the lock says that holds every write made
    /// under it; such an answer may still count what was deleted meanwhile (not exact: a
    /// refusal is checked again against [`TenantStore::reservation`]), never less than is
    /// there.
    async fn reservation_under(
        &self,
        _writes: Option<&str>,
        namespaces: &[String],
    ) -> PlatformResult<Usage> {
        Ok(Usage {
            held: self.reservation(namespaces).await?,
            exact: true,
            basis: None,
        })
    }

    /// The limits of one sandbox (`sandboxes` is 1): what a fork of it reserves.
    async fn sandbox_size(&self, namespace: &str, name: &str) -> PlatformResult<Reservation>;

    /// The limits recorded with a snapshot: what a restore of it reserves before overrides.
    async fn snapshot_size(&self, namespace: &str, name: &str) -> PlatformResult<Reservation>;

    /// Takes a tenant's lock shared with other replicas for a quota check (the in-process lock
    /// is taken first). With `pass`, a lock another replica holds may answer
    /// [`PlatformError::Elsewhere`] instead of a wait: the request can be passed to it.
    async fn lock_tenant(&self, _tenant: &str, _pass: bool) -> PlatformResult<HeldLock> {
        Ok(HeldLock::none())
    }

    /// A counter that moves whenever the stored tenants may have changed (a watch), when the
    /// store can tell; `None`: the tenant service re-reads them on a timer.
    fn tenant_changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// Whether this replica runs the cluster-wide periodic work (the scheduled GC sweep, the
    /// tenant status refresh): the holder of the leader Lease; always, with one replica.
    fn is_leader(&self) -> bool {
        true
    }
}

/// Sandboxes: create, read, exec, logs, pause/resume, metrics, delete.
#[async_trait]
pub trait SandboxBackend: Send + Sync {
    /// The backends this platform runs sandboxes on, its default first.
    fn backends(&self) -> &'static [&'static str];

    /// Creates a sandbox; it becomes Ready asynchronously.
    async fn create_sandbox(&self, new: NewSandbox) -> PlatformResult<()>;

    /// The root volume a new sandbox of `backend` gets, bytes (`None`: it has none; its disk
    /// is its writable layer alone).
    fn root_disk_bytes(&self, _backend: &str) -> Option<u64> {
        None
    }

    /// Sandboxes of one namespace, or of all when `None`.
    async fn list_sandboxes(&self, namespace: Option<&str>) -> PlatformResult<Vec<Sandbox>>;

    /// A number that changes whenever any sandbox record changes (for caching lists);
    /// `None` when the platform cannot tell.
    fn sandboxes_version(&self) -> Option<u64>;

    /// One sandbox.
    async fn get_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<Sandbox>;

    /// Deletes a sandbox and everything it made.
    async fn delete_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()>;

    /// Runs a shell command in a sandbox.
    async fn exec_sandbox(
        &self,
        namespace: &str,
        name: &str,
        command: &str,
        timeout: Duration,
    ) -> PlatformResult<ExecResponse>;

    /// Starts a streamed exec of `request.command` (validated) in a running sandbox: its
    /// session (404 without the sandbox, 409 when it is not running).
    async fn exec_stream(
        &self,
        namespace: &str,
        name: &str,
        request: &ExecStreamQuery,
    ) -> PlatformResult<ExecSession>;

    /// A snapshot of the log of one of a sandbox's containers: the last `tail` lines of the
    /// last `since` seconds (`Invalid`, naming the sandbox's containers, for a container it
    /// does not have).
    async fn sandbox_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String>;

    /// Follows the log of one of a sandbox's containers: the lines [`Self::sandbox_logs`]
    /// gives, then new ones as they are written, until the sandbox stops or the receiver is
    /// dropped.
    async fn follow_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<tokio::sync::mpsc::Receiver<bytes::Bytes>>;

    /// Freezes a sandbox.
    async fn pause_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()>;

    /// Thaws a sandbox.
    async fn resume_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()>;

    /// CPU and memory of the sandboxes of a namespace (all when `None`).
    async fn sandbox_metrics(&self, namespace: Option<&str>)
    -> PlatformResult<Vec<SandboxMetrics>>;

    /// The longest exec this platform allows.
    fn max_exec_timeout(&self) -> Duration;

    /// Sets a sandbox's lifetime (404 without the sandbox).
    async fn set_lifetime(
        &self,
        namespace: &str,
        name: &str,
        lifetime: Lifetime,
    ) -> PlatformResult<()>;

    /// The sandboxes the leader's lifetime check acts on at `now` (Unix seconds), by
    /// (namespace, name): past their TTL, or idle past their timeout while they may be running;
    /// none being deleted. The check reads each one's record before it acts, so a platform may
    /// answer from its lifetimes alone (Kubernetes: the objects' annotations, not 10,000
    /// records built each second); this default reads the records.
    async fn due_sandboxes(&self, now: i64) -> PlatformResult<Vec<(String, String)>> {
        Ok(lifetime::due_records(self.list_sandboxes(None).await?, now))
    }

    /// Records activity in a sandbox now (best effort; a platform may record it coarsely, to
    /// a few seconds).
    async fn touch_sandbox(&self, namespace: &str, name: &str);

    /// The leader's periodic look at the nodes that run sandboxes (Kubernetes: the sbxd
    /// sandboxes of a node whose agent stopped reporting read Failed).
    async fn check_nodes(&self) -> PlatformResult<()> {
        Ok(())
    }
}

/// Snapshots: named and pause snapshots, fork, restore, GC.
#[async_trait]
pub trait SnapshotBackend: Send + Sync {
    /// Snapshots a running or paused sandbox without pausing it.
    async fn snapshot_sandbox(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<()>;

    /// Pauses a sandbox and snapshots it while frozen (kind `pause`).
    async fn pause_sandbox_with_snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
    ) -> PlatformResult<()>;

    /// Clones a sandbox into `new_name` (cold: its files; `warm`: its running processes
    /// too); returns when the clone runs.
    async fn fork_sandbox(
        &self,
        namespace: &str,
        source: &str,
        new_name: &str,
        snapshot: Option<&str>,
        warm: bool,
    ) -> PlatformResult<()>;

    /// Snapshots, filtered by namespace (all when `None`), source sandbox and kind.
    async fn list_snapshots(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
        kind: Option<SnapshotKind>,
    ) -> PlatformResult<Vec<Snapshot>>;

    /// One snapshot.
    async fn get_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<Snapshot>;

    /// The backend a snapshot was taken on (its `source-backend`).
    async fn snapshot_backend(&self, namespace: &str, name: &str) -> PlatformResult<String>;

    /// Deletes a snapshot.
    async fn delete_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<()>;

    /// Creates a sandbox from a snapshot.
    async fn restore_snapshot(&self, snapshot: &str, plan: RestorePlan) -> PlatformResult<()>;

    /// Deletes `fork` snapshots older than `keep_for` (reports only, with `dry_run`).
    async fn gc_snapshots(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>>;
}

/// Everything the service layer asks of a platform: the sum of its seams (identity, tenancy,
/// sandboxes, snapshots), the image store where it has one, and its own start and stop.
#[async_trait]
pub trait Platform:
    IdentityStore + TenantStore + SandboxBackend + SnapshotBackend + Send + Sync + 'static
{
    /// Short name for logs (`local`, `kubernetes`).
    fn name(&self) -> &'static str;

    /// The image store of this host, where the platform pulls images itself (local);
    /// `None` where the cluster's nodes do.
    fn images(&self) -> Option<Arc<dyn ImageBackend>> {
        None
    }

    /// Remote install of other nodes, where the platform has it and it is turned on.
    fn installer(&self) -> Option<Arc<dyn install::InstallBackend>> {
        None
    }

    /// Whether requests can be served now; the reason when not (`GET /readyz`).
    async fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// Finishes background work before the daemon exits (bounded; sandboxes keep running).
    async fn shutdown(&self) {}

    /// Adds the platform's own series to `/metrics` (registered once, at start-up).
    fn register_metrics(&self, _registry: &mut prometheus_client::registry::Registry) {}

    /// Told once the API listens, with the local address other replicas pass requests to
    /// (the internal TLS listener's when there is one).
    fn listening(&self, _local: std::net::SocketAddr) {}

    /// The certificates of TLS between replicas and to agents, when the platform has them
    /// (Kubernetes with `[kubernetes] internalTls`): the daemon then also serves its API on
    /// an internal listener that only replicas can complete a handshake with.
    fn internal_tls(&self) -> Option<crate::shared::tls::Generated> {
        None
    }
}

/// This host's node name: its hostname (as a kubelet names its node).
pub fn host_node_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
