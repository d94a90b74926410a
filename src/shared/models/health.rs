//! Payloads of the unauthenticated health routes `GET /` and `GET /health` (bare objects, no envelope).
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
