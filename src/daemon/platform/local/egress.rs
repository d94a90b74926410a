//! Tenants' deny lists on the embedded default: a sandbox takes its tenant's
//! `limits.egressDeny` when it is made (create, restore, fork), and a change of the
//! tenant rewrites the egress rules of its sandboxes in place.
use std::sync::atomic::Ordering;

use super::sandboxes::{LocalSandboxes, runtime_error};
use crate::daemon::platform::{PlatformError, PlatformResult};
use crate::runtime::network::NetworkError;
use crate::shared::models::tenant::TenantSpec;

impl LocalSandboxes {
    /// The deny list of the tenant owning `namespace`, or None when no tenant of this
    /// database owns it (always so on a node's agent, whose platform sends the list).
    pub(super) async fn owner_egress_deny(
        &self,
        namespace: &str,
    ) -> PlatformResult<Option<Vec<String>>> {
        let specs = self
            .db
            .call(|conn| {
                let mut statement = conn.prepare("SELECT spec FROM tenants")?;
                let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
                rows.collect::<Result<Vec<_>, _>>()
            })
            .await?;
        for text in specs {
            // A spec that does not read is the tenant listing's error to report, not a
            // create's: such a tenant is skipped here.
            let Ok(spec) = serde_json::from_str::<TenantSpec>(&text) else {
                continue;
            };
            if spec.namespaces.iter().any(|n| n == namespace) {
                return Ok(Some(spec.egress_deny()));
            }
        }
        Ok(None)
    }

    /// Gives the sandboxes of `spec`'s namespaces its deny list: stored with each sandbox and
    /// written into the rules of those attached now (one nft transaction each; a connection
    /// the new rules refuse is cut at its next packet).
    pub async fn apply_tenant_egress_deny(&self, spec: &TenantSpec) -> PlatformResult<()> {
        let deny = spec.egress_deny();
        let changed: Vec<_> = {
            let mut records = self.records.write().await;
            records
                .iter_mut()
                .filter(|((namespace, _), r)| {
                    spec.namespaces.contains(namespace) && r.spec.egress_deny != deny
                })
                .map(|(_, record)| {
                    record.spec.egress_deny = deny.clone();
                    record.spec.clone()
                })
                .collect()
        };
        if changed.is_empty() {
            return Ok(());
        }
        self.version.fetch_add(1, Ordering::SeqCst);
        for sandbox in changed {
            let json =
                serde_json::to_string(&sandbox).map_err(|e| PlatformError::Store(e.to_string()))?;
            let id = sandbox.id.clone();
            self.db
                .call(move |conn| {
                    conn.execute(
                        "UPDATE sandboxes SET spec = ?2 WHERE id = ?1",
                        rusqlite::params![id, json],
                    )
                    .map(drop)
                })
                .await?;
            if !self.sbxd.network_started() {
                continue;
            }
            let egress = sandbox.egress_policy().map_err(runtime_error)?;
            let network = self.sbxd.network().await.map_err(runtime_error)?;
            match network.set_egress(&sandbox.id, sandbox.slot, &egress).await {
                // Not running: its next start writes the rules from the stored spec.
                Ok(()) | Err(NetworkError::NotAttached(_)) => {}
                Err(e) => return Err(runtime_error(e.into())),
            }
        }
        Ok(())
    }
}
