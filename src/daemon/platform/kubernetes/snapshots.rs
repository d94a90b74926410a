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
        self.snapshot(namespace, sandbox, snapshot, kind).await
    }

    async fn pause_sandbox_with_snapshot(
        &self,
        namespace: &str,
        sandbox: &str,
        snapshot: &str,
    ) -> PlatformResult<()> {
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
        self.list_snapshot_records(namespace, sandbox, kind).await
    }

    async fn get_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<Snapshot> {
        self.snapshot_record(namespace, name).await
    }

    async fn snapshot_backend(&self, namespace: &str, name: &str) -> PlatformResult<String> {
        Ok(self.snapshot_template(namespace, name).await?.backend)
    }

    async fn delete_snapshot(&self, namespace: &str, name: &str) -> PlatformResult<()> {
        self.delete_snapshot_objects(namespace, name).await
    }

    async fn restore_snapshot(&self, snapshot: &str, plan: RestorePlan) -> PlatformResult<()> {
        self.restore(snapshot, plan).await
    }

    async fn gc_snapshots(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>> {
        self.gc(namespace, keep_for, dry_run).await
    }
}
