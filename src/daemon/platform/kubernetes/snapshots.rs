//! The Kubernetes platform's snapshot seam: a snapshot is a VolumeSnapshot of the sandbox's
//! root PVC (built in `objects::snapshots`); fork and restore make a PVC from it.
use async_trait::async_trait;

use super::*;
use crate::daemon::platform::SnapshotBackend;

#[async_trait]
impl SnapshotBackend for KubernetesPlatform {
    async fn snapshot_sandbox(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<()> {
        if let Some(record) = self.sbxd_record(namespace, sandbox).await? {
            return self.sbxd_take_snapshot(&record, snapshot, kind).await;
        }
        self.snapshot(namespace, sandbox, snapshot, kind).await
    }

    async fn pause_sandbox_with_snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
    ) -> PlatformResult<()> {
        if let Some(record) = self.sbxd_record(namespace, sandbox).await? {
            return self
                .sbxd_take_snapshot(&record, snapshot, SnapshotKind::Pause)
                .await;
        }
        self.pause_with_snapshot(namespace, sandbox, snapshot).await
    }

    async fn fork_sandbox(
        &self,
        namespace: &str,
        source: &str,
        new_name: &str,
        snapshot: Option<&str>,
        warm: bool,
    ) -> PlatformResult<()> {
        if let Some(record) = self.sbxd_record(namespace, source).await? {
            return self.sbxd_fork(&record, new_name, snapshot, warm).await;
        }
        if warm {
            return Err(PlatformError::Invalid(
                "warm fork (memory kept) is an sbxd feature: kata-qemu-longhorn forks clone \
                 the root volume only; fork without `warm`"
                    .into(),
            ));
        }
        self.fork(namespace, source, new_name, snapshot).await
    }

    async fn list_snapshots(
        &self,
        namespace: Option<&str>,
        sandbox: Option<&str>,
        kind: Option<SnapshotKind>,
    ) -> PlatformResult<Vec<Snapshot>> {
        let mut list = self.list_snapshot_records(namespace, sandbox, kind).await?;
        let now = crate::shared::timestamp::now_unix();
        let sbxd: Vec<Snapshot> = self
            .sbxd_snapshots(namespace)
            .await?
            .iter()
            .map(|r| objects::sbxd::snapshot_record(r, now))
            .filter(|s| sandbox.is_none_or(|name| s.source_sandbox == name))
            .filter(|s| kind.is_none_or(|k| s.kind == k))
            .collect();
        if !sbxd.is_empty() {
            list.extend(sbxd);
            list.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        }
        Ok(list)
    }

    async fn get_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<Snapshot> {
        if let Some(record) = self.sbxd_snapshot(namespace, name).await? {
            return Ok(objects::sbxd::snapshot_record(
                &record,
                crate::shared::timestamp::now_unix(),
            ));
        }
        self.snapshot_record(namespace, name).await
    }

    async fn snapshot_backend(&self, namespace: &str, name: &str) -> PlatformResult<String> {
        if self.sbxd_snapshot(namespace, name).await?.is_some() {
            return Ok(SBXD_BACKEND.to_string());
        }
        Ok(self.snapshot_template(namespace, name).await?.backend)
    }

    async fn delete_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        if let Some(record) = self.sbxd_snapshot(namespace, name).await? {
            return self.sbxd_delete_snapshot(&record).await;
        }
        self.delete_snapshot_objects(namespace, name).await
    }

    async fn restore_snapshot(&self, snapshot: &str, plan: RestorePlan) -> PlatformResult<()> {
        if let Some(record) = self.sbxd_snapshot(&plan.namespace, snapshot).await? {
            if self
                .sbxd_record(&plan.namespace, &plan.new_name)
                .await?
                .is_some()
            {
                return Err(PlatformError::AlreadyExists(format!(
                    "sandbox '{}' already exists in namespace '{}'",
                    plan.new_name, plan.namespace
                )));
            }
            return self.sbxd_restore(&record, plan).await;
        }
        self.restore(snapshot, plan).await
    }

    async fn gc_snapshots(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>> {
        let mut results = self.gc(namespace, keep_for, dry_run).await?;
        results.extend(self.sbxd_gc(namespace, keep_for, dry_run).await?);
        Ok(results)
    }
}
