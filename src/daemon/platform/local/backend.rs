//! The `SandboxBackend` seam of the embedded default: each call handed to the sandbox
//! manager (`sandboxes.rs`), its exec and logs (`exec.rs`).
use std::time::Duration;

use async_trait::async_trait;

use super::LocalPlatform;
use super::exec::check_container;
use crate::daemon::platform::{NewSandbox, PlatformResult, SandboxBackend};
use crate::shared::exec_stream::{ExecSession, ExecStreamQuery};
use crate::shared::models::sandbox::{ExecResponse, Sandbox, SandboxMetrics};

/// The embedded default's sandbox seam, over [`LocalSandboxes`].
#[async_trait]
impl SandboxBackend for LocalPlatform {
    fn backends(&self) -> &'static [&'static str] {
        &[super::BACKEND]
    }

    async fn create_sandbox(&self, new: NewSandbox) -> PlatformResult<()> {
        self.sandboxes()?.create(new).await
    }

    async fn list_sandboxes(&self, namespace: Option<&str>) -> PlatformResult<Vec<Sandbox>> {
        Ok(self.sandboxes()?.list(namespace).await)
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

    async fn exec_stream(
        &self,
        namespace: &str,
        name: &str,
        request: &ExecStreamQuery,
    ) -> PlatformResult<ExecSession> {
        let request = crate::runtime::engine::StreamRequest {
            command: request.command.clone().unwrap_or_default(),
            tty: request.tty,
            stdin: request.stdin,
            size: request.size(),
        };
        self.sandboxes()?
            .exec_stream(namespace, name, &request)
            .await
    }

    async fn sandbox_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String> {
        check_container(name, container)?;
        self.sandboxes()?
            .logs(namespace, name, tail, since_secs)
            .await
    }

    async fn follow_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<tokio::sync::mpsc::Receiver<bytes::Bytes>> {
        check_container(name, container)?;
        self.sandboxes()?
            .follow_logs(namespace, name, tail, since_secs)
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

    async fn set_lifetime(
        &self,
        namespace: &str,
        name: &str,
        lifetime: crate::daemon::platform::Lifetime,
    ) -> PlatformResult<()> {
        self.sandboxes()?
            .set_lifetime(namespace, name, lifetime)
            .await
    }

    async fn touch_sandbox(&self, namespace: &str, name: &str) {
        if let Ok(sandboxes) = self.sandboxes() {
            if let Ok(record) = sandboxes.record(namespace, name).await {
                sandboxes.touch(&record.spec.id);
            }
        }
    }

    fn max_exec_timeout(&self) -> Duration {
        self.max_exec
    }
}
