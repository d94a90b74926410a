//! Wire types of the sandbox routes: records, create/exec/logs/pause/resume/fork/snapshot bodies and results.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::shared::models::DEFAULT_NAMESPACE;
use crate::shared::models::formats::{
    CapabilityName, Cidr, DnsLabel, DroppedCapability, Entrypoint, EnvMap, ImageReference,
    LabelMap, LabelSelector, QuantityText, Word,
};
use crate::shared::quantity::Quantity;

/// Container whose logs are read when the logs query names none.
pub const DEFAULT_LOG_CONTAINER: &str = "sandbox";

/// Trailing log lines returned when the logs query names no `tail`.
pub const DEFAULT_LOG_TAIL: u64 = 200;
/// Exec timeout when the request names none (DESIGN.md §4).
pub const DEFAULT_EXEC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The namespace a request names, or [`DEFAULT_NAMESPACE`] when it names none.
pub fn namespace_or_default(namespace: Option<&str>) -> &str {
    namespace.unwrap_or(DEFAULT_NAMESPACE)
}

/// Returns a required string field, or the 400 message naming it when it is absent or empty.
pub fn require_field<'a>(field: &str, value: Option<&'a str>) -> Result<&'a str, String> {
    match value {
        Some(v) if !v.is_empty() => Ok(v),
        Some(_) => Err(format!("`{field}` must not be empty")),
        None => Err(format!("missing required field `{field}`")),
    }
}

/// Lifecycle state of a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum SandboxStatus {
    /// Created, not yet ready (image pull, `before_script` running, scheduling).
    Pending,
    /// Ready and serving.
    Running,
    /// Scaled to zero by pause; `ready` reads `False`.
    Paused,
    /// Could not start; see `error_message`.
    Failed,
    /// Being deleted.
    Terminating,
}

impl SandboxStatus {
    /// The wire form (`Running`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxStatus::Pending => "Pending",
            SandboxStatus::Running => "Running",
            SandboxStatus::Paused => "Paused",
            SandboxStatus::Failed => "Failed",
            SandboxStatus::Terminating => "Terminating",
        }
    }
}

impl std::fmt::Display for SandboxStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A sandbox as returned by list and get.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Sandbox {
    /// Unique name within the namespace.
    pub name: String,
    /// Namespace holding the sandbox.
    pub namespace: String,
    /// Lifecycle state.
    pub status: SandboxStatus,
    /// Readiness as a string: `True` or `False`.
    #[schema(example = "True")]
    pub ready: String,
    /// Container restarts so far.
    pub restarts: i32,
    /// Elapsed time since creation as `H:MM:SS`.
    #[schema(example = "1:02:03")]
    pub age: String,
    /// Container image reference.
    pub image: String,
    /// Why the sandbox failed; empty string when none.
    pub error_message: String,
    /// Backend running the sandbox (e.g. `kata-qemu-longhorn`); empty when unknown.
    #[serde(default)]
    pub backend: String,
    /// The labels it was created with (sbx extension; absent when none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// When it is deleted, RFC 3339 UTC (sbx extension; absent: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// Seconds without an exec, stream or file transfer after which it is paused (sbx
    /// extension; absent: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<u64>,
    /// The last exec, stream, file transfer, create or resume, RFC 3339 UTC (sbx extension;
    /// on Kubernetes recorded to within a few seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_at: Option<String>,
}

/// The shortest `ttl_seconds` or `idle_timeout_seconds`.
pub const MIN_LIFETIME_SECONDS: u64 = 10;
/// The longest (ten years): a deadline must stay a date.
pub const MAX_LIFETIME_SECONDS: u64 = 315_360_000;

/// Body of `PATCH /api/v1/sandboxes/{name}` (sbx extension): an absent field is kept, `null`
/// removes the setting, a number sets it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SandboxPatch {
    /// Delete the sandbox this many seconds from now (at least 10); `null`: never (refused
    /// when its tenant sets `limits.maxTtlSeconds`).
    #[serde(
        default,
        deserialize_with = "crate::shared::models::tenant::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>, minimum = 10, maximum = 315_360_000)]
    pub ttl_seconds: Option<Option<u64>>,
    /// Pause it after this many seconds without an exec, stream or file transfer (at least
    /// 10); `null`: never.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::tenant::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>, minimum = 10, maximum = 315_360_000)]
    pub idle_timeout_seconds: Option<Option<u64>>,
}

/// Resource limits of a sandbox; each value is a Kubernetes quantity string, used as limit and request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResourceLimits {
    /// CPU, e.g. `500m` or `2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "500m", value_type = Option<QuantityText>)]
    pub cpu: Option<String>,
    /// Memory, e.g. `512Mi` or `2Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "512Mi", value_type = Option<QuantityText>)]
    pub memory: Option<String>,
    /// Ephemeral storage, e.g. `10Gi`.
    #[serde(
        rename = "ephemeral-storage",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(example = "10Gi", value_type = Option<QuantityText>)]
    pub ephemeral_storage: Option<String>,
    /// Any other key; rejected by [`ResourceLimits::parse`].
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// [`ResourceLimits`] with every value parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedLimits {
    /// Parsed `cpu`.
    pub cpu: Option<Quantity>,
    /// Parsed `memory`.
    pub memory: Option<Quantity>,
    /// Parsed `ephemeral-storage`.
    pub ephemeral_storage: Option<Quantity>,
}

impl ResourceLimits {
    /// Parses every value; the error (a 400 "invalid limits") names the bad or unknown key.
    pub fn parse(&self) -> Result<ParsedLimits, String> {
        if let Some(key) = self.extra.keys().next() {
            return Err(format!(
                "invalid limits: unknown key `{key}` (allowed: cpu, memory, ephemeral-storage)"
            ));
        }
        let parse = |key: &str, value: &Option<String>| -> Result<Option<Quantity>, String> {
            value
                .as_deref()
                .map(|text| {
                    Quantity::parse(text).map_err(|e| format!("invalid limits: `{key}`: {e}"))
                })
                .transpose()
        };
        Ok(ParsedLimits {
            cpu: parse("cpu", &self.cpu)?,
            memory: parse("memory", &self.memory)?,
            ephemeral_storage: parse("ephemeral-storage", &self.ephemeral_storage)?,
        })
    }
}

/// Body of `POST /api/v1/sandboxes`.
// `name` and `image` are required but `Option` here so that a missing one is a 400 from
// `require_name`/`require_image` rather than a 422 from decoding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreateSandboxRequest {
    /// Sandbox name (required), a DNS-1123 label unique in the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = DnsLabel, required = true)]
    pub name: Option<String>,
    /// Container image reference (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = ImageReference, required = true)]
    pub image: Option<String>,
    /// Namespace; `default` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// Path on the API host of an env file, injected as a Secret. Operator and admin
    /// principals only (403 otherwise: the service reads it on its own host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_file: Option<String>,
    /// Shell commands run before the container is marked Ready; none when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_script: Option<String>,
    /// Limits (and requests): `cpu`, `memory`, `ephemeral-storage`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub limits: Option<ResourceLimits>,
    /// Egress CIDRs: absent or null = the internet; `[]` = no egress at all; a list = only
    /// those CIDRs, plus DNS to the platform's resolver. Whatever the list says, a sandbox never
    /// reaches other sandboxes, the host, link-local addresses (cloud metadata) or what the
    /// admin's `egressDeny` refuses (by default RFC 1918, 100.64.0.0/10 and 168.63.129.16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Cidr>>, max_items = 1024)]
    pub egress_whitelist: Option<Vec<String>>,
    /// Run the pod with UID, GID and FSGroup 65532.
    #[serde(default)]
    pub pod_non_root: bool,
    /// Run the container as UID 65532.
    #[serde(default)]
    pub container_non_root: bool,
    /// Capabilities to drop; the default policy drops `ALL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<DroppedCapability>>)]
    pub cap_drop: Option<Vec<String>>,
    /// Capabilities to add back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<CapabilityName>>)]
    pub cap_add: Option<Vec<String>>,
    /// Backend to run on (e.g. `kata-qemu-longhorn`, `sbxd`); the platform default when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Environment variables (sbx extension), over those of `env_file`. Kept as a Secret on
    /// Kubernetes; never logged and never returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<EnvMap>)]
    pub env: Option<BTreeMap<String, String>>,
    /// Replaces the image's entrypoint (sbx extension); as in Kubernetes' `command`, the
    /// image's cmd is dropped too unless `cmd` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Entrypoint>)]
    pub entrypoint: Option<Vec<String>>,
    /// Replaces the image's cmd (sbx extension), Kubernetes' `args`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Word>>)]
    pub cmd: Option<Vec<String>>,
    /// Labels (sbx extension), Kubernetes' syntax; the prefixes `sbx.io`, `kubernetes.io` and
    /// `k8s.io` are reserved. Shown by get and list, and selected by `label_selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<LabelMap>)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Delete the sandbox this many seconds after its create (sbx extension; at least 10, at
    /// most its tenant's `limits.maxTtlSeconds`, which is also the default when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 10, maximum = 315_360_000)]
    pub ttl_seconds: Option<u64>,
    /// Pause the sandbox after this many seconds without an exec, stream or file transfer
    /// (sbx extension; at least 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 10, maximum = 315_360_000)]
    pub idle_timeout_seconds: Option<u64>,
}

impl CreateSandboxRequest {
    /// The required `name`, or the 400 message.
    pub fn require_name(&self) -> Result<&str, String> {
        require_field("name", self.name.as_deref())
    }

    /// The required `image`, or the 400 message.
    pub fn require_image(&self) -> Result<&str, String> {
        require_field("image", self.image.as_deref())
    }

    /// The namespace, `default` when omitted.
    pub fn namespace(&self) -> &str {
        namespace_or_default(self.namespace.as_deref())
    }
}

/// Result of a sandbox create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreateSandboxResponse {
    /// Created sandbox.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its image.
    pub image: String,
}

/// Outcome for one sandbox of a bulk delete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteResult {
    /// Sandbox name.
    pub name: String,
    /// Whether it was deleted.
    pub success: bool,
    /// Why it was not; null on success.
    #[serde(default)]
    pub error: Option<String>,
}

/// Result of `DELETE /api/v1/sandboxes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteAllResponse {
    /// Summary.
    pub message: String,
    /// One entry per sandbox.
    pub results: Vec<DeleteResult>,
}

/// Body of `POST /api/v1/sandboxes/{name}/exec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecRequest {
    /// Shell command (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "echo hello", value_type = String, required = true, min_length = 1)]
    pub command: Option<String>,
    /// Seconds before the command is killed (exit code 124, `timed_out`); 300 when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub timeout_seconds: Option<u64>,
}

impl ExecRequest {
    /// The required `command`, or the 400 message.
    pub fn require_command(&self) -> Result<&str, String> {
        require_field("command", self.command.as_deref())
    }
}

/// Result of a command run in a sandbox; a failing command is still a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExecResponse {
    /// Exit code: 0 on success, 124 on time-out.
    pub exit_code: i32,
    /// Captured standard output.
    pub stdout: String,
    /// Captured standard error.
    pub stderr: String,
    /// Observed duration in milliseconds, including stream set-up and tear-down.
    pub duration_ms: u64,
    /// The command was killed at its time-out.
    #[serde(default)]
    pub timed_out: bool,
    /// A stream was cut at the output cap.
    #[serde(default)]
    pub truncated: bool,
}

fn default_log_container() -> String {
    DEFAULT_LOG_CONTAINER.to_string()
}

fn default_log_tail() -> u64 {
    DEFAULT_LOG_TAIL
}

/// Query of `GET /api/v1/sandboxes/{name}/logs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// Namespace; `default` when omitted.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::formats::namespace_param",
        skip_serializing_if = "Option::is_none"
    )]
    #[param(value_type = Option<DnsLabel>)]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// Container to read.
    #[serde(default = "default_log_container")]
    #[param(default = "sandbox")]
    #[schema(default = "sandbox")]
    pub container: String,
    /// Trailing lines to return.
    #[serde(
        default = "default_log_tail",
        deserialize_with = "crate::shared::models::formats::int64_param"
    )]
    #[param(default = 200)]
    #[schema(default = 200)]
    pub tail: u64,
    /// Only lines from the last this many seconds; 0 = no filter.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::formats::int64_param"
    )]
    #[param(default = 0)]
    #[schema(default = 0)]
    pub since: u64,
    /// Stream the log as it grows (`text/plain`, chunked) until the sandbox stops or the
    /// client leaves, instead of one JSON snapshot.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[param(default = false)]
    #[schema(default = false)]
    pub follow: bool,
}

impl Default for LogsQuery {
    fn default() -> Self {
        LogsQuery {
            namespace: None,
            container: default_log_container(),
            tail: DEFAULT_LOG_TAIL,
            since: 0,
            follow: false,
        }
    }
}

/// Result of a logs read: a snapshot, not a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LogsResponse {
    /// Log text.
    pub logs: String,
}

/// Optional body of `POST /api/v1/sandboxes/{name}/pause`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PauseRequest {
    /// Namespace; `default` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// Name of a `pause` snapshot of the root disk to take (kata-qemu-longhorn only); none when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub snapshot: Option<String>,
}

/// Optional body of `POST /api/v1/sandboxes/{name}/resume`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResumeRequest {
    /// Namespace; `default` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
}

/// Body of `POST /api/v1/sandboxes/{name}/fork`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ForkRequest {
    /// Name of the new sandbox (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = DnsLabel, required = true)]
    pub new_name: Option<String>,
    /// Namespace of source and clone; `default` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
    /// Name of the intermediate snapshot, kept as a `named` snapshot; generated and deleted when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub snapshot: Option<String>,
    /// sbx extension (sbxd): the clone continues from the source's running processes and
    /// their memory (CRIU checkpoint, source left running), not only its files. 400 with the
    /// reason where CRIU is missing or cannot checkpoint the sandbox.
    #[serde(default)]
    pub warm: bool,
}

impl ForkRequest {
    /// The required `new_name`, or the 400 message.
    pub fn require_new_name(&self) -> Result<&str, String> {
        require_field("new_name", self.new_name.as_deref())
    }
}

/// Result of a fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ForkResponse {
    /// New sandbox.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Sandbox it was forked from.
    pub source: String,
    /// Summary.
    pub message: String,
}

/// Body of `POST /api/v1/sandboxes/{name}/snapshot`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreateSnapshotRequest {
    /// Name of the `named` snapshot to create (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = DnsLabel, required = true)]
    pub snapshot_name: Option<String>,
    /// Namespace; `default` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DnsLabel>)]
    pub namespace: Option<String>,
}

impl CreateSnapshotRequest {
    /// The required `snapshot_name`, or the 400 message.
    pub fn require_snapshot_name(&self) -> Result<&str, String> {
        require_field("snapshot_name", self.snapshot_name.as_deref())
    }
}

/// Result of a named snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreateSnapshotResponse {
    /// Snapshot name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Sandbox whose root disk was snapshotted.
    pub source_sandbox: String,
}

/// CPU and memory use of one sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SandboxMetrics {
    /// Sandbox name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// CPU as a quantity, e.g. `250m`.
    #[schema(example = "250m")]
    pub cpu_usage: String,
    /// Memory as a quantity, e.g. `12Mi`.
    #[schema(example = "12Mi")]
    pub memory_usage: String,
}

/// Query of `GET /api/v1/sandboxes` (and the metrics list).
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, utoipa::IntoParams,
)]
#[into_params(parameter_in = Query)]
pub struct SandboxListQuery {
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
    /// Only sandboxes whose labels match (sbx extension): `key=value`, `key!=value`, `key`,
    /// `!key`, comma-separated, all to match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[param(value_type = Option<LabelSelector>)]
    #[schema(value_type = Option<LabelSelector>)]
    pub label_selector: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_record_round_trips_and_defaults_backend() {
        let json = r#"{"name":"sb1","namespace":"default","status":"Running","ready":"True",
            "restarts":0,"age":"0:01:05","image":"alpine:3","error_message":""}"#;
        let sandbox: Sandbox = serde_json::from_str(json).expect("spec example");
        assert_eq!(sandbox.status, SandboxStatus::Running);
        assert_eq!(sandbox.backend, "");
        let back = serde_json::to_value(&sandbox).expect("serialize");
        assert_eq!(back["status"], "Running");
        assert_eq!(back["ready"], "True");
    }

    #[test]
    fn status_uses_pascal_case() {
        for (status, text) in [
            (SandboxStatus::Pending, "\"Pending\""),
            (SandboxStatus::Paused, "\"Paused\""),
            (SandboxStatus::Terminating, "\"Terminating\""),
        ] {
            assert_eq!(serde_json::to_string(&status).expect("serialize"), text);
        }
        assert!(serde_json::from_str::<SandboxStatus>("\"running\"").is_err());
    }

    #[test]
    fn create_request_missing_required_fields_decodes() {
        let req: CreateSandboxRequest = serde_json::from_str("{}").expect("empty body decodes");
        assert_eq!(
            req.require_name(),
            Err("missing required field `name`".to_string())
        );
        assert!(req.require_image().is_err());
        assert_eq!(req.namespace(), "default");
        assert!(!req.pod_non_root);
        assert_eq!(req.egress_whitelist, None);

        let empty_name: CreateSandboxRequest =
            serde_json::from_str(r#"{"name":"","image":"alpine"}"#).expect("decodes");
        assert!(empty_name.require_name().is_err());
        assert_eq!(empty_name.require_image(), Ok("alpine"));
    }

    #[test]
    fn create_request_wrong_types_fail_to_decode() {
        assert!(serde_json::from_str::<CreateSandboxRequest>(r#"{"name":1}"#).is_err());
        assert!(serde_json::from_str::<CreateSandboxRequest>(r#"{"pod_non_root":"yes"}"#).is_err());
    }

    #[test]
    fn egress_whitelist_keeps_empty_list_apart_from_null() {
        let none: CreateSandboxRequest =
            serde_json::from_str(r#"{"egress_whitelist":null}"#).expect("decodes");
        assert_eq!(none.egress_whitelist, None);
        let empty: CreateSandboxRequest =
            serde_json::from_str(r#"{"egress_whitelist":[]}"#).expect("decodes");
        assert_eq!(empty.egress_whitelist, Some(vec![]));
    }

    #[test]
    fn limits_parse_and_name_the_bad_key() {
        let limits: ResourceLimits =
            serde_json::from_str(r#"{"cpu":"500m","memory":"512Mi","ephemeral-storage":"10Gi"}"#)
                .expect("decodes");
        let parsed = limits.parse().expect("valid");
        assert_eq!(parsed.cpu.map(|q| q.millis()), Some(500));
        assert_eq!(parsed.memory.map(|q| q.value_ceil()), Some(536_870_912));
        assert_eq!(
            parsed.ephemeral_storage.map(|q| q.value_ceil()),
            Some(10 << 30)
        );
        assert_eq!(
            serde_json::to_value(&limits).expect("serialize"),
            serde_json::json!({"cpu":"500m","memory":"512Mi","ephemeral-storage":"10Gi"})
        );

        let bad: ResourceLimits = serde_json::from_str(r#"{"memory":"lots"}"#).expect("decodes");
        let err = bad.parse().expect_err("invalid");
        assert!(err.contains("`memory`"), "{err}");

        let unknown: ResourceLimits = serde_json::from_str(r#"{"gpu":"1"}"#).expect("decodes");
        let err = unknown.parse().expect_err("unknown key");
        assert!(err.contains("`gpu`"), "{err}");
    }

    #[test]
    fn logs_query_defaults() {
        let query: LogsQuery = serde_json::from_str("{}").expect("decodes");
        assert_eq!(query, LogsQuery::default());
        assert_eq!(query.container, "sandbox");
        assert_eq!(query.tail, 200);
        assert_eq!(query.since, 0);
    }

    #[test]
    fn exec_response_defaults_flags() {
        let res: ExecResponse =
            serde_json::from_str(r#"{"exit_code":1,"stdout":"","stderr":"no","duration_ms":12}"#)
                .expect("decodes");
        assert!(!res.timed_out);
        assert!(!res.truncated);
        assert_eq!(
            ExecRequest::default().require_command(),
            Err("missing required field `command`".to_string())
        );
    }

    #[test]
    fn delete_result_serializes_null_error() {
        let result = DeleteResult {
            name: "a".to_string(),
            success: true,
            error: None,
        };
        assert_eq!(
            serde_json::to_value(&result).expect("serialize"),
            serde_json::json!({"name":"a","success":true,"error":null})
        );
    }

    #[test]
    fn namespace_defaults() {
        assert_eq!(namespace_or_default(None), "default");
        assert_eq!(namespace_or_default(Some("team-a")), "team-a");
    }
}
