//! Launching a sandbox's objects. The Deployment, where the sandbox's name is taken (409 when
//! it exists), and the root PVC are POSTed together; the env Secret and the egress policy,
//! which carry what this request asked for, follow once the name is ours. A create's
//! namespace is not read first: it is made only when a POST finds it missing, and the tenant
//! is the one the service checked the quotas against.
//!
//! Two creates of one name race for the Deployment; the PVC name may go to either. The loser
//! hands a PVC it made over to the winner (an annotation naming the winning Deployment's
//! UID) or deletes it; the winner adopts a PVC handed to it when it is the volume it wants.
//! Any other PVC in the way (a deleted sandbox's, still terminating) fails the create as
//! before, and everything of it is taken back out.
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, Preconditions};
use serde_json::json;

use super::objects::sandboxes::{self, SandboxTemplate};
use super::workloads::{Env, Root, create_error, writer};
use super::{KubernetesPlatform, TENANT_LABEL, conflict, kube_error};
use crate::daemon::platform::{PlatformError, PlatformResult, SandboxOwner};
use crate::shared::egress::Egress;
use crate::shared::models::tenant::TenantLimits;

/// Annotation of a root PVC made by a create that lost its name to another: the UID of the
/// winner's Deployment, to which the volume now belongs.
pub(super) const HANDED_TO_ANNOTATION: &str = "sbx.io/handed-to";

/// How long a create that won the name waits for the loser to hand over the PVC.
const HAND_OVER_WAIT: Duration = Duration::from_secs(2);

/// Who owns the namespace of a sandbox being launched.
#[derive(Clone, Copy)]
pub(super) enum Tenancy<'a> {
    /// As the service found it when it checked the quotas (a create): nothing is read.
    Known(Option<&'a SandboxOwner>),
    /// Read from the namespace's label and the Tenant (forks and restores).
    Lookup,
}

/// How long a create that sbx's quota check admitted is POSTed again while the tenant's
/// backstop ResourceQuota refuses it (its quota controller has not yet counted a delete).
const BACKSTOP_LAG: Duration = Duration::from_secs(4);
/// How often it is POSTed again meanwhile.
const BACKSTOP_RETRY: Duration = Duration::from_millis(200);

/// Why POSTing a sandbox's objects failed.
enum Failure {
    /// The namespace does not exist (yet).
    NoNamespace,
    Other(PlatformError),
}

impl KubernetesPlatform {
    /// Makes a sandbox: its Deployment and root PVC together, then its env Secret and egress
    /// policy; when one of those fails, everything of the sandbox is taken back out.
    pub(super) async fn launch(
        &self,
        namespace: &str,
        name: &str,
        template: &SandboxTemplate,
        root: Root<'_>,
        env: Env<'_>,
        tenancy: Tenancy<'_>,
    ) -> PlatformResult<()> {
        let (tenant, limits) = match tenancy {
            Tenancy::Known(owner) => (
                owner.map(|o| o.name.clone()),
                owner.map(|o| TenantLimits {
                    network: o.network.clone(),
                    allowed_capabilities: o.allowed_capabilities.clone(),
                    allow_dind: o.allow_dind,
                    egress_deny: Some(o.egress_deny.iter().map(ToString::to_string).collect()),
                    ..Default::default()
                }),
            ),
            Tenancy::Lookup => {
                let tenant = self.ensure_namespace(namespace).await?;
                let limits = match &tenant {
                    Some(t) => self.tenant_limits(t).await?,
                    None => None,
                };
                (tenant, limits)
            }
        };
        // What the tenant's namespace (its pod-security level) admits, before anything is
        // made: a Pod it would refuse is a 403 naming the setting, not a sandbox that never
        // starts.
        if let Some(tenant) = &tenant {
            let limits = limits.clone().unwrap_or_default();
            sandboxes::admitted(
                template,
                tenant,
                limits.allowed_capabilities.as_deref(),
                limits.allow_dind,
            )
            .map_err(PlatformError::Forbidden)?;
        }
        let tenant_deny = match &limits {
            Some(limits) => limits.egress_deny().map_err(PlatformError::Invalid)?,
            None => Vec::new(),
        };
        let network = limits.and_then(|l| l.network);
        self.bind_daemon(namespace).await?;
        let user_namespaces = self
            .user_namespaces(sandboxes::runtime_class(&template.backend))
            .await?;
        // The shared parser: a bare address becomes /32 before it reaches an ipBlock, IPv6 is
        // refused (a fork or restore carries a template recorded before either was checked).
        let egress = Egress::from_whitelist(template.egress.as_deref())
            .map_err(|why| PlatformError::Invalid(format!("sandbox '{name}': {why}")))?;
        let mut template = template.clone();
        template.env = !matches!(env, Env::None);
        let deployment: Deployment = serde_json::from_value(sandboxes::deployment(
            namespace,
            name,
            &template,
            tenant.as_deref(),
            network.as_ref(),
            &self.settings,
            user_namespaces,
        ))
        .map_err(|e| PlatformError::Store(format!("sandbox Deployment: {e}")))?;
        let from_snapshot = match root {
            Root::Made => None,
            Root::Fresh => Some(None),
            Root::FromSnapshot(s) => Some(Some(s)),
        };
        let pvc = match from_snapshot {
            Some(source) if template.has_root_volume() => {
                let bytes = template
                    .root_disk_bytes
                    .unwrap_or(self.settings.root_disk_bytes);
                Some(root_pvc(namespace, name, bytes, source)?)
            }
            _ => None,
        };
        let started = Instant::now();
        let mut made_namespace = false;
        let created = loop {
            match self.post(namespace, name, &deployment, pvc.as_ref()).await {
                Err(Failure::NoNamespace) if !made_namespace => {
                    // A namespace deleted since it was bound: made again, bound again.
                    self.make_namespace(namespace).await?;
                    self.bind_daemon(namespace).await?;
                    made_namespace = true;
                }
                // sbx's own check admitted the create; the tenant's backstop ResourceQuota
                // takes a delete into account only once its quota controller has counted
                // again, and refuses a create right after a delete meanwhile.
                Err(Failure::Other(PlatformError::QuotaExceeded(why)))
                    if why.contains(super::QUOTA_NAME) && started.elapsed() < BACKSTOP_LAG =>
                {
                    tracing::debug!(%namespace, sandbox = %name, %why, "the backstop ResourceQuota refused: again");
                    tokio::time::sleep(BACKSTOP_RETRY).await;
                }
                other => break other,
            }
        }
        .map_err(|f| match f {
            Failure::NoNamespace => PlatformError::NotFound(format!(
                "namespace '{namespace}' went away while the sandbox was made"
            )),
            Failure::Other(e) => e,
        })?;
        let companions = async {
            let secret = async {
                match env {
                    Env::None => Ok(()),
                    Env::Values(values) => {
                        self.apply_in(
                            namespace,
                            sandboxes::env_secret_object(namespace, name, values),
                        )
                        .await
                    }
                    Env::Copy(from) => {
                        self.copy_secret(namespace, from, &sandboxes::env_secret(name), name)
                            .await
                    }
                }
            };
            let policy = self.apply_in(
                namespace,
                super::objects::network::egress_policy_object(
                    namespace,
                    name,
                    &egress,
                    &self.settings.egress_deny,
                    &tenant_deny,
                ),
            );
            tokio::try_join!(secret, policy).map(drop)
        };
        let posted = started.elapsed();
        if let Err(e) = companions.await {
            self.remove_sandbox_objects(namespace, name).await;
            return Err(e);
        }
        let companions = started.elapsed() - posted;
        self.deployment_cache.wrote(&created);
        tracing::debug!(
            %namespace, sandbox = %name,
            posts = ?posted, companions = ?companions,
            "launched"
        );
        Ok(())
    }

    /// POSTs the Deployment and the root PVC together; returns the Deployment as written.
    async fn post(
        &self,
        namespace: &str,
        name: &str,
        deployment: &Deployment,
        pvc: Option<&PersistentVolumeClaim>,
    ) -> Result<Deployment, Failure> {
        let deployments = self.deployments(Some(namespace));
        let params = writer();
        let (made, volume) = tokio::join!(deployments.create(&params, deployment), async {
            match pvc {
                Some(pvc) => Some(self.pvcs(namespace).create(&params, pvc).await),
                None => None,
            }
        });
        let pvc_name = sandboxes::root_pvc(name);
        match (made, volume) {
            (Ok(made), None | Some(Ok(_))) => Ok(made),
            (Ok(made), Some(Err(e))) => {
                let adopted = match (conflict(&e), pvc) {
                    (true, Some(wanted)) => self.adopt(namespace, &made, wanted).await,
                    _ => false,
                };
                if adopted {
                    return Ok(made);
                }
                self.remove_sandbox_objects(namespace, name).await;
                Err(Failure::Other(kube_error(&format!("PVC {pvc_name}"), e)))
            }
            (Err(e), volume) => {
                if let Some(Ok(mine)) = volume {
                    self.hand_over(namespace, name, &mine).await;
                }
                if namespace_missing(&e) {
                    return Err(Failure::NoNamespace);
                }
                Err(Failure::Other(create_error(e, "sandbox", namespace, name)))
            }
        }
    }

    /// A create whose Deployment failed: when it lost the name, the PVC it made goes to the
    /// Deployment that won (when that one lives); otherwise it is deleted, and waited for.
    /// Only this PVC, as it was made: preconditions guard both.
    async fn hand_over(&self, namespace: &str, name: &str, mine: &PersistentVolumeClaim) {
        let pvcs = self.pvcs(namespace);
        let pvc_name = sandboxes::root_pvc(name);
        let winner = match self.deployments(Some(namespace)).get_opt(name).await {
            Ok(Some(d)) if d.metadata.deletion_timestamp.is_none() => d.metadata.uid,
            _ => None,
        };
        if let Some(uid) = winner {
            // The UID is the precondition (the PV controller annotates a new PVC at once, so
            // its resourceVersion moves on its own).
            let patch = json!({"metadata": {
                "uid": mine.metadata.uid,
                "annotations": {HANDED_TO_ANNOTATION: uid},
            }});
            let params = PatchParams {
                field_manager: Some(super::FIELD_MANAGER.into()),
                ..Default::default()
            };
            if pvcs
                .patch(&pvc_name, &params, &Patch::Merge(&patch))
                .await
                .is_ok()
            {
                tracing::info!(%namespace, pvc = %pvc_name, "a create that lost its name to another handed its PVC over");
                return;
            }
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: mine.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        tracing::info!(%namespace, pvc = %pvc_name, "a failed create deletes its PVC");
        if let Err(e) = pvcs.delete(&pvc_name, &params).await {
            tracing::warn!(%namespace, pvc = %pvc_name, error = %e, "removing the PVC of a failed create");
            return;
        }
        // Its protection finalizer goes once no Pod uses it (none does): the create answers
        // once it is gone, so that nothing of it is left and the name is free again.
        let deadline = Instant::now() + HAND_OVER_WAIT;
        while Instant::now() < deadline {
            match pvcs.get_opt(&pvc_name).await {
                Ok(Some(p)) if p.metadata.uid == mine.metadata.uid => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                _ => return,
            }
        }
    }

    /// A create that won the name but found the PVC's name taken: waits a little for a losing
    /// create to hand it over, and takes it when it is the volume `wanted` describes; POSTs
    /// `wanted` again once a PVC being deleted (the loser's, or a deleted sandbox's) is gone.
    async fn adopt(
        &self,
        namespace: &str,
        made: &Deployment,
        wanted: &PersistentVolumeClaim,
    ) -> bool {
        let (Some(uid), Some(pvc_name)) = (&made.metadata.uid, &wanted.metadata.name) else {
            return false;
        };
        let pvcs = self.pvcs(namespace);
        let deadline = Instant::now() + HAND_OVER_WAIT;
        loop {
            match pvcs.get_opt(pvc_name).await {
                // Going (a failed create's, or a deleted sandbox's without a Pod): wait for it.
                Ok(Some(found)) if found.metadata.deletion_timestamp.is_some() => {}
                Ok(Some(found)) => {
                    let handed = found
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(HANDED_TO_ANNOTATION));
                    if handed == Some(uid) {
                        return same_volume(&found, wanted);
                    }
                }
                Ok(None) => return pvcs.create(&writer(), wanted).await.is_ok(),
                Err(_) => return false,
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The sandbox's namespace, created when missing; returns its tenant (label).
    pub(super) async fn ensure_namespace(&self, namespace: &str) -> PlatformResult<Option<String>> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        if let Some(ns) = namespaces
            .get_opt(namespace)
            .await
            .map_err(|e| kube_error(&format!("namespace {namespace}"), e))?
        {
            return Ok(ns
                .metadata
                .labels
                .and_then(|l| l.get(TENANT_LABEL).cloned()));
        }
        self.make_namespace(namespace).await?;
        Ok(None)
    }

    /// Creates a namespace (one made meanwhile by someone else will do).
    pub(super) async fn make_namespace(&self, namespace: &str) -> PlatformResult<()> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        match namespaces.create(&writer(), &ns).await {
            Ok(_) => {
                // A new namespace holds no RoleBinding of the daemon's, whatever was bound
                // under its name before.
                self.forget_bound(namespace);
                Ok(())
            }
            Err(e) if conflict(&e) => Ok(()),
            Err(e) => Err(kube_error(&format!("namespace {namespace}"), e)),
        }
    }

    /// The limits of a tenant (bandwidth annotations on its sandboxes' Pods, what its
    /// namespaces' pod-security level admits).
    pub(super) async fn tenant_limits(&self, tenant: &str) -> PlatformResult<Option<TenantLimits>> {
        let Some(object) = self
            .tenants()
            .get_opt(tenant)
            .await
            .map_err(|e| kube_error(&format!("tenant {tenant}"), e))?
        else {
            return Ok(None);
        };
        Ok(super::objects::tenants::record(&object)?.spec.limits)
    }

    /// Creates a sandbox's root PVC on its own (a fork's clone, made before the Deployment).
    pub(super) async fn create_root_pvc(
        &self,
        namespace: &str,
        sandbox: &str,
        bytes: u64,
        from_snapshot: Option<&str>,
    ) -> PlatformResult<()> {
        let object = root_pvc(namespace, sandbox, bytes, from_snapshot)?;
        self.pvcs(namespace)
            .create(&writer(), &object)
            .await
            .map(drop)
            .map_err(|e| kube_error(&format!("PVC {}", sandboxes::root_pvc(sandbox)), e))
    }
}

fn root_pvc(
    namespace: &str,
    sandbox: &str,
    bytes: u64,
    from_snapshot: Option<&str>,
) -> PlatformResult<PersistentVolumeClaim> {
    serde_json::from_value(sandboxes::root_pvc_object(
        namespace,
        sandbox,
        bytes,
        from_snapshot,
    ))
    .map_err(|e| PlatformError::Store(format!("root PVC: {e}")))
}

/// A POST refused because its namespace does not exist (404 naming a namespace).
fn namespace_missing(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 404
        && status.details.as_ref().is_some_and(|d| d.kind == "namespaces"))
}

/// Whether a PVC handed over is the volume a create wants: same class, size and source.
fn same_volume(found: &PersistentVolumeClaim, wanted: &PersistentVolumeClaim) -> bool {
    let key = |p: &PersistentVolumeClaim| {
        p.spec.as_ref().map(|s| {
            (
                s.storage_class_name.clone(),
                s.resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage").cloned()),
                s.data_source
                    .as_ref()
                    .map(|d| (d.kind.clone(), d.name.clone())),
            )
        })
    };
    key(found) == key(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pvc(bytes: u64, from: Option<&str>) -> PersistentVolumeClaim {
        root_pvc("ns", "box", bytes, from).unwrap()
    }

    #[test]
    fn a_handed_over_volume_is_taken_only_when_it_is_the_one_wanted() {
        assert!(same_volume(&pvc(1 << 30, None), &pvc(1 << 30, None)));
        assert!(!same_volume(&pvc(2 << 30, None), &pvc(1 << 30, None)));
        assert!(!same_volume(
            &pvc(1 << 30, Some("snap")),
            &pvc(1 << 30, None)
        ));
        assert!(same_volume(
            &pvc(1 << 30, Some("snap")),
            &pvc(1 << 30, Some("snap"))
        ));
    }

    #[test]
    fn only_a_missing_namespace_makes_one() {
        // As the API server answers: `{"kind": "Status", …, "details": {"kind": …}}`.
        let status = |code: u16, kind: &str| {
            kube::Error::Api(Box::new(
                serde_json::from_value(json!({
                    "status": "Failure", "code": code, "reason": "NotFound",
                    "message": "not found", "details": {"name": "x", "kind": kind},
                }))
                .unwrap(),
            ))
        };
        assert!(namespace_missing(&status(404, "namespaces")));
        assert!(!namespace_missing(&status(404, "deployments")));
        assert!(!namespace_missing(&status(409, "namespaces")));
    }
}
