//! Snapshots as VolumeSnapshots of a kql sandbox's root PVC: the object a snapshot becomes,
//! the `sbx.io/source-*` annotations that let a restore rebuild the sandbox, and the record a
//! VolumeSnapshot reads as.
use std::collections::BTreeMap;

use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use super::names::*;
use super::sandboxes::SandboxTemplate;
use crate::shared::duration::format_age;
use crate::shared::models::snapshot::{Snapshot, SnapshotKind};
use crate::shared::quantity::{Quantity, format_bytes_binary, format_cpu_millis};
use crate::shared::timestamp::format_rfc3339_utc;

/// The VolumeSnapshot resource (snapshot.storage.k8s.io/v1).
pub fn resource() -> ApiResource {
    ApiResource {
        group: "snapshot.storage.k8s.io".into(),
        version: "v1".into(),
        api_version: "snapshot.storage.k8s.io/v1".into(),
        kind: "VolumeSnapshot".into(),
        plural: "volumesnapshots".into(),
    }
}

/// Name of the Secret keeping a snapshot's copy of its sandbox's env file (a dot: no sandbox
/// name can make it).
pub fn env_secret(snapshot: &str) -> String {
    format!("{snapshot}.snapshot-env")
}

/// The `sbx.io/*` annotations of a snapshot of `sandbox` made from `t`.
pub fn annotations(
    sandbox: &str,
    kind: SnapshotKind,
    t: &SandboxTemplate,
) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        a.insert(k.to_string(), v);
    };
    put(KIND, kind.as_str().into());
    put(SOURCE_SANDBOX, sandbox.into());
    put(SOURCE_IMAGE, t.image.clone());
    put(SOURCE_BACKEND, t.backend.clone());
    if let Some(m) = t.cpu_millis {
        put(SOURCE_CPU, format_cpu_millis(m));
    }
    if let Some(b) = t.memory_bytes {
        put(SOURCE_MEMORY, format_bytes_binary(b));
    }
    if let Some(b) = t.ephemeral_bytes {
        put(SOURCE_EPHEMERAL, format_bytes_binary(b));
    }
    if let Some(b) = t.root_disk_bytes {
        put(SOURCE_ROOT_DISK, format_bytes_binary(b));
    }
    if let Some(s) = &t.before_script {
        put(SOURCE_BEFORE_SCRIPT, s.clone());
    }
    let json = |v: &Vec<String>| serde_json::to_string(v).unwrap_or_default();
    if let Some(v) = &t.entrypoint {
        put(SOURCE_ENTRYPOINT, json(v));
    }
    if let Some(v) = &t.cmd {
        put(SOURCE_CMD, json(v));
    }
    if let Some(v) = &t.egress {
        put(SOURCE_EGRESS, json(v));
    }
    if let Some(v) = &t.nodes {
        put(SOURCE_NODES, json(v));
    }
    put(SOURCE_RUN_AS, format!("{}:{}", t.uid, t.gid));
    if !t.additional_gids.is_empty() {
        put(
            SOURCE_FS_GROUPS,
            serde_json::to_string(&t.additional_gids).unwrap_or_default(),
        );
    }
    put(SOURCE_CAPABILITIES, t.capabilities.join(","));
    if let Some(s) = &t.sidecar {
        put(SOURCE_SIDECAR, s.clone());
    }
    if t.env {
        put(SOURCE_ENV, "true".into());
    }
    a
}

/// The sandbox a snapshot's annotations describe (what a restore starts from before its
/// overrides). Missing annotations leave defaults (an empty image: the restore must name one).
pub fn template(annotations: &BTreeMap<String, String>) -> Result<SandboxTemplate, String> {
    let get = |k: &str| annotations.get(k).filter(|v| !v.is_empty());
    let bytes = |k: &str| -> Result<Option<u64>, String> {
        get(k)
            .map(|v| {
                Quantity::parse(v)
                    .map(|q| q.value_ceil() as u64)
                    .map_err(|e| format!("annotation {k}: {e}"))
            })
            .transpose()
    };
    let list = |k: &str| -> Result<Option<Vec<String>>, String> {
        get(k)
            .map(|v| serde_json::from_str(v).map_err(|e| format!("annotation {k}: {e}")))
            .transpose()
    };
    let (uid, gid) = match get(SOURCE_RUN_AS) {
        Some(v) => {
            let (u, g) = v
                .split_once(':')
                .ok_or_else(|| format!("annotation {SOURCE_RUN_AS}: expected UID:GID"))?;
            let id = |s: &str| {
                s.parse::<u32>()
                    .map_err(|_| format!("annotation {SOURCE_RUN_AS}: expected UID:GID"))
            };
            (id(u)?, id(g)?)
        }
        None => (0, 0),
    };
    Ok(SandboxTemplate {
        image: get(SOURCE_IMAGE).cloned().unwrap_or_default(),
        backend: get(SOURCE_BACKEND)
            .cloned()
            .unwrap_or_else(|| crate::daemon::platform::kubernetes::KQL_BACKEND.to_string()),
        cpu_millis: get(SOURCE_CPU)
            .map(|v| {
                Quantity::parse(v)
                    .map(|q| q.millis() as u64)
                    .map_err(|e| format!("annotation {SOURCE_CPU}: {e}"))
            })
            .transpose()?,
        memory_bytes: bytes(SOURCE_MEMORY)?,
        ephemeral_bytes: bytes(SOURCE_EPHEMERAL)?,
        root_disk_bytes: bytes(SOURCE_ROOT_DISK)?,
        before_script: get(SOURCE_BEFORE_SCRIPT).cloned(),
        entrypoint: list(SOURCE_ENTRYPOINT)?,
        cmd: list(SOURCE_CMD)?,
        egress: list(SOURCE_EGRESS)?,
        uid,
        gid,
        additional_gids: get(SOURCE_FS_GROUPS)
            .map(|v| {
                serde_json::from_str(v).map_err(|e| format!("annotation {SOURCE_FS_GROUPS}: {e}"))
            })
            .transpose()?
            .unwrap_or_default(),
        capabilities: get(SOURCE_CAPABILITIES)
            .map(|v| v.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        sidecar: get(SOURCE_SIDECAR).cloned(),
        env: get(SOURCE_ENV).is_some(),
        nodes: list(SOURCE_NODES)?,
        labels: Default::default(),
        lifetime: Default::default(),
    })
}

/// The VolumeSnapshot (class `longhorn`) of `sandbox`'s root PVC.
pub fn volume_snapshot(
    namespace: &str,
    name: &str,
    sandbox: &str,
    kind: SnapshotKind,
    t: &SandboxTemplate,
) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {SANDBOX_LABEL: sandbox, MANAGED_LABEL: crate::daemon::platform::kubernetes::FIELD_MANAGER},
            "annotations": annotations(sandbox, kind, t),
        },
        "spec": {
            "volumeSnapshotClassName": crate::daemon::platform::kubernetes::SNAPSHOT_CLASS,
            "source": {"persistentVolumeClaimName": super::sandboxes::root_pvc(sandbox)},
        },
    })
}

/// The annotations of an object.
pub fn annotations_of(object: &DynamicObject) -> BTreeMap<String, String> {
    object.metadata.annotations.clone().unwrap_or_default()
}

/// The kind a VolumeSnapshot's `sbx.io/kind` names (`None`: not one of ours).
pub fn kind_of(object: &DynamicObject) -> Option<SnapshotKind> {
    annotations_of(object).get(KIND)?.parse().ok()
}

/// Whether the object is a snapshot of sbx the API shows: one of sbx's kinds, not being
/// deleted (a deleted VolumeSnapshot stays until the snapshot controller has removed its
/// finalizers; for the API it is gone at the delete).
pub fn shown(object: &DynamicObject) -> bool {
    kind_of(object).is_some() && object.metadata.deletion_timestamp.is_none()
}

/// When the CSI driver cut the snapshot (`status.creationTime`), if it has.
pub fn cut(object: &DynamicObject) -> Option<&str> {
    object.data["status"]["creationTime"].as_str()
}

/// The message of the VolumeSnapshot's `status.error` (the controller's last failure).
pub fn error_of(object: &DynamicObject) -> Option<String> {
    object.data["status"]["error"]["message"]
        .as_str()
        .map(str::to_string)
}

/// The creation time of a snapshot: when the driver cut it, else when it was asked for.
pub fn created(object: &DynamicObject) -> i64 {
    cut(object)
        .and_then(|t| crate::shared::timestamp::parse_timestamp(t).ok())
        .or_else(|| {
            object
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second())
        })
        .unwrap_or(0)
}

/// The backend of the sandbox a VolumeSnapshot was taken of (kql when it does not say).
pub fn source_backend(object: &DynamicObject) -> String {
    annotations_of(object)
        .get(SOURCE_BACKEND)
        .filter(|b| !b.is_empty())
        .cloned()
        .unwrap_or_else(|| crate::daemon::platform::kubernetes::KQL_BACKEND.to_string())
}

/// What a VolumeSnapshot holds, bytes: its `status.restoreSize` (0 until the driver says).
pub fn restore_size(object: &DynamicObject) -> u64 {
    object.data["status"]["restoreSize"]
        .as_str()
        .and_then(|q| Quantity::parse(q).ok())
        .map(|q| q.value_ceil() as u64)
        .unwrap_or(0)
}

/// The snapshot record of a VolumeSnapshot at `now` (unix seconds).
pub fn record(object: &DynamicObject, now: i64) -> Snapshot {
    let a = annotations_of(object);
    let at = created(object);
    Snapshot {
        name: object.metadata.name.clone().unwrap_or_default(),
        namespace: object.metadata.namespace.clone().unwrap_or_default(),
        source_pvc: object.data["spec"]["source"]["persistentVolumeClaimName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        source_sandbox: a.get(SOURCE_SANDBOX).cloned().unwrap_or_default(),
        kind: a
            .get(KIND)
            .and_then(|k| k.parse().ok())
            .unwrap_or(SnapshotKind::Named),
        ready_to_use: object.data["status"]["readyToUse"]
            .as_bool()
            .unwrap_or(false),
        creation_timestamp: format_rfc3339_utc(at),
        age: format_age((now - at).max(0) as u64),
        size_bytes: restore_size(object),
        snapshot_class: object.data["spec"]["volumeSnapshotClassName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_carry_the_template() {
        let t = SandboxTemplate {
            image: "busybox:1.36".into(),
            backend: crate::daemon::platform::kubernetes::KQL_BACKEND.into(),
            cpu_millis: Some(500),
            memory_bytes: Some(256 << 20),
            ephemeral_bytes: None,
            root_disk_bytes: Some(10 << 30),
            before_script: Some("echo hi > /tmp/x".into()),
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into()]),
            cmd: Some(vec!["sleep 1d".into()]),
            egress: Some(vec![]),
            uid: 65532,
            gid: 65532,
            additional_gids: vec![65532],
            capabilities: vec!["CAP_NET_BIND_SERVICE".into()],
            sidecar: Some("dind".into()),
            env: true,
            nodes: Some(vec!["node-1".into()]),
            lifetime: Default::default(),
            labels: Default::default(),
        };
        let a = annotations("src", SnapshotKind::Pause, &t);
        assert_eq!(a[KIND], "pause");
        assert_eq!(a[SOURCE_SANDBOX], "src");
        assert_eq!(a[SOURCE_IMAGE], "busybox:1.36");
        assert_eq!(a[SOURCE_MEMORY], "256Mi");
        assert_eq!(template(&a).unwrap(), t);
        // Nothing recorded: defaults, an empty image (a restore must name one).
        let bare = template(&BTreeMap::new()).unwrap();
        assert_eq!(bare.image, "");
        assert_eq!(
            bare.backend,
            crate::daemon::platform::kubernetes::KQL_BACKEND
        );
        let mut broken = a.clone();
        broken.insert(SOURCE_RUN_AS.into(), "x".into());
        assert!(template(&broken).unwrap_err().contains(SOURCE_RUN_AS));
    }
}
