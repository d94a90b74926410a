//! Identity wire types: roles, API keys, whoami, OIDC discovery and role bindings.
use serde::{Deserialize, Serialize};

use crate::shared::models::formats::{DnsLabel, KeyName, NodeName, NonBlank, TenancyLabelMap};
use utoipa::ToSchema;

/// A principal's role. `read-only` and `user` are scoped to a tenant; `operator` and `admin`
/// are cluster-wide.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Read sandboxes, logs, metrics and snapshots of its tenant (the least a role grants:
    /// the default of a record being built).
    #[default]
    ReadOnly,
    /// Every sandbox and snapshot route in its tenant's namespaces.
    User,
    /// Every sandbox and snapshot route everywhere, tenant read, node dedication and storage.
    Operator,
    /// Everything, including keys, role bindings and tenant writes.
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 4] = [Role::ReadOnly, Role::User, Role::Operator, Role::Admin];

    /// The role's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::User => "user",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// Whether the role is scoped to a tenant (`read-only`, `user`).
    pub fn is_tenant_scoped(self) -> bool {
        matches!(self, Role::ReadOnly | Role::User)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                format!("unknown role '{s}': expected one of read-only, user, operator, admin")
            })
    }
}

/// `POST /api/v1/keys`: mint a key. Required fields are checked by the service so that a
/// missing one is a 400 naming it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CreateKeyRequest {
    /// Required. Human label; several keys may share it.
    #[serde(default)]
    #[schema(value_type = KeyName, required = true)]
    pub name: Option<String>,
    /// Required. One of `read-only`, `user`, `operator`, `admin`.
    #[serde(default)]
    #[schema(value_type = Role, required = true)]
    pub role: Option<String>,
    /// Tenant of a `read-only` or `user` key (required in production mode); forbidden for
    /// `operator` and `admin`; must exist.
    #[serde(default)]
    #[schema(value_type = Option<DnsLabel>)]
    pub tenant: Option<String>,
    /// Required. Days until the key expires; a positive integer.
    #[serde(default)]
    #[schema(value_type = i64, required = true, minimum = 1, maximum = 36500)]
    pub expires_days: Option<i64>,
    /// Narrows the key to these namespaces inside its tenant.
    #[serde(default)]
    #[schema(value_type = Option<Vec<DnsLabel>>)]
    pub namespaces: Option<Vec<String>>,
    /// Cluster node names where the key may place sandboxes.
    #[serde(default)]
    #[schema(value_type = Option<Vec<NodeName>>)]
    pub nodes: Option<Vec<String>>,
    /// Labels (Kubernetes label syntax, at most 64), e.g. `sbx.io/apply-set`, which `sbx apply
    /// --applyset` writes to find what it may prune.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<TenancyLabelMap>)]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
}

/// An API key record. The secret's hash is never returned; `token` only in the mint response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApiKey {
    /// Key id: the part of the token before the first `_`.
    pub id: String,
    /// Human label.
    pub name: String,
    /// The key's role.
    pub role: Role,
    /// The key's tenant, absent for cluster-wide keys and unscoped development keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Namespaces the key is narrowed to (empty: no narrowing).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Nodes where the key may place sandboxes (empty: no narrowing).
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Creation time, unix seconds.
    pub created: i64,
    /// Expiry time, unix seconds.
    pub expires: i64,
    /// Last successful authentication, unix seconds; null until used.
    #[serde(default)]
    pub last_used: Option<i64>,
    /// Labels given when it was minted; absent when there are none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schema(value_type = TenancyLabelMap)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The bearer token `<key_id>_<secret>`: present only in the mint response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// `DELETE /api/v1/keys/{name}`: the ids of every key revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RevokeKeysResponse {
    /// Ids of the revoked keys.
    pub revoked: Vec<String>,
}

/// How the caller authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalType {
    /// An API key.
    Key,
    /// An OIDC bearer JWT.
    Oidc,
}

/// `GET /api/v1/auth/whoami`: the caller's identity and grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WhoamiResponse {
    /// `key` or `oidc`.
    #[serde(rename = "type")]
    pub principal_type: PrincipalType,
    /// The key id, or the OIDC `sub`.
    pub subject: String,
    /// The cluster role and/or `<role> on tenant <tenant>` per tenant; an unscoped
    /// development key shows `<role> on namespaces …`.
    pub grants: Vec<String>,
    /// The token's issuer for OIDC principals; null for keys.
    pub issuer: Option<String>,
    /// The token's groups for OIDC principals; null for keys.
    pub groups: Option<Vec<String>>,
}

/// `GET /api/v1/auth/oidc`: the OIDC configuration clients need to obtain a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OidcDiscovery {
    /// Issuer URL.
    pub issuer: String,
    /// Client id to request tokens for.
    pub client_id: String,
    /// Audience the service expects in `aud`.
    pub audience: String,
}

/// One role binding: exactly one matcher (`group`, `user` or `subject`), a role, and a
/// tenant for tenant roles.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RoleBinding {
    /// Matches an OIDC group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<NonBlank>)]
    pub group: Option<String>,
    /// Matches an OIDC username.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<NonBlank>)]
    pub user: Option<String>,
    /// Matches an OIDC `sub`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<NonBlank>)]
    pub subject: Option<String>,
    /// The role granted.
    #[schema(value_type = Role)]
    pub role: String,
    /// The tenant of a tenant role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub tenant: Option<String>,
}

/// The role-binding document (`GET`/`PUT /api/v1/role-bindings`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RoleBindings {
    /// The bindings; several matches combine as the highest role per tenant plus the highest
    /// cluster role.
    #[serde(default, deserialize_with = "crate::shared::models::objects::list")]
    pub bindings: Vec<RoleBinding>,
    /// OIDC `sub`s or usernames blocked from the next request on.
    #[serde(default)]
    #[schema(value_type = Vec<NonBlank>)]
    pub deny_subjects: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip_and_reject_unknown_names() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        let err = "root".parse::<Role>().unwrap_err();
        assert!(err.contains("'root'") && err.contains("read-only"), "{err}");
        assert!(Role::User.is_tenant_scoped() && !Role::Operator.is_tenant_scoped());
        assert!(Role::Admin > Role::Operator && Role::User > Role::ReadOnly);
    }

    #[test]
    fn key_record_hides_absent_token_and_tenant() {
        let key = ApiKey {
            id: "k1".into(),
            name: "ci".into(),
            role: Role::Admin,
            tenant: None,
            namespaces: vec![],
            nodes: vec![],
            created: 1,
            expires: 2,
            last_used: None,
            labels: Default::default(),
            token: None,
        };
        let v = serde_json::to_value(&key).unwrap();
        assert!(v.get("token").is_none() && v.get("tenant").is_none());
        assert!(v["last_used"].is_null());
    }

    #[test]
    fn whoami_uses_type_on_the_wire() {
        let w = WhoamiResponse {
            principal_type: PrincipalType::Key,
            subject: "k1".into(),
            grants: vec!["admin".into()],
            issuer: None,
            groups: None,
        };
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["type"], "key");
        assert!(v["issuer"].is_null() && v["groups"].is_null());
    }
}
