//! The local platform (embedded default): state in SQLite under the data dir, sandboxes on
//! this host through the sbxd runtime.
mod backend;
mod db;
mod egress;
mod exec;
mod identity;
mod images;
mod lifecycle;
mod lifetimes;
pub mod sandboxes;
pub mod snapshots;
mod tenants;

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};

use crate::daemon::platform::images::ImageBackend;
use crate::daemon::platform::local::sandboxes::LocalSandboxes;
use crate::daemon::platform::{
    Metering, Platform, PlatformError, PlatformResult, Reservation, StoredKey, StoredTenant,
};
use crate::runtime::engine::RuntimeConfig;
use crate::runtime::engine::Sbxd;
use crate::runtime::engine::pool::PoolMetrics;
use crate::runtime::images::ImageStore;
use crate::runtime::network::NetworkConfig;
use crate::shared::models::identity::{ApiKey, Role, RoleBindings};
use crate::shared::models::tenant::TenantStatus;
use crate::shared::paths::ADMIN_TOKEN_FILE;

pub use db::{Db, SCHEMA_VERSION};

/// The one backend of this platform: sandboxes run by the sbxd runtime on this host.
pub const BACKEND: &str = "sbxd";

/// Settings of the sbxd runtime on this host.
#[derive(Debug, Clone, Default)]
pub struct RuntimeSettings {
    /// OCI runtime, logs, exec limits.
    pub runtime: RuntimeConfig,
    /// Sandbox networking.
    pub network: NetworkConfig,
}

/// State and sandboxes on this host.
pub struct LocalPlatform {
    data_dir: PathBuf,
    db: Db,
    images: Arc<ImageStore>,
    sandboxes: OnceLock<Result<Arc<LocalSandboxes>, String>>,
    max_exec: Duration,
    disk_pool: PathBuf,
    node: String,
    /// The series of the sbxd runtime's pool of prepared sandboxes.
    pool_metrics: PoolMetrics,
}

/// What one sandbox of this spec reserves.
fn size_of(spec: &crate::runtime::engine::SandboxSpec) -> Reservation {
    Reservation {
        sandboxes: 1,
        cpu_millis: spec.cpu_millis.unwrap_or(0),
        memory_bytes: spec.memory_bytes.unwrap_or(0),
        disk_bytes: spec.ephemeral_bytes.unwrap_or(0),
        root_disk_bytes: 0,
        snapshot_bytes: 0,
    }
}

fn tenant_not_found(name: &str) -> PlatformError {
    PlatformError::NotFound(format!("tenant '{name}' not found"))
}

impl LocalPlatform {
    /// Opens (creating if needed, mode 0700) the data dir, its database and image store.
    pub fn open(
        data_dir: &Path,
        insecure_registries: Vec<String>,
    ) -> PlatformResult<LocalPlatform> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(data_dir)
            .map_err(|source| PlatformError::Io {
                context: format!("cannot create data dir {}", data_dir.display()),
                source,
            })?;
        let db = Db::open(&data_dir.join("sbx.db"))?;
        let images = ImageStore::open(&data_dir.join("images"), insecure_registries)
            .map_err(|e| PlatformError::Store(format!("image store: {e}")))?;
        Ok(LocalPlatform {
            data_dir: data_dir.to_path_buf(),
            db,
            images: Arc::new(images),
            sandboxes: OnceLock::new(),
            max_exec: Duration::from_secs(RuntimeConfig::default().max_exec_seconds),
            disk_pool: PathBuf::from(crate::runtime::storage::DEFAULT_DISK_POOL),
            node: super::host_node_name(),
            pool_metrics: PoolMetrics::default(),
        })
    }

    /// The host's image store (images preloaded at start-up go straight in).
    pub fn image_store(&self) -> Arc<ImageStore> {
        self.images.clone()
    }

    /// Where the k7d disk pool is mounted (`[nodes] diskPoolPath`).
    pub fn set_disk_pool(&mut self, path: PathBuf) {
        self.disk_pool = path;
    }

    /// Starts the sbxd runtime and reconciles sandboxes with the host. When the host cannot
    /// run sandboxes (not root, runtime missing), the reason is kept and sandbox routes
    /// answer 503 with it; everything else keeps working.
    pub async fn start_runtime(&mut self, settings: RuntimeSettings) {
        self.max_exec = Duration::from_secs(settings.runtime.max_exec_seconds);
        let outcome = match Sbxd::new(
            &self.data_dir,
            settings.runtime,
            settings.network,
            self.images.clone(),
            self.pool_metrics.clone(),
        )
        .await
        {
            Ok(sbxd) => LocalSandboxes::start(self.db.clone(), Arc::new(sbxd))
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(reason) = &outcome {
            tracing::error!(%reason, "the sbxd runtime is unavailable; sandbox routes will answer 503");
        }
        let _ = self.sandboxes.set(outcome);
    }

    /// The sandbox manager, or why there is none.
    pub fn sandboxes(&self) -> PlatformResult<&Arc<LocalSandboxes>> {
        match self.sandboxes.get() {
            Some(Ok(manager)) => Ok(manager),
            Some(Err(reason)) => Err(PlatformError::Unavailable(format!(
                "sandboxes are unavailable on this host: {reason}"
            ))),
            None => Err(PlatformError::Unavailable(
                "the sandbox runtime is not started".to_string(),
            )),
        }
    }
}

fn json_list(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_string())
}

fn key_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredKey> {
    let role: String = row.get("role")?;
    let role = role.parse::<Role>().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into())
    })?;
    let namespaces: String = row.get("namespaces")?;
    let nodes: String = row.get("nodes")?;
    let labels: String = row.get("labels")?;
    let hash: Vec<u8> = row.get("secret_sha256")?;
    let secret_sha256: [u8; 32] = hash.try_into().map_err(|_| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Blob,
            "secret hash is not 32 bytes".into(),
        )
    })?;
    Ok(StoredKey {
        key: ApiKey {
            id: row.get("id")?,
            name: row.get("name")?,
            role,
            tenant: row.get("tenant")?,
            namespaces: serde_json::from_str(&namespaces).unwrap_or_default(),
            nodes: serde_json::from_str(&nodes).unwrap_or_default(),
            created: row.get("created")?,
            expires: row.get("expires")?,
            last_used: row.get("last_used")?,
            labels: serde_json::from_str(&labels).unwrap_or_default(),
            token: None,
        },
        secret_sha256,
    })
}

#[async_trait]
impl Platform for LocalPlatform {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn shutdown(&self) {
        if let Ok(sandboxes) = self.sandboxes() {
            sandboxes.drain(Duration::from_secs(5)).await;
        }
    }

    fn images(&self) -> Option<Arc<dyn ImageBackend>> {
        Some(self.images.clone())
    }

    fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.pool_metrics.register(registry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::platform::{IdentityStore, TenantStore};

    fn stored(id: &str, name: &str) -> StoredKey {
        StoredKey {
            key: ApiKey {
                id: id.into(),
                name: name.into(),
                role: Role::User,
                tenant: None,
                namespaces: vec!["a".into()],
                nodes: vec![],
                created: 10,
                expires: 20,
                last_used: None,
                labels: Default::default(),
                token: None,
            },
            secret_sha256: [7; 32],
        }
    }

    #[tokio::test]
    async fn keys_round_trip_through_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let platform = LocalPlatform::open(dir.path(), vec![]).unwrap();
        platform.insert_key(&stored("k1", "ci")).await.unwrap();
        platform.insert_key(&stored("k2", "ci")).await.unwrap();
        platform.insert_key(&stored("k3", "dev")).await.unwrap();
        platform.touch_key("k1", 15).await.unwrap();
        platform.touch_key("k1", 12).await.unwrap();
        let keys = platform.list_keys().await.unwrap();
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[0].key.last_used, Some(15));
        assert_eq!(keys[0].key.namespaces, vec!["a".to_string()]);
        assert_eq!(keys[0].secret_sha256, [7; 32]);
        assert_eq!(
            platform.delete_keys_named("ci").await.unwrap(),
            vec!["k1", "k2"]
        );
        assert!(platform.delete_keys_named("ci").await.unwrap().is_empty());
        assert_eq!(platform.list_keys().await.unwrap().len(), 1);
        assert!(!platform.tenant_exists("acme").await.unwrap());
    }

    #[tokio::test]
    async fn bootstrap_token_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let platform = LocalPlatform::open(dir.path(), vec![]).unwrap();
        let at = platform.store_bootstrap_token("abc_def").await.unwrap();
        let meta = std::fs::metadata(&at).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&at).unwrap(), "abc_def\n");
    }
}
