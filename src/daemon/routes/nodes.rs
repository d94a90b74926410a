//! `/api/v1/nodes`: storage pools per node and node dedication. The node agent lands with
//! its own issue; until then the routes check roles and bodies, then answer 501.
use std::collections::BTreeMap;

use axum::Router;
use axum::routing::{get, post};

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Json, Path};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::MessageResponse;
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
pub async fn node_storage(principal: Principal) -> ServiceResult<Json<NodeStorage>> {
    principal.require_cluster_role(Role::Operator)?;
    Err(ServiceError::not_implemented("node storage"))
}

/// Dedicate a node to a tenant: label, `NoSchedule` taint, and `Tenant.spec.nodes`.
#[utoipa::path(post, path = "/api/v1/nodes/{name}/dedicate", tag = "nodes",
    params(("name" = String, Path, description = "Node name")),
    request_body = DedicateRequest,
    responses(
        (status = 200, description = "Dedicated", body = DataEnvelope<MessageResponse>),
        (status = 400, description = "Missing `tenant`", body = ErrorEnvelope),
        (status = 404, description = "Unknown node or tenant", body = ErrorEnvelope),
    ))]
pub async fn dedicate_node(
    principal: Principal,
    Path(_name): Path<String>,
    Json(_request): Json<DedicateRequest>,
) -> ServiceResult<Json<MessageResponse>> {
    principal.require_cluster_role(Role::Operator)?;
    Err(ServiceError::not_implemented("node dedication"))
}

/// Undo a dedication: all three effects are reversed.
#[utoipa::path(post, path = "/api/v1/nodes/{name}/undedicate", tag = "nodes",
    params(("name" = String, Path, description = "Node name")),
    responses(
        (status = 200, description = "Undedicated", body = DataEnvelope<MessageResponse>),
        (status = 404, description = "Unknown node or tenant", body = ErrorEnvelope),
    ))]
pub async fn undedicate_node(
    principal: Principal,
    Path(_name): Path<String>,
) -> ServiceResult<Json<MessageResponse>> {
    principal.require_cluster_role(Role::Operator)?;
    Err(ServiceError::not_implemented("node dedication"))
}
