//! `/api/v1/install`: remote node install. Off by default, so both routes answer 404 as the
//! contract says.
use axum::Router;
use axum::routing::{get, post};

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Json, Path};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::install::{InstallRequest, InstallStartResponse, InstallStatusResponse};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/install", post(start_install))
        .route("/api/v1/install/{operation}", get(install_status))
}

fn disabled() -> ServiceError {
    ServiceError::not_found("remote install is not enabled on this service")
}

/// Start a remote install on nodes (admin). Body exactly `{nodes: [...]}`.
#[utoipa::path(post, path = "/api/v1/install", tag = "install",
    request_body = InstallRequest,
    responses(
        (status = 202, description = "Started; the operation id to poll", body = DataEnvelope<InstallStartResponse>),
        (status = 400, description = "A body key other than `nodes`", body = ErrorEnvelope),
        (status = 404, description = "Remote install is disabled, or an unknown node", body = ErrorEnvelope),
        (status = 409, description = "A server node, unless allowed at install", body = ErrorEnvelope),
    ))]
pub async fn start_install(
    _principal: Principal,
    Json(_request): Json<InstallRequest>,
) -> ServiceResult<Json<InstallStartResponse>> {
    Err(disabled())
}

/// Per-node state of an install operation (admin).
#[utoipa::path(get, path = "/api/v1/install/{operation}", tag = "install",
    params(("operation" = String, Path, description = "Operation id")),
    responses(
        (status = 200, description = "State per node", body = DataEnvelope<InstallStatusResponse>),
        (status = 404, description = "Remote install is disabled, or an unknown operation", body = ErrorEnvelope),
    ))]
pub async fn install_status(
    _principal: Principal,
    Path(_operation): Path<String>,
) -> ServiceResult<Json<InstallStatusResponse>> {
    Err(disabled())
}
