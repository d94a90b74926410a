//! Wire types of the snapshot routes: snapshot records, list query, restore and garbage collection.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::shared::duration::DurationValue;
use crate::shared::models::formats::{DnsLabel, ImageReference, QuantityText};
use crate::shared::models::sandbox::{ResourceLimits, namespace_or_default, require_field};
use crate::shared::quantity::Quantity;

/// `keep_fork_for` used when the GC body gives none: ten minutes.
pub const DEFAULT_KEEP_FORK_FOR: Duration = Duration::from_secs(600);

/// Canonical `sidecar` override value: a Docker-in-Docker daemon next to the sandbox.
pub const SIDECAR_DIND: &str = "dind";

/// `sidecar` override value for no sidecar.
pub const SIDECAR_NONE: &str = "none";

/// Deprecated alias of [`SIDECAR_DIND`] still accepted in the `sidecar` override.
pub const SIDECAR_DOCKER_ALIAS: &str = "docker";

/// Keys accepted inside restore `overrides`.
pub const RESTORE_OVERRIDE_KEYS: [&str; 8] = [
    "image",
    "backend",
    "root_disk_size",
    "sidecar",
    "limits",
    "entrypoint",
    "cmd",
    "before_script",
];

/// What created a snapshot, which decides its lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotKind {
    /// Taken by pause with `snapshot`; kept until deleted.
    Pause,
    /// Intermediate snapshot of a fork without `snapshot`; deleted inline or swept by GC.
    Fork,
    /// Taken by the snapshot route or a fork with `snapshot`; kept until deleted.
    Named,
}

impl SnapshotKind {
    /// Every kind, in documentation order.
    pub const ALL: [SnapshotKind; 3] =
        [SnapshotKind::Pause, SnapshotKind::Fork, SnapshotKind::Named];

    /// The wire form: `pause`, `fork` or `named`.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotKind::Pause => "pause",
            SnapshotKind::Fork => "fork",
            SnapshotKind::Named => "named",
        }
    }
}

impl fmt::Display for SnapshotKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A snapshot kind string that is not `pause`, `fork` or `named`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown snapshot kind `{0}` (allowed: pause, fork, named)")]
pub struct UnknownSnapshotKind(pub String);

impl FromStr for SnapshotKind {
    type Err = UnknownSnapshotKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SnapshotKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownSnapshotKind(s.to_string()))
    }
}

/// A volume snapshot of a sandbox's root disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Snapshot {
    /// Snapshot name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Root PVC it was taken from (`<sandbox>-root-lh`).
    pub source_pvc: String,
    /// Sandbox it was taken from (annotation `sbx.io/source-sandbox`).
    pub source_sandbox: String,
    /// What created it (annotation `sbx.io/kind`).
    pub kind: SnapshotKind,
    /// Whether it can be restored from.
    pub ready_to_use: bool,
    /// Creation time, ISO 8601 UTC.
    #[schema(example = "2026-11-25T10:00:00Z")]
    pub creation_timestamp: String,
    /// Elapsed time since creation as `H:MM:SS`.
    #[schema(example = "0:10:00")]
    pub age: String,
    /// Restore size in bytes.
    pub size_bytes: u64,
    /// Volume snapshot class (`longhorn` for pause).
    pub snapshot_class: String,
}

/// Query of `GET /api/v1/snapshots`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, utoipa::IntoParams,
)]
#[into_params(parameter_in = Query)]
pub struct SnapshotListQuery {
    /// Namespace; `default` when omitted.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::formats::namespace_param",
        skip_serializing_if = "Option::is_none"
    )]
    #[param(value_type = Option<DnsLabel>)]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// List every namespace the caller may see instead.
    #[serde(default)]
    pub all_namespaces: bool,
    /// Only snapshots of this sandbox.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::formats::sandbox_param",
        skip_serializing_if = "Option::is_none"
    )]
    #[param(value_type = Option<DnsLabel>)]
    #[schema(value_type = Option<DnsLabel>)]
    pub sandbox: Option<String>,
    /// Only snapshots of this kind: `pause`, `fork` or `named`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(value_type = Option<SnapshotKind>)]
    #[schema(value_type = Option<SnapshotKind>)]
    pub kind: Option<String>,
}

impl SnapshotListQuery {
    /// The `kind` filter, or the 400 message listing the allowed kinds.
    pub fn kind_filter(&self) -> Result<Option<SnapshotKind>, String> {
        self.kind
            .as_deref()
            .map(|kind| kind.parse().map_err(|e: UnknownSnapshotKind| e.to_string()))
            .transpose()
    }
}

/// Settings of the restored sandbox that win over the snapshot's `sbx.io/source-*` annotations;
/// absent fields fall back to the annotation. Any other key (including the removed `docker`
/// and `docker_disk`) is rejected with 400.
// Unknown keys are collected in `extra` on decoding and turned into the 400 by `validate`,
// rather than being silently ignored (serde's default) or being a 422 (deny_unknown_fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RestoreOverrides {
    /// Container image reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ImageReference>)]
    pub image: Option<String>,
    /// Backend; restore supports only `kata-qemu-longhorn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Root disk size as a quantity, e.g. `20Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub root_disk_size: Option<String>,
    /// Sidecar: `dind` or `none` (`docker` is a deprecated alias of `dind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^(dind|none|docker)$")]
    pub sidecar: Option<String>,
    /// Resource limits.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub limits: Option<ResourceLimits>,
    /// Container entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    /// Container command arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
    /// Shell commands run before the container is marked Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_script: Option<String>,
    /// Keys outside [`RESTORE_OVERRIDE_KEYS`]; rejected by [`RestoreOverrides::validate`].
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl RestoreOverrides {
    /// The `sidecar` override normalized to its canonical value (`docker` → `dind`), or the
    /// 400 message for an unknown value.
    pub fn validate_sidecar(&self) -> Result<Option<&'static str>, String> {
        match self.sidecar.as_deref() {
            None => Ok(None),
            Some(SIDECAR_DIND | SIDECAR_DOCKER_ALIAS) => Ok(Some(SIDECAR_DIND)),
            Some(SIDECAR_NONE) => Ok(Some(SIDECAR_NONE)),
            Some(other) => Err(format!(
                "unknown sidecar `{other}` in overrides (allowed: {SIDECAR_DIND}, {SIDECAR_NONE}; `{SIDECAR_DOCKER_ALIAS}` is a deprecated alias of `{SIDECAR_DIND}`)"
            )),
        }
    }

    /// Checks every override: no unknown key, parseable `root_disk_size` and `limits`, known `sidecar`.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(key) = self.extra.keys().next() {
            let allowed = RESTORE_OVERRIDE_KEYS.join(", ");
            return Err(match key.as_str() {
                "docker" | "docker_disk" => format!(
                    "override `{key}` is no longer accepted; use `sidecar` (allowed keys: {allowed})"
                ),
                _ => format!("unknown override `{key}` (allowed keys: {allowed})"),
            });
        }
        if let Some(size) = self.root_disk_size.as_deref() {
            Quantity::parse(size).map_err(|e| format!("invalid override `root_disk_size`: {e}"))?;
        }
        if let Some(limits) = &self.limits {
            limits.parse()?;
        }
        self.validate_sidecar()?;
        Ok(())
    }
}

/// Body of `POST /api/v1/snapshots/{name}/restore`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RestoreRequest {
    /// Name of the new sandbox (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = DnsLabel, required = true)]
    pub new_sandbox_name: Option<String>,
    /// Namespace of the snapshot and the new sandbox; `default` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// Settings that win over the snapshot's annotations.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub overrides: Option<RestoreOverrides>,
    /// Keep the source snapshot (default true); false deletes it once the new sandbox is Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(default = true)]
    pub keep_snapshot: Option<bool>,
}

impl RestoreRequest {
    /// The required `new_sandbox_name`, or the 400 message.
    pub fn require_new_sandbox_name(&self) -> Result<&str, String> {
        require_field("new_sandbox_name", self.new_sandbox_name.as_deref())
    }

    /// The namespace, `default` when omitted.
    pub fn namespace(&self) -> &str {
        namespace_or_default(self.namespace.as_deref())
    }

    /// Whether to keep the source snapshot; true unless the body says false.
    pub fn keep_snapshot(&self) -> bool {
        self.keep_snapshot.unwrap_or(true)
    }
}

/// Result of a restore.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RestoreResponse {
    /// New sandbox.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Snapshot it was restored from.
    pub source_snapshot: String,
    /// Summary.
    pub message: String,
}

/// Optional body of `POST /api/v1/snapshots/gc`; `{}` or no body means the defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct GcRequest {
    /// Namespace to sweep; `default` when omitted.
    #[serde(
        deserialize_with = "crate::shared::models::formats::namespace_param",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// Sweep every namespace the caller may see instead.
    pub all_namespaces: bool,
    /// Minimum age of a fork snapshot to delete: `"10m"`, `"2h"`, `"45s"` or integer seconds; 10m when omitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_fork_for: Option<DurationValue>,
    /// Report what would be deleted (`deleted: false`) without deleting.
    pub dry_run: bool,
}

impl GcRequest {
    /// The `keep_fork_for` threshold ([`DEFAULT_KEEP_FORK_FOR`] when omitted), or the 400 message.
    pub fn keep_fork_for(&self) -> Result<Duration, String> {
        match &self.keep_fork_for {
            None => Ok(DEFAULT_KEEP_FORK_FOR),
            Some(value) => value
                .to_duration()
                .map_err(|e| format!("invalid `keep_fork_for`: {e}")),
        }
    }
}

/// One fork snapshot considered by GC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GcResult {
    /// Snapshot name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its age as `H:MM:SS`.
    pub age: String,
    /// Whether it was deleted (always false on a dry run).
    pub deleted: bool,
}

/// Result of a GC sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct GcResponse {
    /// Summary.
    pub message: String,
    /// Fork snapshots older than the threshold.
    pub results: Vec<GcResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_parses_and_rejects_with_allowed_values() {
        assert_eq!("pause".parse::<SnapshotKind>(), Ok(SnapshotKind::Pause));
        assert_eq!("fork".parse::<SnapshotKind>(), Ok(SnapshotKind::Fork));
        assert_eq!("named".parse::<SnapshotKind>(), Ok(SnapshotKind::Named));
        let err = "Named".parse::<SnapshotKind>().expect_err("case matters");
        assert_eq!(
            err.to_string(),
            "unknown snapshot kind `Named` (allowed: pause, fork, named)"
        );
        assert_eq!(
            serde_json::to_string(&SnapshotKind::Fork).expect("serialize"),
            "\"fork\""
        );
    }

    #[test]
    fn list_query_kind_filter() {
        let query = SnapshotListQuery {
            kind: Some("fork".to_string()),
            ..SnapshotListQuery::default()
        };
        assert_eq!(query.kind_filter(), Ok(Some(SnapshotKind::Fork)));
        assert_eq!(SnapshotListQuery::default().kind_filter(), Ok(None));
        let bad = SnapshotListQuery {
            kind: Some("daily".to_string()),
            ..SnapshotListQuery::default()
        };
        assert!(
            bad.kind_filter()
                .expect_err("unknown")
                .contains("pause, fork, named")
        );
    }

    #[test]
    fn snapshot_record_round_trips() {
        let json = serde_json::json!({
            "name": "sb1-paused-1700000000", "namespace": "default",
            "source_pvc": "sb1-root-lh", "source_sandbox": "sb1", "kind": "pause",
            "ready_to_use": true, "creation_timestamp": "2026-11-25T10:00:00Z",
            "age": "0:10:00", "size_bytes": 10737418240u64, "snapshot_class": "longhorn"
        });
        let snapshot: Snapshot = serde_json::from_value(json.clone()).expect("spec example");
        assert_eq!(snapshot.kind, SnapshotKind::Pause);
        assert_eq!(serde_json::to_value(&snapshot).expect("serialize"), json);
    }

    #[test]
    fn restore_request_defaults() {
        let req: RestoreRequest = serde_json::from_str("{}").expect("decodes");
        assert!(req.require_new_sandbox_name().is_err());
        assert!(req.keep_snapshot());
        assert_eq!(req.namespace(), "default");
        let req: RestoreRequest =
            serde_json::from_str(r#"{"new_sandbox_name":"b","keep_snapshot":false}"#)
                .expect("decodes");
        assert_eq!(req.require_new_sandbox_name(), Ok("b"));
        assert!(!req.keep_snapshot());
    }

    #[test]
    fn overrides_accept_known_keys_and_normalize_sidecar() {
        let overrides: RestoreOverrides = serde_json::from_value(serde_json::json!({
            "image": "alpine:3", "backend": "kata-qemu-longhorn", "root_disk_size": "20Gi",
            "sidecar": "docker", "limits": {"cpu": "1"}, "entrypoint": ["/bin/sh"],
            "cmd": ["-c", "sleep infinity"], "before_script": "true"
        }))
        .expect("decodes");
        assert_eq!(overrides.validate(), Ok(()));
        assert_eq!(overrides.validate_sidecar(), Ok(Some(SIDECAR_DIND)));
        assert!(overrides.extra.is_empty());
    }

    #[test]
    fn overrides_reject_removed_and_unknown_keys() {
        for key in ["docker", "docker_disk"] {
            let overrides: RestoreOverrides =
                serde_json::from_value(serde_json::json!({ key: true })).expect("decodes");
            let err = overrides.validate().expect_err("removed key");
            assert!(err.contains(&format!("`{key}`")), "{err}");
            assert!(err.contains("sidecar"), "{err}");
        }
        let overrides: RestoreOverrides =
            serde_json::from_value(serde_json::json!({"playbook": "x"})).expect("decodes");
        assert!(
            overrides
                .validate()
                .expect_err("unknown")
                .contains("`playbook`")
        );
    }

    #[test]
    fn overrides_reject_bad_values() {
        let bad_sidecar = RestoreOverrides {
            sidecar: Some("podman".to_string()),
            ..RestoreOverrides::default()
        };
        assert!(
            bad_sidecar
                .validate()
                .expect_err("bad")
                .contains("`podman`")
        );
        let bad_size = RestoreOverrides {
            root_disk_size: Some("big".to_string()),
            ..RestoreOverrides::default()
        };
        assert!(
            bad_size
                .validate()
                .expect_err("bad")
                .contains("root_disk_size")
        );
        let bad_limits = RestoreOverrides {
            limits: Some(ResourceLimits {
                cpu: Some("-1".to_string()),
                ..ResourceLimits::default()
            }),
            ..RestoreOverrides::default()
        };
        assert!(bad_limits.validate().expect_err("bad").contains("`cpu`"));
    }

    #[test]
    fn gc_request_defaults_on_empty_body() {
        let req: GcRequest = serde_json::from_str("{}").expect("decodes");
        assert_eq!(req, GcRequest::default());
        assert_eq!(req.keep_fork_for(), Ok(Duration::from_secs(600)));
        assert!(!req.dry_run);
        assert!(!req.all_namespaces);
    }

    #[test]
    fn gc_request_keep_fork_for_forms() {
        let text: GcRequest =
            serde_json::from_str(r#"{"keep_fork_for":"2h","dry_run":true}"#).expect("decodes");
        assert_eq!(text.keep_fork_for(), Ok(Duration::from_secs(7200)));
        assert!(text.dry_run);
        let seconds: GcRequest = serde_json::from_str(r#"{"keep_fork_for":45}"#).expect("decodes");
        assert_eq!(seconds.keep_fork_for(), Ok(Duration::from_secs(45)));
        let bad: GcRequest = serde_json::from_str(r#"{"keep_fork_for":"10x"}"#).expect("decodes");
        assert!(
            bad.keep_fork_for()
                .expect_err("bad")
                .contains("keep_fork_for")
        );
        assert!(serde_json::from_str::<GcRequest>(r#"{"keep_fork_for":true}"#).is_err());
    }
}
