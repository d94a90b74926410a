//! API keys: minting, listing, revocation, authentication and the first admin key.
//!
//! Only the SHA-256 of a key's secret is stored. Authentication reads an in-memory mirror of
//! the store, written through on every local change and re-read whenever the store says the
//! keys changed (a watch on Kubernetes) or, where it cannot tell, every few seconds, so that
//! another replica's changes are seen within the contract's 5 s.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::daemon::auth::Principal;
use crate::daemon::config::Mode;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::mirror::Mirror;
use crate::daemon::platform::{IdentityStore, StoredKey, TenantStore};
use crate::shared::models::identity::{ApiKey, CreateKeyRequest, Role};
use crate::shared::names;
use crate::shared::timestamp::{format_rfc3339_utc, now_unix};

/// How often the mirror is reloaded from a store that cannot say when the keys change.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(3);
/// How often it is reloaded anyway from a store that can (a safety net, not the bound).
pub const RESYNC_INTERVAL: Duration = Duration::from_secs(60);
/// Longest key lifetime accepted, in days (100 years).
pub const MAX_EXPIRES_DAYS: i64 = 36_500;
/// Lifetime of the first admin key, in days.
pub const BOOTSTRAP_EXPIRES_DAYS: i64 = 365;
/// Name of the first admin key.
pub const BOOTSTRAP_KEY_NAME: &str = "bootstrap-admin";

const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;
const SECONDS_PER_DAY: i64 = 86_400;

/// Owns every API-key operation.
pub struct KeyService {
    identity: Arc<dyn IdentityStore>,
    tenancy: Arc<dyn TenantStore>,
    mode: Mode,
    /// The keys by id; a reload begun before a local write or a newer reload never replaces
    /// what they left (a revoked key cannot come back from an older read).
    mirror: Mirror<HashMap<String, StoredKey>>,
}

fn random_hex(bytes: usize) -> ServiceResult<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| ServiceError::internal(format!("getrandom: {e}")))?;
    Ok(hex::encode(buf))
}

fn sha256(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn required<'a, T>(value: &'a Option<T>, field: &str) -> ServiceResult<&'a T> {
    value
        .as_ref()
        .ok_or_else(|| ServiceError::bad_request(format!("missing required field '{field}'")))
}

impl KeyService {
    /// A service over a platform's key store; call [`KeyService::reload`] before serving.
    pub fn new(
        identity: Arc<dyn IdentityStore>,
        tenancy: Arc<dyn TenantStore>,
        mode: Mode,
    ) -> KeyService {
        KeyService {
            identity,
            tenancy,
            mode,
            mirror: Mirror::new(),
        }
    }

    /// Replaces the mirror with the store's keys, keeping newer local `last_used` values.
    /// Returns false when a local write or a newer reload finished while this one read the
    /// store (what they left is kept).
    pub async fn reload(&self) -> ServiceResult<bool> {
        let ticket = self.mirror.ticket();
        let stored = self.identity.list_keys().await?;
        Ok(self.mirror.install_with(ticket, |held| {
            stored
                .into_iter()
                .map(|mut k| {
                    let local = held
                        .and_then(|m| m.get(&k.key.id))
                        .and_then(|m| m.key.last_used);
                    k.key.last_used = k.key.last_used.max(local);
                    (k.key.id.clone(), k)
                })
                .collect()
        }))
    }

    /// Reloads the mirror forever: on every change the store reports (and every
    /// [`RESYNC_INTERVAL`]), or every [`REFRESH_INTERVAL`] from a store that reports none;
    /// failures are logged. A reload that a local write overtook is read again at once, so
    /// this replica's own writes never hold back what other replicas changed.
    pub async fn refresh_loop(self: Arc<Self>) {
        let mut changes = self.identity.key_changes();
        let every = match changes {
            Some(_) => RESYNC_INTERVAL,
            None => REFRESH_INTERVAL,
        };
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let watch_gone = match changes.as_mut() {
                Some(changes) => tokio::select! {
                    changed = changes.changed() => changed.is_err(),
                    _ = tick.tick() => false,
                },
                None => {
                    tick.tick().await;
                    false
                }
            };
            if watch_gone {
                changes = None;
                tick = tokio::time::interval(REFRESH_INTERVAL);
            }
            for _ in 0..3 {
                match self.reload().await {
                    Ok(true) => break,
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::warn!(error = %e.internal.as_deref().unwrap_or(&e.message), "key reload failed");
                        break;
                    }
                }
            }
        }
    }

    /// Mints a key after checking the request against the contract's rules.
    pub async fn create(&self, request: &CreateKeyRequest) -> ServiceResult<ApiKey> {
        let name = required(&request.name, "name")?.trim().to_string();
        names::validate_key_name(&name).map_err(ServiceError::bad_request)?;
        let role: Role = required(&request.role, "role")?
            .parse()
            .map_err(ServiceError::bad_request)?;
        let days = *required(&request.expires_days, "expires_days")?;
        if !(1..=MAX_EXPIRES_DAYS).contains(&days) {
            return Err(ServiceError::bad_request(format!(
                "expires_days must be a positive number of days up to {MAX_EXPIRES_DAYS}, not {days}"
            )));
        }
        let tenant = request.tenant.as_deref().map(str::trim);
        match (role.is_tenant_scoped(), tenant) {
            (false, Some(_)) => {
                return Err(ServiceError::bad_request(format!(
                    "role {role} is cluster-wide: a key with role {role} cannot have a tenant"
                )));
            }
            (true, None) if self.mode == Mode::Production => {
                return Err(ServiceError::bad_request(format!(
                    "role {role} is scoped to a tenant: give 'tenant' (required in production mode)"
                )));
            }
            (true, None) => {
                // Issue 43 point 20: an unscoped key reaches every namespace, so once a
                // tenant exists it would cross every tenant's boundary.
                let tenants = self.tenancy.list_tenants().await?;
                if !tenants.is_empty() {
                    let names: Vec<&str> = tenants.iter().map(|t| t.name.as_str()).collect();
                    return Err(ServiceError::bad_request(format!(
                        "role {role} is scoped to a tenant: give 'tenant' ({}); an unscoped \
                         development-mode key is refused once a tenant exists, since it would \
                         reach every tenant's namespaces",
                        names.join(", ")
                    )));
                }
            }
            (true, Some(tenant)) if !self.tenancy.tenant_exists(tenant).await? => {
                return Err(ServiceError::bad_request(format!(
                    "unknown tenant '{tenant}'"
                )));
            }
            _ => {}
        }
        let labels = request.labels.clone().unwrap_or_default();
        crate::shared::labels::validate_tenancy(&labels).map_err(ServiceError::bad_request)?;
        let namespaces = request.namespaces.clone().unwrap_or_default();
        if !namespaces.is_empty() && !role.is_tenant_scoped() {
            return Err(ServiceError::bad_request(format!(
                "namespaces narrow a key inside its tenant; role {role} is cluster-wide"
            )));
        }
        for ns in &namespaces {
            names::validate_dns_label("namespace", ns).map_err(ServiceError::bad_request)?;
        }
        if let (Some(tenant), false) = (tenant, namespaces.is_empty()) {
            let owned = self
                .tenancy
                .list_tenants()
                .await?
                .into_iter()
                .find(|t| t.name == tenant)
                .map(|t| t.spec.namespaces)
                .unwrap_or_default();
            if let Some(ns) = namespaces.iter().find(|ns| !owned.contains(ns)) {
                return Err(ServiceError::bad_request(format!(
                    "namespace '{ns}' is not one of tenant '{tenant}': a key's namespaces narrow \
                     it inside its tenant ({})",
                    owned.join(", ")
                )));
            }
        }
        let nodes = request.nodes.clone().unwrap_or_default();
        let known = if nodes.is_empty() {
            Vec::new()
        } else {
            self.tenancy.node_names().await?
        };
        for node in &nodes {
            names::validate_dns_subdomain("node", node).map_err(ServiceError::bad_request)?;
            if !known.contains(node) {
                return Err(ServiceError::bad_request(format!(
                    "unknown node '{node}' (nodes: {})",
                    known.join(", ")
                )));
            }
        }
        let key = ApiKey {
            name,
            role,
            tenant: tenant.map(str::to_string),
            namespaces,
            nodes,
            labels,
            ..ApiKey::default()
        };
        self.mint(key, days).await
    }

    /// Mints a key of these settings (name, role, tenant, namespaces, nodes, labels) that
    /// expires in `days`.
    async fn mint(&self, settings: ApiKey, days: i64) -> ServiceResult<ApiKey> {
        let id = random_hex(ID_BYTES)?;
        let secret = random_hex(SECRET_BYTES)?;
        let created = now_unix();
        let stored = StoredKey {
            key: ApiKey {
                id: id.clone(),
                created,
                expires: created + days * SECONDS_PER_DAY,
                last_used: None,
                token: None,
                ..settings
            },
            secret_sha256: sha256(&secret),
        };
        self.identity.insert_key(&stored).await?;
        let mut key = stored.key.clone();
        self.mirror.write(|keys| {
            keys.insert(id.clone(), stored);
        });
        key.token = Some(format!("{id}_{secret}"));
        tracing::info!(key_id = %key.id, name = %key.name, role = %key.role, "minted API key");
        Ok(key)
    }

    /// Every key record (no hashes, no tokens), oldest first.
    pub async fn list(&self) -> Vec<ApiKey> {
        let mut keys: Vec<ApiKey> = self.mirror.read(|keys| {
            keys.into_iter()
                .flat_map(|k| k.values())
                .map(|k| k.key.clone())
                .collect()
        });
        keys.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
        keys
    }

    /// Revokes every key with this name; 404 when there is none.
    pub async fn revoke(&self, name: &str) -> ServiceResult<Vec<String>> {
        self.keep_an_admin(name).await?;
        let ids = self.identity.delete_keys_named(name).await?;
        if ids.is_empty() {
            return Err(ServiceError::not_found(format!(
                "no API key named '{name}'"
            )));
        }
        self.mirror.write(|keys| {
            for id in &ids {
                keys.remove(id);
            }
        });
        tracing::info!(name, ids = ?ids, "revoked API keys");
        Ok(ids)
    }

    /// Whether `token` names a key this service holds, by its id (before the `_`): a map
    /// lookup, no hashing. Lets a key through an address that bad tokens have exhausted (a
    /// proxy's, shared with an attacker), without the cost the limit is there to avoid.
    pub fn names_known_key(&self, token: &str) -> bool {
        let Some((id, _)) = token.split_once('_') else {
            return false;
        };
        self.mirror
            .read(|keys| keys.is_some_and(|keys| keys.contains_key(id)))
    }

    /// Checks a `<key_id>_<secret>` token: known id, matching hash (constant time), not
    /// expired. Records `last_used`.
    pub async fn authenticate(&self, token: &str) -> ServiceResult<Principal> {
        let invalid = || ServiceError::unauthorized("invalid API key");
        let (id, secret) = token.split_once('_').ok_or_else(invalid)?;
        let presented = sha256(secret);
        let now = now_unix();
        let (key, stale) = self
            .mirror
            .read(|keys| {
                let stored = keys.and_then(|k| k.get(id));
                // Compare against a dummy when the id is unknown so that timing does not tell
                // known ids from unknown ones.
                let expected = stored.map(|k| k.secret_sha256).unwrap_or([0u8; 32]);
                let matches: bool = presented.ct_eq(&expected).into();
                match stored {
                    Some(stored) if matches => {
                        let stale = stored.key.last_used.is_none_or(|t| t < now);
                        Some((stored.key.clone(), stale))
                    }
                    _ => None,
                }
            })
            .ok_or_else(invalid)?;
        if key.expires <= now {
            return Err(ServiceError::unauthorized(format!(
                "API key {} expired at {}",
                key.id,
                format_rfc3339_utc(key.expires)
            )));
        }
        if stale {
            self.record_use(&key.id, now).await;
        }
        Ok(Principal::from_key(&key))
    }

    async fn record_use(&self, id: &str, now: i64) {
        // Every reload keeps the later of two `last_used` values, so this is no write that
        // reloads must be ordered after.
        self.mirror.amend(|keys| {
            if let Some(stored) = keys.get_mut(id) {
                stored.key.last_used = Some(now);
            }
        });
        let identity = self.identity.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            if let Err(e) = identity.touch_key(&id, now).await {
                tracing::warn!(key_id = %id, error = %e, "cannot record key use");
            }
        });
    }

    /// Refuses (400) a revocation of `name` that would leave no admin: its keys hold the last
    /// unexpired admin key and no role binding grants admin. (The restart that would mint a
    /// new first key is no recovery a running service should need.)
    async fn keep_an_admin(&self, name: &str) -> ServiceResult<()> {
        let now = now_unix();
        let (revoked_admin, other_admin) = self.mirror.read(|keys| {
            let admins = keys
                .into_iter()
                .flat_map(|k| k.values())
                .filter(|k| k.key.role == Role::Admin && k.key.expires > now);
            admins.fold((false, false), |(named, other), k| {
                (named || k.key.name == name, other || k.key.name != name)
            })
        });
        if !revoked_admin || other_admin {
            return Ok(());
        }
        let bindings = self.identity.role_bindings().await?;
        if bindings
            .bindings
            .iter()
            .any(|b| b.role == Role::Admin.as_str())
        {
            return Ok(());
        }
        Err(ServiceError::bad_request(format!(
            "revoking '{name}' would leave no admin: it holds the last unexpired admin key and no \
             role binding grants admin; mint another admin key (or bind admin to an OIDC \
             identity) first"
        )))
    }

    /// Whether an admin key exists that has not expired.
    pub async fn has_unexpired_admin_key(&self) -> bool {
        let now = now_unix();
        self.mirror.read(|keys| {
            keys.into_iter()
                .flat_map(|k| k.values())
                .any(|k| k.key.role == Role::Admin && k.key.expires > now)
        })
    }

    /// Mints the first admin key when no unexpired admin key exists (and, with
    /// `admin_binding`, no role binding grants admin either), and stores its token where only
    /// the operator can read it. Returns where, when a key was minted.
    pub async fn ensure_admin(&self, admin_binding: bool) -> ServiceResult<Option<String>> {
        if admin_binding || self.has_unexpired_admin_key().await {
            return Ok(None);
        }
        // Decided again under the lock, from the store: another replica starting at the same
        // time may have minted one since this one read the keys.
        let lock = self.identity.lock_bootstrap().await?;
        self.reload().await?;
        if self.has_unexpired_admin_key().await {
            lock.release().await;
            return Ok(None);
        }
        let key = self
            .mint(
                ApiKey {
                    name: BOOTSTRAP_KEY_NAME.to_string(),
                    role: Role::Admin,
                    ..ApiKey::default()
                },
                BOOTSTRAP_EXPIRES_DAYS,
            )
            .await?;
        let token = key.token.as_deref().unwrap_or_default();
        let place = self.identity.store_bootstrap_token(token).await;
        lock.release().await;
        let place = place?;
        tracing::info!(key_id = %key.id, token_file = %place, "minted the first admin key");
        Ok(Some(place))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::platform::local::LocalPlatform;

    async fn service(mode: Mode) -> (tempfile::TempDir, KeyService) {
        let dir = tempfile::tempdir().unwrap();
        let platform = Arc::new(LocalPlatform::open(dir.path(), vec![]).unwrap());
        let service = KeyService::new(platform.clone(), platform, mode);
        service.reload().await.unwrap();
        (dir, service)
    }

    fn request(role: &str) -> CreateKeyRequest {
        CreateKeyRequest {
            name: Some("ci".into()),
            role: Some(role.into()),
            expires_days: Some(30),
            ..Default::default()
        }
    }

    /// Mints and revocations while reloads run back to back: a list read before a write
    /// never undoes it (a new key fails, or a revoked key comes back until the next reload).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_reload_begun_before_a_write_never_undoes_it() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (_dir, keys) = service(Mode::Development).await;
        let keys = Arc::new(keys);
        let stop = Arc::new(AtomicBool::new(false));
        let reloaders: Vec<_> = (0..3)
            .map(|_| {
                let (keys, stop) = (keys.clone(), stop.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        keys.reload().await.unwrap();
                    }
                })
            })
            .collect();
        for i in 0..150 {
            let mut ask = request("operator");
            ask.name = Some(format!("k{i}"));
            let token = keys.create(&ask).await.unwrap().token.unwrap();
            assert!(keys.authenticate(&token).await.is_ok(), "minted key {i}");
            keys.revoke(&format!("k{i}")).await.unwrap();
            assert!(keys.authenticate(&token).await.is_err(), "revoked key {i}");
        }
        stop.store(true, Ordering::Relaxed);
        for r in reloaders {
            r.await.unwrap();
        }
    }

    #[tokio::test]
    async fn minted_tokens_authenticate_and_wrong_secrets_do_not() {
        let (_dir, keys) = service(Mode::Development).await;
        let key = keys.create(&request("operator")).await.unwrap();
        let token = key.token.clone().unwrap();
        let (id, secret) = token.split_once('_').unwrap();
        assert_eq!(id, key.id);
        assert_eq!(secret.len(), 64);
        let principal = keys.authenticate(&token).await.unwrap();
        assert_eq!(principal.cluster_role, Some(Role::Operator));
        assert!(
            keys.authenticate(&format!("{id}_{}", "0".repeat(64)))
                .await
                .is_err()
        );
        assert!(keys.authenticate("nounderscore").await.is_err());
        assert!(
            keys.authenticate(&format!("ffffffffffffffff_{secret}"))
                .await
                .is_err()
        );
        assert!(keys.list().await[0].last_used.is_some());
        assert!(keys.list().await[0].token.is_none());
    }

    #[tokio::test]
    async fn the_contract_rules_of_key_creation() {
        let (_dir, keys) = service(Mode::Production).await;
        let cases: Vec<(CreateKeyRequest, &str)> = vec![
            (
                CreateKeyRequest {
                    name: None,
                    ..request("admin")
                },
                "'name'",
            ),
            (
                CreateKeyRequest {
                    role: None,
                    ..request("admin")
                },
                "'role'",
            ),
            (
                CreateKeyRequest {
                    expires_days: None,
                    ..request("admin")
                },
                "'expires_days'",
            ),
            (
                CreateKeyRequest {
                    expires_days: Some(0),
                    ..request("admin")
                },
                "positive",
            ),
            (
                CreateKeyRequest {
                    expires_days: Some(-3),
                    ..request("admin")
                },
                "positive",
            ),
            (request("root"), "unknown role"),
            (
                CreateKeyRequest {
                    tenant: Some("acme".into()),
                    ..request("admin")
                },
                "cluster-wide",
            ),
            (request("user"), "production"),
            (
                CreateKeyRequest {
                    tenant: Some("acme".into()),
                    ..request("user")
                },
                "unknown tenant",
            ),
            (
                CreateKeyRequest {
                    name: Some("a b".into()),
                    ..request("admin")
                },
                "not valid",
            ),
        ];
        for (req, needle) in cases {
            let err = keys.create(&req).await.unwrap_err();
            assert_eq!(err.status(), axum::http::StatusCode::BAD_REQUEST, "{req:?}");
            assert!(err.message.contains(needle), "{needle}: {}", err.message);
        }
        assert!(
            keys.list().await.is_empty(),
            "a failed create stores nothing"
        );
    }

    #[tokio::test]
    async fn development_keys_may_be_unscoped_and_revocation_is_by_name() {
        let (_dir, keys) = service(Mode::Development).await;
        let mut req = request("user");
        req.namespaces = Some(vec!["team-a".into()]);
        let a = keys.create(&req).await.unwrap();
        let b = keys.create(&request("read-only")).await.unwrap();
        let principal = keys
            .authenticate(a.token.as_deref().unwrap())
            .await
            .unwrap();
        assert_eq!(principal.grants(), ["user on namespaces team-a"]);
        let mut revoked = keys.revoke("ci").await.unwrap();
        revoked.sort();
        let mut expected = vec![a.id.clone(), b.id.clone()];
        expected.sort();
        assert_eq!(revoked, expected);
        assert!(
            keys.authenticate(a.token.as_deref().unwrap())
                .await
                .is_err()
        );
        assert_eq!(
            keys.revoke("ci").await.unwrap_err().status(),
            axum::http::StatusCode::NOT_FOUND
        );
    }

    #[tokio::test]
    async fn first_admin_is_minted_once() {
        let (dir, keys) = service(Mode::Development).await;
        let place = keys.ensure_admin(false).await.unwrap().unwrap();
        let token = std::fs::read_to_string(&place).unwrap();
        assert!(place.starts_with(&dir.path().display().to_string()));
        let principal = keys.authenticate(token.trim()).await.unwrap();
        assert_eq!(principal.grants(), ["admin"]);
        assert!(keys.ensure_admin(false).await.unwrap().is_none());
    }
}
