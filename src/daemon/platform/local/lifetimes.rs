//! Lifetimes on the embedded default: the deadline and the idle timeout live in the sandbox's
//! stored spec (they survive a restart); its last activity in memory (a restart counts as
//! activity, so nothing is paused for the time the daemon was down).
use std::sync::atomic::Ordering;

use super::sandboxes::LocalSandboxes;
use crate::daemon::platform::{Lifetime, PlatformError, PlatformResult};
use crate::shared::timestamp::now_unix;

impl LocalSandboxes {
    /// Sets a sandbox's lifetime, stored with its spec.
    pub async fn set_lifetime(
        &self,
        namespace: &str,
        name: &str,
        lifetime: Lifetime,
    ) -> PlatformResult<()> {
        let key = (namespace.to_string(), name.to_string());
        let spec = {
            let mut records = self.records.write().await;
            let record = records.get_mut(&key).ok_or_else(|| {
                PlatformError::NotFound(format!(
                    "sandbox '{name}' not found in namespace '{namespace}'"
                ))
            })?;
            record.spec.expires_at = lifetime.expires_at;
            record.spec.idle_timeout_seconds = lifetime.idle_timeout_seconds;
            self.version.fetch_add(1, Ordering::SeqCst);
            record.spec.clone()
        };
        // Only the spec changed: its column alone is written (the status updates leave it).
        let json = serde_json::to_string(&spec).map_err(|e| PlatformError::Store(e.to_string()))?;
        self.db
            .call(move |conn| {
                conn.execute(
                    "UPDATE sandboxes SET spec = ?2 WHERE id = ?1",
                    rusqlite::params![spec.id, json],
                )
                .map(drop)
            })
            .await
    }

    /// Records activity in the sandbox of id `id` now.
    pub fn touch(&self, id: &str) {
        self.activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), now_unix());
    }

    /// The last activity in the sandbox of id `id`, unix seconds.
    pub(super) fn last_activity(&self, id: &str) -> Option<i64> {
        self.activity
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .copied()
    }
}
