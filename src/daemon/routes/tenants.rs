//! `/api/v1/tenants`: tenant read (operator, admin) and writes (admin), over the tenant
//! service.
use axum::Router;
use axum::extract::State;
use axum::routing::get;

use crate::daemon::auth::Principal;
use crate::daemon::error::ServiceResult;
use crate::daemon::extract::{Created, Json, Path, Query};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::formats::DnsLabel;
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

/// List tenants (operator, admin).
#[utoipa::path(get, path = "/api/v1/tenants", tag = "tenants",
    responses((status = 200, description = "Tenants in read form", body = DataEnvelope<Vec<Tenant>>)))]
pub async fn list_tenants(
    State(state): State<AppState>,
    principal: Principal,
) -> ServiceResult<Json<Vec<Tenant>>> {
    principal.require_cluster_role(Role::Operator)?;
    Ok(Json(state.tenants.list().await?))
}

/// Read one tenant (operator, admin).
#[utoipa::path(get, path = "/api/v1/tenants/{name}", tag = "tenants",
    params(("name" = DnsLabel, Path, description = "Tenant name")),
    responses(
        (status = 200, description = "The tenant in read form", body = DataEnvelope<Tenant>),
        (status = 400, description = "Not a tenant name", body = ErrorEnvelope),
        (status = 404, description = "No such tenant", body = ErrorEnvelope),
    ))]
pub async fn get_tenant(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
) -> ServiceResult<Json<Tenant>> {
    principal.require_cluster_role(Role::Operator)?;
    Ok(Json(state.tenants.get(&name).await?))
}

/// Create a tenant (admin).
#[utoipa::path(post, path = "/api/v1/tenants", tag = "tenants",
    request_body = CreateTenantRequest,
    responses(
        (status = 201, description = "The tenant in read form", body = DataEnvelope<Tenant>),
        (status = 400, description = "Invalid spec, a namespace claimed by another tenant, or the name taken", body = ErrorEnvelope),
        (status = 409, description = "A namespace of the spec holds sandboxes or snapshots: a namespace joins a tenant only empty (`Conflict`)", body = ErrorEnvelope),
    ))]
pub async fn create_tenant(
    State(state): State<AppState>,
    principal: Principal,
    Json(request): Json<CreateTenantRequest>,
) -> ServiceResult<Created<Tenant>> {
    principal.require_cluster_role(Role::Admin)?;
    let tenant = state.tenants.create(&request).await?;
    Ok(Created {
        location: format!("/api/v1/tenants/{}", tenant.metadata.name),
        data: tenant,
    })
}

/// Update a tenant (admin): whole sections are replaced; `null` removes one.
#[utoipa::path(patch, path = "/api/v1/tenants/{name}", tag = "tenants",
    params(("name" = DnsLabel, Path, description = "Tenant name")),
    request_body = PatchTenantRequest,
    responses(
        (status = 200, description = "The tenant in read form", body = DataEnvelope<Tenant>),
        (status = 400, description = "Invalid spec", body = ErrorEnvelope),
        (status = 404, description = "No such tenant", body = ErrorEnvelope),
        (status = 409, description = "A namespace added or removed holds sandboxes or snapshots: namespaces change tenants only empty (`Conflict`)", body = ErrorEnvelope),
    ))]
pub async fn patch_tenant(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Json(request): Json<PatchTenantRequest>,
) -> ServiceResult<Json<Tenant>> {
    principal.require_cluster_role(Role::Admin)?;
    Ok(Json(state.tenants.update(&name, &request).await?))
}

/// Delete a tenant (admin); refused while it has sandboxes unless `cascade=true`.
#[utoipa::path(delete, path = "/api/v1/tenants/{name}", tag = "tenants",
    params(("name" = DnsLabel, Path, description = "Tenant name"), DeleteTenantQuery),
    responses(
        (status = 200, description = "Deleted (with per-sandbox results when cascading)", body = DataEnvelope<DeleteTenantResponse>),
        (status = 404, description = "No such tenant", body = ErrorEnvelope),
        (status = 409, description = "The tenant still has sandboxes and `cascade` is not set", body = ErrorEnvelope),
    ))]
pub async fn delete_tenant(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<DeleteTenantQuery>,
) -> ServiceResult<Json<DeleteTenantResponse>> {
    principal.require_cluster_role(Role::Admin)?;
    Ok(Json(
        state
            .tenants
            .delete(&name, query.cascade, &state.sandboxes)
            .await?,
    ))
}
