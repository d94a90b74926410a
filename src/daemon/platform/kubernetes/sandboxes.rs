//! The Kubernetes platform's sandbox seam: a sandbox is a Deployment with its root PVC, env
//! Secret and egress NetworkPolicy (built in `objects::sandboxes`, written in `workloads`),
//! read from the watch caches.
use async_trait::async_trait;

use super::*;
use crate::daemon::platform::SandboxBackend;
use crate::shared::models::sandbox::SandboxStatus;

#[async_trait]
impl SandboxBackend for KubernetesPlatform {
    fn backends(&self) -> &'static [&'static str] {
        &[KQL_BACKEND, KFD_BACKEND]
    }

    fn root_disk_bytes(&self, backend: &str) -> Option<u64> {
        (backend == KQL_BACKEND).then_some(self.settings.root_disk_bytes)
    }

    async fn create_sandbox(&self, new: NewSandbox) -> PlatformResult<()> {
        let template = objects::sandboxes::SandboxTemplate::of(&new, self.settings.root_disk_bytes);
        let env = if new.env.is_empty() {
            workloads::Env::None
        } else {
            workloads::Env::Values(&new.env)
        };
        self.launch(
            &new.namespace,
            &new.name,
            &template,
            workloads::Root::Fresh,
            env,
        )
        .await
    }

    async fn list_sandboxes(&self, namespace: Option<&str>) -> PlatformResult<Vec<Sandbox>> {
        let deployments = self.sandbox_deployments(namespace).await?;
        self.records(namespace, &deployments).await
    }

    fn sandboxes_version(&self) -> Option<u64> {
        Some(self.deployment_cache.version()? + self.pod_cache.version()?)
    }

    async fn get_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<Sandbox> {
        let d = self.sandbox_deployment(namespace, name).await?;
        let mut records = self.records(Some(namespace), &[Arc::new(d)]).await?;
        let mut record = records
            .pop()
            .ok_or_else(|| PlatformError::Store("a sandbox record went missing".into()))?;
        if record.status == SandboxStatus::Pending && record.error_message.is_empty() {
            if let Some(reason) = self.pending_reason(namespace, name).await? {
                record.error_message = reason;
            }
        }
        Ok(record)
    }

    async fn delete_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        self.sandbox_deployment(namespace, name).await?;
        self.delete_sandbox_objects(namespace, name).await
    }

    async fn exec_sandbox(
        &self,
        namespace: &str,
        name: &str,
        command: &str,
        timeout: Duration,
    ) -> PlatformResult<ExecResponse> {
        self.exec(namespace, name, command, timeout).await
    }

    async fn sandbox_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String> {
        self.logs(namespace, name, container, tail, since_secs)
            .await
    }

    async fn pause_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        let record = self.get_sandbox(namespace, name).await?;
        if record.status == crate::shared::models::sandbox::SandboxStatus::Paused {
            return Ok(());
        }
        if record.status != crate::shared::models::sandbox::SandboxStatus::Running {
            return Err(PlatformError::Conflict(format!(
                "sandbox '{name}' is {}: only a running sandbox can be paused",
                record.status
            )));
        }
        self.scale(namespace, name, 0).await
    }

    async fn resume_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        let d = self.sandbox_deployment(namespace, name).await?;
        if d.spec.replicas == Some(0) {
            self.scale(namespace, name, 1).await
        } else {
            Ok(())
        }
    }

    async fn sandbox_metrics(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<SandboxMetrics>> {
        self.metrics(namespace).await
    }

    fn max_exec_timeout(&self) -> Duration {
        Duration::from_secs(3600)
    }
}
