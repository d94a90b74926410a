//! The local platform (embedded default): state in SQLite under the data dir, sandboxes on
//! this host through the sbxd runtime.
mod db;
mod images;
pub mod sandboxes;
pub mod snapshots;
pub mod storage;

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
    Metering, NewSandbox, Platform, PlatformError, PlatformResult, Reservation, RestorePlan,
    StoredKey, StoredTenant,
};
use crate::daemon::runtime::engine::RuntimeConfig;
use crate::daemon::runtime::engine::Sbxd;
use crate::daemon::runtime::images::ImageStore;
use crate::daemon::runtime::network::NetworkConfig;
use crate::shared::models::identity::{ApiKey, Role, RoleBindings};
use crate::shared::models::sandbox::{ExecResponse, Sandbox, SandboxMetrics};
use crate::shared::models::snapshot::{GcResult, Snapshot, SnapshotKind};
use crate::shared::paths::ADMIN_TOKEN_FILE;

pub use db::{Db, SCHEMA_VERSION};

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
}

/// What one sandbox of this spec reserves.
fn size_of(spec: &crate::daemon::runtime::engine::SandboxSpec) -> Reservation {
    Reservation {
        sandboxes: 1,
        cpu_millis: spec.cpu_millis.unwrap_or(0),
        memory_bytes: spec.memory_bytes.unwrap_or(0),
        disk_bytes: spec.ephemeral_bytes.unwrap_or(0),
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
            disk_pool: PathBuf::from(storage::DEFAULT_DISK_POOL),
            node: super::host_node_name(),
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

    fn backends(&self) -> &'static [&'static str] {
        &["sbxd"]
    }

    async fn list_keys(&self) -> PlatformResult<Vec<StoredKey>> {
        self.db
            .call(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, name, role, tenant, namespaces, nodes, secret_sha256, created, \
                     expires, last_used FROM api_keys ORDER BY created, id",
                )?;
                let rows = stmt.query_map([], key_from_row)?;
                rows.collect()
            })
            .await
    }

    async fn insert_key(&self, key: &StoredKey) -> PlatformResult<()> {
        let key = key.clone();
        self.db
            .call(move |conn| {
                conn.execute(
                    "INSERT INTO api_keys (id, name, role, tenant, namespaces, nodes, \
                     secret_sha256, created, expires, last_used) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    params![
                        key.key.id,
                        key.key.name,
                        key.key.role.as_str(),
                        key.key.tenant,
                        json_list(&key.key.namespaces),
                        json_list(&key.key.nodes),
                        key.secret_sha256.to_vec(),
                        key.key.created,
                        key.key.expires,
                        key.key.last_used,
                    ],
                )?;
                Ok(())
            })
            .await
    }

    async fn delete_keys_named(&self, name: &str) -> PlatformResult<Vec<String>> {
        let name = name.to_string();
        self.db
            .call(move |conn| {
                let tx = conn.transaction()?;
                let ids = {
                    let mut stmt =
                        tx.prepare_cached("SELECT id FROM api_keys WHERE name = ?1 ORDER BY id")?;
                    stmt.query_map([&name], |row| row.get::<_, String>(0))?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                };
                tx.execute("DELETE FROM api_keys WHERE name = ?1", [&name])?;
                tx.commit()?;
                Ok(ids)
            })
            .await
    }

    async fn touch_key(&self, id: &str, at: i64) -> PlatformResult<()> {
        let id = id.to_string();
        self.db
            .call(move |conn| {
                conn.execute(
                    "UPDATE api_keys SET last_used = ?2 WHERE id = ?1 \
                     AND (last_used IS NULL OR last_used < ?2)",
                    params![id, at],
                )?;
                Ok(())
            })
            .await
    }

    async fn tenant_exists(&self, name: &str) -> PlatformResult<bool> {
        let name = name.to_string();
        self.db
            .call(move |conn| {
                conn.query_row("SELECT 1 FROM tenants WHERE name = ?1", [&name], |_| Ok(()))
                    .optional()
                    .map(|found| found.is_some())
            })
            .await
    }

    async fn role_bindings(&self) -> PlatformResult<RoleBindings> {
        let text = self
            .db
            .call(|conn| {
                conn.query_row(
                    "SELECT document FROM role_bindings WHERE id = 1",
                    [],
                    |row| row.get::<_, String>(0),
                )
                .optional()
            })
            .await?;
        match text {
            None => Ok(RoleBindings::default()),
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| PlatformError::Store(format!("unreadable role bindings: {e}"))),
        }
    }

    async fn put_role_bindings(&self, document: &RoleBindings) -> PlatformResult<()> {
        let text =
            serde_json::to_string(document).map_err(|e| PlatformError::Store(e.to_string()))?;
        self.db
            .call(move |conn| {
                conn.execute(
                    "INSERT INTO role_bindings (id, document) VALUES (1, ?1) \
                     ON CONFLICT (id) DO UPDATE SET document = excluded.document",
                    [text],
                )
                .map(drop)
            })
            .await
    }

    async fn list_tenants(&self) -> PlatformResult<Vec<StoredTenant>> {
        let rows = self
            .db
            .call(|conn| {
                let mut statement = conn
                    .prepare("SELECT name, spec, generation, created FROM tenants ORDER BY name")?;
                let rows = statement.query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, i64>(3)?,
                    ))
                })?;
                rows.collect::<Result<Vec<_>, _>>()
            })
            .await?;
        rows.into_iter()
            .map(|(name, spec, generation, created)| {
                let spec = serde_json::from_str(&spec).map_err(|e| {
                    PlatformError::Store(format!("tenant '{name}' has an unreadable spec: {e}"))
                })?;
                Ok(StoredTenant {
                    name,
                    spec,
                    generation,
                    created,
                })
            })
            .collect()
    }

    async fn insert_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        let spec =
            serde_json::to_string(&tenant.spec).map_err(|e| PlatformError::Store(e.to_string()))?;
        let (name, generation, created) = (tenant.name.clone(), tenant.generation, tenant.created);
        let inserted = self
            .db
            .call(move |conn| {
                conn.execute(
                    "INSERT OR IGNORE INTO tenants (name, spec, generation, created) \
                     VALUES (?1, ?2, ?3, ?4)",
                    params![name, spec, generation, created],
                )
            })
            .await?;
        if inserted == 0 {
            return Err(PlatformError::AlreadyExists(format!(
                "tenant '{}' already exists",
                tenant.name
            )));
        }
        Ok(())
    }

    async fn update_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        let spec =
            serde_json::to_string(&tenant.spec).map_err(|e| PlatformError::Store(e.to_string()))?;
        let (name, generation) = (tenant.name.clone(), tenant.generation);
        let updated = self
            .db
            .call(move |conn| {
                conn.execute(
                    "UPDATE tenants SET spec = ?2, generation = ?3 WHERE name = ?1",
                    params![name, spec, generation],
                )
            })
            .await?;
        if updated == 0 {
            return Err(tenant_not_found(&tenant.name));
        }
        Ok(())
    }

    async fn delete_tenant(&self, name: &str) -> PlatformResult<()> {
        let owned = name.to_string();
        let deleted = self
            .db
            .call(move |conn| conn.execute("DELETE FROM tenants WHERE name = ?1", [&owned]))
            .await?;
        if deleted == 0 {
            return Err(tenant_not_found(name));
        }
        Ok(())
    }

    async fn reservation(&self, namespaces: &[String]) -> PlatformResult<Reservation> {
        // With no sandbox runtime there are no sandboxes and no snapshots.
        match self.sandboxes() {
            Ok(manager) => Ok(manager.reservation(namespaces).await),
            Err(_) => Ok(Reservation::default()),
        }
    }

    async fn node_names(&self) -> PlatformResult<Vec<String>> {
        Ok(vec![self.node.clone()])
    }

    async fn node_storage(&self) -> PlatformResult<crate::shared::models::node::NodeStorage> {
        let mut out = crate::shared::models::node::NodeStorage::new();
        out.insert(self.node.clone(), storage::entry(&self.disk_pool).await);
        Ok(out)
    }

    async fn node_dedications(&self) -> PlatformResult<std::collections::BTreeMap<String, String>> {
        self.db
            .call(|conn| {
                let mut statement = conn.prepare("SELECT node, tenant FROM node_dedications")?;
                let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
                rows.collect()
            })
            .await
    }

    async fn set_node_dedication(&self, node: &str, tenant: Option<&str>) -> PlatformResult<()> {
        let (node, tenant) = (node.to_string(), tenant.map(str::to_string));
        self.db
            .call(move |conn| {
                match tenant {
                    Some(tenant) => conn.execute(
                        "INSERT INTO node_dedications (node, tenant) VALUES (?1, ?2) \
                         ON CONFLICT (node) DO UPDATE SET tenant = excluded.tenant",
                        params![node, tenant],
                    ),
                    None => conn.execute("DELETE FROM node_dedications WHERE node = ?1", [node]),
                }
                .map(drop)
            })
            .await
    }

    async fn metering(&self) -> PlatformResult<Metering> {
        match self.sandboxes() {
            Ok(manager) => Ok(manager.metering().await),
            Err(_) => Ok(Metering::default()),
        }
    }

    async fn sandbox_size(&self, namespace: &str, name: &str) -> PlatformResult<Reservation> {
        let record = self.sandboxes()?.record(namespace, name).await?;
        Ok(size_of(&record.spec))
    }

    async fn snapshot_size(&self, namespace: &str, name: &str) -> PlatformResult<Reservation> {
        let snapshot = self.sandboxes()?.snapshot_record(namespace, name).await?;
        Ok(size_of(&snapshot.source))
    }

    async fn create_sandbox(&self, new: NewSandbox) -> PlatformResult<()> {
        self.sandboxes()?.create(new).await
    }

    async fn list_sandboxes(&self, namespace: Option<&str>) -> PlatformResult<Vec<Sandbox>> {
        Ok(self.sandboxes()?.list(namespace).await)
    }

    async fn shutdown(&self) {
        if let Ok(sandboxes) = self.sandboxes() {
            sandboxes.drain(Duration::from_secs(5)).await;
        }
    }

    fn sandboxes_version(&self) -> Option<u64> {
        self.sandboxes().ok().map(|s| s.version())
    }

    async fn get_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<Sandbox> {
        self.sandboxes()?.get(namespace, name).await
    }

    async fn delete_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        self.sandboxes()?.delete(namespace, name).await
    }

    async fn exec_sandbox(
        &self,
        namespace: &str,
        name: &str,
        command: &str,
        timeout: Duration,
    ) -> PlatformResult<ExecResponse> {
        self.sandboxes()?
            .exec(namespace, name, command, timeout)
            .await
    }

    async fn sandbox_logs(
        &self,
        namespace: &str,
        name: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String> {
        self.sandboxes()?
            .logs(namespace, name, tail, since_secs)
            .await
    }

    async fn pause_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        self.sandboxes()?.pause(namespace, name).await
    }

    async fn resume_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        self.sandboxes()?.resume(namespace, name).await
    }

    async fn sandbox_metrics(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<SandboxMetrics>> {
        Ok(self.sandboxes()?.metrics(namespace).await)
    }

    fn max_exec_timeout(&self) -> Duration {
        self.max_exec
    }

    async fn snapshot_sandbox(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<()> {
        self.sandboxes()?
            .snapshot(namespace, sandbox, snapshot, kind)
            .await
            .map(drop)
    }

    async fn pause_sandbox_with_snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
    ) -> PlatformResult<()> {
        self.sandboxes()?
            .pause_with_snapshot(namespace, sandbox, snapshot)
            .await
            .map(drop)
    }

    async fn fork_sandbox(
        &self,
        namespace: &str,
        source: &str,
        new_name: &str,
        snapshot: Option<&str>,
        warm: bool,
    ) -> PlatformResult<()> {
        self.sandboxes()?
            .fork(namespace, source, new_name, snapshot, warm)
            .await
    }

    async fn list_snapshots(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
        kind: Option<SnapshotKind>,
    ) -> PlatformResult<Vec<Snapshot>> {
        Ok(self
            .sandboxes()?
            .list_snapshots(namespace, sandbox, kind)
            .await)
    }

    async fn get_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<Snapshot> {
        self.sandboxes()?.get_snapshot(namespace, name).await
    }

    async fn snapshot_backend(&self, namespace: &str, name: &str) -> PlatformResult<String> {
        self.sandboxes()?.snapshot_record(namespace, name).await?;
        Ok("sbxd".to_string())
    }

    async fn delete_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        self.sandboxes()?.delete_snapshot(namespace, name).await
    }

    async fn restore_snapshot(&self, snapshot: &str, plan: RestorePlan) -> PlatformResult<()> {
        let namespace = plan.namespace.clone();
        self.sandboxes()?
            .restore(&namespace, snapshot, plan)
            .await
            .map(drop)
    }

    async fn gc_snapshots(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>> {
        Ok(self.sandboxes()?.gc(namespace, keep_for, dry_run).await)
    }

    fn images(&self) -> Option<Arc<dyn ImageBackend>> {
        Some(self.images.clone())
    }

    async fn store_bootstrap_token(&self, token: &str) -> PlatformResult<String> {
        let path = self.data_dir.join(ADMIN_TOKEN_FILE);
        let tmp = self.data_dir.join(format!(".{ADMIN_TOKEN_FILE}.tmp"));
        let io = |context: &str, source| PlatformError::Io {
            context: format!("{context} {}", tmp.display()),
            source,
        };
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io("cannot create", e))?;
        file.write_all(format!("{token}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| io("cannot write", e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io("cannot rename", e))?;
        Ok(path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
