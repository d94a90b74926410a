//! Snapshot rules of the contract, independent of the platform: names, kinds, restore
//! overrides and backends, fork, GC.
use std::sync::Arc;
use std::time::Duration;

use crate::daemon::auth::Principal;
use crate::daemon::config::{Mode, SandboxDefaults};
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::{
    PlatformError, RestorePlan, SandboxBackend, SnapshotBackend, TenantStore,
};
use crate::daemon::services::process::command_field;
use crate::daemon::services::sandboxes::{
    LOCAL_BACKEND, Nodes, Sizing, apply_tenant_policy, validate_limits,
};
use crate::daemon::services::tenants::{Need, TenantService};
use crate::shared::image_ref::normalize_reference;
use crate::shared::models::DEFAULT_NAMESPACE;
use crate::shared::models::identity::Role;
use crate::shared::models::sandbox::{CreateSnapshotRequest, ForkRequest, SandboxStatus};
use crate::shared::models::snapshot::{
    GcRequest, GcResponse, RestoreRequest, Snapshot, SnapshotKind, SnapshotListQuery,
};
use crate::shared::names;

/// The backend whose snapshots can be neither forked nor restored.
pub const KFD_BACKEND: &str = "kata-firecracker-devmapper";
/// How long a restore with `keep_snapshot: false` waits for Ready before keeping the snapshot.
pub const RESTORE_READY_WAIT: Duration = Duration::from_secs(600);

/// A 409 for a taken name, whatever the platform called it.
fn conflict_on_exists(e: PlatformError) -> ServiceError {
    match e {
        PlatformError::AlreadyExists(m) => ServiceError::conflict(m),
        other => other.into(),
    }
}

fn snapshot_name(what: &str, value: &str) -> ServiceResult<()> {
    names::validate_dns_label(what, value).map_err(ServiceError::bad_request)
}

/// The snapshot service.
pub struct SnapshotService {
    snapshots: Arc<dyn SnapshotBackend>,
    sandboxes: Arc<dyn SandboxBackend>,
    tenancy: Arc<dyn TenantStore>,
    tenants: Arc<TenantService>,
    registries: Arc<super::images::RegistryPolicy>,
    mode: Mode,
    /// `[sandboxDefaults]` (a restore is sized as a create is).
    defaults: SandboxDefaults,
}

impl SnapshotService {
    /// A service over the platform's snapshot, sandbox and tenancy seams.
    pub fn new(
        snapshots: Arc<dyn SnapshotBackend>,
        sandboxes: Arc<dyn SandboxBackend>,
        tenancy: Arc<dyn TenantStore>,
        tenants: Arc<TenantService>,
        registries: Arc<super::images::RegistryPolicy>,
        mode: Mode,
        defaults: SandboxDefaults,
    ) -> SnapshotService {
        SnapshotService {
            snapshots,
            sandboxes,
            tenancy,
            tenants,
            registries,
            mode,
            defaults,
        }
    }

    /// `POST /sandboxes/{name}/snapshot`: a `named` snapshot of a running sandbox.
    pub async fn snapshot(
        &self,
        principal: &Principal,
        sandbox: &str,
        request: &CreateSnapshotRequest,
    ) -> ServiceResult<(String, String)> {
        let name = request
            .require_snapshot_name()
            .map_err(ServiceError::bad_request)?;
        snapshot_name("snapshot_name", name)?;
        let namespace = request
            .namespace
            .as_deref()
            .unwrap_or(DEFAULT_NAMESPACE)
            .to_string();
        self.tenants
            .require(principal, &namespace, Need::Write)
            .await?;
        let owner = self.tenants.owner(&namespace).await?;
        self.tenants
            .admit(owner.as_ref(), None, async {
                self.snapshots
                    .snapshot_sandbox(&namespace, sandbox, name, SnapshotKind::Named)
                    .await
                    .map_err(conflict_on_exists)
            })
            .await?;
        Ok((name.to_string(), namespace))
    }

    /// Pause with an optional `pause` snapshot.
    pub async fn pause(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: Option<&str>,
    ) -> ServiceResult<()> {
        match snapshot {
            None => Ok(self.sandboxes.pause_sandbox(namespace, sandbox).await?),
            Some(name) => {
                snapshot_name("snapshot", name)?;
                let owner = self.tenants.owner(namespace).await?;
                self.tenants
                    .admit(owner.as_ref(), None, async {
                        self.snapshots
                            .pause_sandbox_with_snapshot(namespace, sandbox, name)
                            .await
                            .map_err(conflict_on_exists)
                    })
                    .await
            }
        }
    }

    /// `POST /sandboxes/{name}/fork`.
    pub async fn fork(
        &self,
        principal: &Principal,
        source: &str,
        request: &ForkRequest,
    ) -> ServiceResult<(String, String)> {
        let new_name = request
            .require_new_name()
            .map_err(ServiceError::bad_request)?;
        names::validate_dns_label("new_name", new_name).map_err(ServiceError::bad_request)?;
        let namespace = request
            .namespace
            .as_deref()
            .unwrap_or(DEFAULT_NAMESPACE)
            .to_string();
        if let Some(name) = &request.snapshot {
            snapshot_name("snapshot", name)?;
        }
        self.tenants
            .require(principal, &namespace, Need::Write)
            .await?;
        let sandbox = self.sandboxes.get_sandbox(&namespace, source).await?;
        if sandbox.backend == KFD_BACKEND {
            return Err(ServiceError::bad_request(format!(
                "sandbox '{source}' runs on {KFD_BACKEND}, which cannot fork"
            )));
        }
        let owner = self.tenants.owner(&namespace).await?;
        let size = self.tenancy.sandbox_size(&namespace, source).await?;
        // A fork of a volume takes a volume snapshot (kept when named, else deleted once the
        // clone's volume is made), and any fork with `snapshot` keeps one: snapshotStorage is
        // checked for it as for any snapshot (rule 4).
        let ask = crate::daemon::services::quotas::Ask {
            cpu_millis: Some(size.cpu_millis),
            memory_bytes: Some(size.memory_bytes),
            disk_bytes: Some(size.disk_bytes),
            with_snapshot: request.snapshot.is_some() || size.root_disk_bytes > 0,
        };
        self.tenants
            .admit(owner.as_ref(), Some(ask), async {
                self.snapshots
                    .fork_sandbox(
                        &namespace,
                        source,
                        new_name,
                        request.snapshot.as_deref(),
                        request.warm,
                    )
                    .await
                    .map_err(conflict_on_exists)
            })
            .await?;
        super::lifetimes::apply_tenant_ttl(
            self.sandboxes.as_ref(),
            owner.as_ref(),
            &namespace,
            new_name,
        )
        .await?;
        Ok((new_name.to_string(), namespace))
    }

    /// One snapshot.
    pub async fn get(&self, namespace: &str, name: &str) -> ServiceResult<Snapshot> {
        Ok(self.snapshots.get_snapshot(namespace, name).await?)
    }

    /// Deletes one snapshot.
    pub async fn delete(&self, namespace: &str, name: &str) -> ServiceResult<()> {
        Ok(self.snapshots.delete_snapshot(namespace, name).await?)
    }

    /// `GET /snapshots`.
    pub async fn list(
        &self,
        principal: &Principal,
        query: &SnapshotListQuery,
    ) -> ServiceResult<Vec<Snapshot>> {
        let kind = query.kind_filter().map_err(ServiceError::bad_request)?;
        let namespace = (!query.all_namespaces)
            .then(|| query.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE));
        let access = match namespace {
            Some(ns) => self.tenants.require(principal, ns, Need::Read).await?,
            None => self.tenants.access(principal).await?,
        };
        let mut snapshots = self
            .snapshots
            .list_snapshots(namespace, query.sandbox.as_deref(), kind)
            .await?;
        snapshots.retain(|s| access.sees(&s.namespace));
        Ok(snapshots)
    }

    /// `POST /snapshots/{name}/restore`: validates the request and overrides, then creates
    /// the sandbox; with `keep_snapshot: false` the snapshot goes once the sandbox is Ready.
    pub async fn restore(
        &self,
        principal: &Principal,
        snapshot: &str,
        request: &RestoreRequest,
    ) -> ServiceResult<RestorePlan> {
        let bad = ServiceError::bad_request;
        let new_name = request.require_new_sandbox_name().map_err(bad)?;
        names::validate_dns_label("new_sandbox_name", new_name).map_err(bad)?;
        let namespace = request.namespace().to_string();
        self.tenants
            .require(principal, &namespace, Need::Write)
            .await?;
        // 404 for an absent snapshot before judging the overrides against it.
        let source_backend = self
            .snapshots
            .snapshot_backend(&namespace, snapshot)
            .await?;
        if source_backend == KFD_BACKEND {
            return Err(bad(format!(
                "snapshot '{snapshot}' was taken on {KFD_BACKEND}, which cannot be restored"
            )));
        }
        let overrides = request.overrides.clone().unwrap_or_default();
        overrides.validate().map_err(bad)?;
        if let Some(backend) = overrides.backend.as_deref() {
            if backend != source_backend {
                return Err(bad(format!(
                    "backend '{backend}' cannot restore a snapshot taken on {source_backend}"
                )));
            }
        }
        if source_backend == LOCAL_BACKEND {
            if overrides.root_disk_size.is_some() {
                return Err(ServiceError::bad_request(
                    "root_disk_size does not apply on sbxd: limit the writable layer with \
                     limits.ephemeral-storage",
                ));
            }
            if overrides
                .validate_sidecar()
                .map_err(bad)?
                .is_some_and(|s| s != "none")
            {
                return Err(ServiceError::bad_request("sbxd sandboxes run no sidecar"));
            }
        }
        if let Some(image) = overrides.image.as_deref().filter(|i| !i.trim().is_empty()) {
            normalize_reference(image.trim()).map_err(bad)?;
            self.registries.check(principal, image)?;
        }
        // The same checks as a create's (issue 43 point 17): a restore makes a sandbox too.
        let limits = validate_limits(overrides.limits.as_ref())?;
        let mut plan = RestorePlan {
            namespace: namespace.clone(),
            new_name: new_name.to_string(),
            image: overrides.image.clone().filter(|i| !i.trim().is_empty()),
            cpu_millis: limits.cpu_millis,
            memory_bytes: limits.memory_bytes,
            ephemeral_bytes: limits.ephemeral_bytes,
            entrypoint: command_field("entrypoint", overrides.entrypoint.as_ref()).map_err(bad)?,
            cmd: command_field("cmd", overrides.cmd.as_ref()).map_err(bad)?,
            before_script: overrides.before_script.clone().map(Some),
            root_disk_bytes: overrides
                .root_disk_size
                .as_deref()
                .map(|q| crate::shared::quantity::Quantity::parse(q).map(|q| q.value_ceil() as u64))
                .transpose()
                .map_err(|e| bad(format!("root_disk_size: {e}")))?,
            sidecar: overrides
                .validate_sidecar()
                .map_err(bad)?
                .map(str::to_string),
            nodes: None,
        };
        // The new sandbox's size: the overrides, else what the snapshot recorded; then the
        // tenant's rules as for a create.
        let recorded = self.tenancy.snapshot_size(&namespace, snapshot).await?;
        let nonzero = |v: u64| (v > 0).then_some(v);
        let mut sizing = Sizing {
            backend: source_backend.clone(),
            cpu_millis: plan.cpu_millis.or(nonzero(recorded.cpu_millis)),
            memory_bytes: plan.memory_bytes.or(nonzero(recorded.memory_bytes)),
            ephemeral_bytes: plan
                .ephemeral_bytes
                .or(nonzero(recorded.disk_bytes - recorded.root_disk_bytes)),
            root_disk_bytes: plan
                .root_disk_bytes
                .or(nonzero(recorded.root_disk_bytes))
                .or(self.sandboxes.root_disk_bytes(&source_backend)),
            nodes: None,
        };
        let owner = self.tenants.owner(&namespace).await?;
        let nodes = Nodes::of(self.tenancy.as_ref()).await?;
        apply_tenant_policy(
            &mut sizing,
            owner.as_ref(),
            principal,
            self.mode,
            &nodes,
            &self.defaults,
        )?;
        (
            plan.cpu_millis,
            plan.memory_bytes,
            plan.ephemeral_bytes,
            plan.nodes,
        ) = (
            sizing.cpu_millis,
            sizing.memory_bytes,
            sizing.ephemeral_bytes,
            sizing.nodes.clone(),
        );
        self.tenants
            .admit(owner.as_ref(), Some(sizing.ask()), async {
                self.snapshots
                    .restore_snapshot(snapshot, plan.clone())
                    .await
                    .map_err(conflict_on_exists)
            })
            .await?;
        super::lifetimes::apply_tenant_ttl(
            self.sandboxes.as_ref(),
            owner.as_ref(),
            &namespace,
            new_name,
        )
        .await?;
        if !request.keep_snapshot() {
            self.delete_when_ready(namespace, snapshot.to_string(), new_name.to_string());
        }
        Ok(plan)
    }

    fn delete_when_ready(&self, namespace: String, snapshot: String, sandbox: String) {
        let (sandboxes, snapshots) = (self.sandboxes.clone(), self.snapshots.clone());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            while started.elapsed() < RESTORE_READY_WAIT {
                match sandboxes.get_sandbox(&namespace, &sandbox).await {
                    Ok(s) if s.status == SandboxStatus::Running && s.ready == "True" => {
                        if let Err(e) = snapshots.delete_snapshot(&namespace, &snapshot).await {
                            tracing::warn!(%snapshot, error = %e, "deleting a restored snapshot");
                        }
                        return;
                    }
                    Ok(s) if s.status == SandboxStatus::Failed => break,
                    Err(_) => break,
                    Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
            tracing::warn!(%snapshot, %sandbox, "restored sandbox never became Ready: snapshot kept");
        });
    }

    /// `POST /snapshots/gc`.
    pub async fn gc(
        &self,
        principal: &Principal,
        request: &GcRequest,
    ) -> ServiceResult<GcResponse> {
        let keep_for = request.keep_fork_for().map_err(ServiceError::bad_request)?;
        let namespace = (!request.all_namespaces)
            .then(|| request.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE));
        match namespace {
            // GC across namespaces is the operator's (DESIGN.md §4).
            None => principal.require_cluster_role(Role::Operator)?,
            Some(ns) => self.tenants.require_write(principal, ns).await?,
        }
        let results = self
            .snapshots
            .gc_snapshots(namespace, keep_for, request.dry_run)
            .await?;
        let message = if request.dry_run {
            format!(
                "{} fork snapshots older than {}s would be deleted",
                results.len(),
                keep_for.as_secs()
            )
        } else {
            let deleted = results.iter().filter(|r| r.deleted).count();
            format!(
                "deleted {deleted} fork snapshots older than {}s",
                keep_for.as_secs()
            )
        };
        Ok(GcResponse { message, results })
    }

    /// The scheduled sweep: every 10 minutes, fork snapshots older than the default, by the
    /// leader replica only.
    pub async fn sweep_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(600));
        tick.tick().await;
        loop {
            tick.tick().await;
            // One replica sweeps: the holder of the leader Lease on Kubernetes.
            if !self.tenancy.is_leader() {
                continue;
            }
            let keep = crate::shared::models::snapshot::DEFAULT_KEEP_FORK_FOR;
            match self.snapshots.gc_snapshots(None, keep, false).await {
                Ok(results) if !results.is_empty() => {
                    tracing::info!(
                        deleted = results.iter().filter(|r| r.deleted).count(),
                        "scheduled snapshot GC"
                    )
                }
                Ok(_) => {}
                Err(PlatformError::Unavailable(_)) => {}
                Err(e) => tracing::warn!(error = %e, "scheduled snapshot GC"),
            }
        }
    }
}
