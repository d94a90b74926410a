//! `/api/v1/auth/*` and `/api/v1/role-bindings`: who is calling, OIDC discovery, bindings.
use axum::Router;
use axum::extract::State;
use axum::routing::get;

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::Json;
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::identity::{OidcDiscovery, Role, RoleBindings, WhoamiResponse};

/// Routes that need authentication.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/auth/whoami", get(whoami))
        .route(
            "/api/v1/role-bindings",
            get(get_role_bindings).put(put_role_bindings),
        )
}

/// Routes open to everyone.
pub fn public_router() -> Router<AppState> {
    Router::new().route("/api/v1/auth/oidc", get(oidc_discovery))
}

/// The caller's identity and grants.
#[utoipa::path(get, path = "/api/v1/auth/whoami", tag = "identity",
    responses((status = 200, description = "Caller identity", body = DataEnvelope<WhoamiResponse>)))]
pub async fn whoami(principal: Principal) -> Json<WhoamiResponse> {
    Json(principal.whoami())
}

/// OIDC configuration for clients; no authentication.
#[utoipa::path(get, path = "/api/v1/auth/oidc", tag = "identity", security(),
    responses(
        (status = 200, description = "Issuer, client id and audience", body = DataEnvelope<OidcDiscovery>),
        (status = 404, description = "OIDC is not configured", body = ErrorEnvelope),
    ))]
pub async fn oidc_discovery(State(state): State<AppState>) -> ServiceResult<Json<OidcDiscovery>> {
    match &state.oidc {
        Some(verifier) => Ok(Json(verifier.config().discovery())),
        None => Err(ServiceError::not_found(
            "OIDC is not configured on this service",
        )),
    }
}

/// The role-binding document.
#[utoipa::path(get, path = "/api/v1/role-bindings", tag = "identity",
    responses((status = 200, description = "The stored document", body = DataEnvelope<RoleBindings>)))]
pub async fn get_role_bindings(
    State(state): State<AppState>,
    principal: Principal,
) -> ServiceResult<Json<RoleBindings>> {
    principal.require_cluster_role(Role::Admin)?;
    Ok(Json(state.bindings.get().await?))
}

/// Replace the whole role-binding document.
#[utoipa::path(put, path = "/api/v1/role-bindings", tag = "identity",
    request_body = RoleBindings,
    responses(
        (status = 200, description = "The stored document", body = DataEnvelope<RoleBindings>),
        (status = 400, description = "Unknown tenant, role/tenant mismatch, duplicate matcher, or no admin left", body = ErrorEnvelope),
    ))]
pub async fn put_role_bindings(
    State(state): State<AppState>,
    principal: Principal,
    Json(document): Json<RoleBindings>,
) -> ServiceResult<Json<RoleBindings>> {
    principal.require_cluster_role(Role::Admin)?;
    Ok(Json(
        state
            .bindings
            .put(document, &state.tenants, &state.keys)
            .await?,
    ))
}
