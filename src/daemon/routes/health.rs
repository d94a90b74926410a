//! `GET /`, `GET /health` and `GET /readyz`: bare objects, no envelope, no authentication.
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use crate::daemon::state::AppState;
use crate::shared::models::health::{HealthResponse, ReadinessResponse, RootInfo};

/// Basic information about the service.
#[utoipa::path(get, path = "/", tag = "health", security(),
    responses((status = 200, description = "Service name and version", body = RootInfo)))]
pub async fn root() -> Json<RootInfo> {
    Json(RootInfo {
        message: "sbx sandbox management service".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    })
}

/// Liveness.
#[utoipa::path(get, path = "/health", tag = "health", security(),
    responses((status = 200, description = "The service answers", body = HealthResponse)))]
pub async fn health() -> Json<HealthResponse> {
    Json(HealthResponse {
        status: "healthy".to_string(),
    })
}

/// Readiness, for a load balancer or a kubelet's probe: 200 while this replica can serve
/// requests (on Kubernetes: the API server answers and the watch caches are in step), 503
/// with the reason otherwise. `/health` answers whenever the process does.
#[utoipa::path(get, path = "/readyz", tag = "health", security(),
    responses(
        (status = 200, description = "Ready", body = ReadinessResponse),
        (status = 503, description = "Not ready, with the reason", body = ReadinessResponse),
    ))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<ReadinessResponse>) {
    match state.readiness().await {
        Ok(()) => (
            StatusCode::OK,
            Json(ReadinessResponse {
                status: "ready".to_string(),
                reason: None,
            }),
        ),
        Err(reason) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(ReadinessResponse {
                status: "not ready".to_string(),
                reason: Some(reason),
            }),
        ),
    }
}
