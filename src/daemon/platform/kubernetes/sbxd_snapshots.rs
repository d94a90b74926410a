//! Snapshots, forks, restores and GC of the `sbxd` backend on Kubernetes: taken by the agent of
//! the node that runs the sandbox (layers, and CRIU images for a warm fork, stay on that node,
//! so forks and restores run there too), recorded as `SbxdSnapshot` objects that every replica
//! reads (`objects::sbxd`). After each change on a node this replica brings the records of
//! that node in line with what its agent holds.
use std::time::Duration;

use kube::api::{Api, DeleteParams, PostParams};
use reqwest::Method;

use super::objects::sbxd::{self as records, SbxdSandboxObject, SbxdSnapshotObject};
use super::sbxd::names_of;
use super::*;
use crate::shared::agent::{
    ForkCall, GC_PATH, GcCall, SANDBOXES_PATH, SNAPSHOTS_PATH, SnapshotCall,
};
use crate::shared::models::snapshot::SnapshotKind;

fn snapshot_path(namespace: &str, name: &str) -> String {
    format!("{SNAPSHOTS_PATH}/{namespace}/{name}")
}

impl KubernetesPlatform {
    fn sbxd_snapshot_api(&self, namespace: &str) -> Api<SbxdSnapshotObject> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// The record of the sbxd snapshot `name`, when it is one.
    pub(super) async fn sbxd_snapshot(
        &self,
        namespace: &str,
        name: &str,
    ) -> PlatformResult<Option<SbxdSnapshotObject>> {
        if let Some(cached) = self.sbxd_snapshot_cache.get(namespace, name) {
            return Ok(Some(SbxdSnapshotObject::clone(&cached)));
        }
        // A VolumeSnapshot, as this replica's watch shows it (the kql snapshots' calls).
        if self.snapshot_cache.get(namespace, name).is_some() {
            return Ok(None);
        }
        self.sbxd_snapshot_api(namespace)
            .get_opt(name)
            .await
            .map_err(|e| kube_error(&format!("snapshot {name}"), e))
    }

    /// The records of the sbxd snapshots of a namespace (all when `None`), from the watch.
    pub(super) async fn sbxd_snapshots(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<SbxdSnapshotObject>>> {
        match self.sbxd_snapshot_cache.list(namespace) {
            Some(records) => Ok(records),
            None => self.read_sbxd_snapshots(namespace).await,
        }
    }

    /// The records, read from the API server.
    pub(super) async fn read_sbxd_snapshots(
        &self,
        namespace: Option<&str>,
    ) -> PlatformResult<Vec<Arc<SbxdSnapshotObject>>> {
        let api: Api<SbxdSnapshotObject> = match namespace {
            Some(ns) => self.sbxd_snapshot_api(ns),
            None => Api::all(self.client.clone()),
        };
        read_managed(api, "list sbxd snapshots").await
    }

    /// Brings the snapshot records of `node` (in `namespace`, or all) in line with what its
    /// agent holds: missing ones are written, gone ones removed.
    pub(super) async fn sbxd_sync_snapshots(
        &self,
        node: &str,
        namespace: Option<&str>,
    ) -> PlatformResult<()> {
        let query = namespace
            .map(|ns| format!("?namespace={ns}"))
            .unwrap_or_default();
        let held: Vec<Snapshot> = self
            .agents
            .call(
                &self.client,
                node,
                Method::GET,
                &format!("{SNAPSHOTS_PATH}{query}"),
                None,
                None,
            )
            .await?;
        let recorded: Vec<Arc<SbxdSnapshotObject>> = self
            .read_sbxd_snapshots(namespace)
            .await?
            .into_iter()
            .filter(|r| r.spec.node == node)
            .collect();
        let key = |ns: &Option<String>, name: &Option<String>| {
            (
                ns.clone().unwrap_or_default(),
                name.clone().unwrap_or_default(),
            )
        };
        for snapshot in &held {
            let known = recorded.iter().any(|r| {
                key(&r.metadata.namespace, &r.metadata.name)
                    == (snapshot.namespace.clone(), snapshot.name.clone())
            });
            if known {
                continue;
            }
            let object = records::snapshot_object(snapshot, node);
            match self
                .sbxd_snapshot_api(&snapshot.namespace)
                .create(&PostParams::default(), &object)
                .await
            {
                Ok(written) => {
                    self.sbxd_snapshot_cache
                        .settled(
                            &snapshot.namespace,
                            &snapshot.name,
                            written.metadata.resource_version.as_deref(),
                        )
                        .await
                }
                Err(e) if conflict(&e) => {}
                Err(e) => return Err(kube_error("record an sbxd snapshot", e)),
            }
        }
        for record in recorded {
            let (ns, name) = key(&record.metadata.namespace, &record.metadata.name);
            if held.iter().any(|s| s.namespace == ns && s.name == name) {
                continue;
            }
            match self
                .sbxd_snapshot_api(&ns)
                .delete(&name, &DeleteParams::default())
                .await
            {
                Ok(_) => self.sbxd_snapshot_cache.settled(&ns, &name, None).await,
                Err(e) if missing(&e) => {}
                Err(e) => return Err(kube_error("remove an sbxd snapshot's record", e)),
            }
        }
        Ok(())
    }

    /// Snapshots an sbxd sandbox (`pause`: pauses it and snapshots it frozen).
    pub(super) async fn sbxd_take_snapshot(
        &self,
        record: &SbxdSandboxObject,
        snapshot: &str,
        kind: SnapshotKind,
    ) -> PlatformResult<()> {
        let (namespace, name) = names_of(record);
        if self.sbxd_snapshot(&namespace, snapshot).await?.is_some()
            || self.volume_snapshot(&namespace, snapshot).await.is_ok()
        {
            return Err(PlatformError::AlreadyExists(format!(
                "snapshot '{snapshot}' already exists in namespace '{namespace}'"
            )));
        }
        let node = &record.spec.node;
        self.agents
            .call::<serde_json::Value>(
                &self.client,
                node,
                Method::POST,
                &format!("{SANDBOXES_PATH}/{namespace}/{name}/snapshot"),
                Some(serde_json::json!(SnapshotCall {
                    snapshot: snapshot.to_string(),
                    kind,
                })),
                Some(self.settings.snapshot_timeout),
            )
            .await?;
        if kind == SnapshotKind::Pause {
            self.sbxd_refresh(&namespace, &name, node).await;
        }
        self.sbxd_sync_snapshots(node, Some(&namespace)).await
    }

    /// Forks an sbxd sandbox on its node: the clone's record there first, then the agent's
    /// fork (cold: the source's files; warm: its processes too); a refusal removes the record.
    pub(super) async fn sbxd_fork(
        &self,
        source: &SbxdSandboxObject,
        new_name: &str,
        snapshot: Option<&str>,
        warm: bool,
    ) -> PlatformResult<()> {
        let (namespace, name) = names_of(source);
        self.sbxd_place_record(&namespace, new_name, &source.spec)
            .await?;
        let node = &source.spec.node;
        let forked = self
            .agents
            .call::<serde_json::Value>(
                &self.client,
                node,
                Method::POST,
                &format!("{SANDBOXES_PATH}/{namespace}/{name}/fork"),
                Some(serde_json::json!(ForkCall {
                    new_name: new_name.to_string(),
                    snapshot: snapshot.map(str::to_string),
                    warm,
                })),
                Some(self.settings.fork_timeout),
            )
            .await;
        self.sbxd_settle_new(&namespace, new_name, node, forked)
            .await
    }

    /// Restores an sbxd snapshot into a new sandbox on the snapshot's node.
    pub(super) async fn sbxd_restore(
        &self,
        snapshot: &SbxdSnapshotObject,
        plan: RestorePlan,
    ) -> PlatformResult<()> {
        let (namespace, name) = (
            plan.namespace.clone(),
            snapshot.metadata.name.clone().unwrap_or_default(),
        );
        let node = snapshot.spec.node.clone();
        if let Some(allowed) = &plan.nodes {
            if !allowed.contains(&node) {
                return Err(PlatformError::Invalid(format!(
                    "snapshot '{name}' is on node {node}, which this sandbox may not use (its nodes: {})",
                    allowed.join(", ")
                )));
            }
        }
        let source = self.sbxd_snapshot_source(&namespace, &name, &node).await?;
        let spec = records::SbxdSandboxSpec {
            node: node.clone(),
            image: plan.image.clone().unwrap_or(source.image),
            cpu_millis: plan.cpu_millis.or(source.cpu_millis).map(|v| v as i64),
            memory_bytes: plan.memory_bytes.or(source.memory_bytes).map(|v| v as i64),
            ephemeral_bytes: plan
                .ephemeral_bytes
                .or(source.ephemeral_bytes)
                .map(|v| v as i64),
        };
        let new_name = plan.new_name.clone();
        self.sbxd_place_record(&namespace, &new_name, &spec).await?;
        let restored = self
            .agents
            .call::<serde_json::Value>(
                &self.client,
                &node,
                Method::POST,
                &format!("{}/restore", snapshot_path(&namespace, &name)),
                Some(serde_json::to_value(&plan).unwrap_or_default()),
                None,
            )
            .await;
        self.sbxd_settle_new(&namespace, &new_name, &node, restored)
            .await
    }

    /// What the sandbox a snapshot was taken of was: its image and limits.
    pub(super) async fn sbxd_snapshot_source(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
    ) -> PlatformResult<crate::shared::agent::SnapshotSource> {
        self.agents
            .call(
                &self.client,
                node,
                Method::GET,
                &format!("{}/source", snapshot_path(namespace, name)),
                None,
                None,
            )
            .await
    }

    /// Writes the record of a sandbox an agent is about to make from another (fork, restore).
    async fn sbxd_place_record(
        &self,
        namespace: &str,
        name: &str,
        spec: &records::SbxdSandboxSpec,
    ) -> PlatformResult<()> {
        if self.sandbox_deployment(namespace, name).await.is_ok() {
            return Err(PlatformError::AlreadyExists(format!(
                "sandbox '{name}' already exists in namespace '{namespace}'"
            )));
        }
        let mut object = SbxdSandboxObject::new(name, spec.clone());
        object.metadata.namespace = Some(namespace.to_string());
        object.metadata.labels = Some(records::labels(&spec.node));
        match self
            .sbxd_api(namespace)
            .create(&PostParams::default(), &object)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if conflict(&e) => Err(PlatformError::AlreadyExists(format!(
                "sandbox '{name}' already exists in namespace '{namespace}'"
            ))),
            Err(e) => Err(kube_error("create the sandbox's SbxdSandbox record", e)),
        }
    }

    /// After an agent made (or refused to make) a sandbox from another: its status written,
    /// the node's snapshot records in line; on a refusal its record removed again.
    async fn sbxd_settle_new(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        made: PlatformResult<serde_json::Value>,
    ) -> PlatformResult<()> {
        if let Err(error) = made {
            if let Err(e) = self
                .sbxd_api(namespace)
                .delete(name, &DeleteParams::default())
                .await
            {
                if !missing(&e) {
                    tracing::warn!(%namespace, %name, error = %e,
                        "cannot remove the record of a sandbox its agent did not make");
                }
            }
            // A fork's intermediate snapshot may have been made and kept.
            let _ = self.sbxd_sync_snapshots(node, Some(namespace)).await;
            return Err(error);
        }
        self.sbxd_refresh(namespace, name, node).await;
        self.sbxd_sync_snapshots(node, Some(namespace)).await
    }

    /// Deletes an sbxd snapshot: the agent's layers, then the record.
    pub(super) async fn sbxd_delete_snapshot(
        &self,
        record: &SbxdSnapshotObject,
    ) -> PlatformResult<()> {
        let namespace = record.metadata.namespace.clone().unwrap_or_default();
        let name = record.metadata.name.clone().unwrap_or_default();
        match self
            .agents
            .call::<serde_json::Value>(
                &self.client,
                &record.spec.node,
                Method::DELETE,
                &snapshot_path(&namespace, &name),
                None,
                None,
            )
            .await
        {
            Ok(_) | Err(PlatformError::NotFound(_)) => {}
            Err(e) if self.may_forget(&record.spec.node, &e).await => {}
            Err(e) => return Err(e),
        }
        match self
            .sbxd_snapshot_api(&namespace)
            .delete(&name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if missing(&e) => {}
            Err(e) => {
                return Err(kube_error(
                    &format!("delete the record of snapshot {name}"),
                    e,
                ));
            }
        }
        self.sbxd_snapshot_cache
            .settled(&namespace, &name, None)
            .await;
        Ok(())
    }

    /// The GC sweep on every node holding sbxd snapshots (of `namespace`, or all); a node whose
    /// agent does not answer is skipped (logged) and swept next time.
    pub(super) async fn sbxd_gc(
        &self,
        namespace: Option<&str>,
        keep_for: Duration,
        dry_run: bool,
    ) -> PlatformResult<Vec<GcResult>> {
        let nodes: std::collections::BTreeSet<String> = self
            .sbxd_snapshots(namespace)
            .await?
            .iter()
            .map(|r| r.spec.node.clone())
            .collect();
        let mut out = Vec::new();
        for node in nodes {
            let swept = self
                .agents
                .call::<Vec<GcResult>>(
                    &self.client,
                    &node,
                    Method::POST,
                    GC_PATH,
                    Some(serde_json::json!(GcCall {
                        namespace: namespace.map(str::to_string),
                        keep_for_seconds: keep_for.as_secs(),
                        dry_run,
                    })),
                    None,
                )
                .await;
            match swept {
                Ok(results) => {
                    out.extend(results);
                    if !dry_run {
                        self.sbxd_sync_snapshots(&node, namespace).await?;
                    }
                }
                Err(e) => tracing::warn!(%node, error = %e, "no GC sweep on a node"),
            }
        }
        Ok(out)
    }
}
