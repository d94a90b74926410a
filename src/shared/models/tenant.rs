//! Wire types of the tenant routes: the `Tenant` resource, its spec and status, create, patch and delete.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::shared::models::formats::{
    CapabilityName, Cidr, DnsLabel, NodeName, QuantityText, TenancyLabelMap,
};

use crate::shared::models::sandbox::{DeleteResult, require_field};
use crate::shared::quantity::Quantity;

/// `apiVersion` of the Tenant resource.
pub const TENANT_API_VERSION: &str = "sbx.io/v1alpha1";

/// `kind` of the Tenant resource.
pub const TENANT_KIND: &str = "Tenant";

/// Size a sandbox gets when its create names no limits.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
pub struct SizeSpec {
    /// CPU quantity, e.g. `1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub cpu: Option<String>,
    /// Memory quantity, e.g. `2Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub memory: Option<String>,
    /// Root disk quantity, e.g. `20Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub disk: Option<String>,
}

/// Totals a tenant's sandboxes and snapshots may not exceed (checked on create, 403 `QuotaExceeded`).
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct TenantQuotas {
    /// Number of sandboxes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandboxes: Option<u64>,
    /// Total vCPU quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub vcpu: Option<String>,
    /// Total memory quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub memory: Option<String>,
    /// Total disk quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub disk: Option<String>,
    /// Total volume-snapshot storage quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub snapshot_storage: Option<String>,
}

/// Largest size one sandbox may ask for (400 above it).
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
pub struct MaxSandboxSize {
    /// CPU quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub cpu: Option<String>,
    /// Memory quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub memory: Option<String>,
}

/// Per-sandbox network bandwidth limits, in bits per second (enforced on kfd and kql).
#[derive(
    Debug,
    Clone,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkLimits {
    /// Egress bits per second, e.g. `100M`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub egress_bps: Option<String>,
    /// Ingress bits per second, e.g. `100M`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QuantityText>)]
    pub ingress_bps: Option<String>,
}

/// Per-sandbox limits of a tenant.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct TenantLimits {
    /// Largest sandbox size.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub max_sandbox_size: Option<MaxSandboxSize>,
    /// Network bandwidth limits.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub network: Option<NetworkLimits>,
    /// Disk I/O limits: accepted by the schema, enforced by no backend.
    #[serde(
        rename = "diskIO",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    #[schema(value_type = Option<Object>)]
    #[schemars(schema_with = "free_form_object")]
    pub disk_io: Option<serde_json::Value>,
    /// The longest a sandbox may live, seconds (sbx extension): the `ttl_seconds` of a create
    /// that names none, and the most one may name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 10, maximum = 315_360_000)]
    pub max_ttl_seconds: Option<u64>,
    /// Capabilities the tenant's users may add with `cap_add` beyond the runtime's default
    /// set (sbx extension; set by an admin). Without it a tenant's user gets 403 for any other
    /// capability; operators and admins are not limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<CapabilityName>>)]
    pub allowed_capabilities: Option<Vec<String>>,
    /// Destinations none of the tenant's sandboxes reach, whatever their `egress_whitelist`
    /// says (sbx extension; set by an admin; every backend): IPv4 CIDRs (a bare address is
    /// /32), at most 256, on top of the daemon's own `egressDeny`. A change applies to the
    /// tenant's running sandboxes too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Cidr>>, max_items = 256)]
    pub egress_deny: Option<Vec<String>>,
    /// Whether the tenant's sandboxes may run the Docker-in-Docker sidecar (restore override
    /// `sidecar: dind`; sbx extension, set by an admin; default false). The sidecar is a
    /// privileged container: on Kubernetes the tenant's namespaces are then enforced at
    /// pod-security level `privileged` instead of `baseline`. Without it a restore that asks
    /// for the sidecar is 403, for every role.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_dind: bool,
}

impl TenantLimits {
    /// The parsed `egressDeny` (empty when unset); the error is a 400 message.
    pub fn egress_deny(&self) -> Result<Vec<crate::shared::egress::Ipv4Net>, String> {
        crate::shared::egress::tenant_denied_ranges(self.egress_deny.as_deref().unwrap_or_default())
    }
}

/// A free-form object; in the Tenant CRD its fields are kept as written.
fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// Desired state of a tenant.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct TenantSpec {
    /// Namespaces owned by the tenant (required, at least one).
    // Defaults to empty on decoding so that a missing list is a 400 from `validate`, not a 422.
    #[serde(default)]
    #[schema(value_type = Vec<DnsLabel>, required = true, min_items = 1)]
    pub namespaces: Vec<String>,
    /// Cluster nodes the tenant's sandboxes are confined to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<NodeName>>)]
    pub nodes: Option<Vec<String>>,
    /// Size for creates that name no limits.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub default_size: Option<SizeSpec>,
    /// Tenant-wide quotas.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub quotas: Option<TenantQuotas>,
    /// Per-sandbox limits.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    pub limits: Option<TenantLimits>,
}

impl TenantSpec {
    /// `limits.egressDeny` as written (empty when unset; checked by `validate`).
    pub fn egress_deny(&self) -> Vec<String> {
        self.limits
            .as_ref()
            .and_then(|l| l.egress_deny.clone())
            .unwrap_or_default()
    }

    /// Checks the rules a spec must meet on its own (400 otherwise): at least one non-empty
    /// namespace, no duplicate namespace, and every quantity string parseable.
    pub fn validate(&self) -> Result<(), String> {
        if self.namespaces.is_empty() {
            return Err("`spec.namespaces` must list at least one namespace".to_string());
        }
        for (i, ns) in self.namespaces.iter().enumerate() {
            if ns.is_empty() {
                return Err("`spec.namespaces` must not contain an empty name".to_string());
            }
            if self.namespaces[..i].contains(ns) {
                return Err(format!("`spec.namespaces` lists `{ns}` twice"));
            }
        }
        let nodes = self.nodes.as_deref().unwrap_or_default();
        for (i, node) in nodes.iter().enumerate() {
            if nodes[..i].contains(node) {
                return Err(format!("`spec.nodes` lists `{node}` twice"));
            }
        }
        let check = |field: &str, value: &Option<String>| -> Result<(), String> {
            match value.as_deref() {
                Some(text) => Quantity::parse(text)
                    .map(|_| ())
                    .map_err(|e| format!("invalid `spec.{field}`: {e}")),
                None => Ok(()),
            }
        };
        if let Some(size) = &self.default_size {
            check("defaultSize.cpu", &size.cpu)?;
            check("defaultSize.memory", &size.memory)?;
            check("defaultSize.disk", &size.disk)?;
        }
        if let Some(quotas) = &self.quotas {
            check("quotas.vcpu", &quotas.vcpu)?;
            check("quotas.memory", &quotas.memory)?;
            check("quotas.disk", &quotas.disk)?;
            check("quotas.snapshotStorage", &quotas.snapshot_storage)?;
        }
        if let Some(limits) = &self.limits {
            if let Some(max) = &limits.max_sandbox_size {
                check("limits.maxSandboxSize.cpu", &max.cpu)?;
                check("limits.maxSandboxSize.memory", &max.memory)?;
            }
            if let Some(network) = &limits.network {
                check("limits.network.egressBps", &network.egress_bps)?;
                check("limits.network.ingressBps", &network.ingress_bps)?;
            }
            let min = crate::shared::models::sandbox::MIN_LIFETIME_SECONDS;
            let max = crate::shared::models::sandbox::MAX_LIFETIME_SECONDS;
            if limits
                .max_ttl_seconds
                .is_some_and(|t| !(min..=max).contains(&t))
            {
                return Err(format!(
                    "limits.maxTtlSeconds must be at least {min} and at most {max}"
                ));
            }
            limits.egress_deny()?;
            for name in limits.allowed_capabilities.as_deref().unwrap_or_default() {
                // `ALL` would hand every capability, SYS_ADMIN among them, to every user of
                // the tenant: an admin names each one.
                if name.trim().eq_ignore_ascii_case("ALL") {
                    return Err(
                        "limits.allowedCapabilities: ALL is not allowed; name the capabilities"
                            .to_string(),
                    );
                }
                crate::shared::capabilities::parse_capability(name)
                    .map_err(|e| format!("invalid `spec.limits.allowedCapabilities`: {e}"))?;
            }
        }
        Ok(())
    }
}

/// Metadata of the Tenant resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TenantMetadata {
    /// Tenant name (cluster-scoped).
    pub name: String,
    /// Labels (Kubernetes label syntax), e.g. `sbx.io/apply-set`, which `sbx apply
    /// --applyset` writes to find what it may prune; absent when there are none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = TenancyLabelMap)]
    pub labels: BTreeMap<String, String>,
}

/// Current consumption of a tenant, as quantity strings (the sandbox count too, as the spec gives it).
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct TenantUsage {
    /// Number of sandboxes, e.g. `"3"`.
    #[serde(default)]
    pub sandboxes: String,
    /// vCPU reserved.
    #[serde(default)]
    pub vcpu: String,
    /// Memory reserved.
    #[serde(default)]
    pub memory: String,
    /// Disk reserved.
    #[serde(default)]
    pub disk: String,
    /// Volume-snapshot storage used.
    #[serde(default)]
    pub snapshot_storage: String,
}

/// Observed state of a tenant, rewritten every 60 seconds by the leader.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct TenantStatus {
    /// Current consumption.
    #[serde(default)]
    pub usage: TenantUsage,
    /// Spec generation the status reflects.
    #[serde(default)]
    pub observed_generation: i64,
}

/// The Tenant resource in its read form (returned by get, list, create and update).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tenant {
    /// Always `sbx.io/v1alpha1`.
    #[schema(example = "sbx.io/v1alpha1")]
    pub api_version: String,
    /// Always `Tenant`.
    #[schema(example = "Tenant")]
    pub kind: String,
    /// Name.
    pub metadata: TenantMetadata,
    /// Desired state.
    pub spec: TenantSpec,
    /// Observed state.
    #[serde(default)]
    pub status: TenantStatus,
}

impl Tenant {
    /// A tenant with the fixed `apiVersion` and `kind`.
    pub fn new(name: impl Into<String>, spec: TenantSpec, status: TenantStatus) -> Tenant {
        Tenant {
            api_version: TENANT_API_VERSION.to_string(),
            kind: TENANT_KIND.to_string(),
            metadata: TenantMetadata {
                name: name.into(),
                labels: BTreeMap::new(),
            },
            spec,
            status,
        }
    }
}

/// Body of `POST /api/v1/tenants`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CreateTenantRequest {
    /// Tenant name (required), a DNS-1123 label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = DnsLabel, required = true)]
    pub name: Option<String>,
    /// Desired state (required).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::shared::models::objects::optional"
    )]
    #[schema(value_type = TenantSpec, required = true)]
    pub spec: Option<TenantSpec>,
    /// Labels (Kubernetes label syntax, at most 64), returned as `metadata.labels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<TenancyLabelMap>)]
    pub labels: Option<BTreeMap<String, String>>,
}

impl CreateTenantRequest {
    /// The required `name`, or the 400 message.
    pub fn require_name(&self) -> Result<&str, String> {
        require_field("name", self.name.as_deref())
    }

    /// The required `spec`, checked with [`TenantSpec::validate`], or the 400 message.
    pub fn require_spec(&self) -> Result<&TenantSpec, String> {
        let spec = self
            .spec
            .as_ref()
            .ok_or_else(|| "missing required field `spec`".to_string())?;
        spec.validate()?;
        Ok(spec)
    }
}

/// Deserializes a field that distinguishes absent (`None`, via `#[serde(default)]`), `null`
/// (`Some(None)`) and a value (`Some(Some(v))`).
pub fn double_option<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// Spec sections of a tenant PATCH: an absent section is kept, `null` removes it, a value
/// replaces the whole section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantSpecPatch {
    /// New namespaces (cannot be removed).
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Vec<DnsLabel>, required = false, min_items = 1)]
    pub namespaces: Option<Option<Vec<String>>>,
    /// New node list, or null to remove it.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Vec<NodeName>>)]
    pub nodes: Option<Option<Vec<String>>>,
    /// New default size, or null to remove it.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::objects::patch",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<SizeSpec>)]
    pub default_size: Option<Option<SizeSpec>>,
    /// New quotas, or null to remove them.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::objects::patch",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<TenantQuotas>)]
    pub quotas: Option<Option<TenantQuotas>>,
    /// New limits, or null to remove them.
    #[serde(
        default,
        deserialize_with = "crate::shared::models::objects::patch",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<TenantLimits>)]
    pub limits: Option<Option<TenantLimits>>,
}

/// Replaces the section when the patch names it (`Some`), keeps it otherwise.
fn patch_section<T: Clone>(patch: &Option<Option<T>>, current: &Option<T>) -> Option<T> {
    match patch {
        None => current.clone(),
        Some(value) => value.clone(),
    }
}

impl TenantSpecPatch {
    /// The spec after the patch, checked with [`TenantSpec::validate`]; removing `namespaces`
    /// is an error because the section is required.
    pub fn apply(&self, current: &TenantSpec) -> Result<TenantSpec, String> {
        let namespaces = match &self.namespaces {
            None => current.namespaces.clone(),
            Some(Some(namespaces)) => namespaces.clone(),
            Some(None) => {
                return Err("`spec.namespaces` is required and cannot be removed".to_string());
            }
        };
        let spec = TenantSpec {
            namespaces,
            nodes: patch_section(&self.nodes, &current.nodes),
            default_size: patch_section(&self.default_size, &current.default_size),
            quotas: patch_section(&self.quotas, &current.quotas),
            limits: patch_section(&self.limits, &current.limits),
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// Body of `PATCH /api/v1/tenants/{name}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PatchTenantRequest {
    /// Sections to replace or remove; an empty or absent spec changes nothing.
    #[serde(default, deserialize_with = "crate::shared::models::objects::required")]
    pub spec: TenantSpecPatch,
    /// New labels, replacing all of them (`{}` removes them); absent: kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<TenancyLabelMap>)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// Query of `DELETE /api/v1/tenants/{name}`.
#[derive(
    Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema, utoipa::IntoParams,
)]
#[into_params(parameter_in = Query)]
pub struct DeleteTenantQuery {
    /// Also delete the tenant's sandboxes; without it a tenant with sandboxes is 409.
    #[serde(default)]
    pub cascade: bool,
}

/// Result of a tenant delete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeleteTenantResponse {
    /// Summary.
    pub message: String,
    /// With `cascade`: one entry per deleted sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<Vec<DeleteResult>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_spec() -> TenantSpec {
        serde_json::from_value(serde_json::json!({
            "namespaces": ["team-a"],
            "nodes": ["node-1"],
            "defaultSize": {"cpu": "1", "memory": "2Gi", "disk": "20Gi"},
            "quotas": {"sandboxes": 10, "vcpu": "8", "memory": "16Gi", "disk": "200Gi",
                       "snapshotStorage": "100Gi"},
            "limits": {"maxSandboxSize": {"cpu": "4", "memory": "8Gi"},
                       "network": {"egressBps": "100M", "ingressBps": "200M"},
                       "diskIO": {"readBps": "10M"}}
        }))
        .expect("spec example")
    }

    #[test]
    fn spec_uses_camel_case_and_round_trips() {
        let spec = full_spec();
        assert_eq!(spec.quotas.as_ref().and_then(|q| q.sandboxes), Some(10));
        assert_eq!(
            spec.limits
                .as_ref()
                .and_then(|l| l.network.as_ref())
                .and_then(|n| n.egress_bps.as_deref()),
            Some("100M")
        );
        let value = serde_json::to_value(&spec).expect("serialize");
        assert_eq!(value["quotas"]["snapshotStorage"], "100Gi");
        assert_eq!(value["limits"]["maxSandboxSize"]["cpu"], "4");
        assert_eq!(value["limits"]["diskIO"]["readBps"], "10M");
        assert_eq!(value["defaultSize"]["disk"], "20Gi");
        assert_eq!(spec.validate(), Ok(()));
    }

    #[test]
    fn spec_skips_absent_sections() {
        let spec = TenantSpec {
            namespaces: vec!["a".to_string()],
            ..TenantSpec::default()
        };
        assert_eq!(
            serde_json::to_value(&spec).expect("serialize"),
            serde_json::json!({"namespaces": ["a"]})
        );
    }

    #[test]
    fn spec_validation() {
        let empty: TenantSpec = serde_json::from_str("{}").expect("decodes");
        assert!(
            empty
                .validate()
                .expect_err("no namespaces")
                .contains("at least one")
        );
        let twice = TenantSpec {
            namespaces: vec!["a".to_string(), "a".to_string()],
            ..TenantSpec::default()
        };
        assert!(twice.validate().is_err());
        let mut bad_quota = full_spec();
        if let Some(quotas) = bad_quota.quotas.as_mut() {
            quotas.memory = Some("16 Gi".to_string());
        }
        assert!(
            bad_quota
                .validate()
                .expect_err("bad")
                .contains("quotas.memory")
        );
    }

    #[test]
    fn read_form_round_trips() {
        let json = serde_json::json!({
            "apiVersion": "sbx.io/v1alpha1", "kind": "Tenant",
            "metadata": {"name": "acme"},
            "spec": {"namespaces": ["acme"]},
            "status": {"usage": {"sandboxes": "2", "vcpu": "2", "memory": "4Gi",
                                 "disk": "40Gi", "snapshotStorage": "0"},
                       "observedGeneration": 3}
        });
        let tenant: Tenant = serde_json::from_value(json.clone()).expect("read form");
        assert_eq!(tenant.status.observed_generation, 3);
        assert_eq!(serde_json::to_value(&tenant).expect("serialize"), json);
        let fresh = Tenant::new("acme", tenant.spec.clone(), TenantStatus::default());
        assert_eq!(fresh.api_version, TENANT_API_VERSION);
        assert_eq!(fresh.kind, TENANT_KIND);
    }

    #[test]
    fn create_request_requires_name_and_valid_spec() {
        let req: CreateTenantRequest = serde_json::from_str("{}").expect("decodes");
        assert!(req.require_name().is_err());
        assert_eq!(
            req.require_spec(),
            Err("missing required field `spec`".to_string())
        );
        let req: CreateTenantRequest =
            serde_json::from_str(r#"{"name":"acme","spec":{"namespaces":[]}}"#).expect("decodes");
        assert_eq!(req.require_name(), Ok("acme"));
        assert!(req.require_spec().is_err());
    }

    #[test]
    fn patch_distinguishes_absent_null_and_value() {
        let patch: PatchTenantRequest = serde_json::from_str(
            r#"{"spec":{"nodes":null,"quotas":{"sandboxes":5},"namespaces":["b","c"]}}"#,
        )
        .expect("decodes");
        let spec = &patch.spec;
        assert_eq!(spec.nodes, Some(None));
        assert_eq!(spec.default_size, None);
        assert_eq!(spec.limits, None);
        let patched = spec.apply(&full_spec()).expect("valid patch");
        assert_eq!(patched.namespaces, vec!["b".to_string(), "c".to_string()]);
        assert_eq!(patched.nodes, None);
        // A replaced section is replaced whole, not merged.
        assert_eq!(
            patched.quotas,
            Some(TenantQuotas {
                sandboxes: Some(5),
                ..TenantQuotas::default()
            })
        );
        // Untouched sections are kept.
        assert_eq!(patched.default_size, full_spec().default_size);
        assert_eq!(patched.limits, full_spec().limits);
    }

    #[test]
    fn empty_patch_changes_nothing() {
        let patch: PatchTenantRequest = serde_json::from_str("{}").expect("decodes");
        assert_eq!(patch.spec.apply(&full_spec()), Ok(full_spec()));
    }

    #[test]
    fn patch_cannot_remove_or_empty_namespaces() {
        let remove: PatchTenantRequest =
            serde_json::from_str(r#"{"spec":{"namespaces":null}}"#).expect("decodes");
        assert!(
            remove
                .spec
                .apply(&full_spec())
                .expect_err("required")
                .contains("namespaces")
        );
        let empty: PatchTenantRequest =
            serde_json::from_str(r#"{"spec":{"namespaces":[]}}"#).expect("decodes");
        assert!(empty.spec.apply(&full_spec()).is_err());
    }

    #[test]
    fn patch_serializes_null_for_removal() {
        let patch = TenantSpecPatch {
            nodes: Some(None),
            ..TenantSpecPatch::default()
        };
        assert_eq!(
            serde_json::to_value(&patch).expect("serialize"),
            serde_json::json!({"nodes": null})
        );
        let back: TenantSpecPatch =
            serde_json::from_value(serde_json::json!({"nodes": null})).expect("decodes");
        assert_eq!(back, patch);
    }

    #[test]
    fn delete_query_and_response() {
        let query: DeleteTenantQuery = serde_json::from_str("{}").expect("decodes");
        assert!(!query.cascade);
        let plain = DeleteTenantResponse {
            message: "deleted".to_string(),
            results: None,
        };
        assert_eq!(
            serde_json::to_value(&plain).expect("serialize"),
            serde_json::json!({"message": "deleted"})
        );
    }
}
