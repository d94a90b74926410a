//! The SbxdSandbox custom resource (`sbxdsandboxes.sbx.io`, namespaced): the cluster's record of
//! a sandbox of the `sbxd` backend, which the sbx agent of one node runs. `sbx serve` writes
//! the spec (its node and what it reserves) when it places the sandbox; the node's agent
//! writes the status as its runtime sees it; the leader replica marks it Failed when the
//! agent stops reporting. Every replica reads it, so any replica serves any request. The CRD
//! in `deploy/crds/` is generated from this type.
use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::names::{MANAGED_LABEL, NODE_LABEL};
use crate::daemon::platform::{NewSandbox, Reservation};
use crate::shared::models::sandbox::{Sandbox, SandboxStatus};
use crate::shared::models::snapshot::{Snapshot, SnapshotKind};

/// The backend name.
pub const BACKEND: &str = "sbxd";

/// Where an sbxd sandbox runs and what it reserves.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sbx.io",
    version = "v1alpha1",
    kind = "SbxdSandbox",
    root = "SbxdSandboxObject",
    plural = "sbxdsandboxes",
    singular = "sbxdsandbox",
    namespaced,
    status = "SbxdSandboxStatus",
    doc = "A sandbox of the sbxd backend, run by the sbx agent of one node: written by sbx serve, its status by the agent.",
    printcolumn = r#"{"name": "Node", "type": "string", "jsonPath": ".spec.node"}"#,
    printcolumn = r#"{"name": "Status", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Image", "type": "string", "jsonPath": ".spec.image"}"#,
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SbxdSandboxSpec {
    /// The node whose agent runs it.
    pub node: String,
    /// Image reference.
    pub image: String,
    /// CPU limit, millicores (signed, as Kubernetes schemas count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<i64>,
    /// Memory limit, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<i64>,
    /// Writable-layer limit, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_bytes: Option<i64>,
}

/// What the node's agent last reported (or, when it stopped reporting, the leader's verdict).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SbxdSandboxStatus {
    /// `Pending`, `Running`, `Paused`, `Failed` or `Terminating`.
    pub phase: String,
    /// Whether it is ready.
    #[serde(default)]
    pub ready: bool,
    /// Restarts of its main process.
    #[serde(default)]
    pub restarts: i32,
    /// Why it failed; empty when it did not.
    #[serde(default)]
    pub message: String,
}

fn signed(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn unsigned(value: Option<i64>) -> u64 {
    value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}

/// The CustomResourceDefinition of SbxdSandbox.
pub fn crd() -> CustomResourceDefinition {
    SbxdSandboxObject::crd()
}

/// A snapshot of an sbxd sandbox: layers on the node whose agent took it, where its restores
/// and forks run too.
#[derive(CustomResource, Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sbx.io",
    version = "v1alpha1",
    kind = "SbxdSnapshot",
    root = "SbxdSnapshotObject",
    plural = "sbxdsnapshots",
    singular = "sbxdsnapshot",
    namespaced,
    doc = "A snapshot of an sbxd sandbox, kept as layers on the node whose sbx agent took it: written by sbx serve.",
    printcolumn = r#"{"name": "Node", "type": "string", "jsonPath": ".spec.node"}"#,
    printcolumn = r#"{"name": "Sandbox", "type": "string", "jsonPath": ".spec.sourceSandbox"}"#,
    printcolumn = r#"{"name": "Kind", "type": "string", "jsonPath": ".spec.kind"}"#,
    printcolumn = r#"{"name": "Bytes", "type": "integer", "jsonPath": ".spec.sizeBytes"}"#,
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SbxdSnapshotSpec {
    /// The node whose agent holds its layers.
    pub node: String,
    /// The sandbox it was taken from.
    pub source_sandbox: String,
    /// `pause`, `fork` or `named`.
    pub kind: String,
    /// Size of its own layer on the node, bytes.
    pub size_bytes: i64,
    /// When the agent took it, RFC 3339.
    pub created: String,
}

/// The CustomResourceDefinition of SbxdSnapshot.
pub fn snapshot_crd() -> CustomResourceDefinition {
    SbxdSnapshotObject::crd()
}

/// The record of a snapshot an agent on `node` reports.
/// The agents' records are small and read whole: cached whole.
impl crate::daemon::platform::kubernetes::cache::Kept for SbxdSandboxObject {}
impl crate::daemon::platform::kubernetes::cache::Kept for SbxdSnapshotObject {}

pub fn snapshot_object(snapshot: &Snapshot, node: &str) -> SbxdSnapshotObject {
    let mut object = SbxdSnapshotObject::new(
        &snapshot.name,
        SbxdSnapshotSpec {
            node: node.to_string(),
            source_sandbox: snapshot.source_sandbox.clone(),
            kind: snapshot.kind.as_str().to_string(),
            size_bytes: signed(snapshot.size_bytes),
            created: snapshot.creation_timestamp.clone(),
        },
    );
    object.metadata.namespace = Some(snapshot.namespace.clone());
    object.metadata.labels = Some(labels(node));
    object
}

/// The snapshot a record reads as, `now` in Unix seconds.
pub fn snapshot_record(object: &SbxdSnapshotObject, now: i64) -> Snapshot {
    let created = crate::shared::timestamp::parse_timestamp(&object.spec.created)
        .unwrap_or_else(|_| created(&object.metadata, now));
    let kind = SnapshotKind::ALL
        .into_iter()
        .find(|k| k.as_str() == object.spec.kind)
        .unwrap_or(SnapshotKind::Named);
    Snapshot {
        name: object.metadata.name.clone().unwrap_or_default(),
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
        source_pvc: String::new(),
        source_sandbox: object.spec.source_sandbox.clone(),
        kind,
        ready_to_use: true,
        creation_timestamp: crate::shared::timestamp::format_rfc3339_utc(created),
        age: crate::shared::duration::format_age(now.saturating_sub(created).max(0) as u64),
        size_bytes: unsigned(Some(object.spec.size_bytes)),
        snapshot_class: SNAPSHOT_CLASS.to_string(),
    }
}

/// The snapshot class of sbxd layers (as the embedded default reports it).
pub const SNAPSHOT_CLASS: &str = "sbxd-layer";

/// The labels of a record of `node`: sbx's, and the node's (its agent lists its own by it).
pub fn labels(node: &str) -> std::collections::BTreeMap<String, String> {
    [
        (
            MANAGED_LABEL.to_string(),
            super::super::FIELD_MANAGER.to_string(),
        ),
        (NODE_LABEL.to_string(), node.to_string()),
    ]
    .into_iter()
    .collect()
}

/// The record of a new sandbox placed on `node`.
pub fn object(new: &NewSandbox, node: &str) -> SbxdSandboxObject {
    let mut object = SbxdSandboxObject::new(
        &new.name,
        SbxdSandboxSpec {
            node: node.to_string(),
            image: new.image.clone(),
            cpu_millis: new.cpu_millis.map(signed),
            memory_bytes: new.memory_bytes.map(signed),
            ephemeral_bytes: new.ephemeral_bytes.map(signed),
        },
    );
    object.metadata.namespace = Some(new.namespace.clone());
    let annotations: BTreeMap<String, String> =
        super::sandboxes::lifetime_annotations(&new.lifetime)
            .into_iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.to_string(), v.to_string())))
            .collect();
    if !annotations.is_empty() {
        object.metadata.annotations = Some(annotations);
    }
    object.metadata.labels = Some(
        [
            (
                MANAGED_LABEL.to_string(),
                super::super::FIELD_MANAGER.to_string(),
            ),
            (NODE_LABEL.to_string(), node.to_string()),
        ]
        .into_iter()
        .chain(new.labels.clone())
        .collect(),
    );
    object.status = Some(SbxdSandboxStatus {
        phase: SandboxStatus::Pending.as_str().to_string(),
        ..Default::default()
    });
    object
}

/// The status an agent reports for what its runtime says of a sandbox.
pub fn status_of(sandbox: &Sandbox) -> SbxdSandboxStatus {
    SbxdSandboxStatus {
        phase: sandbox.status.as_str().to_string(),
        ready: sandbox.ready == "True",
        restarts: sandbox.restarts,
        message: sandbox.error_message.clone(),
    }
}

fn phase(text: &str) -> SandboxStatus {
    match text {
        "Running" => SandboxStatus::Running,
        "Paused" => SandboxStatus::Paused,
        "Failed" => SandboxStatus::Failed,
        "Terminating" => SandboxStatus::Terminating,
        _ => SandboxStatus::Pending,
    }
}

/// When a record was made, Unix seconds (`now` when the API server has not said).
pub fn created(meta: &kube::api::ObjectMeta, now: i64) -> i64 {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(now)
}

/// The sandbox a record reads as, `now` in Unix seconds.
pub fn record(object: &SbxdSandboxObject, now: i64) -> Sandbox {
    let status = object.status.clone().unwrap_or_default();
    let created = created(&object.metadata, now);
    let (expires_at, idle_timeout_seconds, last_activity_at) =
        super::sandboxes::lifetime_fields(&object.metadata, created);
    let phase = if object.metadata.deletion_timestamp.is_some() {
        SandboxStatus::Terminating
    } else {
        phase(&status.phase)
    };
    Sandbox {
        name: object.metadata.name.clone().unwrap_or_default(),
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
        status: phase,
        ready: if status.ready && phase == SandboxStatus::Running {
            "True"
        } else {
            "False"
        }
        .to_string(),
        restarts: status.restarts,
        age: crate::shared::duration::format_age(now.saturating_sub(created).max(0) as u64),
        image: object.spec.image.clone(),
        error_message: status.message,
        backend: BACKEND.to_string(),
        labels: crate::shared::labels::user_labels(object.metadata.labels.as_ref()),
        expires_at,
        idle_timeout_seconds,
        last_activity_at,
    }
}

/// What a record reserves against its tenant's quotas.
pub fn size(object: &SbxdSandboxObject) -> Reservation {
    Reservation {
        sandboxes: 1,
        cpu_millis: unsigned(object.spec.cpu_millis),
        memory_bytes: unsigned(object.spec.memory_bytes),
        disk_bytes: unsigned(object.spec.ephemeral_bytes),
        root_disk_bytes: 0,
        snapshot_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_is_namespaced_under_sbx_io() {
        let crd = crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("sbxdsandboxes.sbx.io"));
        assert_eq!(crd.spec.scope, "Namespaced");
    }

    #[test]
    fn a_record_reads_as_the_sandbox_its_agent_reported() {
        let new = NewSandbox {
            namespace: "team-a".into(),
            name: "box".into(),
            image: "busybox".into(),
            env: vec!["SECRET=1".into()],
            before_script: None,
            cpu_millis: Some(500),
            memory_bytes: Some(64 << 20),
            ephemeral_bytes: None,
            egress: None,
            egress_deny: vec![],
            uid: 0,
            gid: 0,
            additional_gids: vec![],
            capabilities: vec![],
            backend: BACKEND.into(),
            nodes: None,
            entrypoint: None,
            cmd: None,
            labels: [("team".to_string(), "ml".to_string())].into(),
            lifetime: Default::default(),
            owner: None,
        };
        let mut object = object(&new, "node-1");
        // The env never reaches the cluster's record.
        assert!(!serde_json::to_string(&object).unwrap().contains("SECRET"));
        assert_eq!(record(&object, 0).status, SandboxStatus::Pending);
        object.status = Some(SbxdSandboxStatus {
            phase: "Running".into(),
            ready: true,
            restarts: 1,
            message: String::new(),
        });
        let sandbox = record(&object, 0);
        assert_eq!(sandbox.status, SandboxStatus::Running);
        assert_eq!(sandbox.ready, "True");
        assert_eq!(sandbox.backend, "sbxd");
        assert_eq!(size(&object).memory_bytes, 64 << 20);
        assert_eq!(status_of(&sandbox).phase, "Running");
    }
}
