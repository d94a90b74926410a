//! Wire types of the node routes: per-node storage pools and node dedication.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::shared::models::formats::DnsLabel;

use crate::shared::models::sandbox::require_field;

/// Data of `GET /api/v1/nodes/storage`: one [`NodeStorageEntry`] per node name, every node present.
pub type NodeStorage = BTreeMap<String, NodeStorageEntry>;

/// The kfd backend's devmapper thin pool on a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ThinPool {
    /// LVM volume group.
    pub vg: String,
    /// Thin-pool logical volume.
    pub lv: String,
    /// Pool size in bytes.
    pub size_bytes: u64,
    /// Data space used, percent.
    pub data_percent: f64,
    /// Metadata space used, percent.
    pub metadata_percent: f64,
}

/// The XFS loopback disk pool mounted at `/var/lib/k7d/disks` on a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DiskPool {
    /// Mount path.
    pub path: String,
    /// Filesystem size in bytes.
    pub size_bytes: u64,
    /// Bytes used.
    pub used_bytes: u64,
    /// Bytes available.
    pub avail_bytes: u64,
    /// Space used, percent.
    pub used_percent: f64,
}

/// Why one pool on a reachable node could not be read (e.g. it does not exist there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PoolError {
    /// What went wrong.
    pub error: String,
}

/// The thin pool, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum ThinPoolResult {
    /// Pool usage.
    Ok(ThinPool),
    /// Error detail.
    Err(PoolError),
}

/// The disk pool, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum DiskPoolResult {
    /// Pool usage.
    Ok(DiskPool),
    /// Error detail.
    Err(PoolError),
}

/// Storage of one node: both pools, or an error when the node's agent is unreachable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum NodeStorageEntry {
    /// The node answered; each pool is reported or has its own error.
    Pools {
        /// kfd devmapper thin pool.
        kata_thinpool: ThinPoolResult,
        /// Loopback disk pool.
        k7d_disks: DiskPoolResult,
    },
    /// The node's agent could not be reached.
    Unreachable {
        /// What went wrong.
        error: String,
    },
}

/// Body of `POST /api/v1/nodes/{name}/dedicate`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DedicateRequest {
    /// Tenant to dedicate the node to (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = DnsLabel, required = true)]
    pub tenant: Option<String>,
}

impl DedicateRequest {
    /// The required `tenant`, or the 400 message.
    pub fn require_tenant(&self) -> Result<&str, String> {
        require_field("tenant", self.tenant.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_entry_shape() {
        let json = serde_json::json!({
            "node-1": {
                "kata_thinpool": {"vg": "k7d", "lv": "thinpool", "size_bytes": 107374182400u64,
                                  "data_percent": 12.5, "metadata_percent": 1.25},
                "k7d_disks": {"path": "/var/lib/k7d/disks", "size_bytes": 1000, "used_bytes": 250,
                              "avail_bytes": 750, "used_percent": 25.0}
            },
            "node-2": {
                "kata_thinpool": {"error": "volume group k7d not found"},
                "k7d_disks": {"path": "/var/lib/k7d/disks", "size_bytes": 1000, "used_bytes": 0,
                              "avail_bytes": 1000, "used_percent": 0.0}
            },
            "node-3": {"error": "agent unreachable: connection refused"}
        });
        let storage: NodeStorage = serde_json::from_value(json.clone()).expect("spec shapes");

        match &storage["node-1"] {
            NodeStorageEntry::Pools {
                kata_thinpool: ThinPoolResult::Ok(pool),
                k7d_disks: DiskPoolResult::Ok(disks),
            } => {
                assert_eq!(pool.vg, "k7d");
                assert_eq!(disks.used_bytes, 250);
            }
            other => panic!("node-1 decoded as {other:?}"),
        }
        assert!(matches!(
            &storage["node-2"],
            NodeStorageEntry::Pools {
                kata_thinpool: ThinPoolResult::Err(_),
                k7d_disks: DiskPoolResult::Ok(_),
            }
        ));
        assert!(matches!(
            &storage["node-3"],
            NodeStorageEntry::Unreachable { error } if error.contains("unreachable")
        ));
        assert_eq!(serde_json::to_value(&storage).expect("serialize"), json);
    }

    #[test]
    fn rejects_entry_of_neither_shape() {
        assert!(serde_json::from_str::<NodeStorageEntry>(r#"{"kata_thinpool":{}}"#).is_err());
    }

    #[test]
    fn dedicate_requires_tenant() {
        let req: DedicateRequest = serde_json::from_str("{}").expect("decodes");
        assert!(req.require_tenant().is_err());
        let req: DedicateRequest = serde_json::from_str(r#"{"tenant":"acme"}"#).expect("decodes");
        assert_eq!(req.require_tenant(), Ok("acme"));
    }
}
