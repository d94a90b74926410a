//! What the daemon may do in a cluster, in one table: the RBAC in `deploy/rbac.yaml` and the
//! table in `docs/operations.md` are generated from it (`tests/generated.rs` checks both), and
//! `sbx serve` checks every line of it at start-up (a SelfSubjectAccessReview each), so that a
//! missing permission or CRD is named when the daemon starts rather than failing a request
//! later.
use std::fmt::Write as _;

use futures_util::StreamExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, PostParams};
use serde_json::json;

use super::install::OPERATIONS_CONFIGMAP;
use super::{BINDINGS_CONFIGMAP, BOOTSTRAP_SECRET, KEYS_SECRET, SYSTEM_NAMESPACE};

/// Where a permission is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (the ClusterRole `sbx`): only what must be cluster-wide (namespaces,
    /// nodes, the CRDs, and the reads behind the watch caches, which list every namespace).
    Cluster,
    /// Each sandbox namespace (the ClusterRole [`TENANT_ROLE`]), granted by a RoleBinding the
    /// daemon makes there when it claims the namespace for a tenant or makes its first
    /// sandbox there (never in `kube-*` or `sbx-*`): Secrets, writes of sandbox objects,
    /// exec and logs reach no other namespace.
    Tenant,
    /// The service's own namespace for its state, `kube-system` (a Role there).
    System,
    /// The nodes' agents' namespace, `sbx-agent` (a Role there): their heartbeats.
    Agents,
}

impl Scope {
    /// The namespace of a namespaced scope.
    pub fn namespace(self) -> Option<&'static str> {
        match self {
            Scope::Cluster | Scope::Tenant => None,
            Scope::System => Some(SYSTEM_NAMESPACE),
            Scope::Agents => Some(AGENT_NAMESPACE),
        }
    }
}

/// The namespace of the agents in `deploy/agent.yaml`.
pub const AGENT_NAMESPACE: &str = "sbx-agent";

/// One RBAC rule the daemon needs, with the reason.
#[derive(Debug, Clone, Copy)]
pub struct Permission {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resource, with `/subresource` where there is one.
    pub resource: &'static str,
    /// Verbs.
    pub verbs: &'static [&'static str],
    /// Where.
    pub scope: Scope,
    /// Object names the rule is limited to (empty: any). `create` cannot be limited by name,
    /// so it is in a rule of its own.
    pub names: &'static [&'static str],
    /// Why the daemon needs it.
    pub why: &'static str,
}

const fn rule(
    group: &'static str,
    resource: &'static str,
    verbs: &'static [&'static str],
    scope: Scope,
    why: &'static str,
) -> Permission {
    Permission {
        group,
        resource,
        verbs,
        scope,
        names: &[],
        why,
    }
}

/// Every permission `sbx serve` uses on the Kubernetes platform.
pub const PERMISSIONS: &[Permission] = &[
    rule(
        "apps",
        "deployments",
        &["get", "list", "watch"],
        Scope::Cluster,
        "a sandbox is a Deployment; lists and gets are served from a watch of sbx's own (by label) in every namespace",
    ),
    rule(
        "apps",
        "deployments",
        &["create", "patch", "delete"],
        Scope::Tenant,
        "a sandbox is a Deployment: created, scaled to 0 and back by pause and resume (patch), its lifetime and last activity written as annotations (patch), deleted",
    ),
    rule(
        "",
        "pods",
        &["get", "list", "watch"],
        Scope::Cluster,
        "a sandbox's state, node and errors come from its Pod (watched); remote install reads the installer's Pods and finds the nodes running sbx serve",
    ),
    rule(
        "",
        "pods/exec",
        &["get", "create"],
        Scope::Tenant,
        "`POST /sandboxes/{name}/exec` runs the command in the sandbox's Pod (a WebSocket upgrade: `get`, and `create` since Kubernetes 1.30)",
    ),
    rule(
        "",
        "pods/log",
        &["get"],
        Scope::Tenant,
        "`GET /sandboxes/{name}/logs`",
    ),
    rule(
        "",
        "events",
        &["list"],
        Scope::Tenant,
        "why a sandbox's Pod cannot start (unschedulable, no runtime handler, image pull) shows as its `error_message`",
    ),
    rule(
        "",
        "persistentvolumeclaims",
        &["get", "create", "patch", "delete"],
        Scope::Tenant,
        "the root volume of a kql sandbox, cloned from a VolumeSnapshot by fork and restore; handed from one create to another when both ask for the same name at once",
    ),
    rule(
        "",
        "secrets",
        &["get", "create", "update", "patch", "delete"],
        Scope::Tenant,
        "a sandbox's env file is a Secret in its namespace, copied for its snapshots. Only Secrets the daemon names: no list or watch of Secrets in sandbox namespaces, and none at all outside them",
    ),
    rule(
        "networking.k8s.io",
        "networkpolicies",
        &["list", "watch"],
        Scope::Cluster,
        "the leader watches sbx's own policies (by the managed-by label) to put back one deleted",
    ),
    rule(
        "networking.k8s.io",
        "networkpolicies",
        &["create", "patch", "delete"],
        Scope::Tenant,
        "a sandbox's egress allow-list is a NetworkPolicy, and every tenant namespace has the default deny `sbx-default-deny` (server-side apply)",
    ),
    rule(
        "snapshot.storage.k8s.io",
        "volumesnapshots",
        &["get", "list", "watch"],
        Scope::Cluster,
        "pause, named and fork snapshots are VolumeSnapshots of a kql sandbox's root volume (watched in every namespace)",
    ),
    rule(
        "snapshot.storage.k8s.io",
        "volumesnapshots",
        &["create", "delete"],
        Scope::Tenant,
        "taking and deleting a kql sandbox's snapshots",
    ),
    rule(
        "",
        "namespaces",
        &["get", "list", "create", "patch"],
        Scope::Cluster,
        "a sandbox's namespace is made on first use; a tenant's namespaces carry its label and the pod-security labels (server-side apply); at start-up the tenant namespaces (by label) get the daemon's RoleBinding",
    ),
    rule(
        "rbac.authorization.k8s.io",
        "rolebindings",
        &["create", "patch"],
        Scope::Cluster,
        "the RoleBinding `sbx` that grants the daemon the ClusterRole `sbx-tenant` in a sandbox namespace (server-side apply), made when a tenant claims the namespace or its first sandbox is made; never in `kube-*` or `sbx-*`",
    ),
    Permission {
        group: "rbac.authorization.k8s.io",
        resource: "clusterroles",
        verbs: &["get", "bind"],
        scope: Scope::Cluster,
        names: &[TENANT_ROLE],
        why: "binding `sbx-tenant` in a sandbox namespace without holding its rules everywhere (`bind`); its rules are read at start-up to check that they cover the table's",
    },
    rule(
        "",
        "resourcequotas",
        &["create", "patch", "delete"],
        Scope::Tenant,
        "the backstop ResourceQuota `sbx-tenant-quota` of a single-namespace tenant",
    ),
    rule(
        "",
        "nodes",
        &["get", "list", "update"],
        Scope::Cluster,
        "placement and `sbx node dedicate`: a dedicated node carries the tenant's label and `NoSchedule` taint; remote install labels nodes into the installer pool (`sbx.io/install`) and, once installed, the agents' (`sbx.io/agent`); whether the nodes' runtimes support user namespaces (`hostUsers`)",
    ),
    rule(
        "",
        "nodes/stats",
        &["get"],
        Scope::Cluster,
        "`egress_bytes` usage: the bytes each sandbox's Pod sent, from the stats summary of its node's kubelet (read from the kubelet itself, as metrics-server does; not `nodes/proxy`)",
    ),
    rule(
        "sbx.io",
        "tenants",
        &["get", "list", "watch", "create", "update", "delete"],
        Scope::Cluster,
        "tenants are `Tenant` objects (the CRD in `deploy/crds/`), watched so that every replica applies a change at once",
    ),
    rule(
        "sbx.io",
        "tenants/status",
        &["patch"],
        Scope::Cluster,
        "a tenant's `status.usage`, written when its spec changes and, when it changed, by the leader replica's 60-second refresh (from its watch caches)",
    ),
    rule(
        "sbx.io",
        "sbxdsandboxes",
        &["get", "list", "watch"],
        Scope::Cluster,
        "a sandbox of the `sbxd` backend is an `SbxdSandbox` record (the CRD in `deploy/crds/`) naming the node whose agent runs it, watched in every namespace so that every replica serves it",
    ),
    rule(
        "sbx.io",
        "sbxdsandboxes",
        &["create", "patch", "delete"],
        Scope::Tenant,
        "an sbxd sandbox's record is made and deleted with it; its lifetime and last activity are annotations of it (patch)",
    ),
    rule(
        "sbx.io",
        "sbxdsnapshots",
        &["get", "list", "watch"],
        Scope::Cluster,
        "a snapshot of an sbxd sandbox is an `SbxdSnapshot` record naming the node that holds its layers (watched)",
    ),
    rule(
        "sbx.io",
        "sbxdsnapshots",
        &["create", "delete"],
        Scope::Tenant,
        "an sbxd snapshot's record is made and deleted with it",
    ),
    rule(
        "sbx.io",
        "sbxdsandboxes/status",
        &["patch"],
        Scope::Tenant,
        "an sbxd sandbox's state right after a change the service made (the agent writes it too), and Failed when its node's agent stops reporting (leader)",
    ),
    rule(
        "coordination.k8s.io",
        "leases",
        &["get"],
        Scope::Agents,
        "the agents' heartbeat Leases (`sbx-agent-<node>`): the leader marks the sbxd sandboxes of a node whose agent stopped reporting Failed",
    ),
    rule(
        "metrics.k8s.io",
        "pods",
        &["list"],
        Scope::Cluster,
        "`GET /sandboxes/metrics` reads CPU and memory from metrics-server",
    ),
    rule(
        "coordination.k8s.io",
        "leases",
        &["get", "list", "watch", "create", "update"],
        Scope::System,
        "a Lease per tenant serialises quota checks across replicas (watched: a claim starts from the Lease as another replica left it, and a waiting one goes on at its release); the leader Lease elects the replica that runs the GC sweep and the usage refresh; `sbx-bootstrap` lets one of the replicas starting together mint the first admin key",
    ),
    rule(
        "",
        "configmaps",
        &["create"],
        Scope::System,
        "the role-binding document is made on first write",
    ),
    rule(
        "",
        "secrets",
        &["create"],
        Scope::System,
        "the keys Secret `sbx-api-keys` and the first admin token `sbx-bootstrap-admin` are made on first write (create cannot be limited by name)",
    ),
    Permission {
        group: "",
        resource: "secrets",
        verbs: &["get", "update", "patch"],
        scope: Scope::System,
        names: &[KEYS_SECRET, BOOTSTRAP_SECRET, super::internal_tls::SECRET],
        why: "API keys (hashes only) are `sbx-api-keys`, the first admin token `sbx-bootstrap-admin` (server-side apply), the internal TLS certificates `sbx-internal-tls` (made by the first replica, read by every one); no other Secret of `kube-system` is read",
    },
    rule(
        "",
        "secrets",
        &["create"],
        Scope::Agents,
        "the agents' TLS certificate `sbx-agent-tls` is made by the first replica (create cannot be limited by name)",
    ),
    Permission {
        group: "",
        resource: "secrets",
        verbs: &["get", "update"],
        scope: Scope::Agents,
        names: &[super::internal_tls::AGENT_SECRET],
        why: "the agents' TLS certificate `sbx-agent-tls` is kept in step with `kube-system/sbx-internal-tls`; no other Secret of the agents' namespace is read",
    },
    Permission {
        group: "",
        resource: "secrets",
        verbs: &["list", "watch"],
        scope: Scope::System,
        names: &[KEYS_SECRET],
        why: "every replica watches the keys Secret, so that a key made or revoked on one works or stops working on all of them within the watch's delay",
    },
    Permission {
        group: "",
        resource: "configmaps",
        verbs: &["get", "patch"],
        scope: Scope::System,
        names: &[BINDINGS_CONFIGMAP],
        why: "the role-binding document `sbx-role-bindings` (`GET`/`PUT /role-bindings`)",
    },
    Permission {
        group: "",
        resource: "configmaps",
        verbs: &["get", "update"],
        scope: Scope::System,
        names: &[OPERATIONS_CONFIGMAP],
        why: "remote install's operations, one key each in `sbx-install`, so that every replica reads them and they outlive a restart",
    },
    Permission {
        group: "apps",
        resource: "daemonsets",
        verbs: &["get"],
        scope: Scope::Cluster,
        names: &[INSTALLER_DAEMONSET],
        why: "remote install checks that the installer DaemonSet runs the pinned image (500 otherwise) and finds its Pods",
    },
];

/// The ClusterRole of the [`Scope::Tenant`] rules, bound in each sandbox namespace.
pub const TENANT_ROLE: &str = "sbx-tenant";

/// The installer DaemonSet's name in `deploy/installer.yaml` (the RBAC names it).
pub const INSTALLER_DAEMONSET: &str = "sbx-installer";

/// The CRDs and aggregated APIs the daemon cannot work without: (group/version, resource,
/// what installs it).
pub const REQUIRED_APIS: &[(&str, &str, &str)] = &[
    (
        "sbx.io/v1alpha1",
        "tenants",
        "the Tenant CRD: kubectl apply -f deploy/crds/tenants.sbx.io.yaml",
    ),
    (
        "sbx.io/v1alpha1",
        "sbxdsandboxes",
        "the SbxdSandbox CRD: kubectl apply -f deploy/crds/sbxdsandboxes.sbx.io.yaml",
    ),
    (
        "sbx.io/v1alpha1",
        "sbxdsnapshots",
        "the SbxdSnapshot CRD: kubectl apply -f deploy/crds/sbxdsnapshots.sbx.io.yaml",
    ),
    (
        "snapshot.storage.k8s.io/v1",
        "volumesnapshots",
        "the VolumeSnapshot CRDs and controller of kubernetes-csi/external-snapshotter",
    ),
];

/// Namespace the manifests run the daemon in.
pub const DEPLOY_NAMESPACE: &str = "sbx-system";
/// Name of the daemon's ServiceAccount, roles and bindings.
pub const DEPLOY_NAME: &str = "sbx";

/// What a start-up check found missing, each line naming the verb and resource or the API.
pub async fn missing(client: &kube::Client) -> Vec<String> {
    let mut problems = Vec::new();
    for (api_version, resource, install) in REQUIRED_APIS {
        match client.list_api_group_resources(api_version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == *resource) => {}
            Ok(_) | Err(kube::Error::Api(_)) => problems.push(format!(
                "the API server does not serve {resource} ({api_version}): install {install}"
            )),
            Err(e) => problems.push(format!(
                "cannot read {api_version} from the API server: {e}"
            )),
        }
    }
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    // The tenant rules hold only where the daemon bound them, unless it holds them
    // everywhere already (a cluster admin's kubeconfig): they are reviewed cluster-wide
    // apart, and when any is denied the ClusterRole that holds them is read instead
    // (`tenant_role_gaps`).
    let tenant_checks = PERMISSIONS
        .iter()
        .filter(|p| p.scope == Scope::Tenant)
        .flat_map(|p| p.verbs.iter().map(move |verb| (p, *verb, None)));
    let everywhere = review_all(&api, tenant_checks).await;
    if !everywhere.is_empty() {
        problems.extend(tenant_role_gaps(client).await);
    }
    let checks = PERMISSIONS
        .iter()
        .filter(|p| p.scope != Scope::Tenant)
        .flat_map(|p| {
            let names: Vec<Option<&str>> = if p.names.is_empty() {
                vec![None]
            } else {
                p.names.iter().map(|n| Some(*n)).collect()
            };
            names
                .into_iter()
                .flat_map(move |name| p.verbs.iter().map(move |verb| (p, *verb, name)))
        });
    problems.extend(review_all(&api, checks).await);
    problems.sort();
    problems
}

/// One SelfSubjectAccessReview per check (8 at a time); what each denied says.
async fn review_all<'a>(
    api: &Api<SelfSubjectAccessReview>,
    checks: impl Iterator<Item = (&'a Permission, &'a str, Option<&'a str>)>,
) -> Vec<String> {
    let reviews = checks.map(|(p, verb, name)| {
        let api = api.clone();
        async move {
            let (resource, subresource) = match p.resource.split_once('/') {
                Some((r, s)) => (r, Some(s.to_string())),
                None => (p.resource, None),
            };
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(p.group.to_string()),
                        resource: Some(resource.to_string()),
                        subresource,
                        verb: Some(verb.to_string()),
                        namespace: p.scope.namespace().map(str::to_string),
                        name: name.map(str::to_string),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let what = describe(p, verb, name);
            match api.create(&PostParams::default(), &review).await {
                Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => None,
                Ok(_) => Some(format!("permission denied: {what} ({})", p.why)),
                Err(e) => Some(format!("cannot check whether it may {what}: {e}")),
            }
        }
    });
    let denied: Vec<Option<String>> = futures_util::stream::iter(reviews)
        .buffer_unordered(8)
        .collect()
        .await;
    denied.into_iter().flatten().collect()
}

/// What the ClusterRole [`TENANT_ROLE`] lacks of the [`Scope::Tenant`] rules (it is what the
/// daemon binds in each sandbox namespace, so no access review can check it beforehand).
async fn tenant_role_gaps(client: &kube::Client) -> Vec<String> {
    let api: Api<ClusterRole> = Api::all(client.clone());
    let role = match api.get_opt(TENANT_ROLE).await {
        Ok(Some(role)) => role,
        Ok(None) => {
            return vec![format!(
                "the ClusterRole `{TENANT_ROLE}` is missing: apply deploy/rbac.yaml"
            )];
        }
        Err(e) => return vec![format!("cannot read the ClusterRole `{TENANT_ROLE}`: {e}")],
    };
    let rules = role.rules.unwrap_or_default();
    // A rule limited to names does not grant a rule for any name.
    let granted = |p: &Permission, verb: &str| {
        let any = |list: Option<&Vec<String>>, want: &str| {
            list.into_iter().flatten().any(|v| v == want || v == "*")
        };
        rules.iter().any(|r| {
            any(r.api_groups.as_ref(), p.group)
                && any(r.resources.as_ref(), p.resource)
                && any(Some(&r.verbs), verb)
                && r.resource_names.as_ref().is_none_or(Vec::is_empty)
        })
    };
    PERMISSIONS
        .iter()
        .filter(|p| p.scope == Scope::Tenant)
        .flat_map(|p| p.verbs.iter().map(move |verb| (p, *verb)))
        .filter(|(p, verb)| !granted(p, verb))
        .map(|(p, verb)| format!("permission denied: {} ({})", describe(p, verb, None), p.why))
        .collect()
}

/// `create leases (coordination.k8s.io) in namespace kube-system`.
fn describe(p: &Permission, verb: &str, name: Option<&str>) -> String {
    let group = if p.group.is_empty() { "core" } else { p.group };
    let object = match name {
        Some(n) => format!("{} `{n}`", p.resource),
        None => p.resource.to_string(),
    };
    match p.scope {
        Scope::Cluster => format!("`{verb}` {object} ({group}) in every namespace"),
        Scope::Tenant => format!(
            "`{verb}` {object} ({group}) in sandbox namespaces (ClusterRole `{TENANT_ROLE}`)"
        ),
        Scope::System | Scope::Agents => format!(
            "`{verb}` {object} ({group}) in namespace {}",
            p.scope.namespace().unwrap_or_default()
        ),
    }
}

/// RBAC rules of one scope, as Kubernetes writes them.
fn rules(scope: Scope) -> Vec<serde_json::Value> {
    PERMISSIONS
        .iter()
        .filter(|p| p.scope == scope)
        .map(|p| {
            let mut rule = json!({
                "apiGroups": [p.group],
                "resources": [p.resource],
                "verbs": p.verbs,
            });
            if !p.names.is_empty() {
                rule["resourceNames"] = json!(p.names);
            }
            rule
        })
        .collect()
}

/// `deploy/rbac.yaml`: the ClusterRole `sbx` and its binding, the ClusterRole `sbx-tenant`
/// (bound by the daemon itself, in each sandbox namespace), the Roles in `kube-system` and
/// `sbx-agent` and their bindings to the daemon's ServiceAccount.
pub fn rbac_yaml() -> String {
    let subject = json!([{
        "kind": "ServiceAccount",
        "name": DEPLOY_NAME,
        "namespace": DEPLOY_NAMESPACE,
    }]);
    let labels = json!({"app.kubernetes.io/name": "sbx"});
    let documents = [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": DEPLOY_NAME, "labels": labels},
            "rules": rules(Scope::Cluster),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": DEPLOY_NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DEPLOY_NAME},
            "subjects": subject,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": TENANT_ROLE, "labels": labels},
            "rules": rules(Scope::Tenant),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": DEPLOY_NAME, "namespace": SYSTEM_NAMESPACE, "labels": labels},
            "rules": rules(Scope::System),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": DEPLOY_NAME, "namespace": SYSTEM_NAMESPACE, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DEPLOY_NAME},
            "subjects": subject,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": DEPLOY_NAME, "namespace": AGENT_NAMESPACE, "labels": labels},
            "rules": rules(Scope::Agents),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": DEPLOY_NAME, "namespace": AGENT_NAMESPACE, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DEPLOY_NAME},
            "subjects": subject,
        }),
    ];
    documents
        .iter()
        .map(|d| serde_yaml_ng::to_string(d).expect("RBAC documents serialise"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The Markdown table of `docs/operations.md`: each rule and why.
pub fn markdown_table() -> String {
    let mut table =
        String::from("| resource (API group) | verbs | where | why |\n|---|---|---|---|\n");
    for p in PERMISSIONS {
        let group = if p.group.is_empty() { "core" } else { p.group };
        let mut resource = format!("`{}` ({group})", p.resource);
        if !p.names.is_empty() {
            let names: Vec<String> = p.names.iter().map(|n| format!("`{n}`")).collect();
            let _ = write!(resource, ", only {}", names.join(", "));
        }
        let scope = match p.scope {
            Scope::Cluster => "all namespaces (ClusterRole)".to_string(),
            Scope::Tenant => {
                format!("each sandbox namespace (ClusterRole `{TENANT_ROLE}`, bound there by sbx)")
            }
            Scope::System | Scope::Agents => {
                format!("`{}` (Role)", p.scope.namespace().unwrap_or_default())
            }
        };
        let _ = writeln!(
            table,
            "| {resource} | {} | {scope} | {} |",
            p.verbs.join(", "),
            p.why.replace('|', "\\|")
        );
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_is_never_limited_by_name() {
        for p in PERMISSIONS {
            assert!(
                p.names.is_empty() || !p.verbs.contains(&"create"),
                "{}: RBAC cannot limit create by resourceNames",
                p.resource
            );
        }
    }

    #[test]
    fn the_role_binds_the_service_account() {
        let yaml = rbac_yaml();
        assert!(yaml.contains("kind: ClusterRole\n"));
        assert!(yaml.contains("namespace: sbx-system"));
        assert!(yaml.contains("name: sbx-tenant\n"));
        // The keys and bootstrap Secrets (twice), the bindings and install ConfigMaps, the
        // installer DaemonSet, the tenant ClusterRole.
        assert_eq!(yaml.matches("resourceNames").count(), 7);
    }

    #[test]
    fn denials_name_the_verb_and_resource() {
        let p = &PERMISSIONS[0];
        assert_eq!(
            describe(p, "create", None),
            "`create` deployments (apps) in every namespace"
        );
        let bindings = PERMISSIONS
            .iter()
            .find(|p| p.names == [BINDINGS_CONFIGMAP])
            .unwrap();
        assert_eq!(
            describe(bindings, "get", Some(BINDINGS_CONFIGMAP)),
            "`get` configmaps `sbx-role-bindings` (core) in namespace kube-system"
        );
    }
}
