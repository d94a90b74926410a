//! `GET /api/v1/usage`: showback read from the metrics server at `metering.metricsUrl`.
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Json, Query};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::usage::{UsageQuery, UsageResponse};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/usage", get(usage))
}

/// Usage rows over `[from, to]`, grouped by any of tenant, namespace, backend, state.
#[utoipa::path(get, path = "/api/v1/usage", tag = "usage", params(UsageQuery),
    responses(
        (status = 200, description = "Usage rows", body = DataEnvelope<UsageResponse>),
        (status = 400, description = "Bad range or grouping, or `metering.metricsUrl` is not configured", body = ErrorEnvelope),
        (status = 404, description = "No such tenant", body = ErrorEnvelope),
        (status = 502, description = "The metrics server is unreachable (`MetricsUnavailable`)", body = ErrorEnvelope),
    ))]
pub async fn usage(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<UsageQuery>,
) -> ServiceResult<Json<UsageResponse>> {
    let (from, to) = query.range().map_err(ServiceError::bad_request)?;
    let group = query.group_keys().map_err(ServiceError::bad_request)?;
    let tenant = usage_tenant(&principal, query.tenant.as_deref())?;
    if let Some(tenant) = &tenant {
        state.tenants.require_tenant(tenant).await?;
    }
    let rows = state
        .metering
        .usage(from, to, tenant.as_deref(), &group)
        .await?;
    Ok(Json(UsageResponse { rows }))
}

/// Which tenant's usage the caller may read: operators and admins any (or all); a
/// tenant-scoped principal only its own (named, or implied when it has one tenant).
fn usage_tenant(principal: &Principal, asked: Option<&str>) -> ServiceResult<Option<String>> {
    if principal.cluster_role.is_some() || principal.unscoped_role.is_some() {
        return Ok(asked.map(str::to_string));
    }
    let own: Vec<&String> = principal.tenant_roles.keys().collect();
    match (asked, own.as_slice()) {
        (Some(t), _) if principal.tenant_roles.contains_key(t) => Ok(Some(t.to_string())),
        (Some(t), _) => Err(ServiceError::forbidden(format!(
            "{} may read the usage of its own tenant only, not of '{t}'",
            principal.subject
        ))),
        (None, [only]) => Ok(Some((*only).clone())),
        (None, []) => Err(ServiceError::forbidden(format!(
            "{} holds no tenant role: it may read no usage",
            principal.subject
        ))),
        (None, _) => Err(ServiceError::bad_request(
            "name the tenant: this principal holds roles in several",
        )),
    }
}

/// The Prometheus scrape endpoint: usage series and the service's request metrics
/// (operator, admin).
pub async fn metrics(
    State(state): State<AppState>,
    principal: Principal,
) -> ServiceResult<Response> {
    principal.require_cluster_role(crate::shared::models::identity::Role::Operator)?;
    let body = state.metering.render().await;
    Ok((
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response())
}
