//! `GET /` and `GET /health`: bare objects, no envelope, no authentication.
use axum::Json;

use crate::shared::models::health::{HealthResponse, RootInfo};

/// Basic information about the service.
#[utoipa::path(get, path = "/", tag = "health",
    responses((status = 200, description = "Service name and version", body = RootInfo)))]
pub async fn root() -> Json<RootInfo> {
    Json(RootInfo {
        message: "sbx sandbox management service".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// Liveness.
#[utoipa::path(get, path = "/health", tag = "health",
    responses((status = 200, description = "The service answers", body = HealthResponse)))]
pub async fn health() -> Json<HealthResponse> {
    Json(HealthResponse {
        status: "healthy".to_string(),
    })
}
