//! `/api/v1/nodes`: storage pools per node and node dedication (operator, admin).
use std::collections::BTreeMap;

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Json, Path};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::MessageResponse;
use crate::shared::models::formats::NodeName;
use crate::shared::models::identity::Role;
use crate::shared::models::node::{DedicateRequest, NodeStorage, NodeStorageEntry};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/nodes/storage", get(node_storage))
        .route("/api/v1/nodes/{name}/dedicate", post(dedicate_node))
        .route("/api/v1/nodes/{name}/undedicate", post(undedicate_node))
}

/// Storage pools of every node; an unreachable agent gives an `error` entry.
#[utoipa::path(get, path = "/api/v1/nodes/storage", tag = "nodes",
    responses((status = 200, description = "Storage entry per node name", body = DataEnvelope<BTreeMap<String, NodeStorageEntry>>)))]
pub async fn node_storage(
    State(state): State<AppState>,
    principal: Principal,
) -> ServiceResult<Json<NodeStorage>> {
    principal.require_cluster_role(Role::Operator)?;
    Ok(Json(state.tenants.node_storage().await?))
}

/// Dedicate a node to a tenant: label, `NoSchedule` taint, and `Tenant.spec.nodes`.
#[utoipa::path(post, path = "/api/v1/nodes/{name}/dedicate", tag = "nodes",
    params(("name" = NodeName, Path, description = "Node name")),
    request_body = DedicateRequest,
    responses(
        (status = 200, description = "Dedicated", body = DataEnvelope<MessageResponse>),
        (status = 400, description = "Missing `tenant`", body = ErrorEnvelope),
        (status = 404, description = "Unknown node or tenant", body = ErrorEnvelope),
    ))]
pub async fn dedicate_node(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Json(request): Json<DedicateRequest>,
) -> ServiceResult<Json<MessageResponse>> {
    principal.require_cluster_role(Role::Operator)?;
    let tenant = request
        .require_tenant()
        .map_err(ServiceError::bad_request)?;
    state.tenants.dedicate(&name, tenant).await?;
    Ok(Json(MessageResponse {
        message: format!("node '{name}' dedicated to tenant '{tenant}'"),
    }))
}

/// Undo a dedication: all three effects are reversed.
#[utoipa::path(post, path = "/api/v1/nodes/{name}/undedicate", tag = "nodes",
    params(("name" = NodeName, Path, description = "Node name")),
    responses(
        (status = 200, description = "Undedicated", body = DataEnvelope<MessageResponse>),
        (status = 400, description = "Not a node name", body = ErrorEnvelope),
        (status = 404, description = "Unknown node or tenant", body = ErrorEnvelope),
    ))]
pub async fn undedicate_node(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
) -> ServiceResult<Json<MessageResponse>> {
    principal.require_cluster_role(Role::Operator)?;
    let message = match state.tenants.undedicate(&name).await? {
        Some(tenant) => format!("node '{name}' is no longer dedicated to tenant '{tenant}'"),
        None => format!("node '{name}' was not dedicated"),
    };
    Ok(Json(MessageResponse { message }))
}
