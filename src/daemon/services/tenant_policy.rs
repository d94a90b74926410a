//! A tenant's rules for one new sandbox, independent of the platform: its default size and
//! its limits, placement on the tenant's nodes and the key's, what the backend cannot
//! enforce, and the capabilities its caller may add.
use crate::daemon::auth::Principal;
use crate::daemon::config::{Mode, SandboxDefaults};
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::platform::TenantStore;
use crate::daemon::services::quotas::Ask;
use crate::daemon::services::tenants::Owner;
use crate::shared::capabilities::{first_not_allowed, parse_capability};
use crate::shared::envelope::ErrorCode;
use crate::shared::models::identity::Role;
use oci_spec::runtime::Capability;

use super::sandboxes::UNENFORCING_BACKENDS;

/// The nodes and their dedications, as placement sees them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nodes {
    /// Every node.
    pub all: Vec<String>,
    /// Node -> the tenant it is dedicated to.
    pub dedicated: std::collections::BTreeMap<String, String>,
}

impl Nodes {
    /// The platform's nodes now.
    pub async fn of(tenancy: &dyn TenantStore) -> ServiceResult<Nodes> {
        let dedicated = tenancy.node_dedications().await?;
        // Every node's name matters only when a dedication may exclude some.
        let all = if dedicated.is_empty() {
            Vec::new()
        } else {
            tenancy.node_names().await?
        };
        Ok(Nodes { all, dedicated })
    }
}

/// The sizing and placement of a sandbox-to-be, as tenant policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sizing {
    /// The backend (limits some backends cannot enforce are refused).
    pub backend: String,
    /// CPU limit, millicores.
    pub cpu_millis: Option<u64>,
    /// Memory limit, bytes.
    pub memory_bytes: Option<u64>,
    /// Writable-layer limit, bytes.
    pub ephemeral_bytes: Option<u64>,
    /// Root volume, bytes (kql's root PVC; `None` on backends without one).
    pub root_disk_bytes: Option<u64>,
    /// Nodes it may run on (`None`: any).
    pub nodes: Option<Vec<String>>,
}

impl Sizing {
    /// What the quota check asks for: disk is the writable layer's limit plus the root volume.
    pub fn ask(&self) -> Ask {
        let disk = match (self.ephemeral_bytes, self.root_disk_bytes) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        Ask {
            cpu_millis: self.cpu_millis,
            memory_bytes: self.memory_bytes,
            disk_bytes: disk,
            with_snapshot: false,
        }
    }
}

fn quantity(text: &Option<String>) -> Option<crate::shared::quantity::Quantity> {
    text.as_deref()
        .and_then(|t| crate::shared::quantity::Quantity::parse(t).ok())
}

/// The owning tenant's rules for a new sandbox (tenant rules 2, 3, 5 and 6): `defaultSize`
/// fills each limit the request leaves out, `limits.maxSandboxSize` caps them, limits the
/// sbxd backends cannot enforce are refused (400 `LimitNotEnforceable`), placement is the
/// tenant's nodes narrowed by the key's; in production mode CPU and memory must end up set.
/// A sandbox with no size for something its tenant has a quota on (vcpu, memory, disk) is
/// refused with a 400: unlimited, it would count as nothing against that quota.
///
/// Then, on the sbxd backends, `defaults` (`[sandboxDefaults]`) fills each limit still left
/// out: nothing else bounds such a sandbox (on Kubernetes, a namespace's LimitRange does).
pub fn apply_tenant_policy(
    sizing: &mut Sizing,
    owner: Option<&Owner>,
    principal: &Principal,
    mode: Mode,
    nodes: &Nodes,
    defaults: &SandboxDefaults,
) -> ServiceResult<()> {
    let bad = ServiceError::bad_request;
    if let Some(owner) = owner {
        let spec = &owner.spec;
        if let Some(size) = &spec.default_size {
            if sizing.cpu_millis.is_none() {
                sizing.cpu_millis = quantity(&size.cpu).map(|q| q.millis() as u64);
            }
            if sizing.memory_bytes.is_none() {
                sizing.memory_bytes = quantity(&size.memory).map(|q| q.value_ceil() as u64);
            }
            if sizing.ephemeral_bytes.is_none() {
                sizing.ephemeral_bytes = quantity(&size.disk).map(|q| q.value_ceil() as u64);
            }
        }
        let limits = spec.limits.clone().unwrap_or_default();
        let mut unenforceable = Vec::new();
        if limits.network.is_some() {
            unenforceable.push("limits.network");
        }
        if limits.disk_io.is_some() {
            unenforceable.push("limits.diskIO");
        }
        if spec.quotas.as_ref().is_some_and(|q| q.disk.is_some()) {
            unenforceable.push("quotas.disk");
        }
        // Network limits are enforced on kql and kfd; the sbxd backends enforce none of
        // these, and diskIO no backend enforces (accepted by the schema everywhere else).
        if !UNENFORCING_BACKENDS.contains(&sizing.backend.as_str()) {
            unenforceable.clear();
        }
        if !unenforceable.is_empty() {
            return Err(ServiceError::new(
                ErrorCode::LimitNotEnforceable,
                format!(
                    "tenant '{}' sets {}, which the {} backend cannot enforce",
                    owner.name,
                    unenforceable.join(" and "),
                    sizing.backend
                ),
            ));
        }
        if let Some(max) = &limits.max_sandbox_size {
            if let (Some(max), Some(cpu)) = (quantity(&max.cpu), sizing.cpu_millis) {
                if cpu as u128 > max.millis() {
                    return Err(bad(format!(
                        "cpu {} is above tenant '{}' limits.maxSandboxSize.cpu {}",
                        crate::shared::quantity::format_cpu_millis(cpu),
                        owner.name,
                        max.as_str()
                    )));
                }
            }
            if let (Some(max), Some(memory)) = (quantity(&max.memory), sizing.memory_bytes) {
                if memory as u128 > max.value_ceil() {
                    return Err(bad(format!(
                        "memory {} is above tenant '{}' limits.maxSandboxSize.memory {}",
                        crate::shared::quantity::format_bytes_binary(memory),
                        owner.name,
                        max.as_str()
                    )));
                }
            }
        }
        if let Some(quotas) = &spec.quotas {
            let missing_size = [
                (
                    "vcpu",
                    "cpu",
                    quotas.vcpu.is_some() && sizing.cpu_millis.is_none(),
                ),
                (
                    "memory",
                    "memory",
                    quotas.memory.is_some() && sizing.memory_bytes.is_none(),
                ),
                (
                    "disk",
                    "ephemeral-storage",
                    quotas.disk.is_some()
                        && sizing.ephemeral_bytes.is_none()
                        && sizing.root_disk_bytes.is_none(),
                ),
            ];
            if let Some((quota, limit, _)) = missing_size.iter().find(|(_, _, missing)| *missing) {
                let default = if *limit == "ephemeral-storage" {
                    "disk"
                } else {
                    limit
                };
                return Err(bad(format!(
                    "tenant '{}' has a {quota} quota, so every sandbox needs a `{limit}` limit: \
                     give one in the request's limits, or set the tenant's defaultSize.{default}",
                    owner.name
                )));
            }
        }
        sizing.nodes = spec.nodes.clone();
    }
    if !principal.nodes.is_empty() {
        sizing.nodes = Some(match sizing.nodes.take() {
            Some(allowed) => allowed
                .into_iter()
                .filter(|n| principal.nodes.contains(n))
                .collect(),
            None => principal.nodes.clone(),
        });
    }
    // A node dedicated to a tenant takes no one else's sandboxes (the taint).
    let tenant = owner.map(|o| o.name.as_str());
    let tainted = |node: &String| {
        nodes
            .dedicated
            .get(node)
            .is_some_and(|t| Some(t.as_str()) != tenant)
    };
    if nodes.all.iter().any(tainted) {
        let allowed = sizing.nodes.take().unwrap_or_else(|| nodes.all.clone());
        sizing.nodes = Some(allowed.into_iter().filter(|n| !tainted(n)).collect());
    }
    if UNENFORCING_BACKENDS.contains(&sizing.backend.as_str()) {
        sizing.cpu_millis = sizing.cpu_millis.or(defaults.cpu_millis);
        sizing.memory_bytes = sizing.memory_bytes.or(defaults.memory_bytes);
        sizing.ephemeral_bytes = sizing.ephemeral_bytes.or(defaults.ephemeral_bytes);
    }
    if mode == Mode::Production && (sizing.cpu_millis.is_none() || sizing.memory_bytes.is_none()) {
        return Err(bad(
            "in production mode every sandbox needs `cpu` and `memory` limits, from the \
             request or from its tenant's defaultSize"
                .to_string(),
        ));
    }
    Ok(())
}

/// Rule of issue 43 point 6, the one place it is decided: a caller below the operator role
/// (a tenant's `user`, an unscoped development key) gets no capability outside the runtime's
/// default set and the owning tenant's `limits.allowedCapabilities` (403 naming the first
/// one and the setting an admin would change). Operators and admins get what they ask for.
/// The seccomp profile lifts syscall blocks by the granted set only, so it lifts none for a
/// capability refused here.
pub fn check_capabilities(
    capabilities: &[String],
    owner: Option<&Owner>,
    principal: &Principal,
) -> ServiceResult<()> {
    if principal.require_cluster_role(Role::Operator).is_ok() {
        return Ok(());
    }
    let allowed = owner
        .and_then(|o| o.spec.limits.as_ref())
        .and_then(|l| l.allowed_capabilities.as_deref())
        .unwrap_or_default();
    let mut set: Vec<Capability> = Vec::new();
    for name in capabilities {
        // The set was built from known names; one that no longer parses is refused, not
        // skipped.
        let cap = parse_capability(name).map_err(|_| {
            ServiceError::forbidden(format!("capability {name} is not allowed for tenant users"))
        })?;
        set.push(cap);
    }
    let Some(refused) = first_not_allowed(&set, allowed) else {
        return Ok(());
    };
    let remedy = match owner {
        Some(owner) => format!(
            "an admin may add it to tenant '{}' limits.allowedCapabilities",
            owner.name
        ),
        None => "an admin may add it to the limits.allowedCapabilities of a tenant owning                  this namespace, or an operator may create the sandbox"
            .to_string(),
    };
    Err(ServiceError::forbidden(format!(
        "cap_add {refused} is not allowed for tenant users; {remedy}"
    )))
}
