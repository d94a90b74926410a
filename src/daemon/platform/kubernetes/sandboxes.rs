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
        &[KQL_BACKEND, KFD_BACKEND, SBXD_BACKEND]
    }

    fn root_disk_bytes(&self, backend: &str) -> Option<u64> {
        (backend == KQL_BACKEND).then_some(self.settings.root_disk_bytes)
    }

    async fn create_sandbox(&self, new: NewSandbox) -> PlatformResult<()> {
        if new.backend == SBXD_BACKEND {
            return self.sbxd_create(new).await;
        }
        // The name may be an sbxd sandbox's. The watch cache answers when in step, not a read
        // of the API server on every create: a create of the same name on another replica a
        // moment ago races either way (two creates of one name on different backends are not
        // serialised), and in a tenant's namespaces the quota check from the caches has waited
        // for them to hold every write made under the tenant's Lease.
        let taken = if self.sbxd_cache.in_step() {
            self.sbxd_cache.get(&new.namespace, &new.name).is_some()
        } else {
            self.sbxd_record(&new.namespace, &new.name).await?.is_some()
        };
        if taken {
            return Err(PlatformError::AlreadyExists(format!(
                "sandbox '{}' already exists in namespace '{}'",
                new.name, new.namespace
            )));
        }
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
            launch::Tenancy::Known(new.owner.as_ref()),
        )
        .await
    }

    async fn list_sandboxes(&self, namespace: Option<&str>) -> PlatformResult<Vec<Sandbox>> {
        let deployments = self.sandbox_deployments(namespace).await?;
        let mut list = self.records(namespace, &deployments).await?;
        let sbxd = self.sbxd_records(namespace).await?;
        if !sbxd.is_empty() {
            list.extend(sbxd.iter().map(|r| Self::sbxd_sandbox(r)));
            list.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        }
        Ok(list)
    }

    fn sandboxes_version(&self) -> Option<u64> {
        Some(
            self.deployment_cache.version()?
                + self.pod_cache.version()?
                + self.sbxd_cache.version()?,
        )
    }

    async fn get_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<Sandbox> {
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return Ok(Self::sbxd_sandbox(&record));
        }
        let d = self.sandbox_deployment(namespace, name).await?;
        let mut records = self.records(Some(namespace), &[d]).await?;
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
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return self.sbxd_delete(&record).await;
        }
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
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return self.sbxd_exec(&record, command, timeout).await;
        }
        self.exec(namespace, name, command, timeout).await
    }

    async fn exec_stream(
        &self,
        namespace: &str,
        name: &str,
        request: &crate::shared::exec_stream::ExecStreamQuery,
    ) -> PlatformResult<crate::shared::exec_stream::ExecSession> {
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return self.sbxd_exec_stream(&record, request).await;
        }
        self.exec_stream(namespace, name, request).await
    }

    async fn sandbox_logs(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail: usize,
        since_secs: u64,
    ) -> PlatformResult<String> {
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return self.sbxd_logs(&record, container, tail, since_secs).await;
        }
        self.logs(namespace, name, container, tail, since_secs)
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
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return self
                .sbxd_follow_logs(&record, container, tail, since_secs)
                .await;
        }
        self.follow_logs(namespace, name, container, tail, since_secs)
            .await
    }

    async fn pause_sandbox(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return self.sbxd_pause(&record, true).await;
        }
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
        if let Some(record) = self.sbxd_record(namespace, name).await? {
            return self.sbxd_pause(&record, false).await;
        }
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
        let sbxd = self.sbxd_metrics(namespace).await?;
        let mut all = match self.metrics(namespace).await {
            Ok(metrics) => metrics,
            // A cluster without metrics-server still has its agents' figures.
            Err(PlatformError::Unavailable(_)) if !sbxd.is_empty() => Vec::new(),
            Err(e) => return Err(e),
        };
        all.extend(sbxd);
        all.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Ok(all)
    }

    fn max_exec_timeout(&self) -> Duration {
        Duration::from_secs(3600)
    }

    /// The sbxd sandboxes of lost agents read Failed; and, the leader's periodic work here
    /// too, sbx's NetworkPolicies are kept (`policies`).
    async fn check_nodes(&self) -> PlatformResult<()> {
        let policies = self.keep_policies().await;
        self.mark_lost_agents().await?;
        policies
    }

    async fn set_lifetime(
        &self,
        namespace: &str,
        name: &str,
        lifetime: crate::daemon::platform::Lifetime,
    ) -> PlatformResult<()> {
        self.set_lifetime_annotations(namespace, name, lifetime)
            .await
    }

    async fn touch_sandbox(&self, namespace: &str, name: &str) {
        self.write_activity(namespace, name).await
    }

    async fn due_sandboxes(&self, now: i64) -> PlatformResult<Vec<(String, String)>> {
        self.due(now).await
    }
}
