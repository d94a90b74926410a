//! The Tenant custom resource (`tenants.sbx.io`, cluster scoped): its type, from which the
//! CRD in `deploy/` is generated (kube's `CustomResource` derive with a schemars schema of the
//! API's `TenantSpec`), and the record a Tenant object reads as.
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::daemon::platform::{PlatformError, PlatformResult, StoredTenant};
use crate::shared::models::tenant::{TenantSpec, TenantStatus};

/// Desired state of a tenant (the API's `TenantSpec`, as it is).
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sbx.io",
    version = "v1alpha1",
    kind = "Tenant",
    root = "TenantObject",
    plural = "tenants",
    singular = "tenant",
    status = "TenantObjectStatus",
    doc = "A tenant of sbx: the namespaces it owns, the nodes it may use, its default size, quotas and limits.",
    printcolumn = r#"{"name": "Namespaces", "type": "string", "jsonPath": ".spec.namespaces"}"#,
    printcolumn = r#"{"name": "Sandboxes", "type": "string", "jsonPath": ".status.usage.sandboxes"}"#,
    printcolumn = r#"{"name": "vCPU", "type": "string", "jsonPath": ".status.usage.vcpu"}"#,
    printcolumn = r#"{"name": "Memory", "type": "string", "jsonPath": ".status.usage.memory"}"#,
    printcolumn = r#"{"name": "Disk", "type": "string", "jsonPath": ".status.usage.disk"}"#,
    printcolumn = r#"{"name": "Snapshots", "type": "string", "jsonPath": ".status.usage.snapshotStorage"}"#,
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(transparent)]
pub struct TenantObjectSpec(pub TenantSpec);

/// Observed state of a tenant (the API's `TenantStatus`): what it holds, rewritten every 60 s
/// by the leader replica, and the generation that reflects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct TenantObjectStatus(pub TenantStatus);

/// The CustomResourceDefinition of Tenant.
pub fn crd() -> CustomResourceDefinition {
    TenantObject::crd()
}

/// The Tenant object a new tenant is written as.
pub fn object(tenant: &StoredTenant) -> TenantObject {
    let mut object = TenantObject::new(&tenant.name, TenantObjectSpec(tenant.spec.clone()));
    if !tenant.labels.is_empty() {
        object.metadata.labels = Some(tenant.labels.clone());
    }
    object
}

/// The record a Tenant object reads as.
pub fn record(object: &TenantObject) -> PlatformResult<StoredTenant> {
    let name = object
        .metadata
        .name
        .clone()
        .ok_or_else(|| PlatformError::Store("a Tenant object has no name".to_string()))?;
    Ok(StoredTenant {
        name,
        spec: object.spec.0.clone(),
        generation: object.metadata.generation.unwrap_or(1),
        created: object
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(0),
        status: object.status.as_ref().map(|s| s.0.clone()),
        labels: object.metadata.labels.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_names_the_resource_the_platform_uses() {
        let crd = crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("tenants.sbx.io"));
        assert_eq!(crd.spec.scope, "Cluster");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        let schema = serde_json::to_value(&version.schema).unwrap();
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(spec["namespaces"]["type"], "array");
        assert_eq!(
            spec["quotas"]["properties"]["snapshotStorage"]["type"],
            "string"
        );
        assert_eq!(
            spec["limits"]["properties"]["diskIO"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }

    #[test]
    fn objects_round_trip() {
        let tenant = StoredTenant {
            name: "acme".into(),
            spec: TenantSpec {
                namespaces: vec!["acme-dev".into()],
                ..Default::default()
            },
            generation: 1,
            created: 0,
            status: None,
            labels: [("sbx.io/apply-set".to_string(), "tenancy".to_string())].into(),
        };
        let wire = serde_json::to_value(object(&tenant)).unwrap();
        assert_eq!(wire["apiVersion"], "sbx.io/v1alpha1");
        assert_eq!(wire["kind"], "Tenant");
        assert_eq!(
            wire["spec"],
            serde_json::json!({"namespaces": ["acme-dev"]})
        );
        let back: TenantObject = serde_json::from_value(wire).unwrap();
        assert_eq!(record(&back).unwrap(), tenant);
    }
}
