//! `/api/v1/install`: remote node install (admin). Off by default, so both routes answer 404
//! as the contract says; `[kubernetes.install]` turns it on.
use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::{get, post};

use crate::daemon::auth::Principal;
use crate::daemon::error::ServiceResult;
use crate::daemon::extract::{Json, Path};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::identity::Role;
use crate::shared::models::install::{InstallRequest, InstallStartResponse, InstallStatusResponse};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/install", post(start_install))
        .route("/api/v1/install/{operation}", get(install_status))
}

/// Start a remote install on nodes (admin). Body exactly `{nodes: [...]}`: the nodes are
/// labelled into the installer pool, where the installer DaemonSet checks and installs them.
#[utoipa::path(post, path = "/api/v1/install", tag = "install",
    request_body = InstallRequest,
    responses(
        (status = 202, description = "Started; the operation id to poll", body = DataEnvelope<InstallStartResponse>,
            headers(("Location" = String, description = "The operation's status route"))),
        (status = 400, description = "A body key other than `nodes`, or no node", body = ErrorEnvelope),
        (status = 403, description = "Not an admin", body = ErrorEnvelope),
        (status = 404, description = "Remote install is disabled, or an unknown node", body = ErrorEnvelope),
        (status = 409, description = "A server node (unless allowed in the configuration), or a node being installed", body = ErrorEnvelope),
        (status = 500, description = "The installer's image differs from the pinned one", body = ErrorEnvelope),
    ))]
pub async fn start_install(
    axum::extract::State(state): axum::extract::State<AppState>,
    principal: Principal,
    Json(request): Json<InstallRequest>,
) -> ServiceResult<(
    StatusCode,
    [(header::HeaderName, String); 1],
    Json<InstallStartResponse>,
)> {
    state.install.enabled()?;
    principal.require_cluster_role(Role::Admin)?;
    let started = state.install.start(&request).await?;
    let location = format!("/api/v1/install/{}", started.operation);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(started),
    ))
}

/// Per-node state of an install operation (admin): `pending`, `running`, `succeeded`, or
/// `failed` with the installer's failure line.
#[utoipa::path(get, path = "/api/v1/install/{operation}", tag = "install",
    params(("operation" = String, Path, description = "Operation id")),
    responses(
        (status = 200, description = "State per node", body = DataEnvelope<InstallStatusResponse>),
        (status = 403, description = "Not an admin", body = ErrorEnvelope),
        (status = 404, description = "Remote install is disabled, or an unknown operation", body = ErrorEnvelope),
    ))]
pub async fn install_status(
    axum::extract::State(state): axum::extract::State<AppState>,
    principal: Principal,
    Path(operation): Path<String>,
) -> ServiceResult<Json<InstallStatusResponse>> {
    state.install.enabled()?;
    principal.require_cluster_role(Role::Admin)?;
    Ok(Json(state.install.status(&operation).await?))
}
