//! The embedded default's identity seam: API keys and role bindings in SQLite, the first
//! admin token in a file of the data dir only root can read.
use async_trait::async_trait;

use super::*;
use crate::daemon::platform::IdentityStore;

#[async_trait]
impl IdentityStore for LocalPlatform {
    async fn list_keys(&self) -> PlatformResult<Vec<StoredKey>> {
        self.db
            .call(|conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT id, name, role, tenant, namespaces, nodes, secret_sha256, created, \
                     expires, last_used, labels FROM api_keys ORDER BY created, id",
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
                     secret_sha256, created, expires, last_used, labels) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
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
                        serde_json::to_string(&key.key.labels)
                            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?,
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
