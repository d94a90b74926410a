//! Authentication middleware and the authenticated principal: who is calling, and which roles
//! they hold where.
use std::collections::BTreeMap;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::state::AppState;
use crate::shared::models::identity::{ApiKey, PrincipalType, Role, WhoamiResponse};
use crate::shared::paths::API_KEY_HEADER;

/// An authenticated caller and its grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// How it authenticated.
    pub principal_type: PrincipalType,
    /// Key id or OIDC `sub`.
    pub subject: String,
    /// Highest cluster-wide role (`operator`, `admin`), if any.
    pub cluster_role: Option<Role>,
    /// Highest role per tenant.
    pub tenant_roles: BTreeMap<String, Role>,
    /// A development-mode key with a tenant role but no tenant.
    pub unscoped_role: Option<Role>,
    /// Namespaces the principal is narrowed to (empty: none).
    pub namespaces: Vec<String>,
    /// Nodes the principal may place sandboxes on (empty: any its tenant allows).
    pub nodes: Vec<String>,
    /// The token's issuer (OIDC principals).
    pub issuer: Option<String>,
    /// The token's groups (OIDC principals).
    pub groups: Option<Vec<String>>,
}

impl Principal {
    /// The principal of an API key.
    pub fn from_key(key: &ApiKey) -> Principal {
        let mut principal = Principal {
            principal_type: PrincipalType::Key,
            subject: key.id.clone(),
            cluster_role: None,
            tenant_roles: BTreeMap::new(),
            unscoped_role: None,
            namespaces: key.namespaces.clone(),
            nodes: key.nodes.clone(),
            issuer: None,
            groups: None,
        };
        match (&key.tenant, key.role.is_tenant_scoped()) {
            (_, false) => principal.cluster_role = Some(key.role),
            (Some(tenant), true) => {
                principal.tenant_roles.insert(tenant.clone(), key.role);
            }
            (None, true) => principal.unscoped_role = Some(key.role),
        }
        principal
    }

    /// The grant strings of whoami: the cluster role, then `<role> on tenant <t>` per tenant;
    /// an unscoped development key shows `<role> on namespaces …`.
    pub fn grants(&self) -> Vec<String> {
        let mut grants = Vec::new();
        if let Some(role) = self.cluster_role {
            grants.push(role.to_string());
        }
        for (tenant, role) in &self.tenant_roles {
            grants.push(format!("{role} on tenant {tenant}"));
        }
        if let Some(role) = self.unscoped_role {
            if self.namespaces.is_empty() {
                grants.push(format!("{role} on all namespaces"));
            } else {
                grants.push(format!(
                    "{role} on namespaces {}",
                    self.namespaces.join(", ")
                ));
            }
        }
        grants
    }

    /// The whoami record of this principal.
    pub fn whoami(&self) -> WhoamiResponse {
        WhoamiResponse {
            principal_type: self.principal_type,
            subject: self.subject.clone(),
            grants: self.grants(),
            issuer: self.issuer.clone(),
            groups: self.groups.clone(),
        }
    }

    /// The highest role held anywhere, for messages.
    pub fn highest_role(&self) -> Option<Role> {
        self.cluster_role
            .into_iter()
            .chain(self.tenant_roles.values().copied())
            .chain(self.unscoped_role)
            .max()
    }

    /// 403 `Forbidden` for principals that may only read (`read-only`).
    pub fn require_write(&self) -> ServiceResult<()> {
        match self.highest_role() {
            Some(role) if role > Role::ReadOnly => Ok(()),
            _ => Err(ServiceError::forbidden(format!(
                "{} has the read-only role: this operation changes state",
                self.subject
            ))),
        }
    }

    /// 403 `Forbidden` unless the principal holds `role` (or higher) cluster-wide.
    pub fn require_cluster_role(&self, role: Role) -> ServiceResult<()> {
        match self.cluster_role {
            Some(held) if held >= role => Ok(()),
            _ => Err(ServiceError::forbidden(format!(
                "this operation needs the {role} role; {} holds {}",
                self.subject,
                self.highest_role()
                    .map(|r| format!("the {r} role"))
                    .unwrap_or_else(|| "no role".to_string())
            ))),
        }
    }
}

/// Pulls the credential out of `X-API-Key` or `Authorization: Bearer`.
fn credential(parts: &Parts) -> ServiceResult<&str> {
    if let Some(value) = parts.headers.get(API_KEY_HEADER) {
        return value
            .to_str()
            .map(str::trim)
            .map_err(|_| ServiceError::unauthorized("the X-API-Key header is not valid text"));
    }
    if let Some(value) = parts.headers.get(AUTHORIZATION) {
        let value = value.to_str().map_err(|_| {
            ServiceError::unauthorized("the Authorization header is not valid text")
        })?;
        let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
        if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
            return Err(ServiceError::unauthorized(
                "the Authorization header must be 'Bearer <API key or OIDC token>'",
            ));
        }
        return Ok(token.trim());
    }
    Err(ServiceError::unauthorized(
        "missing credentials: send an API key in the X-API-Key header or as \
         'Authorization: Bearer <key>'",
    ))
}

/// The client's address: the peer of the connection (the listener records it). Behind a
/// proxy, the proxy's address.
pub fn client_address(parts: &Parts) -> Option<std::net::IpAddr> {
    parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip())
}

/// Middleware for every protected route: authenticates and stores the [`Principal`] in the
/// request's extensions, or answers 401. An address with too many failed authentications
/// is answered 429 before its credentials are verified (an API key whose id is known aside);
/// each failure is charged to its address and audited (counted per address, see `audit.rs`).
pub async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let address = client_address(&parts);
    if let Some(address) = address {
        if let Some(refused) = state.rate_limits.address_refusal(address) {
            // An API key whose id is known still goes through (clients behind one proxy
            // share its address with whoever floods it); its secret is then checked as
            // always, and a wrong one is charged.
            let known_key = matches!(
                credential(&parts),
                Ok(token) if !crate::daemon::oidc::looks_like_jwt(token)
                    && state.keys.names_known_key(token)
            );
            if !known_key {
                if let Some(audit) = &state.audit {
                    audit.auth_failure(address, parts.uri.path(), refused.status().as_u16());
                }
                return refused;
            }
        }
    }
    let principal = match credential(&parts) {
        Ok(token) if crate::daemon::oidc::looks_like_jwt(token) => match &state.oidc {
            Some(verifier) => match verifier.verify(token).await {
                Ok(identity) => state.bindings.principal(&identity).await,
                Err(e) => Err(e),
            },
            None => Err(ServiceError::unauthorized(
                "a bearer JWT was sent but OIDC is not configured on this service",
            )),
        },
        Ok(token) => state.keys.authenticate(token).await,
        Err(e) => Err(e),
    };
    match principal {
        Ok(principal) => {
            if let Some(refused) = state.rate_limits.refusal(&principal.subject) {
                return refused;
            }
            parts.extensions.insert(principal);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => {
            if let Some(address) = address {
                state.rate_limits.charge_address(address);
                if let Some(audit) = &state.audit {
                    audit.auth_failure(address, parts.uri.path(), e.status().as_u16());
                }
            }
            e.into_response()
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ServiceError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Principal>().cloned().ok_or_else(|| {
            ServiceError::internal("route reads a principal but is not behind authentication")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(role: Role, tenant: Option<&str>, namespaces: &[&str]) -> ApiKey {
        ApiKey {
            id: "0123456789abcdef".into(),
            name: "t".into(),
            role,
            tenant: tenant.map(Into::into),
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            nodes: vec![],
            created: 0,
            expires: 1,
            last_used: None,
            labels: Default::default(),
            token: None,
        }
    }

    #[test]
    fn grants_read_as_the_spec_shows() {
        assert_eq!(
            Principal::from_key(&key(Role::Admin, None, &[])).grants(),
            ["admin"]
        );
        assert_eq!(
            Principal::from_key(&key(Role::User, Some("acme"), &[])).grants(),
            ["user on tenant acme"]
        );
        assert_eq!(
            Principal::from_key(&key(Role::ReadOnly, None, &["a", "b"])).grants(),
            ["read-only on namespaces a, b"]
        );
        assert_eq!(
            Principal::from_key(&key(Role::User, None, &[])).grants(),
            ["user on all namespaces"]
        );
    }

    #[test]
    fn cluster_role_checks() {
        let admin = Principal::from_key(&key(Role::Admin, None, &[]));
        let operator = Principal::from_key(&key(Role::Operator, None, &[]));
        let user = Principal::from_key(&key(Role::User, Some("acme"), &[]));
        assert!(admin.require_cluster_role(Role::Admin).is_ok());
        assert!(admin.require_cluster_role(Role::Operator).is_ok());
        assert!(operator.require_cluster_role(Role::Admin).is_err());
        let err = user.require_cluster_role(Role::Admin).unwrap_err();
        assert_eq!(err.status(), axum::http::StatusCode::FORBIDDEN);
        assert!(
            err.message.contains("needs the admin role"),
            "{}",
            err.message
        );
    }
}
