//! Sandbox rules of the contract, independent of the platform: names, limits, egress lists,
//! users and capabilities, exec limits (the process fields of a create: `process.rs`).
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::daemon::auth::Principal;
use crate::daemon::config::{Mode, SandboxDefaults};
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::{
    NewSandbox, PlatformError, SandboxBackend, SandboxOwner, TenantStore,
};
use crate::daemon::services::process::{command_field, create_env};
use crate::daemon::services::tenants::{Need, TenantService};
use crate::shared::capabilities::{NON_ROOT_ID, capability_set};
use crate::shared::egress::Egress;
use crate::shared::envelope::DataEnvelope;
use crate::shared::exec_stream::{ExecSession, ExecStreamQuery};
use crate::shared::image_ref::normalize_reference;
use crate::shared::models::sandbox::{
    CreateSandboxRequest, DEFAULT_EXEC_TIMEOUT, DeleteAllResponse, DeleteResult, ExecResponse,
    ResourceLimits, Sandbox, SandboxMetrics,
};
use crate::shared::names;
use crate::shared::timestamp::now_unix;
use bytes::Bytes;

pub use super::tenant_policy::{Nodes, Sizing, apply_tenant_policy, check_capabilities};

/// The backend of sandboxes on the local platform.
pub const LOCAL_BACKEND: &str = "sbxd";
/// Backends that enforce neither network limits, diskIO nor a disk quota (spec rule 6).
pub const UNENFORCING_BACKENDS: &[&str] = &[LOCAL_BACKEND, "sbxd-fc"];
/// Smallest memory limit a sandbox can start with.
pub const MIN_MEMORY_BYTES: u64 = 6 * 1024 * 1024;
/// The limits of a create or a restore, checked alike (issue 43 point 17): every value a
/// quantity, `cpu` above 0, `memory` at least [`MIN_MEMORY_BYTES`], `ephemeral-storage`
/// above 0. Returns cpu (millicores), memory and ephemeral storage (bytes).
pub fn validate_limits(limits: Option<&ResourceLimits>) -> ServiceResult<CheckedLimits> {
    let bad = ServiceError::bad_request;
    let limits = limits.cloned().unwrap_or_default().parse().map_err(bad)?;
    let cpu_millis = limits.cpu.map(|q| q.millis() as u64);
    if cpu_millis == Some(0) {
        return Err(bad("invalid limits: `cpu` must be more than 0".to_string()));
    }
    let memory_bytes = limits.memory.map(|q| q.value_ceil() as u64);
    if memory_bytes.is_some_and(|m| m < MIN_MEMORY_BYTES) {
        return Err(bad(
            "invalid limits: `memory` must be at least 6Mi".to_string()
        ));
    }
    let ephemeral_bytes = limits.ephemeral_storage.map(|q| q.value_ceil() as u64);
    if ephemeral_bytes == Some(0) {
        return Err(bad(
            "invalid limits: `ephemeral-storage` must be more than 0".to_string(),
        ));
    }
    Ok(CheckedLimits {
        cpu_millis,
        memory_bytes,
        ephemeral_bytes,
    })
}

/// Limits that passed [`validate_limits`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckedLimits {
    /// CPU, millicores.
    pub cpu_millis: Option<u64>,
    /// Memory, bytes.
    pub memory_bytes: Option<u64>,
    /// Writable layer, bytes.
    pub ephemeral_bytes: Option<u64>,
}

/// Which list a cached answer is: the key of the list cache. An enum, not a string: no
/// namespace name can be mistaken for a set of them, whatever it holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ListKey {
    /// Every namespace.
    All,
    /// One namespace.
    Namespace(String),
    /// The namespaces a caller sees.
    Within(Vec<String>),
}

/// A list answer kept for reuse: valid while the records are unchanged and within the same
/// second (ages are shown to the second).
struct CachedList {
    version: u64,
    second: i64,
    body: Bytes,
}

/// The sandbox service.
pub struct SandboxService {
    pub(super) sandboxes: Arc<dyn SandboxBackend>,
    pub(super) tenancy: Arc<dyn TenantStore>,
    pub(super) tenants: Arc<TenantService>,
    registries: Arc<super::images::RegistryPolicy>,
    mode: Mode,
    list_cache: Mutex<HashMap<ListKey, CachedList>>,
    /// `[sandboxDefaults]`.
    defaults: SandboxDefaults,
}

/// How often the leader looks at the nodes that run sandboxes.
const CHECK_NODES_EVERY: Duration = Duration::from_secs(5);

impl SandboxService {
    /// On the leader, checks the nodes that run sandboxes every few seconds (forever).
    pub async fn nodes_loop(self: Arc<Self>) {
        let mut tick = tokio::time::interval(CHECK_NODES_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if !self.tenancy.is_leader() {
                continue;
            }
            if let Err(e) = self.sandboxes.check_nodes().await {
                tracing::warn!(error = %e, "checking the nodes that run sandboxes");
            }
        }
    }

    /// A service over the platform's sandbox and tenancy seams.
    pub fn new(
        sandboxes: Arc<dyn SandboxBackend>,
        tenancy: Arc<dyn TenantStore>,
        tenants: Arc<TenantService>,
        registries: Arc<super::images::RegistryPolicy>,
        mode: Mode,
        defaults: SandboxDefaults,
    ) -> SandboxService {
        SandboxService {
            sandboxes,
            tenancy,
            tenants,
            registries,
            mode,
            list_cache: Mutex::new(HashMap::new()),
            defaults,
        }
    }

    /// The list answer (`{"data": [...]}`, serialized) for a namespace, or all when `None`.
    /// Lists are the hot read: the serialized answer is reused until a record changes or the
    /// second (and with it every age) turns.
    pub async fn list_envelope(&self, namespace: Option<&str>) -> ServiceResult<Bytes> {
        let key = match namespace {
            Some(ns) => ListKey::Namespace(ns.to_string()),
            None => ListKey::All,
        };
        // The platform lists one namespace already: nothing to filter.
        self.cached_list(key, |_| true).await
    }

    /// The list answer over every namespace in `visible` (a tenant's caller listing all
    /// namespaces), cached like [`SandboxService::list_envelope`].
    pub async fn list_envelope_within(&self, visible: &[String]) -> ServiceResult<Bytes> {
        self.cached_list(ListKey::Within(visible.to_vec()), |s| {
            visible.contains(&s.namespace)
        })
        .await
    }

    /// The list answer for a namespace (all when `None`) narrowed to `visible` namespaces
    /// (when given) and to the sandboxes whose labels match `selector` (400 for a selector
    /// it cannot read). Not cached: a selector is a narrower, rarer read.
    pub async fn list_selected(
        &self,
        namespace: Option<&str>,
        visible: Option<&[String]>,
        selector: &str,
    ) -> ServiceResult<Bytes> {
        let selector =
            crate::shared::labels::Selector::parse(selector).map_err(ServiceError::bad_request)?;
        let mut sandboxes = self.sandboxes.list_sandboxes(namespace).await?;
        sandboxes.retain(|s| {
            visible.is_none_or(|v| v.contains(&s.namespace)) && selector.matches(&s.labels)
        });
        Ok(Bytes::from(
            serde_json::to_vec(&DataEnvelope::new(sandboxes)).map_err(ServiceError::internal)?,
        ))
    }

    async fn cached_list(
        &self,
        key: ListKey,
        keep: impl Fn(&crate::shared::models::sandbox::Sandbox) -> bool,
    ) -> ServiceResult<Bytes> {
        let namespace = match &key {
            ListKey::Namespace(ns) => Some(ns.as_str()),
            ListKey::All | ListKey::Within(_) => None,
        };
        let version = self.sandboxes.sandboxes_version();
        let second = now_unix();
        if let Some(version) = version {
            let cache = self.list_cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hit) = cache.get(&key) {
                if hit.version == version && hit.second == second {
                    return Ok(hit.body.clone());
                }
            }
        }
        let mut sandboxes = self.sandboxes.list_sandboxes(namespace).await?;
        sandboxes.retain(|s| keep(s));
        let body = Bytes::from(
            serde_json::to_vec(&DataEnvelope::new(sandboxes)).map_err(ServiceError::internal)?,
        );
        if let Some(version) = version {
            let mut cache = self.list_cache.lock().unwrap_or_else(|e| e.into_inner());
            // One entry per namespace asked for; forget the lot if it grows large.
            if cache.len() > 1024 {
                cache.clear();
            }
            cache.insert(
                key,
                CachedList {
                    version,
                    second,
                    body: body.clone(),
                },
            );
        }
        Ok(body)
    }

    /// Validates a create request into a platform-neutral sandbox.
    pub fn validate_create(&self, request: &CreateSandboxRequest) -> ServiceResult<NewSandbox> {
        let bad = ServiceError::bad_request;
        let name = request.require_name().map_err(bad)?.to_string();
        names::validate_dns_label("sandbox name", &name).map_err(bad)?;
        let image = request.require_image().map_err(bad)?.trim().to_string();
        // A malformed reference is the caller's mistake now, not a Failed sandbox later.
        normalize_reference(&image).map_err(bad)?;
        let namespace = request.namespace().to_string();
        names::validate_dns_label("namespace", &namespace).map_err(bad)?;
        let available = self.sandboxes.backends();
        let backend = request
            .backend
            .clone()
            .unwrap_or_else(|| available[0].to_string());
        if !available.contains(&backend.as_str()) {
            return Err(bad(format!(
                "backend '{backend}' is not available on this platform (available: {})",
                available.join(", ")
            )));
        }
        let CheckedLimits {
            cpu_millis,
            memory_bytes,
            ephemeral_bytes,
        } = validate_limits(request.limits.as_ref())?;
        let env = create_env(request.env_file.as_deref(), request.env.as_ref()).map_err(bad)?;
        let entrypoint = command_field("entrypoint", request.entrypoint.as_ref()).map_err(bad)?;
        let cmd = command_field("cmd", request.cmd.as_ref()).map_err(bad)?;
        let labels = request.labels.clone().unwrap_or_default();
        crate::shared::labels::validate(&labels).map_err(bad)?;
        // The allow-list's own parser: CIDRs with host bits or IPv6 entries are refused here,
        // not when the sandbox starts.
        Egress::from_whitelist(request.egress_whitelist.as_deref()).map_err(bad)?;
        let capabilities =
            capability_set(request.cap_drop.as_deref(), request.cap_add.as_deref()).map_err(bad)?;
        let (uid, gid, additional_gids) = if request.pod_non_root {
            (NON_ROOT_ID, NON_ROOT_ID, vec![NON_ROOT_ID])
        } else if request.container_non_root {
            (NON_ROOT_ID, 0, vec![])
        } else {
            (0, 0, vec![])
        };
        Ok(NewSandbox {
            namespace,
            name,
            image,
            env,
            before_script: request
                .before_script
                .clone()
                .filter(|s| !s.trim().is_empty()),
            cpu_millis,
            memory_bytes,
            ephemeral_bytes,
            egress: request.egress_whitelist.clone(),
            egress_deny: Vec::new(),
            uid,
            gid,
            additional_gids,
            capabilities: capabilities.iter().map(|c| format!("CAP_{c}")).collect(),
            backend,
            nodes: None,
            entrypoint,
            cmd,
            labels,
            lifetime: Default::default(),
            owner: None,
        })
    }

    /// Creates a sandbox for `principal`: access to the namespace, the owning tenant's
    /// defaults, limits and placement, then its quotas under the tenant's lock; a taken name
    /// is 400 as the contract says.
    pub async fn create(
        &self,
        principal: &Principal,
        request: &CreateSandboxRequest,
    ) -> ServiceResult<NewSandbox> {
        if request.env_file.is_some() {
            // The file is read by the service, on its own host: never for a tenant's key.
            principal
                .require_cluster_role(crate::shared::models::identity::Role::Operator)
                .map_err(|_| {
                    ServiceError::forbidden(
                        "`env_file` makes the service read a file on its own host: only operator \
                         and admin principals may name one; send the variables in `env`",
                    )
                })?;
        }
        let mut new = self.validate_create(request)?;
        self.tenants
            .require(principal, &new.namespace, Need::Write)
            .await?;
        self.registries.check(principal, &new.image)?;
        let owner = self.tenants.owner(&new.namespace).await?;
        check_capabilities(&new.capabilities, owner.as_ref(), principal)?;
        new.lifetime = super::lifetimes::create_lifetime(request, owner.as_ref())?;
        // Checked when the tenant was written; one that no longer reads refuses the create
        // rather than leaving the list out.
        let tenant_deny = match owner.as_ref().and_then(|o| o.spec.limits.as_ref()) {
            Some(limits) => limits.egress_deny().map_err(ServiceError::bad_request)?,
            None => Vec::new(),
        };
        new.owner = owner.as_ref().map(|o| SandboxOwner {
            name: o.name.clone(),
            network: o.spec.limits.as_ref().and_then(|l| l.network.clone()),
            egress_deny: tenant_deny.clone(),
            allowed_capabilities: o
                .spec
                .limits
                .as_ref()
                .and_then(|l| l.allowed_capabilities.clone()),
            allow_dind: o.spec.limits.as_ref().is_some_and(|l| l.allow_dind),
        });
        new.egress_deny = owner
            .as_ref()
            .map(|o| o.spec.egress_deny())
            .unwrap_or_default();
        let mut sizing = Sizing {
            backend: new.backend.clone(),
            cpu_millis: new.cpu_millis,
            memory_bytes: new.memory_bytes,
            ephemeral_bytes: new.ephemeral_bytes,
            root_disk_bytes: self.sandboxes.root_disk_bytes(&new.backend),
            nodes: None,
        };
        let nodes = Nodes::of(self.tenancy.as_ref()).await?;
        apply_tenant_policy(
            &mut sizing,
            owner.as_ref(),
            principal,
            self.mode,
            &nodes,
            &self.defaults,
        )?;
        let ask = sizing.ask();
        (
            new.cpu_millis,
            new.memory_bytes,
            new.ephemeral_bytes,
            new.nodes,
        ) = (
            sizing.cpu_millis,
            sizing.memory_bytes,
            sizing.ephemeral_bytes,
            sizing.nodes,
        );
        self.tenants
            .admit(owner.as_ref(), Some(ask), async {
                match self.sandboxes.create_sandbox(new.clone()).await {
                    Ok(()) => Ok(()),
                    Err(PlatformError::AlreadyExists(m)) => Err(ServiceError::bad_request(m)),
                    Err(e) => Err(e.into()),
                }
            })
            .await?;
        Ok(new)
    }

    /// The images (normalized references) the sandboxes of `namespaces` run: what a caller
    /// who sees only those namespaces may see of the image store.
    pub async fn images_in(
        &self,
        namespaces: &[String],
    ) -> ServiceResult<std::collections::BTreeSet<String>> {
        let mut images = std::collections::BTreeSet::new();
        for namespace in namespaces {
            for sandbox in self.sandboxes.list_sandboxes(Some(namespace)).await? {
                if let Ok(reference) = normalize_reference(&sandbox.image) {
                    images.insert(reference);
                }
            }
        }
        Ok(images)
    }

    /// One sandbox.
    pub async fn get(&self, namespace: &str, name: &str) -> ServiceResult<Sandbox> {
        Ok(self.sandboxes.get_sandbox(namespace, name).await?)
    }

    /// Deletes one sandbox.
    pub async fn delete(&self, namespace: &str, name: &str) -> ServiceResult<()> {
        Ok(self.sandboxes.delete_sandbox(namespace, name).await?)
    }

    /// Thaws a paused sandbox.
    pub async fn resume(&self, namespace: &str, name: &str) -> ServiceResult<()> {
        // A resumed sandbox starts a new idle period: recorded before it runs, so that the
        // leader never finds it running and idle since before its pause.
        self.sandboxes.touch_sandbox(namespace, name).await;
        self.sandboxes.resume_sandbox(namespace, name).await?;
        Ok(())
    }

    /// CPU and memory of a namespace's sandboxes.
    pub async fn metrics(&self, namespace: &str) -> ServiceResult<Vec<SandboxMetrics>> {
        Ok(self.sandboxes.sandbox_metrics(Some(namespace)).await?)
    }

    /// The last `tail` lines of the last `since_secs` seconds of the log of one of a sandbox's
    /// containers (`sandbox`, or a sidecar the platform runs beside it). The
    /// sandbox must exist before its containers are discussed (404 first); a container it
    /// does not have is a 400 naming those it has.
    pub async fn logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: u64,
        since_secs: u64,
    ) -> ServiceResult<String> {
        self.sandboxes.get_sandbox(namespace, name).await?;
        Ok(self
            .sandboxes
            .sandbox_logs(namespace, name, container, tail as usize, since_secs)
            .await?)
    }

    /// Follows a sandbox's log: chunks of its text until the sandbox stops or the receiver
    /// is dropped.
    pub async fn follow_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: u64,
        since_secs: u64,
    ) -> ServiceResult<tokio::sync::mpsc::Receiver<Bytes>> {
        self.sandboxes.get_sandbox(namespace, name).await?;
        Ok(self
            .sandboxes
            .follow_logs(namespace, name, container, tail as usize, since_secs)
            .await?)
    }

    /// Deletes every sandbox of a namespace, reporting each.
    pub async fn delete_all(&self, namespace: &str) -> ServiceResult<DeleteAllResponse> {
        let sandboxes = self.sandboxes.list_sandboxes(Some(namespace)).await?;
        let deletions = sandboxes.iter().map(|s| async move {
            let outcome = self.sandboxes.delete_sandbox(namespace, &s.name).await;
            DeleteResult {
                name: s.name.clone(),
                success: outcome.is_ok(),
                error: outcome.err().map(|e| ServiceError::from(e).message),
            }
        });
        let results = futures_util::future::join_all(deletions).await;
        let deleted = results.iter().filter(|r| r.success).count();
        Ok(DeleteAllResponse {
            message: format!(
                "deleted {deleted} of {} sandboxes in namespace '{namespace}'",
                results.len()
            ),
            results,
        })
    }

    /// Runs a command with the contract's exec limits.
    pub async fn exec(
        &self,
        namespace: &str,
        name: &str,
        command: &str,
        timeout_seconds: Option<u64>,
    ) -> ServiceResult<ExecResponse> {
        let timeout = self
            .exec_timeout(timeout_seconds)?
            .unwrap_or(DEFAULT_EXEC_TIMEOUT.min(self.sandboxes.max_exec_timeout()));
        self.touch_later(namespace, name);
        let result = self
            .sandboxes
            .exec_sandbox(namespace, name, command, timeout)
            .await?;
        self.touch_later(namespace, name);
        Ok(result)
    }

    /// The backends this deployment runs (the first is the default).
    pub fn backends(&self) -> &'static [&'static str] {
        self.sandboxes.backends()
    }

    /// The longest exec time-out a request may ask for.
    pub fn max_exec_timeout(&self) -> Duration {
        self.sandboxes.max_exec_timeout()
    }

    /// `timeout_seconds` of an exec, checked against the service's maximum.
    fn exec_timeout(&self, timeout_seconds: Option<u64>) -> ServiceResult<Option<Duration>> {
        let max = self.sandboxes.max_exec_timeout();
        match timeout_seconds {
            None => Ok(None),
            Some(0) => Err(ServiceError::bad_request(
                "timeout_seconds must be at least 1",
            )),
            Some(s) if Duration::from_secs(s) > max => Err(ServiceError::bad_request(format!(
                "timeout_seconds {s} is above this service's maximum of {}",
                max.as_secs()
            ))),
            Some(s) => Ok(Some(Duration::from_secs(s))),
        }
    }

    /// Starts a streamed exec: its session and its time limit (none unless asked for).
    pub async fn exec_stream(
        &self,
        namespace: &str,
        name: &str,
        query: &ExecStreamQuery,
    ) -> ServiceResult<(ExecSession, Option<Duration>)> {
        crate::shared::models::sandbox::require_field("command", query.command.as_deref())
            .map_err(ServiceError::bad_request)?;
        if query.cols.is_some() != query.rows.is_some()
            || query.cols == Some(0)
            || query.rows == Some(0)
        {
            return Err(ServiceError::bad_request(
                "cols and rows go together, each at least 1",
            ));
        }
        let timeout = self.exec_timeout(query.timeout_seconds)?;
        let session = self.sandboxes.exec_stream(namespace, name, query).await?;
        Ok((self.keep_touching(namespace, name, session), timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_entries() {
        let check = |list: &[&str]| {
            let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
            Egress::from_whitelist(Some(&list)).map(drop)
        };
        assert!(check(&["10.0.0.0/8", "1.2.3.4"]).is_ok());
        for bad in ["10.0.0.0/33", "example.com", "::1/128", "10.0.0.1/8"] {
            let err = check(&[bad]).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
