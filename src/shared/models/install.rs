//! Wire types of the remote install routes: start body, operation id and per-node status.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::shared::models::formats::NodeName;

/// Body of `POST /api/v1/install`: exactly `{"nodes": [...]}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InstallRequest {
    /// Cluster node names to install (required, at least one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Vec<NodeName>, required = true, min_items = 1)]
    pub nodes: Option<Vec<String>>,
    /// Any other key (`playbook`, `image`, `inventory`, `config`, …); rejected by [`InstallRequest::validate`].
    #[serde(flatten)]
    #[schema(ignore)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl InstallRequest {
    /// The node list, or the 400 message for another key, a missing list, or an empty list or name.
    pub fn validate(&self) -> Result<&[String], String> {
        if let Some(key) = self.other.keys().next() {
            return Err(format!(
                "unknown install field `{key}`: the body is exactly {{\"nodes\": [...]}}"
            ));
        }
        let nodes = self
            .nodes
            .as_deref()
            .ok_or_else(|| "missing required field `nodes`".to_string())?;
        if nodes.is_empty() {
            return Err("`nodes` must list at least one node".to_string());
        }
        if nodes.iter().any(String::is_empty) {
            return Err("`nodes` must not contain an empty name".to_string());
        }
        Ok(nodes)
    }
}

/// State of the install on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum InstallState {
    /// Not started yet.
    Pending,
    /// In progress.
    Running,
    /// Finished successfully.
    Succeeded,
    /// Finished with an error; see `message`.
    Failed,
}

/// Data of `POST /api/v1/install` (202).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InstallStartResponse {
    /// Operation id for `GET /api/v1/install/{operation}`.
    pub operation: String,
    /// Nodes labelled into the installer pool.
    pub nodes: Vec<String>,
}

/// Install progress on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NodeInstallStatus {
    /// Current state.
    pub state: InstallState,
    /// The installer's failure line on failure; null otherwise.
    #[serde(default)]
    pub message: Option<String>,
}

/// Data of `GET /api/v1/install/{operation}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InstallStatusResponse {
    /// Operation id.
    pub operation: String,
    /// Progress per node name.
    pub nodes: BTreeMap<String, NodeInstallStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_exactly_nodes() {
        let req: InstallRequest =
            serde_json::from_str(r#"{"nodes":["node-1","node-2"]}"#).expect("decodes");
        assert_eq!(
            req.validate(),
            Ok(&["node-1".to_string(), "node-2".to_string()][..])
        );
        assert_eq!(
            serde_json::to_value(&req).expect("serialize"),
            serde_json::json!({"nodes": ["node-1", "node-2"]})
        );
    }

    #[test]
    fn rejects_other_keys_by_name() {
        for key in ["playbook", "image", "inventory", "config", "anything"] {
            let req: InstallRequest =
                serde_json::from_value(serde_json::json!({"nodes": ["n"], key: "x"}))
                    .expect("decodes");
            let err = req.validate().expect_err("extra key");
            assert!(err.contains(&format!("`{key}`")), "{err}");
        }
    }

    #[test]
    fn rejects_missing_or_empty_nodes() {
        let req: InstallRequest = serde_json::from_str("{}").expect("decodes");
        assert!(req.validate().expect_err("missing").contains("`nodes`"));
        let req: InstallRequest = serde_json::from_str(r#"{"nodes":[]}"#).expect("decodes");
        assert!(req.validate().is_err());
        assert!(serde_json::from_str::<InstallRequest>(r#"{"nodes":"n"}"#).is_err());
    }

    #[test]
    fn status_round_trips() {
        let json = serde_json::json!({
            "operation": "op-1",
            "nodes": {
                "node-1": {"state": "succeeded", "message": null},
                "node-2": {"state": "failed", "message": "TASK [k7d] failed"}
            }
        });
        let status: InstallStatusResponse = serde_json::from_value(json.clone()).expect("decodes");
        assert_eq!(status.nodes["node-2"].state, InstallState::Failed);
        assert_eq!(serde_json::to_value(&status).expect("serialize"), json);
    }
}
