//! Role bindings: which roles OIDC identities get (by group, username or `sub`), and the
//! accounts denied outright. The document is read from the store for every OIDC request, so
//! a `PUT` on any replica (a new binding, a `deny_subjects` entry) holds from the very next
//! request.
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::oidc::OidcIdentity;
use crate::daemon::platform::IdentityStore;
use crate::daemon::services::keys::KeyService;
use crate::daemon::services::tenants::TenantService;
use crate::shared::models::identity::{PrincipalType, Role, RoleBinding, RoleBindings};

/// The role-binding service.
pub struct BindingService {
    identity: Arc<dyn IdentityStore>,
    writes: tokio::sync::Mutex<()>,
}

/// The one matcher of a binding: (kind, value).
fn matcher(binding: &RoleBinding) -> Result<(&'static str, &str), String> {
    let given: Vec<(&'static str, &str)> = [
        ("group", binding.group.as_deref()),
        ("user", binding.user.as_deref()),
        ("subject", binding.subject.as_deref()),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect();
    match given.as_slice() {
        [(kind, value)] if !value.trim().is_empty() => Ok((*kind, *value)),
        [(kind, _)] => Err(format!("`{kind}` must not be empty")),
        [] => Err("needs one matcher: `group`, `user` or `subject`".to_string()),
        _ => Err(format!(
            "has {} matchers ({}); give exactly one of `group`, `user` or `subject`",
            given.len(),
            given.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
        )),
    }
}

impl BindingService {
    /// A service over a platform.
    pub fn new(identity: Arc<dyn IdentityStore>) -> BindingService {
        BindingService {
            identity,
            writes: tokio::sync::Mutex::new(()),
        }
    }

    /// The current document, from the store.
    pub async fn get(&self) -> ServiceResult<RoleBindings> {
        Ok(self.identity.role_bindings().await?)
    }

    /// Whether any binding grants `admin`.
    pub async fn has_admin_binding(&self) -> ServiceResult<bool> {
        Ok(self
            .get()
            .await?
            .bindings
            .iter()
            .any(|b| b.role == Role::Admin.as_str()))
    }

    /// Replaces the document after checking every rule of the contract: exactly one matcher
    /// per binding, known roles, a tenant exactly for tenant roles and an existing one, no
    /// duplicate matcher, and never leaving no admin binding while no unexpired admin key
    /// exists.
    pub async fn put(
        &self,
        document: RoleBindings,
        tenants: &TenantService,
        keys: &KeyService,
    ) -> ServiceResult<RoleBindings> {
        let bad = ServiceError::bad_request;
        let _one = self.writes.lock().await;
        let known: HashSet<String> = tenants.all().await?.into_iter().map(|t| t.name).collect();
        let mut seen = HashSet::new();
        for (i, binding) in document.bindings.iter().enumerate() {
            let at = |m: String| bad(format!("bindings[{i}]: {m}"));
            let (kind, value) = matcher(binding).map_err(at)?;
            let role: Role = binding.role.parse().map_err(at)?;
            match (role.is_tenant_scoped(), binding.tenant.as_deref()) {
                (false, Some(tenant)) => {
                    return Err(at(format!(
                        "role {role} is cluster-wide and cannot have a tenant ('{tenant}')"
                    )));
                }
                (true, None) => {
                    return Err(at(format!("role {role} needs a `tenant`")));
                }
                (true, Some(tenant)) if !known.contains(tenant) => {
                    return Err(at(format!("unknown tenant '{tenant}'")));
                }
                _ => {}
            }
            if !seen.insert((kind, value.to_string(), binding.tenant.clone())) {
                return Err(at(format!(
                    "duplicate matcher {kind} '{value}'{}",
                    binding
                        .tenant
                        .as_deref()
                        .map(|t| format!(" for tenant '{t}'"))
                        .unwrap_or_default()
                )));
            }
        }
        for (i, subject) in document.deny_subjects.iter().enumerate() {
            if subject.trim().is_empty() {
                return Err(bad(format!("deny_subjects[{i}] is empty")));
            }
        }
        let leaves_admin = document
            .bindings
            .iter()
            .any(|b| b.role == Role::Admin.as_str());
        if !leaves_admin && !keys.has_unexpired_admin_key().await {
            return Err(ServiceError::bad_request(
                "this would leave no admin: no binding grants admin and no unexpired admin API \
                 key exists",
            ));
        }
        self.identity.put_role_bindings(&document).await?;
        tracing::info!(
            bindings = document.bindings.len(),
            denied = document.deny_subjects.len(),
            "role bindings replaced"
        );
        Ok(document)
    }

    /// The principal of a verified OIDC identity: every matching binding, combined as the
    /// highest cluster role plus the highest role per tenant; 403 for a denied account.
    pub async fn principal(&self, identity: &OidcIdentity) -> ServiceResult<Principal> {
        // Read on every request (spec: a binding or a `deny_subjects` entry written on any
        // replica holds from the next request on every replica).
        let document = self.get().await?;
        let denied = document
            .deny_subjects
            .iter()
            .any(|d| *d == identity.subject || identity.username.as_deref() == Some(d.as_str()));
        if denied {
            return Err(ServiceError::forbidden(format!(
                "account '{}' is denied access",
                identity.username.as_deref().unwrap_or(&identity.subject)
            )));
        }
        let mut cluster_role: Option<Role> = None;
        let mut tenant_roles: BTreeMap<String, Role> = BTreeMap::new();
        for binding in &document.bindings {
            let Ok((kind, value)) = matcher(binding) else {
                continue;
            };
            let matches = match kind {
                "group" => identity.groups.iter().any(|g| g == value),
                "user" => identity.username.as_deref() == Some(value),
                _ => identity.subject == value,
            };
            let Ok(role) = binding.role.parse::<Role>() else {
                continue;
            };
            if !matches {
                continue;
            }
            match (&binding.tenant, role.is_tenant_scoped()) {
                (Some(tenant), true) => {
                    let held = tenant_roles.entry(tenant.clone()).or_insert(role);
                    *held = (*held).max(role);
                }
                (None, false) => cluster_role = cluster_role.max(Some(role)),
                _ => {}
            }
        }
        Ok(Principal {
            principal_type: PrincipalType::Oidc,
            subject: identity.subject.clone(),
            cluster_role,
            tenant_roles,
            unscoped_role: None,
            namespaces: Vec::new(),
            nodes: Vec::new(),
            issuer: Some(identity.issuer.clone()),
            groups: Some(identity.groups.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(group: Option<&str>, user: Option<&str>, role: &str) -> RoleBinding {
        RoleBinding {
            group: group.map(Into::into),
            user: user.map(Into::into),
            subject: None,
            role: role.into(),
            tenant: None,
        }
    }

    #[test]
    fn a_binding_has_exactly_one_matcher() {
        assert_eq!(
            matcher(&binding(Some("ops"), None, "operator")),
            Ok(("group", "ops"))
        );
        assert!(
            matcher(&binding(None, None, "admin"))
                .unwrap_err()
                .contains("one matcher")
        );
        assert!(
            matcher(&binding(Some("a"), Some("b"), "admin"))
                .unwrap_err()
                .contains("2 matchers")
        );
        assert!(matcher(&binding(Some(" "), None, "admin")).is_err());
    }
}
