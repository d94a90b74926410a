//! Sandboxes on the local platform: records in SQLite (mirrored in memory for fast reads),
//! the sbxd engine underneath, a supervisor per sandbox, and reconciliation at start-up.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use rusqlite::params;
use tokio::sync::{Mutex, RwLock, watch};

use crate::daemon::platform::local::db::Db;
use crate::daemon::platform::local::snapshots::SnapshotRecord;
use crate::daemon::platform::{NewSandbox, PlatformError, PlatformResult};
use crate::runtime::RuntimeError;
use crate::runtime::engine::pool::Shape;
use crate::runtime::engine::{SandboxSpec, Sbxd};
use crate::shared::duration::format_age;
use crate::shared::models::sandbox::{Sandbox, SandboxMetrics, SandboxStatus};
use crate::shared::quantity::{format_cpu_millis, format_mebibytes};
use crate::shared::timestamp::now_unix;

/// Restarts in a row (each after less than [`STABLE_AFTER`] of running) before a sandbox is
/// declared Failed.
pub const MAX_QUICK_RESTARTS: u32 = 5;
/// A main process that ran this long resets the crash-loop count.
pub const STABLE_AFTER: Duration = Duration::from_secs(60);

/// One sandbox as stored.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub(super) spec: SandboxSpec,
    pub(super) backend: String,
    pub(super) status: SandboxStatus,
    pub(super) ready: bool,
    pub(super) restarts: u32,
    pub(super) error_message: String,
    pub(super) created: i64,
    pub(super) pid: Option<i32>,
}

impl Record {
    fn view(&self, now: i64, last_activity: Option<i64>) -> Sandbox {
        let time = crate::shared::timestamp::format_rfc3339_utc;
        Sandbox {
            name: self.spec.name.clone(),
            namespace: self.spec.namespace.clone(),
            status: self.status,
            ready: if self.ready { "True" } else { "False" }.to_string(),
            restarts: self.restarts as i32,
            age: format_age((now - self.created).max(0) as u64),
            image: self.spec.image.clone(),
            error_message: self.error_message.clone(),
            backend: self.backend.clone(),
            labels: self.spec.labels.clone(),
            expires_at: self.spec.expires_at.map(time),
            idle_timeout_seconds: self.spec.idle_timeout_seconds,
            last_activity_at: last_activity.map(time),
        }
    }
}

/// Per-sandbox coordination: one lifecycle operation at a time, and a flag telling the
/// supervisor that an exit is intended.
pub(super) struct Live {
    pub(super) lock: Mutex<()>,
    pub(super) stopping: AtomicBool,
    pub(super) phase: watch::Sender<SandboxStatus>,
}

/// How many times the network of a deleted sandbox is removed before its slot is given up
/// until the next start (about 6 s of pauses in all).
const DETACH_ATTEMPTS: u32 = 7;

/// The local sandbox manager.
pub struct LocalSandboxes {
    pub(super) db: Db,
    pub(super) sbxd: Arc<Sbxd>,
    pub(super) records: RwLock<BTreeMap<(String, String), Record>>,
    pub(super) snapshots: RwLock<BTreeMap<(String, String), SnapshotRecord>>,
    pub(super) live: StdMutex<HashMap<String, Arc<Live>>>,
    pub(super) cpu_samples: StdMutex<HashMap<String, (Instant, u64)>>,
    /// Network slots of deleted sandboxes whose network is still being removed.
    pub(super) retiring: StdMutex<HashSet<u32>>,
    /// Bumped on every change of a record.
    pub(super) version: AtomicU64,
    /// This host's node name (placement: a sandbox whose `nodes` exclude it stays Pending).
    pub(super) node: String,
    /// Held while layers are released, and while a restore reads a snapshot's layers until
    /// its sandbox record (which references them) exists.
    pub(super) layers_lock: Mutex<()>,
    /// The last activity of each sandbox (by id), unix seconds; a restart counts as one.
    pub(super) activity: StdMutex<HashMap<String, i64>>,
}

fn parse_status(text: &str) -> SandboxStatus {
    match text {
        "Running" => SandboxStatus::Running,
        "Paused" => SandboxStatus::Paused,
        "Failed" => SandboxStatus::Failed,
        "Terminating" => SandboxStatus::Terminating,
        _ => SandboxStatus::Pending,
    }
}

pub(super) fn runtime_error(e: RuntimeError) -> PlatformError {
    match e {
        RuntimeError::Invalid(m) => PlatformError::Invalid(m),
        RuntimeError::Image(e) => super::images::platform_error(e),
        RuntimeError::Unavailable(m) => PlatformError::Unavailable(m),
        other => PlatformError::Store(other.to_string()),
    }
}

pub(super) fn new_id() -> String {
    let mut buf = [0u8; 5];
    let _ = getrandom::fill(&mut buf);
    hex::encode(buf)
}

impl LocalSandboxes {
    /// Loads the records and reconciles them with what is really running.
    pub async fn start(db: Db, sbxd: Arc<Sbxd>) -> PlatformResult<Arc<LocalSandboxes>> {
        let rows = db
            .call(|conn| {
                let mut stmt = conn.prepare(
                    "SELECT spec, backend, status, ready, restarts, error_message, created, pid \
                     FROM sandboxes",
                )?;
                let rows = stmt.query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, bool>(3)?,
                        row.get::<_, u32>(4)?,
                        row.get::<_, String>(5)?,
                        row.get::<_, i64>(6)?,
                        row.get::<_, Option<i32>>(7)?,
                    ))
                })?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        let mut records = BTreeMap::new();
        for (spec, backend, status, ready, restarts, error_message, created, pid) in rows {
            let spec: SandboxSpec = serde_json::from_str(&spec)
                .map_err(|e| PlatformError::Store(format!("sandbox record: {e}")))?;
            records.insert(
                (spec.namespace.clone(), spec.name.clone()),
                Record {
                    spec,
                    backend,
                    status: parse_status(&status),
                    ready,
                    restarts,
                    error_message,
                    created,
                    pid,
                },
            );
        }
        let snapshots = super::snapshots::load(&db).await?;
        let started = now_unix();
        let activity = records
            .values()
            .map(|r| (r.spec.id.clone(), started))
            .collect();
        let manager = Arc::new(LocalSandboxes {
            snapshots: RwLock::new(snapshots),
            db,
            sbxd,
            records: RwLock::new(records),
            live: StdMutex::new(HashMap::new()),
            cpu_samples: StdMutex::new(HashMap::new()),
            retiring: StdMutex::new(HashSet::new()),
            version: AtomicU64::new(1),
            node: crate::daemon::platform::host_node_name(),
            layers_lock: Mutex::new(()),
            activity: StdMutex::new(activity),
        });
        let ids: HashSet<String> = manager
            .records
            .read()
            .await
            .values()
            .map(|r| r.spec.id.clone())
            .collect();
        for record in manager.records.read().await.values() {
            manager.sbxd.adopt_id_range(&record.spec);
        }
        manager.sbxd.adopt_pool(&ids).await;
        manager.reconcile().await;
        tokio::spawn(manager.clone().eviction_loop());
        tokio::spawn(manager.sbxd.clone().run_pool());
        Ok(manager)
    }

    pub(super) fn live(&self, id: &str, status: SandboxStatus) -> Arc<Live> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.entry(id.to_string())
            .or_insert_with(|| {
                Arc::new(Live {
                    lock: Mutex::new(()),
                    stopping: AtomicBool::new(false),
                    phase: watch::channel(status).0,
                })
            })
            .clone()
    }

    pub(super) async fn record(&self, namespace: &str, name: &str) -> PlatformResult<Record> {
        self.records
            .read()
            .await
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| {
                PlatformError::NotFound(format!(
                    "sandbox '{name}' not found in namespace '{namespace}'"
                ))
            })
    }

    /// Applies `change` to the record (memory and database) and publishes the new phase.
    pub(super) async fn update(
        &self,
        spec: &SandboxSpec,
        change: impl FnOnce(&mut Record),
    ) -> PlatformResult<()> {
        let key = (spec.namespace.clone(), spec.name.clone());
        let snapshot = {
            let mut records = self.records.write().await;
            let Some(record) = records.get_mut(&key) else {
                return Ok(());
            };
            change(record);
            self.version.fetch_add(1, Ordering::SeqCst);
            record.clone()
        };
        self.live(&spec.id, snapshot.status)
            .phase
            .send_replace(snapshot.status);
        self.db
            .call(move |conn| {
                conn.execute(
                    "UPDATE sandboxes SET status = ?2, ready = ?3, restarts = ?4, \
                     error_message = ?5, pid = ?6 WHERE id = ?1",
                    params![
                        snapshot.spec.id,
                        snapshot.status.as_str(),
                        snapshot.ready,
                        snapshot.restarts,
                        snapshot.error_message,
                        snapshot.pid,
                    ],
                )
                .map(drop)
            })
            .await
    }

    /// Why the sandbox cannot run on this host, if it cannot (its `nodes` exclude it).
    pub(super) fn unschedulable(&self, spec: &SandboxSpec) -> Option<String> {
        let nodes = spec.nodes.as_ref()?;
        if nodes.contains(&self.node) {
            return None;
        }
        Some(if nodes.is_empty() {
            format!(
                "no node to run on: its tenant's nodes, its key's nodes and node dedications \
                 leave none (this host is node '{}')",
                self.node
            )
        } else {
            format!(
                "no node to run on: the sandbox may run only on {} and this host is node '{}'",
                nodes.join(", "),
                self.node
            )
        })
    }

    /// Stores a new sandbox (Pending) and starts provisioning it.
    pub async fn create(self: &Arc<Self>, new: NewSandbox) -> PlatformResult<()> {
        self.create_on_layers(new, Vec::new()).await.map(drop)
    }

    /// Like [`LocalSandboxes::create`], with snapshot layers under the writable layer (restore,
    /// fork); returns the new sandbox's spec.
    pub async fn create_on_layers(
        self: &Arc<Self>,
        new: NewSandbox,
        layers: Vec<String>,
    ) -> PlatformResult<SandboxSpec> {
        self.create_on_layers_with(new, layers, None).await
    }

    /// Like [`LocalSandboxes::create_on_layers`], restored from CRIU images when
    /// `checkpoint` names them.
    pub async fn create_on_layers_with(
        self: &Arc<Self>,
        new: NewSandbox,
        layers: Vec<String>,
        checkpoint: Option<PathBuf>,
    ) -> PlatformResult<SandboxSpec> {
        // The tenant's list as it is now (a restore or fork must not keep its source's); on
        // an agent no tenant is stored and the list comes with the request.
        let egress_deny = match self.owner_egress_deny(&new.namespace).await? {
            Some(deny) => deny,
            None => new.egress_deny,
        };
        let record = {
            let mut records = self.records.write().await;
            let key = (new.namespace.clone(), new.name.clone());
            if records.contains_key(&key) {
                return Err(PlatformError::AlreadyExists(format!(
                    "sandbox '{}' already exists in namespace '{}'",
                    new.name, new.namespace
                )));
            }
            let mut used: Vec<u32> = records.values().map(|r| r.spec.slot).collect();
            used.extend(
                self.retiring
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter(),
            );
            // A slot being retired is still in `records` while its delete runs: once only,
            // or the gap search below hands out a slot in use.
            used.sort_unstable();
            used.dedup();
            let slot = used
                .iter()
                .enumerate()
                .find(|(i, s)| **s != *i as u32)
                .map(|(i, _)| i as u32)
                .unwrap_or(used.len() as u32);
            let record = Record {
                spec: SandboxSpec {
                    id: new_id(),
                    namespace: new.namespace,
                    name: new.name,
                    image: new.image,
                    env: new.env,
                    before_script: new.before_script,
                    cpu_millis: new.cpu_millis,
                    memory_bytes: new.memory_bytes,
                    ephemeral_bytes: new.ephemeral_bytes,
                    egress: new.egress,
                    egress_deny,
                    uid: new.uid,
                    gid: new.gid,
                    additional_gids: new.additional_gids,
                    capabilities: new.capabilities,
                    slot,
                    id_range: None,
                    layers,
                    entrypoint: new.entrypoint,
                    cmd: new.cmd,
                    nodes: new.nodes,
                    labels: new.labels,
                    expires_at: new.lifetime.expires_at,
                    idle_timeout_seconds: new.lifetime.idle_timeout_seconds,
                },
                backend: new.backend,
                status: SandboxStatus::Pending,
                ready: false,
                restarts: 0,
                error_message: String::new(),
                created: now_unix(),
                pid: None,
            };
            let mut record = record;
            if let Some(reason) = self.unschedulable(&record.spec) {
                record.error_message = reason;
            }
            // A container prepared in this sandbox's shape, if the pool has one: its id is
            // the sandbox's.
            let claimed = match Shape::of(&record.spec) {
                Some(shape) if checkpoint.is_none() && record.error_message.is_empty() => {
                    self.sbxd.pool().claim(&shape)
                }
                _ => None,
            };
            // The host id range: the prepared container's, or a new one.
            match &claimed {
                Some(id) => {
                    record.spec.id_range = self.sbxd.pool().claimed_range(id);
                    record.spec.id = id.clone();
                }
                None => {
                    record.spec.id_range = self.sbxd.allocate_id_range().map_err(runtime_error)?
                }
            }
            self.touch(&record.spec.id);
            let row = record.clone();
            let spec_json = serde_json::to_string(&row.spec)
                .map_err(|e| PlatformError::Store(e.to_string()))?;
            let stored = self
                .db
                .call(move |conn| {
                    conn.execute(
                        "INSERT INTO sandboxes (id, namespace, name, image, backend, status, \
                         ready, restarts, error_message, created, slot, pid, spec) \
                         VALUES (?1, ?2, ?3, ?4, ?5, 'Pending', 0, 0, ?9, ?6, ?7, NULL, ?8)",
                        params![
                            row.spec.id,
                            row.spec.namespace,
                            row.spec.name,
                            row.spec.image,
                            row.backend,
                            row.created,
                            row.spec.slot,
                            spec_json,
                            row.error_message,
                        ],
                    )
                    .map(drop)
                })
                .await;
            if let Err(e) = stored {
                match &claimed {
                    Some(id) => self.sbxd.pool().unclaim(id),
                    None => self.sbxd.release_id_range(&record.spec),
                }
                return Err(e);
            }
            records.insert(key, record.clone());
            self.version.fetch_add(1, Ordering::SeqCst);
            record
        };
        if !record.error_message.is_empty() {
            tracing::info!(sandbox = %record.spec.id, reason = %record.error_message, "sandbox stays Pending");
            return Ok(record.spec);
        }
        tracing::info!(sandbox = %record.spec.id, namespace = %record.spec.namespace, name = %record.spec.name, image = %record.spec.image, "creating sandbox");
        let live = self.live(&record.spec.id, SandboxStatus::Pending);
        let manager = self.clone();
        let spec = record.spec.clone();
        tokio::spawn(async move {
            let _guard = live.lock.lock().await;
            manager
                .provision_from(&record.spec, checkpoint.as_deref())
                .await;
        });
        Ok(spec)
    }

    /// Deletes a sandbox and everything it made. The answer comes once its processes,
    /// mounts, cgroups and files are gone; its network (whose removal the kernel makes slow)
    /// is removed right after, its slot held back until then.
    pub async fn delete(self: &Arc<Self>, namespace: &str, name: &str) -> PlatformResult<()> {
        let record = self.record(namespace, name).await?;
        let spec = record.spec;
        let live = self.live(&spec.id, SandboxStatus::Terminating);
        live.stopping.store(true, Ordering::SeqCst);
        let _ = self
            .update(&spec, |r: &mut Record| {
                r.status = SandboxStatus::Terminating;
                r.ready = false;
            })
            .await;
        let _guard = live.lock.lock().await;
        self.sbxd
            .teardown_except_network(&spec, true)
            .await
            .map_err(runtime_error)?;
        // Its processes are dead and its files removed (snapshot layers hold container ids):
        // nothing on the host is owned by its id range any more.
        self.sbxd.release_id_range(&spec);
        self.retiring
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.slot);
        let id = spec.id.clone();
        self.db
            .call(move |conn| {
                conn.execute("DELETE FROM sandboxes WHERE id = ?1", [&id])
                    .map(drop)
            })
            .await?;
        self.records
            .write()
            .await
            .remove(&(spec.namespace.clone(), spec.name.clone()));
        self.version.fetch_add(1, Ordering::SeqCst);
        self.release_layers(&spec.layers).await;
        self.live
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&spec.id);
        self.cpu_samples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&spec.id);
        self.activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&spec.id);
        tracing::info!(sandbox = %spec.id, namespace, name, "deleted sandbox");
        let manager = self.clone();
        tokio::spawn(async move { manager.retire_network(&spec).await });
        Ok(())
    }

    /// Removes the network of a deleted sandbox, trying again a few times; its slot is handed
    /// out again only once nothing of it is left. If every try fails the slot stays out of
    /// use, and the clean-up at the next start removes what is left.
    async fn retire_network(&self, spec: &SandboxSpec) {
        let mut pause = Duration::from_millis(100);
        for attempt in 1..=DETACH_ATTEMPTS {
            match self.sbxd.detach_network(spec).await {
                Ok(()) => {
                    self.retiring
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&spec.slot);
                    return;
                }
                Err(e) if attempt < DETACH_ATTEMPTS => {
                    tracing::warn!(sandbox = %spec.id, slot = spec.slot, attempt, error = %e, "removing the network of a deleted sandbox; trying again");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                Err(e) => {
                    tracing::error!(sandbox = %spec.id, slot = spec.slot, error = %e, "cannot remove the network of a deleted sandbox; its slot stays out of use until the next start of sbx serve");
                }
            }
        }
    }

    /// Waits (up to `limit`) for the networks of deleted sandboxes to be removed.
    pub async fn drain(&self, limit: Duration) {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self
                .retiring
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if started.elapsed() >= limit {
            tracing::warn!(
                "some networks of deleted sandboxes are left for the next start to remove"
            );
        }
    }

    /// Changes whenever a record changes.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// Sandboxes of a namespace (all when `None`), by namespace then name.
    pub async fn list(&self, namespace: Option<&str>) -> Vec<Sandbox> {
        let now = now_unix();
        let records = self.records.read().await;
        match namespace {
            Some(ns) => records
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, r)| r.view(now, self.last_activity(&r.spec.id)))
                .collect(),
            None => records
                .values()
                .map(|r| r.view(now, self.last_activity(&r.spec.id)))
                .collect(),
        }
    }

    /// One sandbox.
    pub async fn get(&self, namespace: &str, name: &str) -> PlatformResult<Sandbox> {
        let record = self.record(namespace, name).await?;
        Ok(record.view(now_unix(), self.last_activity(&record.spec.id)))
    }

    /// Waits (up to `limit`) while the sandbox is Pending; returns its record then.
    pub(super) async fn settled(
        &self,
        namespace: &str,
        name: &str,
        limit: Duration,
    ) -> PlatformResult<Record> {
        let record = self.record(namespace, name).await?;
        if record.status != SandboxStatus::Pending {
            return Ok(record);
        }
        let mut phase = self.live(&record.spec.id, record.status).phase.subscribe();
        let _ = tokio::time::timeout(limit, phase.wait_for(|s| *s != SandboxStatus::Pending)).await;
        self.record(namespace, name).await
    }

    /// Freezes a Running sandbox.
    pub async fn pause(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        let record = self
            .settled(namespace, name, Duration::from_secs(60))
            .await?;
        let live = self.live(&record.spec.id, record.status);
        let _guard = live.lock.lock().await;
        let record = self.record(namespace, name).await?;
        match record.status {
            SandboxStatus::Paused => Ok(()),
            SandboxStatus::Running => {
                self.sbxd
                    .pause(&record.spec.id)
                    .await
                    .map_err(runtime_error)?;
                self.update(&record.spec, |r: &mut Record| {
                    r.status = SandboxStatus::Paused;
                    r.ready = false;
                })
                .await
            }
            other => Err(PlatformError::Conflict(format!(
                "sandbox '{name}' is {} and cannot be paused",
                other.as_str()
            ))),
        }
    }

    /// Thaws a Paused sandbox.
    pub async fn resume(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        let record = self.record(namespace, name).await?;
        let live = self.live(&record.spec.id, record.status);
        let _guard = live.lock.lock().await;
        let record = self.record(namespace, name).await?;
        match record.status {
            SandboxStatus::Running => Ok(()),
            SandboxStatus::Paused => {
                self.sbxd
                    .resume(&record.spec.id)
                    .await
                    .map_err(runtime_error)?;
                self.update(&record.spec, |r: &mut Record| {
                    r.status = SandboxStatus::Running;
                    r.ready = true;
                })
                .await
            }
            other => Err(PlatformError::Conflict(format!(
                "sandbox '{name}' is {} and cannot be resumed",
                other.as_str()
            ))),
        }
    }

    /// CPU (millicores, averaged since the previous reading or over 200 ms) and memory
    /// working set of running and paused sandboxes.
    pub async fn metrics(&self, namespace: Option<&str>) -> Vec<SandboxMetrics> {
        let targets: Vec<Record> = {
            let records = self.records.read().await;
            records
                .values()
                .filter(|r| namespace.is_none_or(|ns| r.spec.namespace == ns))
                .filter(|r| matches!(r.status, SandboxStatus::Running | SandboxStatus::Paused))
                .cloned()
                .collect()
        };
        let needs_second_sample = {
            let samples = self.cpu_samples.lock().unwrap_or_else(|e| e.into_inner());
            targets.iter().any(|r| {
                samples.get(&r.spec.id).is_none_or(|(at, _)| {
                    at.elapsed() < Duration::from_millis(100)
                        || at.elapsed() > Duration::from_secs(60)
                })
            })
        };
        if needs_second_sample {
            let now = Instant::now();
            {
                let mut samples = self.cpu_samples.lock().unwrap_or_else(|e| e.into_inner());
                for r in &targets {
                    if let Some(stats) = self.sbxd.stats(&r.spec.id) {
                        samples.insert(r.spec.id.clone(), (now, stats.cpu_ns));
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut samples = self.cpu_samples.lock().unwrap_or_else(|e| e.into_inner());
        targets
            .iter()
            .filter_map(|r| {
                let stats = self.sbxd.stats(&r.spec.id)?;
                let now = Instant::now();
                let millicores = match samples.get(&r.spec.id) {
                    Some((at, cpu)) if now > *at => {
                        let ns = stats.cpu_ns.saturating_sub(*cpu) as f64;
                        (ns / now.duration_since(*at).as_nanos() as f64 * 1000.0).round() as u64
                    }
                    _ => 0,
                };
                samples.insert(r.spec.id.clone(), (now, stats.cpu_ns));
                Some(SandboxMetrics {
                    name: r.spec.name.clone(),
                    namespace: r.spec.namespace.clone(),
                    cpu_usage: format_cpu_millis(millicores),
                    memory_usage: format_mebibytes(stats.memory_working_set),
                })
            })
            .collect()
    }
}
