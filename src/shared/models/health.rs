//! Payloads of the unauthenticated health routes `GET /`, `GET /health` and `GET /readyz` (bare objects, no envelope).
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /`: basic information about the service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RootInfo {
    /// A greeting naming the service.
    pub message: String,
    /// Service version in `x.y.z` form.
    pub version: String,
}

/// `GET /health`: liveness of the service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthResponse {
    /// Always `healthy` when the service answers.
    pub status: String,
}

/// `GET /readyz`: whether this replica can serve requests now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReadinessResponse {
    /// `ready` or `not ready`.
    pub status: String,
    /// Why not, when not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
