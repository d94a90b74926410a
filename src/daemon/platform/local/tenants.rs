//! The embedded default's tenancy seam: tenants and node dedications in SQLite, this host as
//! the one node, usage and metering from the sandbox records.
use async_trait::async_trait;

use super::*;
use crate::daemon::platform::TenantStore;

#[async_trait]
impl TenantStore for LocalPlatform {
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

    async fn list_tenants(&self) -> PlatformResult<Vec<StoredTenant>> {
        let rows = self
            .db
            .call(|conn| {
                let mut statement = conn.prepare(
                    "SELECT name, spec, generation, created, status, labels FROM tenants \
                     ORDER BY name",
                )?;
                let rows = statement.query_map([], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, i64>(2)?,
                        row.get::<_, i64>(3)?,
                        row.get::<_, Option<String>>(4)?,
                        row.get::<_, String>(5)?,
                    ))
                })?;
                rows.collect::<Result<Vec<_>, _>>()
            })
            .await?;
        rows.into_iter()
            .map(|(name, spec, generation, created, status, labels)| {
                let spec = serde_json::from_str(&spec).map_err(|e| {
                    PlatformError::Store(format!("tenant '{name}' has an unreadable spec: {e}"))
                })?;
                // A status that does not read is recomputed, not an error.
                let status = status.and_then(|s| serde_json::from_str(&s).ok());
                let labels = serde_json::from_str(&labels).map_err(|e| {
                    PlatformError::Store(format!("tenant '{name}' has unreadable labels: {e}"))
                })?;
                Ok(StoredTenant {
                    name,
                    spec,
                    generation,
                    created,
                    status,
                    labels,
                })
            })
            .collect()
    }

    async fn insert_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        let (spec, labels) = stored_json(tenant)?;
        let (name, generation, created) = (tenant.name.clone(), tenant.generation, tenant.created);
        let inserted = self
            .db
            .call(move |conn| {
                conn.execute(
                    "INSERT OR IGNORE INTO tenants (name, spec, generation, created, labels) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![name, spec, generation, created, labels],
                )
            })
            .await?;
        if inserted == 0 {
            return Err(PlatformError::AlreadyExists(format!(
                "tenant '{}' already exists",
                tenant.name
            )));
        }
        self.apply_egress_deny(&tenant.spec).await
    }

    async fn update_tenant(&self, tenant: &StoredTenant) -> PlatformResult<()> {
        let (spec, labels) = stored_json(tenant)?;
        let (name, generation) = (tenant.name.clone(), tenant.generation);
        let updated = self
            .db
            .call(move |conn| {
                conn.execute(
                    "UPDATE tenants SET spec = ?2, generation = ?3, labels = ?4 WHERE name = ?1",
                    params![name, spec, generation, labels],
                )
            })
            .await?;
        if updated == 0 {
            return Err(tenant_not_found(&tenant.name));
        }
        self.apply_egress_deny(&tenant.spec).await
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

    async fn write_tenant_status(&self, name: &str, status: &TenantStatus) -> PlatformResult<()> {
        let status =
            serde_json::to_string(status).map_err(|e| PlatformError::Store(e.to_string()))?;
        let name = name.to_string();
        self.db
            .call(move |conn| {
                conn.execute(
                    "UPDATE tenants SET status = ?2 WHERE name = ?1",
                    params![name, status],
                )
            })
            .await
            .map(drop)
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
        out.insert(
            self.node.clone(),
            crate::runtime::storage::Pools::own(&self.disk_pool)
                .entry()
                .await,
        );
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
}

/// A tenant's spec and labels as the JSON the table holds.
impl LocalPlatform {
    /// A tenant's deny list onto its sandboxes, once they are loaded (before that, start-up
    /// reads each sandbox's stored spec).
    async fn apply_egress_deny(
        &self,
        spec: &crate::shared::models::tenant::TenantSpec,
    ) -> PlatformResult<()> {
        match self.sandboxes.get() {
            Some(Ok(sandboxes)) => sandboxes.apply_tenant_egress_deny(spec).await,
            _ => Ok(()),
        }
    }
}

fn stored_json(tenant: &StoredTenant) -> PlatformResult<(String, String)> {
    let store = |e: serde_json::Error| PlatformError::Store(e.to_string());
    Ok((
        serde_json::to_string(&tenant.spec).map_err(store)?,
        serde_json::to_string(&tenant.labels).map_err(store)?,
    ))
}
