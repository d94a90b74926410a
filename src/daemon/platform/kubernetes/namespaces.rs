//! The namespaces sandboxes live in: which ones are refused (`kube-*`, `sbx-*`), the
//! RoleBinding that gives the daemon its tenant rules in one (the ClusterRole
//! [`TENANT_ROLE`]: Secrets, sandbox writes, exec and logs reach no other namespace), and
//! whether the nodes' runtimes take user namespaces (`hostUsers: false`).
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::objects::names::{MANAGED_LABEL, TENANT_LABEL};
use super::permissions::TENANT_ROLE;
use super::{FIELD_MANAGER, KubernetesPlatform, kube_error, managed};
use crate::daemon::config::UserNamespaces;
use crate::daemon::platform::{PlatformError, PlatformResult};

/// The RoleBinding the daemon makes in each sandbox namespace.
pub const BINDING_NAME: &str = "sbx-tenant";

/// How long a fresh RoleBinding may take to show in the API server's authorizer.
const BINDING_SHOWS_WITHIN: Duration = Duration::from_secs(10);

/// How long the nodes' user-namespace support, as read, is reused.
const NODES_TTL: Duration = Duration::from_secs(30);

/// Why sandboxes, snapshots and tenants may not use `namespace`: the cluster's own
/// (`kube-*`), sbx's own (`sbx-*`: its service, agents and installer) and, as a tenant's,
/// `default` (shared by whatever else runs in the cluster).
pub fn refused(namespace: &str, for_tenant: bool) -> Option<String> {
    if namespace.starts_with("kube-") || namespace.starts_with("sbx-") {
        return Some(format!(
            "namespace '{namespace}' is reserved (kube-* belongs to the cluster, sbx-* to sbx \
             itself): no sandbox, snapshot or tenant may use it"
        ));
    }
    if for_tenant && namespace == "default" {
        return Some(
            "namespace 'default' is shared by whatever else runs in the cluster: a tenant \
             cannot own it"
                .into(),
        );
    }
    None
}

/// The subject a RoleBinding names for the user the daemon authenticates as.
fn subject_of(username: &str) -> Value {
    match username
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((namespace, name)) => {
            json!({"kind": "ServiceAccount", "name": name, "namespace": namespace})
        }
        None => json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": username}),
    }
}

/// The RoleBinding of the daemon's tenant rules in `namespace`.
pub fn binding_object(namespace: &str, subject: &Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": BINDING_NAME,
            "namespace": namespace,
            "labels": {MANAGED_LABEL: FIELD_MANAGER},
        },
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TENANT_ROLE},
        "subjects": [subject],
    })
}

impl KubernetesPlatform {
    /// Who the daemon is, as a RoleBinding subject (asked once: a SelfSubjectReview).
    async fn own_subject(&self) -> PlatformResult<Value> {
        self.subject
            .get_or_try_init(|| async {
                let api: Api<SelfSubjectReview> = Api::all(self.client.clone());
                let review = api
                    .create(&PostParams::default(), &SelfSubjectReview::default())
                    .await
                    .map_err(|e| kube_error("who the daemon is (SelfSubjectReview)", e))?;
                let username = review
                    .status
                    .and_then(|s| s.user_info)
                    .and_then(|u| u.username)
                    .unwrap_or_default();
                if username.is_empty() {
                    return Err(PlatformError::Store(
                        "the API server did not say who the daemon is (SelfSubjectReview)".into(),
                    ));
                }
                Ok(subject_of(&username))
            })
            .await
            .cloned()
    }

    /// Grants the daemon its tenant rules in `namespace` (made when missing), once per
    /// namespace and process; refused for the reserved namespaces. Waits until the API
    /// server's authorizer honours a new binding.
    pub(super) async fn bind_daemon(&self, namespace: &str) -> PlatformResult<()> {
        if let Some(why) = refused(namespace, false) {
            return Err(PlatformError::Forbidden(why));
        }
        if self.bound(namespace) {
            return Ok(());
        }
        let subject = self.own_subject().await?;
        let api: Api<RoleBinding> = Api::namespaced(self.client.clone(), namespace);
        let object = binding_object(namespace, &subject);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api
            .patch(BINDING_NAME, &params, &Patch::Apply(&object))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.make_namespace(namespace).await?;
                api.patch(BINDING_NAME, &params, &Patch::Apply(&object))
                    .await
                    .map_err(|e| {
                        kube_error(&format!("RoleBinding {namespace}/{BINDING_NAME}"), e)
                    })?;
            }
            Err(e) => {
                return Err(kube_error(
                    &format!("RoleBinding {namespace}/{BINDING_NAME}"),
                    e,
                ));
            }
        }
        self.wait_rbac(namespace).await?;
        self.bound_namespaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(namespace.to_string());
        Ok(())
    }

    /// Forgets that `namespace` was bound: it was (re)made, so its RoleBinding is not there.
    pub(super) fn forget_bound(&self, namespace: &str) {
        self.bound_namespaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(namespace);
    }

    fn bound(&self, namespace: &str) -> bool {
        self.bound_namespaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(namespace)
    }

    /// Until the daemon may create Deployments in `namespace` (RBAC's caches follow a new
    /// binding within milliseconds to a second).
    async fn wait_rbac(&self, namespace: &str) -> PlatformResult<()> {
        let api: Api<SelfSubjectAccessReview> = Api::all(self.client.clone());
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some("apps".into()),
                    resource: Some("deployments".into()),
                    verb: Some("create".into()),
                    namespace: Some(namespace.to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let started = Instant::now();
        loop {
            let allowed = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| kube_error("an access review", e))?
                .status
                .is_some_and(|s| s.allowed);
            if allowed {
                return Ok(());
            }
            if started.elapsed() >= BINDING_SHOWS_WITHIN {
                return Err(PlatformError::Misdeployed(format!(
                    "the RoleBinding {namespace}/{BINDING_NAME} does not let sbx create Deployments \
                     there: does the ClusterRole {TENANT_ROLE} of deploy/rbac.yaml exist?"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// At start-up: the binding in every tenant namespace and every namespace holding sbx's
    /// sandboxes (those made before the daemon bound itself per namespace). A failure is
    /// logged; the namespace's next create binds it again.
    pub async fn bind_known_namespaces(&self) {
        let mut namespaces = std::collections::BTreeSet::new();
        let api: Api<Namespace> = Api::all(self.client.clone());
        match api.list(&ListParams::default().labels(TENANT_LABEL)).await {
            Ok(list) => namespaces.extend(list.items.into_iter().filter_map(|n| n.metadata.name)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the tenant namespaces to bind sbx there")
            }
        }
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::all(self.client.clone());
        match deployments.list_metadata(&managed()).await {
            Ok(list) => {
                namespaces.extend(list.items.into_iter().filter_map(|d| d.metadata.namespace))
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the sandboxes to bind sbx in their namespaces")
            }
        }
        for namespace in namespaces {
            if refused(&namespace, false).is_some() {
                continue;
            }
            if let Err(e) = self.bind_daemon(&namespace).await {
                tracing::warn!(%namespace, error = %e, "cannot bind sbx's tenant rules");
            }
        }
    }

    /// Whether sandbox Pods of `runtime_class` get `hostUsers: false`: as configured, or
    /// (`auto`) when every node sandboxes may run on reports user-namespace support for that
    /// RuntimeClass's handler (`status.runtimeHandlers`, containerd 2 and CRI-O do; containerd
    /// 1.x reports none).
    pub(super) async fn user_namespaces(&self, handler: &str) -> PlatformResult<bool> {
        match self.settings.user_namespaces {
            UserNamespaces::Always => return Ok(true),
            UserNamespaces::Never => return Ok(false),
            UserNamespaces::Auto => {}
        }
        {
            let known = self
                .userns_support
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if let Some((at, support)) = known.as_ref() {
                if at.elapsed() < NODES_TTL {
                    return Ok(support.get(handler).copied().unwrap_or(false));
                }
            }
        }
        let api: Api<Node> = Api::all(self.client.clone());
        let mut params = ListParams::default();
        let selector: Vec<String> = self
            .settings
            .sandbox_node_selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !selector.is_empty() {
            params = params.labels(&selector.join(","));
        }
        let nodes = api
            .list(&params)
            .await
            .map_err(|e| kube_error("list nodes", e))?
            .items;
        let support = userns_support(&nodes);
        let answer = support.get(handler).copied().unwrap_or(false);
        *self
            .userns_support
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), support));
        Ok(answer)
    }
}

/// Per runtime handler: whether every node knows it with user-namespace support (a node that
/// reports no handlers at all supports none).
pub fn userns_support(nodes: &[Node]) -> std::collections::HashMap<String, bool> {
    let mut support: std::collections::HashMap<String, bool> = Default::default();
    let handlers_of = |n: &Node| -> Vec<(String, bool)> {
        n.status
            .as_ref()
            .and_then(|s| s.runtime_handlers.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|h| {
                (
                    h.name.unwrap_or_default(),
                    h.features.and_then(|f| f.user_namespaces).unwrap_or(false),
                )
            })
            .collect()
    };
    let all: Vec<Vec<(String, bool)>> = nodes.iter().map(handlers_of).collect();
    let names: std::collections::BTreeSet<String> =
        all.iter().flatten().map(|(n, _)| n.clone()).collect();
    for name in names {
        let everywhere = !all.is_empty()
            && all
                .iter()
                .all(|node| node.iter().any(|(n, userns)| *n == name && *userns));
        support.insert(name, everywhere);
    }
    support
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_namespaces_are_refused() {
        for ns in [
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "sbx-system",
            "sbx-agent",
        ] {
            assert!(refused(ns, false).is_some(), "{ns}");
        }
        assert!(refused("default", true).is_some());
        assert!(refused("default", false).is_none());
        assert!(refused("acme-dev", true).is_none());
        assert!(refused("kubeflow", true).is_none());
    }

    #[test]
    fn the_binding_names_the_daemons_service_account() {
        assert_eq!(
            subject_of("system:serviceaccount:sbx-system:sbx"),
            json!({"kind": "ServiceAccount", "name": "sbx", "namespace": "sbx-system"})
        );
        assert_eq!(subject_of("admin")["kind"], "User");
        let binding = binding_object("acme", &subject_of("system:serviceaccount:sbx-system:sbx"));
        assert_eq!(binding["roleRef"]["name"], TENANT_ROLE);
        assert_eq!(binding["metadata"]["namespace"], "acme");
    }

    #[test]
    fn user_namespaces_need_every_node() {
        let node = |handlers: Value| -> Node {
            serde_json::from_value(
                json!({"metadata": {"name": "n"}, "status": {"runtimeHandlers": handlers}}),
            )
            .unwrap()
        };
        let yes = node(json!([{"name": "kata-qemu", "features": {"userNamespaces": true}}]));
        let no = node(json!([{"name": "kata-qemu", "features": {"userNamespaces": false}}]));
        let none: Node = serde_json::from_value(json!({"metadata": {"name": "old"}})).unwrap();
        assert_eq!(
            userns_support(std::slice::from_ref(&yes)).get("kata-qemu"),
            Some(&true)
        );
        assert_eq!(
            userns_support(&[yes.clone(), no]).get("kata-qemu"),
            Some(&false)
        );
        assert_eq!(userns_support(&[yes, none]).get("kata-qemu"), Some(&false));
        assert_eq!(userns_support(&[]).get("kata-qemu"), None);
    }
}
