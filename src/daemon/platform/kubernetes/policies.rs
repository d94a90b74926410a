//! The leader keeps sbx's NetworkPolicies: every tenant namespace's default deny, and every
//! sandbox's own policy (its egress). One deleted by hand, or missing because the sandbox is
//! older than its policy, is put back within a check of the leader (every few seconds, with
//! the nodes'); one written for another `egressDeny` of its tenant than the tenant's now is
//! written again. The watch cache of sbx's NetworkPolicies says which are missing or stale.
use std::collections::{HashMap, HashSet};

use kube::api::ListParams;

use super::objects::network::{self, DEFAULT_DENY};
use super::objects::sandboxes::{self, SandboxTemplate};
use super::{KubernetesPlatform, kube_error};
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::shared::egress::{Egress, Ipv4Net};

/// A sandbox younger than this is left to its create, which writes its policy after the
/// Deployment: the leader does not race it.
const CREATE_GRACE_SECONDS: i64 = 10;

impl KubernetesPlatform {
    /// Puts back the default deny of each tenant namespace and the policy of each sandbox
    /// that has none; a failure of one is logged and the others are still kept.
    pub(super) async fn keep_policies(&self) -> PlatformResult<()> {
        let Some(policies) = self.policy_cache.list(None) else {
            // Not in step: what is missing is not known.
            return Ok(());
        };
        // Each policy with the tenant deny list it was written for.
        let have: HashMap<(String, String), String> = policies
            .iter()
            .filter_map(|p| {
                let written = p
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(network::TENANT_DENY_ANNOTATION))
                    .cloned()
                    .unwrap_or_default();
                Some((
                    (p.metadata.namespace.clone()?, p.metadata.name.clone()?),
                    written,
                ))
            })
            .collect();
        let has = |namespace: &str, name: &str| have.contains_key(&(namespace.into(), name.into()));
        let tenants = self
            .tenants()
            .list(&ListParams::default())
            .await
            .map_err(|e| kube_error("list tenants", e))?;
        // Each tenant namespace's deny list, as the policies' annotation writes it.
        let mut tenant_deny: HashMap<&str, Vec<Ipv4Net>> = HashMap::new();
        // Namespaces of a tenant whose list does not read (edited past the API): their
        // policies are only put back when missing, never rewritten.
        let mut unreadable: HashSet<&str> = HashSet::new();
        for tenant in &tenants.items {
            let Some(name) = tenant.metadata.name.as_deref() else {
                continue;
            };
            let deny = tenant
                .spec
                .0
                .limits
                .as_ref()
                .map(|l| l.egress_deny())
                .transpose()
                .map(Option::unwrap_or_default)
                .map_err(|e| {
                    tracing::warn!(tenant = %name, error = %e, "the tenant's egressDeny does not read: its sandboxes' policies keep the list they have");
                })
                .ok();
            for namespace in &tenant.spec.0.namespaces {
                match &deny {
                    Some(deny) => {
                        tenant_deny.insert(namespace, deny.clone());
                    }
                    None => {
                        unreadable.insert(namespace);
                    }
                }
            }
            for namespace in &tenant.spec.0.namespaces {
                if has(namespace, DEFAULT_DENY) {
                    continue;
                }
                let policy = network::default_deny_object(namespace, name);
                match self.apply_in(namespace, policy).await {
                    Ok(()) => tracing::warn!(
                        %namespace, tenant = %name,
                        "the tenant namespace's default-deny NetworkPolicy was missing: put back"
                    ),
                    // The namespace went (deleted by hand): its tenant's next write makes it.
                    Err(PlatformError::NotFound(_)) => {}
                    Err(e) => {
                        tracing::warn!(%namespace, error = %e, "keeping the default-deny NetworkPolicy")
                    }
                }
            }
        }
        let Some(deployments) = self.deployment_cache.list(None) else {
            return Ok(());
        };
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        for d in deployments {
            let (Some(namespace), Some(name)) = (&d.metadata.namespace, &d.metadata.name) else {
                continue;
            };
            let created = d
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second());
            let deny = tenant_deny
                .get(namespace.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let written = have.get(&(namespace.clone(), sandboxes::egress_policy(name)));
            if d.metadata.deletion_timestamp.is_some()
                || created.is_none_or(|at| now - at < CREATE_GRACE_SECONDS)
                || written.is_some_and(|w| {
                    unreadable.contains(namespace.as_str()) || *w == network::tenant_deny_text(deny)
                })
            {
                continue;
            }
            if let Err(e) = self.put_back_sandbox_policy(namespace, name, deny).await {
                tracing::warn!(%namespace, sandbox = %name, error = %e, "keeping the sandbox's NetworkPolicy");
            }
        }
        Ok(())
    }

    /// Writes a sandbox's policy again from its recorded template, read afresh: a sandbox
    /// deleted since the cache saw it gets none.
    async fn put_back_sandbox_policy(
        &self,
        namespace: &str,
        name: &str,
        tenant_deny: &[Ipv4Net],
    ) -> PlatformResult<()> {
        let Some(fresh) = self
            .deployments(Some(namespace))
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("sandbox {name}"), e))?
        else {
            return Ok(());
        };
        if fresh.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let template = SandboxTemplate::recorded(&fresh).map_err(PlatformError::Store)?;
        let egress =
            Egress::from_whitelist(template.egress.as_deref()).map_err(PlatformError::Invalid)?;
        let policy = network::egress_policy_object(
            namespace,
            name,
            &egress,
            &self.settings.egress_deny,
            tenant_deny,
        );
        self.apply_in(namespace, policy).await?;
        tracing::info!(%namespace, sandbox = %name, "the sandbox's NetworkPolicy was missing or written for another egressDeny of its tenant: written");
        Ok(())
    }
}
