//! Tenancy, written once for every platform: the tenant resource and its nine rules, who may
//! reach which namespace (DESIGN.md §4), and the quota admission of sandbox and snapshot
//! creates (`admission.rs`, `quotas.rs`).
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::daemon::auth::Principal;
use crate::daemon::config::Mode;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::mirror::Mirror;
use crate::daemon::platform::{
    Platform, PlatformError, Reservation, SnapshotBackend, StoredTenant, TenantStore,
};
use crate::daemon::services::admission::Admissions;
use crate::daemon::services::quotas::Ask;
use crate::daemon::services::sandboxes::SandboxService;
use crate::shared::models::identity::Role;
use crate::shared::models::node::NodeStorage;
use crate::shared::models::tenant::{
    CreateTenantRequest, DeleteTenantResponse, PatchTenantRequest, Tenant, TenantSpec,
    TenantStatus, TenantUsage,
};
use crate::shared::names;
use crate::shared::quantity::{format_bytes_binary, format_cpu_millis};
use crate::shared::timestamp::now_unix;

/// How often `status.usage` is recomputed (spec: every 60 seconds).
pub const STATUS_REFRESH: Duration = Duration::from_secs(60);
/// How often the tenants are read again from a store that cannot say when they change (and
/// how often the leader checks whether the status refresh is due).
pub const RELOAD_EVERY: Duration = Duration::from_secs(5);
/// How often they are read again anyway from a store that can (a safety net).
pub const RESYNC_EVERY: Duration = Duration::from_secs(60);

/// What a request does to a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Reads (`read-only` and up).
    Read,
    /// Changes (`user` and up).
    Write,
}

/// Where a principal may act, and with which role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// A role that holds in every namespace (cluster roles; an unscoped development key).
    everywhere: Option<Role>,
    /// Roles in single namespaces (tenant roles, narrowed by a key's `namespaces`).
    namespaces: BTreeMap<String, Role>,
}

impl Access {
    /// The role held in `namespace`, if any.
    pub fn role_in(&self, namespace: &str) -> Option<Role> {
        self.namespaces.get(namespace).copied().max(self.everywhere)
    }

    /// Whether every namespace is visible (no filtering of lists needed).
    pub fn everywhere(&self) -> bool {
        self.everywhere.is_some()
    }

    /// The namespaces seen when not [`Access::everywhere`], sorted.
    pub fn namespaces(&self) -> Vec<String> {
        self.namespaces.keys().cloned().collect()
    }

    /// Whether objects of `namespace` may be seen.
    pub fn sees(&self, namespace: &str) -> bool {
        self.role_in(namespace).is_some()
    }
}

/// 400 unless `namespace` is a DNS-1123 label. Every namespace a request names (path, query
/// or body) passes the access check, so it is checked here once: a malformed one never
/// reaches a platform, a cache key or a message built from it.
fn valid_namespace(namespace: &str) -> ServiceResult<()> {
    names::validate_dns_label("namespace", namespace).map_err(ServiceError::bad_request)
}

/// The tenant that owns a namespace, and its spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    /// Tenant name.
    pub name: String,
    /// Its spec.
    pub spec: TenantSpec,
}

/// The tenant service.
pub struct TenantService {
    tenancy: Arc<dyn TenantStore>,
    /// What a namespace holds, asked before it changes hands.
    snapshots: Arc<dyn SnapshotBackend>,
    mode: Mode,
    /// Every tenant, loaded on first use, reloaded by [`TenantService::status_loop`] and after
    /// each of this service's writes; a reload begun before another never replaces it.
    tenants: Mirror<Vec<StoredTenant>>,
    /// Quota checks of creates, per tenant.
    admissions: Admissions,
    /// Tenant writes, one at a time (rule 1 compares against the other tenants).
    writes: tokio::sync::Mutex<()>,
    /// When this replica last rewrote every tenant's status (it does while it leads).
    refreshed: Mutex<Option<Instant>>,
}

impl TenantService {
    /// A service over a platform.
    pub fn new(platform: Arc<dyn Platform>, mode: Mode) -> TenantService {
        let tenancy: Arc<dyn TenantStore> = platform.clone();
        let admissions = Admissions::new(tenancy.clone());
        TenantService {
            tenancy,
            snapshots: platform,
            mode,
            tenants: Mirror::new(),
            admissions,
            writes: tokio::sync::Mutex::new(()),
            refreshed: Mutex::new(None),
        }
    }

    /// Every tenant (from memory after the first call).
    pub async fn all(&self) -> ServiceResult<Vec<StoredTenant>> {
        match self.tenants.get() {
            Some(tenants) => Ok(tenants),
            None => self.reload().await,
        }
    }

    /// Reads the tenants from the store; returns the newest that is held afterwards (this
    /// read's, or one begun after it that finished first).
    async fn reload(&self) -> ServiceResult<Vec<StoredTenant>> {
        let ticket = self.tenants.ticket();
        let fresh = self.tenancy.list_tenants().await?;
        if self.tenants.install(ticket, fresh.clone()) {
            return Ok(fresh);
        }
        Ok(self.tenants.get().unwrap_or(fresh))
    }

    /// The tenant owning `namespace`, if any.
    pub async fn owner(&self, namespace: &str) -> ServiceResult<Option<Owner>> {
        Ok(self
            .all()
            .await?
            .into_iter()
            .find(|t| t.spec.namespaces.iter().any(|n| n == namespace))
            .map(|t| Owner {
                name: t.name,
                spec: t.spec,
            }))
    }

    /// Where `principal` may act.
    pub async fn access(&self, principal: &Principal) -> ServiceResult<Access> {
        let mut access = Access {
            everywhere: principal.cluster_role,
            namespaces: BTreeMap::new(),
        };
        if let Some(role) = principal.unscoped_role {
            if principal.namespaces.is_empty() {
                access.everywhere = access.everywhere.max(Some(role));
            } else {
                for ns in &principal.namespaces {
                    let held = access.namespaces.entry(ns.clone()).or_insert(role);
                    *held = (*held).max(role);
                }
            }
        }
        if !principal.tenant_roles.is_empty() {
            for tenant in self.all().await? {
                let Some(&role) = principal.tenant_roles.get(&tenant.name) else {
                    continue;
                };
                for ns in &tenant.spec.namespaces {
                    if !principal.namespaces.is_empty() && !principal.namespaces.contains(ns) {
                        continue;
                    }
                    let held = access.namespaces.entry(ns.clone()).or_insert(role);
                    *held = (*held).max(role);
                }
            }
        }
        Ok(access)
    }

    /// 403 unless `principal` may `need` in `namespace`. Reads of named objects use
    /// [`TenantService::require_read`] instead, which answers 404.
    pub async fn require(
        &self,
        principal: &Principal,
        namespace: &str,
        need: Need,
    ) -> ServiceResult<Access> {
        valid_namespace(namespace)?;
        if let Some(why) = self.tenancy.namespace_refused(namespace, false) {
            return Err(ServiceError::forbidden(why));
        }
        let access = self.access(principal).await?;
        if need == Need::Write
            && self.mode == Mode::Production
            && self.tenancy.tenant_namespaces_only()
            && self.owner(namespace).await?.is_none()
        {
            return Err(ServiceError::forbidden(format!(
                "namespace '{namespace}' is not owned by a tenant: in production mode sandboxes \
                 and snapshots live only in a tenant's namespaces (an admin adds it to a \
                 tenant's spec.namespaces)"
            )));
        }
        match (access.role_in(namespace), need) {
            (None, _) => Err(ServiceError::forbidden(format!(
                "{} has no access to namespace '{namespace}'",
                principal.subject
            ))),
            (Some(Role::ReadOnly), Need::Write) => Err(ServiceError::forbidden(format!(
                "{} has the read-only role in namespace '{namespace}': this operation changes \
                 state",
                principal.subject
            ))),
            _ => Ok(access),
        }
    }

    /// For reads of a named object: 404 with `missing` (the same answer as for an object
    /// that does not exist) unless `principal` may read in `namespace`.
    pub async fn require_read(
        &self,
        principal: &Principal,
        namespace: &str,
        missing: impl FnOnce() -> String,
    ) -> ServiceResult<()> {
        valid_namespace(namespace)?;
        if self.access(principal).await?.sees(namespace) {
            Ok(())
        } else {
            Err(ServiceError::not_found(missing()))
        }
    }

    /// For writes to a named object: 404 as for reads when the caller cannot even see the
    /// namespace would leak nothing either, but the contract says 403 for writes there.
    pub async fn require_write(&self, principal: &Principal, namespace: &str) -> ServiceResult<()> {
        self.require(principal, namespace, Need::Write)
            .await
            .map(drop)
    }

    /// Runs `create` once `ask` (one more sandbox of that size; `None`: a snapshot) is
    /// admitted against the tenant's quotas: 403 `QuotaExceeded` otherwise. Without an owning
    /// tenant, just runs `create`. The check and the creates it admits hold the tenant's lock
    /// (shared with the other replicas) until they end, so the next check sees what they made
    /// (`admission.rs`: the creates that come meanwhile are checked as they come, counting
    /// those admitted before them).
    pub async fn admit<T, F>(
        &self,
        owner: Option<&Owner>,
        ask: Option<Ask>,
        create: F,
    ) -> ServiceResult<T>
    where
        F: std::future::Future<Output = ServiceResult<T>>,
    {
        let Some(owner) = owner else {
            return create.await;
        };
        let Some(quotas) = owner.spec.quotas.as_ref() else {
            return create.await;
        };
        let admitted = self
            .admissions
            .admit(&owner.name, &owner.spec.namespaces, quotas, ask)
            .await?;
        let created = create.await;
        if created.is_ok() {
            admitted.succeeded();
        }
        created
    }

    /// A tenant's observed state now, from what its namespaces hold.
    async fn observe(&self, tenant: &StoredTenant) -> ServiceResult<TenantStatus> {
        let used = self.tenancy.reservation(&tenant.spec.namespaces).await?;
        Ok(status_of(used, tenant.generation))
    }

    /// Observes a tenant and writes its status (after a spec change); the status read back
    /// from the store is the one every replica shows.
    async fn write_status(&self, tenant: &StoredTenant) -> ServiceResult<TenantStatus> {
        let status = self.observe(tenant).await?;
        self.tenancy
            .write_tenant_status(&tenant.name, &status)
            .await?;
        Ok(status)
    }

    /// The status a read shows: the one last written, unless it is of an older spec (another
    /// replica changed it and has not written it yet), then observed now.
    async fn status(&self, tenant: &StoredTenant) -> ServiceResult<TenantStatus> {
        match &tenant.status {
            Some(status) if status.observed_generation == tenant.generation => Ok(status.clone()),
            _ => self.observe(tenant).await,
        }
    }

    /// Re-reads the tenants whenever the store says they changed (a watch on Kubernetes; every
    /// [`RESYNC_EVERY`] besides) or, from a store that cannot say, every [`RELOAD_EVERY`], so
    /// that another replica's writes show; and, while this replica leads, rewrites every
    /// tenant's `status` every [`STATUS_REFRESH`] (tenant rule 4; at once when it becomes the
    /// leader).
    pub async fn status_loop(self: Arc<Self>) {
        let mut changes = self.tenancy.tenant_changes();
        let mut tick = tokio::time::interval(RELOAD_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reloaded = Instant::now();
        loop {
            let changed = match changes.as_mut() {
                Some(watch) => tokio::select! {
                    changed = watch.changed() => {
                        if changed.is_err() {
                            changes = None;
                        }
                        true
                    }
                    _ = tick.tick() => false,
                },
                None => {
                    tick.tick().await;
                    true
                }
            };
            if self.tenancy.is_leader() {
                let due = self
                    .refreshed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_none_or(|at| at.elapsed() >= STATUS_REFRESH);
                if due {
                    self.refresh_statuses().await;
                    *self.refreshed.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(Instant::now());
                }
            } else {
                *self.refreshed.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
            if changed || reloaded.elapsed() >= RESYNC_EVERY {
                reloaded = Instant::now();
                if let Err(e) = self.reload().await {
                    tracing::warn!(error = %e.message, "tenant reload failed");
                }
            }
        }
    }

    /// Rewrites every tenant's status that changed (the 60-second sweep of the leader).
    pub async fn refresh_statuses(&self) {
        let Ok(tenants) = self.all().await else {
            return;
        };
        for tenant in tenants {
            let refreshed = async {
                // As this replica's watches see it: a list of every namespace's objects from
                // the API server each minute otherwise.
                let used = self
                    .tenancy
                    .reservation_seen(&tenant.spec.namespaces)
                    .await?;
                let status = status_of(used, tenant.generation);
                // Unchanged, it is not written again (each write is a watch event for every
                // replica).
                if tenant.status.as_ref() != Some(&status) {
                    self.tenancy
                        .write_tenant_status(&tenant.name, &status)
                        .await?;
                }
                Ok::<_, ServiceError>(())
            };
            if let Err(e) = refreshed.await {
                tracing::warn!(tenant = %tenant.name, error = %e.message, "tenant status refresh failed");
            }
        }
    }

    /// The read form of a tenant this replica just wrote, its status written with it (so that
    /// `kubectl get tenants` shows the new generation's usage at once).
    async fn after_write(&self, name: &str) -> ServiceResult<Tenant> {
        let mut tenant = self.stored(name).await?;
        tenant.status = Some(self.write_status(&tenant).await?);
        self.read_form(tenant).await
    }

    async fn read_form(&self, tenant: StoredTenant) -> ServiceResult<Tenant> {
        let status = self.status(&tenant).await?;
        let mut read = Tenant::new(tenant.name, tenant.spec, status);
        read.metadata.labels = tenant.labels;
        Ok(read)
    }

    /// `GET /tenants`.
    pub async fn list(&self) -> ServiceResult<Vec<Tenant>> {
        let mut out = Vec::new();
        for tenant in self.all().await? {
            out.push(self.read_form(tenant).await?);
        }
        Ok(out)
    }

    /// `GET /tenants/{name}`.
    pub async fn get(&self, name: &str) -> ServiceResult<Tenant> {
        let tenant = self.stored(name).await?;
        self.read_form(tenant).await
    }

    async fn stored(&self, name: &str) -> ServiceResult<StoredTenant> {
        // A name no tenant can have is the caller's mistake (400), not an absent tenant.
        names::validate_dns_label("tenant name", name).map_err(ServiceError::bad_request)?;
        self.all()
            .await?
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| ServiceError::not_found(format!("tenant '{name}' not found")))
    }

    /// Rules a spec must meet against the other tenants (rule 1) and on its own.
    async fn check_spec(&self, name: &str, spec: &TenantSpec) -> ServiceResult<()> {
        let bad = ServiceError::bad_request;
        spec.validate().map_err(bad)?;
        for ns in &spec.namespaces {
            names::validate_dns_label("namespace", ns).map_err(bad)?;
            if let Some(why) = self.tenancy.namespace_refused(ns, true) {
                return Err(bad(why));
            }
        }
        for node in spec.nodes.iter().flatten() {
            names::validate_dns_subdomain("node name", node).map_err(bad)?;
        }
        for other in self.all().await? {
            if other.name == name {
                continue;
            }
            if let Some(ns) = spec
                .namespaces
                .iter()
                .find(|n| other.spec.namespaces.contains(n))
            {
                return Err(bad(format!(
                    "namespace '{ns}' already belongs to tenant '{}'",
                    other.name
                )));
            }
        }
        Ok(())
    }

    /// Issue 43 point 20: a namespace changes hands (leaves tenant `name`, or joins it) only
    /// while it holds no sandbox and no snapshot, else 409: what one tenant made must never
    /// become another's (a namespace left by one tenant, or by a deleted one, is claimed by
    /// the next). `before` and `after` are the tenant's namespaces.
    async fn check_moves(
        &self,
        name: &str,
        before: &[String],
        after: &[String],
    ) -> ServiceResult<()> {
        let moved = before
            .iter()
            .filter(|ns| !after.contains(ns))
            .map(|ns| (ns, "leave"))
            .chain(
                after
                    .iter()
                    .filter(|ns| !before.contains(ns))
                    .map(|ns| (ns, "join")),
            );
        for (ns, way) in moved {
            // The quota view counts sandboxes whether or not a runtime runs them.
            let held = self.tenancy.reservation(std::slice::from_ref(ns)).await?;
            let sandboxes = held.sandboxes;
            let snapshots = match self.snapshots.list_snapshots(Some(ns), None, None).await {
                Ok(list) => list.len(),
                // The embedded default without its runtime holds no snapshot (and its
                // reservation says so); anywhere else an unavailable platform is an error.
                Err(PlatformError::Unavailable(_)) if held.snapshot_bytes == 0 => 0,
                Err(e) => return Err(e.into()),
            };
            if sandboxes > 0 || snapshots > 0 {
                return Err(ServiceError::conflict(format!(
                    "namespace '{ns}' holds {sandboxes} sandbox(es) and {snapshots} \
                     snapshot(s): it cannot {way} tenant '{name}' until they are deleted \
                     (a namespace changes tenants only empty)"
                )));
            }
        }
        Ok(())
    }

    /// `POST /tenants`.
    pub async fn create(&self, request: &CreateTenantRequest) -> ServiceResult<Tenant> {
        let bad = ServiceError::bad_request;
        let name = request.require_name().map_err(bad)?;
        names::validate_dns_label("tenant name", name).map_err(bad)?;
        let spec = request.require_spec().map_err(bad)?.clone();
        let labels = request.labels.clone().unwrap_or_default();
        crate::shared::labels::validate_tenancy(&labels).map_err(bad)?;
        let _writes = self.writes.lock().await;
        self.check_spec(name, &spec).await?;
        self.check_moves(name, &[], &spec.namespaces).await?;
        let tenant = StoredTenant {
            name: name.to_string(),
            spec,
            generation: 1,
            created: now_unix(),
            status: None,
            labels,
        };
        match self.tenancy.insert_tenant(&tenant).await {
            Ok(()) => {}
            // The spec's error table: "create of an existing name" is a 400 (409 is for the
            // names fork, snapshot and restore make).
            Err(PlatformError::AlreadyExists(m)) => return Err(ServiceError::bad_request(m)),
            Err(e) => return Err(e.into()),
        }
        self.reload().await?;
        tracing::info!(tenant = %tenant.name, namespaces = ?tenant.spec.namespaces, "tenant created");
        self.after_write(name).await
    }

    /// `PATCH /tenants/{name}`: whole sections replaced, `null` removes one (rule 7).
    pub async fn update(&self, name: &str, request: &PatchTenantRequest) -> ServiceResult<Tenant> {
        let _writes = self.writes.lock().await;
        let mut tenant = self.stored(name).await?;
        let spec = request
            .spec
            .apply(&tenant.spec)
            .map_err(ServiceError::bad_request)?;
        let labels = match &request.labels {
            Some(labels) => {
                crate::shared::labels::validate_tenancy(labels)
                    .map_err(ServiceError::bad_request)?;
                labels.clone()
            }
            None => tenant.labels.clone(),
        };
        self.check_spec(name, &spec).await?;
        self.check_moves(name, &tenant.spec.namespaces, &spec.namespaces)
            .await?;
        if spec != tenant.spec || labels != tenant.labels {
            // Labels are not the spec: only a spec change is a new generation.
            if spec != tenant.spec {
                tenant.generation += 1;
            }
            tenant.spec = spec;
            tenant.labels = labels;
            self.tenancy.update_tenant(&tenant).await?;
            self.reload().await?;
            tracing::info!(tenant = %name, generation = tenant.generation, "tenant updated");
            return self.after_write(name).await;
        }
        self.read_form(tenant).await
    }

    /// `DELETE /tenants/{name}`: refused (409) while the tenant has sandboxes, unless
    /// `cascade`, which deletes them first and keeps the tenant (409) if one cannot be.
    pub async fn delete(
        &self,
        name: &str,
        cascade: bool,
        sandboxes: &SandboxService,
    ) -> ServiceResult<DeleteTenantResponse> {
        let tenant = self.stored(name).await?;
        let results = if cascade {
            let mut results = Vec::new();
            for namespace in &tenant.spec.namespaces {
                results.extend(sandboxes.delete_all(namespace).await?.results);
            }
            if let Some(failed) = results.iter().find(|r| !r.success) {
                return Err(ServiceError::conflict(format!(
                    "tenant '{name}' is kept: sandbox '{}' could not be deleted: {}",
                    failed.name,
                    failed.error.clone().unwrap_or_default()
                )));
            }
            Some(results)
        } else {
            let held = self
                .tenancy
                .reservation(&tenant.spec.namespaces)
                .await?
                .sandboxes;
            if held > 0 {
                return Err(ServiceError::conflict(format!(
                    "tenant '{name}' still has {held} sandbox(es): delete them first or pass \
                     cascade=true"
                )));
            }
            None
        };
        self.remove(name).await?;
        Ok(DeleteTenantResponse {
            message: match &results {
                Some(r) => format!("tenant '{name}' deleted with its {} sandbox(es)", r.len()),
                None => format!("tenant '{name}' deleted"),
            },
            results,
        })
    }

    /// Removes a tenant once its sandboxes are dealt with, and the nodes dedicated to it go
    /// back to everyone (a node must not stay reserved for a tenant that no longer exists).
    async fn remove(&self, name: &str) -> ServiceResult<()> {
        let _writes = self.writes.lock().await;
        self.tenancy.delete_tenant(name).await?;
        for (node, owner) in self.tenancy.node_dedications().await? {
            if owner == name {
                self.tenancy.set_node_dedication(&node, None).await?;
            }
        }
        self.reload().await?;
        tracing::info!(tenant = %name, "tenant deleted");
        Ok(())
    }

    /// `POST /nodes/{node}/dedicate`: the node takes only `tenant`'s sandboxes from now on
    /// and joins its `spec.nodes`; a tenant it was dedicated to before loses it from its own.
    pub async fn dedicate(&self, node: &str, tenant: &str) -> ServiceResult<()> {
        self.require_node(node).await?;
        let _writes = self.writes.lock().await;
        let mut stored = self.stored(tenant).await?;
        let before = self.tenancy.node_dedications().await?.remove(node);
        self.tenancy.set_node_dedication(node, Some(tenant)).await?;
        if let Some(previous) = before.filter(|t| t != tenant) {
            self.drop_node(&previous, node).await?;
        }
        let mut nodes = stored.spec.nodes.clone().unwrap_or_default();
        if !nodes.iter().any(|n| n == node) {
            nodes.push(node.to_string());
            stored.spec.nodes = Some(nodes);
            stored.generation += 1;
            self.tenancy.update_tenant(&stored).await?;
            self.reload().await?;
        }
        tracing::info!(node, tenant, "node dedicated");
        Ok(())
    }

    /// `POST /nodes/{node}/undedicate`: reverses [`TenantService::dedicate`]; returns the
    /// tenant it was dedicated to, if any.
    pub async fn undedicate(&self, node: &str) -> ServiceResult<Option<String>> {
        self.require_node(node).await?;
        let _writes = self.writes.lock().await;
        let Some(tenant) = self.tenancy.node_dedications().await?.remove(node) else {
            return Ok(None);
        };
        self.tenancy.set_node_dedication(node, None).await?;
        self.drop_node(&tenant, node).await?;
        tracing::info!(node, %tenant, "node undedicated");
        Ok(Some(tenant))
    }

    /// Takes `node` out of `tenant`'s `spec.nodes` (an empty list goes: any node again); a
    /// tenant that no longer exists has nothing to drop.
    async fn drop_node(&self, tenant: &str, node: &str) -> ServiceResult<()> {
        let Ok(mut stored) = self.stored(tenant).await else {
            return Ok(());
        };
        let Some(nodes) = stored.spec.nodes.as_mut() else {
            return Ok(());
        };
        if !nodes.iter().any(|n| n == node) {
            return Ok(());
        }
        nodes.retain(|n| n != node);
        if nodes.is_empty() {
            stored.spec.nodes = None;
        }
        stored.generation += 1;
        self.tenancy.update_tenant(&stored).await?;
        self.reload().await?;
        Ok(())
    }

    /// `GET /nodes/storage`: every node's storage pools, or why they cannot be read.
    pub async fn node_storage(&self) -> ServiceResult<NodeStorage> {
        Ok(self.tenancy.node_storage().await?)
    }

    async fn require_node(&self, node: &str) -> ServiceResult<()> {
        if self.tenancy.node_names().await?.iter().any(|n| n == node) {
            Ok(())
        } else {
            Err(ServiceError::not_found(format!("node '{node}' not found")))
        }
    }

    /// The stored tenant of this name (404 when absent).
    pub async fn require_tenant(&self, name: &str) -> ServiceResult<StoredTenant> {
        self.stored(name).await
    }

    /// Production mode needs a tenant for tenant roles (the key service asks).
    pub fn mode(&self) -> Mode {
        self.mode
    }
}

/// The status read form of a reservation.
fn status_of(used: Reservation, generation: i64) -> TenantStatus {
    TenantStatus {
        usage: TenantUsage {
            sandboxes: used.sandboxes.to_string(),
            vcpu: format_cpu_millis(used.cpu_millis),
            memory: format_bytes_binary(used.memory_bytes),
            disk: format_bytes_binary(used.disk_bytes),
            snapshot_storage: format_bytes_binary(used.snapshot_bytes),
        },
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests;
