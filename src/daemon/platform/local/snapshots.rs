//! Snapshots on the local platform: a snapshot is the sandbox's writable layer frozen into a
//! read-only layer, stacked on the image's layers (and the layers the sandbox itself was made
//! from). Records carry what restore needs (the `source-*` values); layers are removed once
//! no snapshot and no sandbox uses them.
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::LocalPlatform;
use crate::daemon::platform::local::db::Db;
use crate::daemon::platform::local::sandboxes::{LocalSandboxes, Record, new_id, runtime_error};
use crate::daemon::platform::{
    MeterSample, Metering, NewSandbox, PlatformError, PlatformResult, Reservation, RestorePlan,
    SnapshotBackend,
};
use crate::runtime::engine::SandboxSpec;
use crate::shared::duration::format_age;
use crate::shared::models::sandbox::SandboxStatus;
use crate::shared::models::snapshot::{GcResult, Snapshot, SnapshotKind};
use crate::shared::timestamp::{format_rfc3339_utc, now_unix};

/// A snapshot whose stack holds more layers than this is flattened into one, in the
/// background (repeated forks would otherwise stack layers without bound).
pub const FLATTEN_ABOVE: usize = 8;

/// The snapshot class reported for sbxd layers.
pub const SNAPSHOT_CLASS: &str = "sbxd-layer";

/// One snapshot as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// Unique id.
    pub id: String,
    /// Namespace.
    pub namespace: String,
    /// Name, unique in the namespace.
    pub name: String,
    /// What made it.
    pub kind: SnapshotKind,
    /// The sandbox it was taken from.
    pub source_sandbox: String,
    /// Creation time, unix seconds.
    pub created: i64,
    /// Size of its own layer on disk.
    pub size_bytes: u64,
    /// The source sandbox's spec at the time, `layers` being the snapshot's whole stack.
    pub source: SandboxSpec,
}

impl SnapshotRecord {
    fn view(&self, now: i64) -> Snapshot {
        Snapshot {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            source_pvc: String::new(),
            source_sandbox: self.source_sandbox.clone(),
            kind: self.kind,
            ready_to_use: true,
            creation_timestamp: format_rfc3339_utc(self.created),
            age: format_age((now - self.created).max(0) as u64),
            size_bytes: self.size_bytes,
            snapshot_class: SNAPSHOT_CLASS.to_string(),
        }
    }
}

fn conversion(e: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.to_string().into())
}

fn snapshot_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SnapshotRecord> {
    let kind: String = r.get("kind")?;
    let source: String = r.get("source")?;
    Ok(SnapshotRecord {
        id: r.get("id")?,
        namespace: r.get("namespace")?,
        name: r.get("name")?,
        kind: kind.parse::<SnapshotKind>().map_err(conversion)?,
        source_sandbox: r.get("source_sandbox")?,
        created: r.get("created")?,
        size_bytes: r.get::<_, i64>("size_bytes")?.max(0) as u64,
        source: serde_json::from_str(&source).map_err(conversion)?,
    })
}

/// Loads every snapshot record.
pub async fn load(db: &Db) -> PlatformResult<BTreeMap<(String, String), SnapshotRecord>> {
    let records: Vec<SnapshotRecord> = db
        .call(|conn| {
            let mut stmt = conn.prepare(
                "SELECT id, namespace, name, kind, source_sandbox, created, size_bytes, source \
                 FROM snapshots",
            )?;
            let rows = stmt.query_map([], snapshot_from_row)?;
            rows.collect()
        })
        .await?;
    Ok(records
        .into_iter()
        .map(|r| ((r.namespace.clone(), r.name.clone()), r))
        .collect())
}

fn not_found(namespace: &str, name: &str) -> PlatformError {
    PlatformError::NotFound(format!(
        "snapshot '{name}' not found in namespace '{namespace}'"
    ))
}

impl LocalSandboxes {
    async fn insert_snapshot(&self, record: SnapshotRecord) -> PlatformResult<()> {
        let row = record.clone();
        let source =
            serde_json::to_string(&row.source).map_err(|e| PlatformError::Store(e.to_string()))?;
        self.db
            .call(move |conn| {
                conn.execute(
                    "INSERT INTO snapshots (id, namespace, name, kind, source_sandbox, created, \
                     size_bytes, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![
                        row.id,
                        row.namespace,
                        row.name,
                        row.kind.as_str(),
                        row.source_sandbox,
                        row.created,
                        row.size_bytes as i64,
                        source,
                    ],
                )
                .map(drop)
            })
            .await?;
        self.snapshots
            .write()
            .await
            .insert((record.namespace.clone(), record.name.clone()), record);
        Ok(())
    }

    /// Takes a snapshot of a Running or Paused sandbox (frozen for the copy, thawed after
    /// unless it was paused). The name must be free in the namespace.
    pub async fn snapshot(
        self: &Arc<Self>,
        namespace: &str,
        sandbox: &str,
        name: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<SnapshotRecord> {
        self.snapshot_with(namespace, sandbox, name, kind, false)
            .await
            .map(|(snapshot, _)| snapshot)
    }

    /// [`LocalSandboxes::snapshot`]; with `warm`, the sandbox's processes are checkpointed
    /// by CRIU at the same instant, and the checkpoint dir is returned too (the caller
    /// restores from it and removes it).
    async fn snapshot_with(
        self: &Arc<Self>,
        namespace: &str,
        sandbox: &str,
        name: &str,
        kind: SnapshotKind,
        warm: bool,
    ) -> PlatformResult<(SnapshotRecord, Option<PathBuf>)> {
        let record = self
            .settled(namespace, sandbox, Duration::from_secs(60))
            .await?;
        let live = self.live(&record.spec.id, record.status);
        let _guard = live.lock.lock().await;
        let record = self.record(namespace, sandbox).await?;
        let taken = self.snapshot_locked(&record, name, kind, warm).await?;
        self.flatten_later(&taken.0);
        Ok(taken)
    }

    /// Flattens a long layer stack of a snapshot in the background; sandboxes running on the
    /// old layers keep them until they go.
    fn flatten_later(self: &Arc<Self>, snapshot: &SnapshotRecord) {
        // A fork's own snapshot is deleted as soon as the clone exists: merging its layers
        // would copy them all for nothing (the clone's later snapshots are flattened).
        if snapshot.source.layers.len() <= FLATTEN_ABOVE || snapshot.kind == SnapshotKind::Fork {
            return;
        }
        let manager = self.clone();
        let (namespace, name) = (snapshot.namespace.clone(), snapshot.name.clone());
        tokio::spawn(async move {
            if let Err(e) = manager.flatten(&namespace, &name).await {
                tracing::warn!(snapshot = %name, error = %e, "flattening snapshot layers");
            }
        });
    }

    /// Replaces a snapshot's layer stack by one merged layer.
    pub async fn flatten(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        let record = self.snapshot_record(namespace, name).await?;
        let old = record.source.layers.clone();
        let (layer, size_bytes) = self
            .sbxd
            .flatten_layers(&old)
            .await
            .map_err(runtime_error)?;
        let mut source = record.source.clone();
        source.layers = vec![layer.clone()];
        let json =
            serde_json::to_string(&source).map_err(|e| PlatformError::Store(e.to_string()))?;
        let id = record.id.clone();
        let stored = self
            .db
            .call(move |conn| {
                conn.execute(
                    "UPDATE snapshots SET source = ?2, size_bytes = ?3 WHERE id = ?1",
                    params![id, json, size_bytes as i64],
                )
            })
            .await?;
        let mut swapped = false;
        if stored == 1 {
            if let Some(current) = self
                .snapshots
                .write()
                .await
                .get_mut(&(namespace.to_string(), name.to_string()))
            {
                current.source = source;
                current.size_bytes = size_bytes;
                swapped = true;
            }
        }
        if swapped {
            tracing::info!(snapshot = %name, namespace, layers = old.len(), "snapshot layers flattened");
            self.release_layers(&old).await;
        } else {
            // Deleted meanwhile: the merged layer is nobody's.
            self.sbxd.remove_layers(&[layer]).await;
        }
        Ok(())
    }

    /// [`LocalSandboxes::snapshot`] with the sandbox's lock held by the caller.
    async fn snapshot_locked(
        &self,
        record: &Record,
        name: &str,
        kind: SnapshotKind,
        warm: bool,
    ) -> PlatformResult<(SnapshotRecord, Option<PathBuf>)> {
        let namespace = record.spec.namespace.as_str();
        if self
            .snapshots
            .read()
            .await
            .contains_key(&(namespace.to_string(), name.to_string()))
        {
            return Err(PlatformError::AlreadyExists(format!(
                "snapshot '{name}' already exists in namespace '{namespace}'"
            )));
        }
        if !matches!(
            record.status,
            SandboxStatus::Running | SandboxStatus::Paused
        ) {
            return Err(PlatformError::Conflict(format!(
                "sandbox '{}' is {}: only a running or paused sandbox can be snapshotted",
                record.spec.name,
                record.status.as_str()
            )));
        }
        let (checkpoint, layer, size_bytes) = if warm {
            if let Some(reason) = self.sbxd.warm_fork_unsupported(&record.spec).await {
                return Err(PlatformError::Invalid(reason));
            }
            let (checkpoint, layer, size) =
                self.sbxd.capture_warm(&record.spec).await.map_err(|e| {
                    PlatformError::Invalid(format!(
                        "warm fork: CRIU could not checkpoint sandbox '{}': {e}",
                        record.spec.name
                    ))
                })?;
            (Some(checkpoint), layer, size)
        } else {
            let (layer, size) = self
                .sbxd
                .capture_layer(&record.spec)
                .await
                .map_err(runtime_error)?;
            (None, layer, size)
        };
        let mut source = record.spec.clone();
        source.layers.push(layer.clone());
        let snapshot = SnapshotRecord {
            id: new_id(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            kind,
            source_sandbox: record.spec.name.clone(),
            created: now_unix(),
            size_bytes,
            source,
        };
        if let Err(e) = self.insert_snapshot(snapshot.clone()).await {
            self.sbxd.remove_layers(&[layer]).await;
            if let Some(dir) = &checkpoint {
                self.sbxd.remove_checkpoint(dir).await;
            }
            return Err(e);
        }
        tracing::info!(snapshot = %snapshot.name, namespace, sandbox = %record.spec.name, kind = %kind, size_bytes, warm, "snapshot taken");
        Ok((snapshot, checkpoint))
    }

    /// Pauses a sandbox and, while it is frozen, snapshots it (kind `pause`).
    pub async fn pause_with_snapshot(
        self: &Arc<Self>,
        namespace: &str,
        name: &str,
        snapshot: &str,
    ) -> PlatformResult<SnapshotRecord> {
        let record = self
            .settled(namespace, name, Duration::from_secs(60))
            .await?;
        let live = self.live(&record.spec.id, record.status);
        let _guard = live.lock.lock().await;
        let record = self.record(namespace, name).await?;
        if record.status == SandboxStatus::Running {
            self.sbxd
                .pause(&record.spec.id)
                .await
                .map_err(runtime_error)?;
            self.update(&record.spec, |r: &mut Record| {
                r.status = SandboxStatus::Paused;
                r.ready = false;
            })
            .await?;
        }
        let record = self.record(namespace, name).await?;
        self.snapshot_locked(&record, snapshot, SnapshotKind::Pause, false)
            .await
            .map(|(snapshot, _)| snapshot)
    }

    /// Snapshots of a namespace (all when `None`), optionally of one sandbox and one kind.
    pub async fn list_snapshots(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
        kind: Option<SnapshotKind>,
    ) -> Vec<Snapshot> {
        let now = now_unix();
        self.snapshots
            .read()
            .await
            .values()
            .filter(|s| namespace.is_none_or(|ns| s.namespace == ns))
            .filter(|s| sandbox.is_none_or(|sb| s.source_sandbox == sb))
            .filter(|s| kind.is_none_or(|k| s.kind == k))
            .map(|s| s.view(now))
            .collect()
    }

    /// One snapshot's record.
    pub async fn snapshot_record(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<SnapshotRecord> {
        self.snapshots
            .read()
            .await
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| not_found(namespace, name))
    }

    /// One snapshot.
    pub async fn get_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<Snapshot> {
        Ok(self
            .snapshot_record(namespace, name)
            .await?
            .view(now_unix()))
    }

    /// Deletes a snapshot, and its layers when nothing else uses them.
    pub async fn delete_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        let record = self.snapshot_record(namespace, name).await?;
        let id = record.id.clone();
        self.db
            .call(move |conn| {
                conn.execute("DELETE FROM snapshots WHERE id = ?1", [&id])
                    .map(drop)
            })
            .await?;
        self.snapshots
            .write()
            .await
            .remove(&(namespace.to_string(), name.to_string()));
        self.release_layers(&record.source.layers).await;
        tracing::info!(snapshot = %name, namespace, "snapshot deleted");
        Ok(())
    }

    /// Deletes the `fork` snapshots of forks a crash interrupted: here a fork's own snapshot
    /// lives only while its fork runs (the clone keeps the layers it needs), so at start-up
    /// each one is a leftover; the GC sweep would take it only after `keep_fork_for`.
    pub(super) async fn remove_interrupted_fork_snapshots(&self) {
        let forks: Vec<(String, String)> = self
            .snapshots
            .read()
            .await
            .values()
            .filter(|s| s.kind == SnapshotKind::Fork)
            .map(|s| (s.namespace.clone(), s.name.clone()))
            .collect();
        for (namespace, name) in forks {
            tracing::info!(snapshot = %name, %namespace, "deleting the snapshot of an interrupted fork");
            if let Err(e) = self.delete_snapshot(&namespace, &name).await {
                tracing::warn!(snapshot = %name, error = %e, "deleting an interrupted fork's snapshot");
            }
        }
    }

    /// Removes snapshot layers nothing references (and half-copied ones) left by a crash.
    pub(super) async fn remove_orphan_layers(&self) {
        let Ok(entries) = std::fs::read_dir(self.sbxd.layers_dir()) else {
            return;
        };
        let names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let (partial, complete): (Vec<String>, Vec<String>) =
            names.into_iter().partition(|n| n.starts_with(".tmp-"));
        if !partial.is_empty() {
            tracing::info!(
                count = partial.len(),
                "removing half-copied snapshot layers"
            );
        }
        self.sbxd.remove_layers(&partial).await;
        self.release_layers(&complete).await;
    }

    /// What every sandbox and snapshot holds now, with each sandbox's egress counter.
    pub async fn metering(&self) -> Metering {
        let egress = if self.sbxd.network_started() {
            match self.sbxd.network().await {
                Ok(network) => network.veth_rx_bytes_all().await.unwrap_or_default(),
                Err(_) => Default::default(),
            }
        } else {
            Default::default()
        };
        let mut out = Metering::default();
        for record in self.records.read().await.values() {
            let spec = &record.spec;
            out.sandboxes.push(MeterSample {
                namespace: spec.namespace.clone(),
                name: spec.name.clone(),
                backend: record.backend.clone(),
                state: record.status.as_str().to_ascii_lowercase(),
                cpu_millis: spec.cpu_millis.unwrap_or(0),
                memory_bytes: spec.memory_bytes.unwrap_or(0),
                disk_bytes: spec.ephemeral_bytes.unwrap_or(0),
                egress_bytes: egress.get(&spec.slot).copied(),
            });
        }
        for snapshot in self.snapshots.read().await.values() {
            *out.snapshot_bytes
                .entry((snapshot.namespace.clone(), super::BACKEND.to_string()))
                .or_default() += snapshot.size_bytes;
        }
        out
    }

    /// What the sandboxes and snapshots of `namespaces` reserve (tenant quotas): every
    /// sandbox record counts, paused and failed ones too, until it is deleted.
    pub async fn reservation(&self, namespaces: &[String]) -> Reservation {
        let mut total = Reservation::default();
        for record in self.records.read().await.values() {
            if namespaces.contains(&record.spec.namespace) {
                total.sandboxes += 1;
                total.cpu_millis += record.spec.cpu_millis.unwrap_or(0);
                total.memory_bytes += record.spec.memory_bytes.unwrap_or(0);
                total.disk_bytes += record.spec.ephemeral_bytes.unwrap_or(0);
            }
        }
        for snapshot in self.snapshots.read().await.values() {
            if namespaces.contains(&snapshot.namespace) {
                total.snapshot_bytes += snapshot.size_bytes;
            }
        }
        total
    }

    /// Removes those of `layers` that no snapshot and no sandbox references any more.
    pub(super) async fn release_layers(&self, layers: &[String]) {
        let _guard = self.layers_lock.lock().await;
        let mut used: HashSet<String> = HashSet::new();
        for s in self.snapshots.read().await.values() {
            used.extend(s.source.layers.iter().cloned());
        }
        for r in self.records.read().await.values() {
            used.extend(r.spec.layers.iter().cloned());
        }
        let unused: Vec<String> = layers
            .iter()
            .filter(|l| !used.contains(*l))
            .cloned()
            .collect();
        self.sbxd.remove_layers(&unused).await;
    }

    /// A new sandbox from a snapshot: its layers under a fresh writable layer, the source
    /// sandbox's settings with the plan's overrides.
    pub async fn restore(
        self: &Arc<Self>,
        namespace: &str,
        snapshot: &str,
        plan: RestorePlan,
    ) -> PlatformResult<SandboxSpec> {
        self.restore_with(namespace, snapshot, plan, None).await
    }

    /// [`LocalSandboxes::restore`]; with `checkpoint`, the new sandbox's processes are
    /// restored from those CRIU images (warm fork).
    async fn restore_with(
        self: &Arc<Self>,
        namespace: &str,
        snapshot: &str,
        plan: RestorePlan,
        checkpoint: Option<PathBuf>,
    ) -> PlatformResult<SandboxSpec> {
        let _guard = self.layers_lock.lock().await;
        let record = self.snapshot_record(namespace, snapshot).await?;
        let source = &record.source;
        let new = NewSandbox {
            namespace: plan.namespace.clone(),
            name: plan.new_name.clone(),
            image: plan.image.clone().unwrap_or_else(|| source.image.clone()),
            env: source.env.clone(),
            before_script: match &plan.before_script {
                Some(script) => script.clone(),
                None => source.before_script.clone(),
            },
            cpu_millis: plan.cpu_millis.or(source.cpu_millis),
            memory_bytes: plan.memory_bytes.or(source.memory_bytes),
            ephemeral_bytes: plan.ephemeral_bytes.or(source.ephemeral_bytes),
            egress: source.egress.clone(),
            egress_deny: source.egress_deny.clone(),
            uid: source.uid,
            gid: source.gid,
            additional_gids: source.additional_gids.clone(),
            capabilities: source.capabilities.clone(),
            backend: super::BACKEND.to_string(),
            nodes: plan.nodes.clone().or_else(|| source.nodes.clone()),
            entrypoint: plan
                .entrypoint
                .clone()
                .or_else(|| source.entrypoint.clone()),
            cmd: plan.cmd.clone().or_else(|| source.cmd.clone()),
            labels: Default::default(),
            lifetime: Default::default(),
            owner: None,
        };
        self.create_on_layers_with(new, source.layers.clone(), checkpoint)
            .await
    }

    /// Clones a sandbox: a snapshot of it (kind `fork`, or `named` under `snapshot`), and a
    /// new sandbox on that snapshot's layers, waited for until it runs; a `fork` snapshot is
    /// deleted once the clone exists (the clone keeps its layers).
    pub async fn fork(
        self: &Arc<Self>,
        namespace: &str,
        source: &str,
        new_name: &str,
        snapshot: Option<&str>,
        warm: bool,
    ) -> PlatformResult<()> {
        if self
            .records
            .read()
            .await
            .contains_key(&(namespace.to_string(), new_name.to_string()))
        {
            return Err(PlatformError::AlreadyExists(format!(
                "sandbox '{new_name}' already exists in namespace '{namespace}'"
            )));
        }
        let (name, kind) = match snapshot {
            Some(name) => (name.to_string(), SnapshotKind::Named),
            None => (format!("{source}-fork-{}", now_unix()), SnapshotKind::Fork),
        };
        let (snap, checkpoint) = self
            .snapshot_with(namespace, source, &name, kind, warm)
            .await?;
        let plan = RestorePlan {
            namespace: namespace.to_string(),
            new_name: new_name.to_string(),
            // The clone's files are prepared already.
            before_script: Some(None),
            ..RestorePlan::default()
        };
        let created = self
            .restore_with(namespace, &snap.name, plan, checkpoint.clone())
            .await;
        let outcome = match created {
            Ok(_) => {
                let clone = self
                    .settled(namespace, new_name, Duration::from_secs(300))
                    .await?;
                if clone.status == SandboxStatus::Failed {
                    Err(PlatformError::Invalid(format!(
                        "the clone '{new_name}' failed to start: {}",
                        clone.error_message
                    )))
                } else {
                    Ok(())
                }
            }
            Err(e) => Err(e),
        };
        if let Some(dir) = &checkpoint {
            self.sbxd.remove_checkpoint(dir).await;
        }
        if kind == SnapshotKind::Fork {
            if let Err(e) = self.delete_snapshot(namespace, &snap.name).await {
                tracing::warn!(snapshot = %snap.name, error = %e, "deleting a fork snapshot");
            }
        }
        outcome
    }

    /// Deletes `fork` snapshots older than `keep_for` (pause and named ones are never
    /// touched); with `dry_run`, only reports them.
    pub async fn gc(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> Vec<GcResult> {
        let now = now_unix();
        let candidates: Vec<SnapshotRecord> = self
            .snapshots
            .read()
            .await
            .values()
            .filter(|s| s.kind == SnapshotKind::Fork)
            .filter(|s| namespace.is_none_or(|ns| s.namespace == ns))
            .filter(|s| now - s.created > keep_for.as_secs() as i64)
            .cloned()
            .collect();
        let mut results = Vec::new();
        for s in candidates {
            let deleted = !dry_run && self.delete_snapshot(&s.namespace, &s.name).await.is_ok();
            results.push(GcResult {
                name: s.name.clone(),
                namespace: s.namespace.clone(),
                age: format_age((now - s.created).max(0) as u64),
                deleted,
            });
        }
        results
    }
}

/// The embedded default's snapshot seam, over the manager above.
#[async_trait]
impl SnapshotBackend for LocalPlatform {
    async fn snapshot_sandbox(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<()> {
        self.sandboxes()?
            .snapshot(namespace, sandbox, snapshot, kind)
            .await
            .map(drop)
    }

    async fn pause_sandbox_with_snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
    ) -> PlatformResult<()> {
        self.sandboxes()?
            .pause_with_snapshot(namespace, sandbox, snapshot)
            .await
            .map(drop)
    }

    async fn fork_sandbox(
        &self,
        namespace: &str,
        source: &str,
        new_name: &str,
        snapshot: Option<&str>,
        warm: bool,
    ) -> PlatformResult<()> {
        self.sandboxes()?
            .fork(namespace, source, new_name, snapshot, warm)
            .await
    }

    async fn list_snapshots(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
        kind: Option<SnapshotKind>,
    ) -> PlatformResult<Vec<Snapshot>> {
        Ok(self
            .sandboxes()?
            .list_snapshots(namespace, sandbox, kind)
            .await)
    }

    async fn get_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<Snapshot> {
        self.sandboxes()?.get_snapshot(namespace, name).await
    }

    async fn snapshot_backend(&self, namespace: &str, name: &str) -> PlatformResult<String> {
        self.sandboxes()?.snapshot_record(namespace, name).await?;
        Ok("sbxd".to_string())
    }

    async fn delete_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        self.sandboxes()?.delete_snapshot(namespace, name).await
    }

    async fn restore_snapshot(&self, snapshot: &str, plan: RestorePlan) -> PlatformResult<()> {
        let namespace = plan.namespace.clone();
        self.sandboxes()?
            .restore(&namespace, snapshot, plan)
            .await
            .map(drop)
    }

    async fn gc_snapshots(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>> {
        Ok(self.sandboxes()?.gc(namespace, keep_for, dry_run).await)
    }
}
