//! Lifetimes on the embedded default: the deadline and the idle timeout live in the sandbox's
//! stored spec (they survive a restart); its last activity in memory (a restart counts as
//! activity, so nothing is paused for the time the daemon was down).
use super::sandboxes::{LocalSandboxes, Record};
use crate::daemon::platform::{Lifetime, PlatformResult};
use crate::shared::timestamp::now_unix;

impl LocalSandboxes {
    /// Sets a sandbox's lifetime, stored with its spec.
    pub async fn set_lifetime(
        &self,
        namespace: &str,
        name: &str,
        lifetime: Lifetime,
    ) -> PlatformResult<()> {
        let record = self.record(namespace, name).await?;
        self.update(&record.spec, |r: &mut Record| {
            r.spec.expires_at = lifetime.expires_at;
            r.spec.idle_timeout_seconds = lifetime.idle_timeout_seconds;
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
