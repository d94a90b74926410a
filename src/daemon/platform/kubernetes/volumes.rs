//! The Kubernetes platform's snapshot workloads: VolumeSnapshots of root PVCs, PVCs cloned
//! from them for forks and restores (with bounded waits and undo on failure), pause
//! snapshots, GC.
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::{Api, DynamicObject};

use super::objects::sandboxes::{self, SandboxTemplate};
use super::objects::{names, snapshots};
use super::{KQL_BACKEND, KubernetesPlatform, kube_error, missing, read_managed};
use crate::daemon::platform::{PlatformError, PlatformResult, RestorePlan, SandboxBackend};
use crate::shared::models::sandbox::SandboxStatus;
use crate::shared::models::snapshot::{GcResult, Snapshot, SnapshotKind};
use crate::shared::quantity::Quantity;

use super::launch::Tenancy;
use super::workloads::*;

impl KubernetesPlatform {
    /// A sandbox's template and root PVC (404 when missing): what snapshots and forks start
    /// from. 400 on a backend without a root volume.
    pub(super) async fn snapshot_source(
        &self,
        namespace: &str,
        sandbox: &str,
        what: &str,
    ) -> PlatformResult<(SandboxTemplate, PersistentVolumeClaim)> {
        let deployment = self.sandbox_deployment(namespace, sandbox).await?;
        let template = SandboxTemplate::recorded(&deployment).map_err(PlatformError::Store)?;
        if !template.has_root_volume() {
            return Err(PlatformError::Invalid(format!(
                "sandbox '{sandbox}' runs on {}, which has no root volume: {what} needs \
                 {KQL_BACKEND}",
                template.backend
            )));
        }
        let pvc = sandboxes::root_pvc(sandbox);
        let found = self
            .pvcs(namespace)
            .get_opt(&pvc)
            .await
            .map_err(|e| kube_error(&format!("PVC {pvc}"), e))?
            // One being deleted (held by its Pod until that goes) is as good as gone.
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .ok_or_else(|| {
                PlatformError::NotFound(format!(
                    "the root PVC '{pvc}' of sandbox '{sandbox}' is missing in namespace \
                     '{namespace}'"
                ))
            })?;
        Ok((template, found))
    }

    /// 409 when a root PVC for a new sandbox of this name is left over.
    pub(super) async fn root_pvc_free(&self, namespace: &str, sandbox: &str) -> PlatformResult<()> {
        let pvc = sandboxes::root_pvc(sandbox);
        let left = self
            .pvcs(namespace)
            .get_opt(&pvc)
            .await
            .map_err(|e| kube_error(&format!("PVC {pvc}"), e))?
            .is_some();
        if left {
            return Err(taken("root PVC", namespace, &pvc));
        }
        Ok(())
    }

    /// Creates the VolumeSnapshot (and its copy of the env Secret); 409 when the name is taken.
    pub(super) async fn create_snapshot(
        &self,
        namespace: &str,
        name: &str,
        sandbox: &str,
        kind: SnapshotKind,
        template: &SandboxTemplate,
    ) -> PlatformResult<()> {
        let body = snapshots::volume_snapshot(namespace, name, sandbox, kind, template);
        let object: DynamicObject = serde_json::from_value(body)
            .map_err(|e| PlatformError::Store(format!("VolumeSnapshot: {e}")))?;
        let written = self
            .volume_snapshots(Some(namespace))
            .create(&writer(), &object)
            .await
            .map_err(|e| create_error(e, "snapshot", namespace, name))?;
        if template.env {
            let copied = self
                .copy_secret(
                    namespace,
                    &sandboxes::env_secret(sandbox),
                    &snapshots::env_secret(name),
                    sandbox,
                )
                .await;
            if let Err(e) = copied {
                self.remove_snapshot(namespace, name).await;
                return Err(e);
            }
        }
        let cut = match self.wait_cut(namespace, name).await {
            Ok(cut) => cut,
            Err(e) => {
                self.remove_snapshot(namespace, name).await;
                return Err(e);
            }
        };
        // The cut, not just the create: its size counts against the tenant's quota from now.
        let version = cut.or(written.metadata.resource_version);
        self.snapshot_cache
            .settled(namespace, name, version.as_deref())
            .await;
        Ok(())
    }

    /// Waits (at most `[kubernetes] snapshotTimeout`) until the CSI driver has cut the
    /// snapshot — the VolumeSnapshot's `status.creationTime`, its point in time — so that a
    /// write after the answer is never in it. (`readyToUse` may come later: the driver may
    /// still be copying what it cut.) The snapshot-controller retries errors, so a
    /// `status.error` is not final; on the deadline it is what the 504 reports. The answer:
    /// the resourceVersion of the snapshot as cut.
    async fn wait_cut(&self, namespace: &str, name: &str) -> PlatformResult<Option<String>> {
        let api = self.volume_snapshots(Some(namespace));
        let started = Instant::now();
        let cut = |o: Option<&DynamicObject>| o.is_none_or(|o| snapshots::cut(o).is_some());
        let waited = tokio::time::timeout(
            self.settings.snapshot_timeout,
            kube::runtime::wait::await_condition(api.clone(), name, cut),
        )
        .await;
        match waited {
            Ok(Ok(Some(cut))) => {
                tracing::debug!(%namespace, snapshot = %name, elapsed_ms = started.elapsed().as_millis() as u64, "snapshot cut");
                Ok(cut.metadata.resource_version)
            }
            Ok(Ok(None)) => Err(PlatformError::Store(format!(
                "the snapshot '{name}' was deleted before the CSI driver cut it"
            ))),
            Ok(Err(e)) => Err(PlatformError::Store(format!(
                "watching the snapshot '{name}': {e}"
            ))),
            Err(_) => {
                let last = match api.get_opt(name).await {
                    Ok(Some(o)) => snapshots::error_of(&o)
                        .map(|e| format!("; the driver's last error: {e}"))
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                Err(PlatformError::Timeout(format!(
                    "the CSI driver did not cut the snapshot '{name}' within {} s{last}; it was \
                     deleted",
                    self.settings.snapshot_timeout.as_secs()
                )))
            }
        }
    }

    /// Deletes a VolumeSnapshot and its env copy (404 when the snapshot is missing).
    pub(super) async fn delete_snapshot_objects(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<()> {
        self.volume_snapshots(Some(namespace))
            .delete(name, &Default::default())
            .await
            .map_err(|e| match kube_error(&format!("snapshot {name}"), e) {
                PlatformError::NotFound(_) => not_found(namespace, name),
                other => other,
            })?;
        // Shown no more at once (`snapshots::shown`); gone once the snapshot controller has
        // removed its finalizers, which is waited for a moment so that the name can be reused.
        self.snapshot_cache.settled(namespace, name, None).await;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match secrets
            .delete(&snapshots::env_secret(name), &Default::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if missing(&e) => Ok(()),
            Err(e) => Err(kube_error(&format!("snapshot {name}"), e)),
        }
    }

    pub(super) async fn remove_snapshot(&self, namespace: &str, name: &str) {
        if let Err(e) = self.delete_snapshot_objects(namespace, name).await {
            tracing::warn!(%namespace, snapshot = %name, error = %e, "undoing a snapshot");
        }
    }

    /// A `named` (or other kind of) snapshot of a sandbox's root PVC; the sandbox keeps running.
    pub(super) async fn snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        name: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<()> {
        let (template, _) = self
            .snapshot_source(namespace, sandbox, "a snapshot")
            .await?;
        self.create_snapshot(namespace, name, sandbox, kind, &template)
            .await
    }

    /// Scales the sandbox to 0, waits (bounded) for its Pod to be gone so that the volume is
    /// no longer written, then snapshots it (kind `pause`); a failed snapshot scales it back.
    pub(super) async fn pause_with_snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        name: &str,
    ) -> PlatformResult<()> {
        let record = self.get_sandbox(namespace, sandbox).await?;
        if record.status != SandboxStatus::Running {
            return Err(PlatformError::Conflict(format!(
                "sandbox '{sandbox}' is {}: only a running sandbox can be paused",
                record.status
            )));
        }
        let (template, _) = self
            .snapshot_source(namespace, sandbox, "pause with a snapshot")
            .await?;
        if self
            .volume_snapshots(Some(namespace))
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("snapshot {name}"), e))?
            .is_some()
        {
            return Err(taken("snapshot", namespace, name));
        }
        self.scale(namespace, sandbox, 0).await?;
        let deadline = Instant::now() + POD_GONE_WAIT;
        while !self.pods_of(namespace, sandbox).await?.is_empty() {
            if Instant::now() > deadline {
                tracing::warn!(%namespace, %sandbox, "pod still there after 60 s: snapshotting anyway");
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Err(e) = self
            .create_snapshot(namespace, name, sandbox, SnapshotKind::Pause, &template)
            .await
        {
            if let Err(undo) = self.scale(namespace, sandbox, 1).await {
                tracing::warn!(%sandbox, error = %undo, "resuming after a failed pause snapshot");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Fork: a VolumeSnapshot of the source's root PVC, a new PVC cloned from it, waited for
    /// until Bound (at most `[kubernetes] forkTimeout`, progress in the log), the `fork`
    /// snapshot deleted, then the new sandbox on that PVC. A clone that never binds is undone
    /// (PVC and snapshot deleted) and answered 504.
    pub(super) async fn fork(
        &self,
        namespace: &str,
        source: &str,
        new_name: &str,
        snapshot: Option<&str>,
    ) -> PlatformResult<()> {
        let (template, source_pvc) = self.snapshot_source(namespace, source, "fork").await?;
        if self
            .deployments(Some(namespace))
            .get_opt(new_name)
            .await
            .map_err(|e| kube_error(&format!("sandbox {new_name}"), e))?
            .is_some()
        {
            return Err(taken("sandbox", namespace, new_name));
        }
        self.root_pvc_free(namespace, new_name).await?;
        let new_pvc = sandboxes::root_pvc(new_name);
        let (snapshot, kind) = match snapshot {
            Some(name) => (name.to_string(), SnapshotKind::Named),
            None => (
                format!("{source}-fork-{}", crate::shared::timestamp::now_unix()),
                SnapshotKind::Fork,
            ),
        };
        self.create_snapshot(namespace, &snapshot, source, kind, &template)
            .await?;
        let size = source_pvc
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .and_then(|q| Quantity::parse(&q.0).ok())
            .map(|q| q.value_ceil() as u64)
            .or(template.root_disk_bytes)
            .unwrap_or(self.settings.root_disk_bytes);
        let (made_pvc, made_snapshot) = (&new_pvc, &snapshot);
        let undo = |pvc: bool| async move {
            if pvc {
                self.remove_pvc(namespace, made_pvc).await;
            }
            self.remove_snapshot(namespace, made_snapshot).await;
        };
        if let Err(e) = self
            .create_root_pvc(namespace, new_name, size, Some(&snapshot))
            .await
        {
            undo(false).await;
            return Err(e);
        }
        if let Err(e) = self.wait_bound(namespace, &new_pvc).await {
            undo(true).await;
            return Err(e);
        }
        if kind == SnapshotKind::Fork {
            self.remove_snapshot(namespace, &snapshot).await;
        }
        let env_copy = sandboxes::env_secret(source);
        let env = if template.env {
            Env::Copy(&env_copy)
        } else {
            Env::None
        };
        match self
            .launch(
                namespace,
                new_name,
                &template,
                Root::Made,
                env,
                Tenancy::Lookup,
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => {
                // A Deployment of that name that appeared meanwhile is not ours to delete.
                if matches!(e, PlatformError::AlreadyExists(_)) {
                    self.remove_pvc(namespace, &new_pvc).await;
                }
                if kind == SnapshotKind::Named {
                    tracing::info!(%snapshot, "fork failed; its named snapshot is kept");
                }
                Err(e)
            }
        }
    }

    /// Deletes a PVC this request made and waits (at most [`PVC_GONE_WAIT`]) until it is
    /// gone — its protection finalizer is lifted by the controller manager — so that the
    /// answer is only sent once a retry under the same name can make it again.
    pub(super) async fn remove_pvc(&self, namespace: &str, pvc: &str) {
        let pvcs = self.pvcs(namespace);
        if let Err(e) = pvcs.delete(pvc, &Default::default()).await {
            if !missing(&e) {
                tracing::warn!(%pvc, error = %e, "undoing a fork");
            }
            return;
        }
        let deadline = Instant::now() + PVC_GONE_WAIT;
        while Instant::now() < deadline {
            match pvcs.get_opt(pvc).await {
                Ok(None) => return,
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => {
                    tracing::warn!(%pvc, error = %e, "waiting for an undone clone PVC to go");
                    return;
                }
            }
        }
        tracing::warn!(%pvc, "an undone clone PVC is still being deleted");
    }

    /// Waits until a PVC is Bound, at most `[kubernetes] forkTimeout`.
    pub(super) async fn wait_bound(&self, namespace: &str, pvc: &str) -> PlatformResult<()> {
        let started = Instant::now();
        let mut reported = started;
        loop {
            let phase = self
                .pvcs(namespace)
                .get(pvc)
                .await
                .map_err(|e| kube_error(&format!("PVC {pvc}"), e))?
                .status
                .and_then(|s| s.phase)
                .unwrap_or_else(|| "Pending".into());
            if phase == "Bound" {
                tracing::info!(%namespace, %pvc, elapsed_ms = started.elapsed().as_millis() as u64, "clone PVC bound");
                return Ok(());
            }
            if phase == "Lost" {
                return Err(PlatformError::Store(format!(
                    "the clone PVC '{pvc}' was lost"
                )));
            }
            if started.elapsed() >= self.settings.fork_timeout {
                return Err(PlatformError::Timeout(format!(
                    "the clone PVC '{pvc}' was not Bound after {} s (phase {phase}); the fork \
                     was undone (PVC and snapshot deleted)",
                    self.settings.fork_timeout.as_secs()
                )));
            }
            if reported.elapsed() >= PROGRESS_EVERY {
                reported = Instant::now();
                tracing::info!(%namespace, %pvc, %phase, elapsed_s = started.elapsed().as_secs(), "waiting for the clone PVC to bind");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One VolumeSnapshot of ours (404 worded as for a missing snapshot).
    pub(super) async fn volume_snapshot(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Arc<DynamicObject>> {
        // A miss is read again from the API server: a snapshot just made by another replica
        // (or by hand) may not have reached this replica's watch yet.
        let object = match self.snapshot_cache.get(namespace, name) {
            Some(cached) => Some(cached),
            None => self
                .volume_snapshots(Some(namespace))
                .get_opt(name)
                .await
                .map_err(|e| kube_error(&format!("snapshot {name}"), e))?
                .map(Arc::new),
        }
        .ok_or_else(|| not_found(namespace, name))?;
        if !snapshots::shown(&object) {
            return Err(not_found(namespace, name));
        }
        Ok(object)
    }

    /// Snapshots of a namespace (all when `None`), by namespace then name.
    pub(super) async fn list_snapshot_records(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
        kind: Option<SnapshotKind>,
    ) -> PlatformResult<Vec<Snapshot>> {
        let items: Vec<Arc<DynamicObject>> = match self.snapshot_cache.list(namespace) {
            Some(items) => items,
            None => self.read_snapshot_objects(namespace).await?,
        };
        Ok(snapshot_records(&items, sandbox, kind))
    }

    /// Every VolumeSnapshot of sbx, from the watch cache while it is in step.
    pub(super) async fn cached_snapshot_objects(&self) -> PlatformResult<Vec<Arc<DynamicObject>>> {
        match self.snapshot_cache.list(None) {
            Some(items) => Ok(items),
            None => self.read_snapshot_objects(None).await,
        }
    }

    /// The VolumeSnapshots of sbx in a namespace (all when `None`), read from the API server.
    pub(super) async fn read_snapshot_objects(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<DynamicObject>>> {
        read_managed(self.volume_snapshots(namespace), "list snapshots").await
    }

    /// One snapshot record.
    pub(super) async fn snapshot_record(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Snapshot> {
        let object = self.volume_snapshot(namespace, name).await?;
        Ok(snapshots::record(
            &object,
            crate::shared::timestamp::now_unix(),
        ))
    }

    /// The template a snapshot's annotations record.
    pub(super) async fn snapshot_template(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<SandboxTemplate> {
        let object = self.volume_snapshot(namespace, name).await?;
        snapshots::template(&snapshots::annotations_of(&object)).map_err(|e| {
            PlatformError::Invalid(format!("snapshot '{name}' cannot be restored: {e}"))
        })
    }

    /// A new sandbox from a snapshot: the recorded template with the plan's overrides, its
    /// root PVC cloned from the snapshot.
    pub(super) async fn restore(&self, snapshot: &str, plan: RestorePlan) -> PlatformResult<()> {
        let namespace = plan.namespace.as_str();
        let mut t = self.snapshot_template(namespace, snapshot).await?;
        if let Some(image) = &plan.image {
            t.image = image.clone();
        }
        if t.image.trim().is_empty() {
            return Err(PlatformError::Invalid(format!(
                "snapshot '{snapshot}' records no image (annotation {}) and the overrides name \
                 none",
                names::SOURCE_IMAGE
            )));
        }
        if t.backend != KQL_BACKEND {
            return Err(PlatformError::Invalid(format!(
                "snapshot '{snapshot}' was taken on {}: only {KQL_BACKEND} snapshots can be restored",
                t.backend
            )));
        }
        t.cpu_millis = plan.cpu_millis.or(t.cpu_millis);
        t.memory_bytes = plan.memory_bytes.or(t.memory_bytes);
        t.ephemeral_bytes = plan.ephemeral_bytes.or(t.ephemeral_bytes);
        t.root_disk_bytes = plan.root_disk_bytes.or(t.root_disk_bytes);
        if plan.entrypoint.is_some() {
            t.entrypoint = plan.entrypoint.clone();
        }
        if plan.cmd.is_some() {
            t.cmd = plan.cmd.clone();
        }
        if let Some(script) = &plan.before_script {
            t.before_script = script.clone();
        }
        if let Some(sidecar) = &plan.sidecar {
            t.sidecar =
                (sidecar != crate::shared::models::snapshot::SIDECAR_NONE).then(|| sidecar.clone());
        }
        if plan.nodes.is_some() {
            t.nodes = plan.nodes.clone();
        }
        let env_copy = snapshots::env_secret(snapshot);
        let env = if t.env {
            Env::Copy(&env_copy)
        } else {
            Env::None
        };
        self.root_pvc_free(namespace, &plan.new_name).await?;
        self.launch(
            namespace,
            &plan.new_name,
            &t,
            Root::FromSnapshot(snapshot),
            env,
            Tenancy::Lookup,
        )
        .await
    }

    /// Deletes (or, dry, lists) the `fork` snapshots older than `keep_for`.
    pub(super) async fn gc(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>> {
        let now = crate::shared::timestamp::now_unix();
        let mut results = Vec::new();
        // What it deletes is read from the API server, not the watch cache: its ages must be
        // the current ones.
        let objects = self.read_snapshot_objects(namespace).await?;
        for s in snapshot_records(&objects, None, Some(SnapshotKind::Fork)) {
            let created =
                crate::shared::timestamp::parse_timestamp(&s.creation_timestamp).unwrap_or(now);
            if ((now - created).max(0) as u64) < keep_for.as_secs() {
                continue;
            }
            let deleted = !dry_run
                && match self.delete_snapshot_objects(&s.namespace, &s.name).await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(snapshot = %s.name, error = %e, "snapshot GC");
                        false
                    }
                };
            results.push(GcResult {
                name: s.name,
                namespace: s.namespace,
                age: s.age,
                deleted,
            });
        }
        Ok(results)
    }
}

/// The records of these VolumeSnapshots (those of sbx), of one source sandbox and kind when
/// given, by namespace then name.
pub(super) fn snapshot_records(
    objects: &[Arc<DynamicObject>],
    sandbox: Option<&str>,
    kind: Option<SnapshotKind>,
) -> Vec<Snapshot> {
    let now = crate::shared::timestamp::now_unix();
    let mut out: Vec<Snapshot> = objects
        .iter()
        .filter(|o| snapshots::shown(o))
        .map(|o| snapshots::record(o, now))
        .filter(|s| sandbox.is_none_or(|want| s.source_sandbox == want))
        .filter(|s| kind.is_none_or(|want| s.kind == want))
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}
