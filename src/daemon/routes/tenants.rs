//! `/api/v1/tenants`: tenant read (operator, admin) and writes (admin). The tenancy service
//! lands with its own issue; until then the routes check roles and bodies, then answer 501.
use axum::Router;
use axum::routing::get;

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Created, Json, Path, Query};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::identity::Role;
use crate::shared::models::tenant::{
    CreateTenantRequest, DeleteTenantQuery, DeleteTenantResponse, PatchTenantRequest, Tenant,
};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/tenants", get(list_tenants).post(create_tenant))
        .route(
            "/api/v1/tenants/{name}",
            get(get_tenant).patch(patch_tenant).delete(delete_tenant),
        )
}

fn pending(what: &str) -> ServiceError {
    ServiceError::not_implemented(what)
}

/// List tenants (operator, admin).
#[utoipa::path(get, path = "/api/v1/tenants", tag = "tenants",
    responses((status = 200, description = "Tenants in read form", body = DataEnvelope<Vec<Tenant>>)))]
pub async fn list_tenants(principal: Principal) -> ServiceResult<Json<Vec<Tenant>>> {
    principal.require_cluster_role(Role::Operator)?;
    Err(pending("tenant list"))
}

/// Read one tenant (operator, admin).
#[utoipa::path(get, path = "/api/v1/tenants/{name}", tag = "tenants",
    params(("name" = String, Path, description = "Tenant name")),
    responses(
        (status = 200, description = "The tenant in read form", body = DataEnvelope<Tenant>),
        (status = 404, description = "No such tenant", body = ErrorEnvelope),
    ))]
pub async fn get_tenant(
    principal: Principal,
    Path(_name): Path<String>,
) -> ServiceResult<Json<Tenant>> {
    principal.require_cluster_role(Role::Operator)?;
    Err(pending("tenant read"))
}

/// Create a tenant (admin).
#[utoipa::path(post, path = "/api/v1/tenants", tag = "tenants",
    request_body = CreateTenantRequest,
    responses(
        (status = 201, description = "The tenant in read form", body = DataEnvelope<Tenant>),
        (status = 400, description = "Invalid spec, or a namespace claimed by another tenant", body = ErrorEnvelope),
        (status = 409, description = "The tenant exists", body = ErrorEnvelope),
    ))]
pub async fn create_tenant(
    principal: Principal,
    Json(_request): Json<CreateTenantRequest>,
) -> ServiceResult<Created<Tenant>> {
    principal.require_cluster_role(Role::Admin)?;
    Err(pending("tenant create"))
}

/// Update a tenant (admin): whole sections are replaced; `null` removes one.
#[utoipa::path(patch, path = "/api/v1/tenants/{name}", tag = "tenants",
    params(("name" = String, Path, description = "Tenant name")),
    request_body = PatchTenantRequest,
    responses(
        (status = 200, description = "The tenant in read form", body = DataEnvelope<Tenant>),
        (status = 400, description = "Invalid spec", body = ErrorEnvelope),
        (status = 404, description = "No such tenant", body = ErrorEnvelope),
    ))]
pub async fn patch_tenant(
    principal: Principal,
    Path(_name): Path<String>,
    Json(_request): Json<PatchTenantRequest>,
) -> ServiceResult<Json<Tenant>> {
    principal.require_cluster_role(Role::Admin)?;
    Err(pending("tenant update"))
}

/// Delete a tenant (admin); refused while it has sandboxes unless `cascade=true`.
#[utoipa::path(delete, path = "/api/v1/tenants/{name}", tag = "tenants",
    params(("name" = String, Path, description = "Tenant name"), DeleteTenantQuery),
    responses(
        (status = 200, description = "Deleted (with per-sandbox results when cascading)", body = DataEnvelope<DeleteTenantResponse>),
        (status = 404, description = "No such tenant", body = ErrorEnvelope),
        (status = 409, description = "The tenant still has sandboxes and `cascade` is not set", body = ErrorEnvelope),
    ))]
pub async fn delete_tenant(
    principal: Principal,
    Path(_name): Path<String>,
    Query(_query): Query<DeleteTenantQuery>,
) -> ServiceResult<Json<DeleteTenantResponse>> {
    principal.require_cluster_role(Role::Admin)?;
    Err(pending("tenant delete"))
}
