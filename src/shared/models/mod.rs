//! Request, response and record types of the whole API contract, one module per area.
pub mod health;
pub mod identity;
pub mod image;
pub mod install;
pub mod node;
pub mod sandbox;
pub mod snapshot;
pub mod tenant;
pub mod usage;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// The default namespace wherever a `namespace` query parameter or body key is absent.
pub const DEFAULT_NAMESPACE: &str = "default";

/// A plain confirmation payload: `{"message": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MessageResponse {
    /// Human-readable outcome of the operation.
    pub message: String,
}

/// The `namespace` query parameter shared by most sandbox and snapshot routes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct NamespaceQuery {
    /// Namespace of the object; `default` when absent.
    #[serde(default)]
    pub namespace: Option<String>,
}

impl NamespaceQuery {
    /// The namespace asked for, or `default`.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }
}
