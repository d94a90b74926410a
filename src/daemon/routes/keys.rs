//! `/api/v1/keys`: mint, list and revoke API keys (admin).
use axum::Router;
use axum::extract::State;
use axum::routing::{delete, get};

use crate::daemon::auth::Principal;
use crate::daemon::error::ServiceResult;
use crate::daemon::extract::{Created, Json, Path};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::formats::KeyName;
use crate::shared::models::identity::{ApiKey, CreateKeyRequest, RevokeKeysResponse, Role};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/keys", get(list_keys).post(create_key))
        .route("/api/v1/keys/{name}", delete(revoke_keys))
}

/// Mint an API key. The token is in this response only.
#[utoipa::path(post, path = "/api/v1/keys", tag = "identity",
    request_body = CreateKeyRequest,
    responses(
        (status = 201, description = "The key, with its token", body = DataEnvelope<ApiKey>,
            headers(("Location" = String, description = "The key's name route"))),
        (status = 400, description = "Missing or invalid field, role/tenant mismatch, unknown tenant, a tenant role without a tenant once a tenant exists (development mode)", body = ErrorEnvelope),
    ))]
pub async fn create_key(
    State(state): State<AppState>,
    principal: Principal,
    Json(request): Json<CreateKeyRequest>,
) -> ServiceResult<Created<ApiKey>> {
    principal.require_cluster_role(Role::Admin)?;
    let key = state.keys.create(&request).await?;
    Ok(Created {
        location: format!("/api/v1/keys/{}", key.name),
        data: key,
    })
}

/// Every key record, without hashes, with `last_used`.
#[utoipa::path(get, path = "/api/v1/keys", tag = "identity",
    responses((status = 200, description = "Key records", body = DataEnvelope<Vec<ApiKey>>)))]
pub async fn list_keys(
    State(state): State<AppState>,
    principal: Principal,
) -> ServiceResult<Json<Vec<ApiKey>>> {
    principal.require_cluster_role(Role::Admin)?;
    Ok(Json(state.keys.list().await))
}

/// Revoke every key with this name.
#[utoipa::path(delete, path = "/api/v1/keys/{name}", tag = "identity",
    params(("name" = KeyName, Path, description = "Key name (label)")),
    responses(
        (status = 200, description = "Ids of the revoked keys", body = DataEnvelope<RevokeKeysResponse>),
        (status = 400, description = "The name holds the last unexpired admin key and no role binding grants admin: the service would have no admin", body = ErrorEnvelope),
        (status = 404, description = "No key has this name", body = ErrorEnvelope),
    ))]
pub async fn revoke_keys(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
) -> ServiceResult<Json<RevokeKeysResponse>> {
    principal.require_cluster_role(Role::Admin)?;
    let revoked = state.keys.revoke(&name).await?;
    Ok(Json(RevokeKeysResponse { revoked }))
}
