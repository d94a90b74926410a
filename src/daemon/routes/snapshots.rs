//! `/api/v1/snapshots`: list, inspect, delete, restore and GC of snapshots.
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::{get, post};

use crate::daemon::auth::Principal;
use crate::daemon::error::ServiceResult;
use crate::daemon::extract::{Created, Json, Path, Query, optional_json};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::formats::DnsLabel;
use crate::shared::models::snapshot::{
    GcRequest, GcResponse, RestoreRequest, RestoreResponse, Snapshot, SnapshotListQuery,
};
use crate::shared::models::{MessageResponse, NamespaceQuery};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/snapshots", get(list_snapshots))
        .route("/api/v1/snapshots/gc", post(gc_snapshots))
        .route(
            "/api/v1/snapshots/{name}",
            get(get_snapshot).delete(delete_snapshot),
        )
        .route("/api/v1/snapshots/{name}/restore", post(restore_snapshot))
}

/// List snapshots, filtered by namespace, sandbox and kind.
#[utoipa::path(get, path = "/api/v1/snapshots", tag = "snapshots", params(SnapshotListQuery),
    responses(
        (status = 200, description = "Snapshot records", body = DataEnvelope<Vec<Snapshot>>),
        (status = 400, description = "Unknown `kind`", body = ErrorEnvelope),
    ))]
pub async fn list_snapshots(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<SnapshotListQuery>,
) -> ServiceResult<Json<Vec<Snapshot>>> {
    Ok(Json(state.snapshots.list(&principal, &query).await?))
}

/// Inspect one snapshot.
#[utoipa::path(get, path = "/api/v1/snapshots/{name}", tag = "snapshots",
    params(("name" = DnsLabel, Path, description = "Snapshot name"), NamespaceQuery),
    responses(
        (status = 200, description = "The snapshot record", body = DataEnvelope<Snapshot>),
        (status = 404, description = "No such snapshot", body = ErrorEnvelope),
    ))]
pub async fn get_snapshot(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<NamespaceQuery>,
) -> ServiceResult<Json<Snapshot>> {
    let namespace = query.namespace();
    state
        .tenants
        .require_read(&principal, namespace, || {
            format!("snapshot '{name}' not found in namespace '{namespace}'")
        })
        .await?;
    Ok(Json(state.snapshots.get(query.namespace(), &name).await?))
}

/// Delete one snapshot.
#[utoipa::path(delete, path = "/api/v1/snapshots/{name}", tag = "snapshots",
    params(("name" = DnsLabel, Path, description = "Snapshot name"), NamespaceQuery),
    responses(
        (status = 200, description = "Deleted", body = DataEnvelope<MessageResponse>),
        (status = 404, description = "No such snapshot", body = ErrorEnvelope),
    ))]
pub async fn delete_snapshot(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<NamespaceQuery>,
) -> ServiceResult<Json<MessageResponse>> {
    state
        .tenants
        .require_write(&principal, query.namespace())
        .await?;
    state.snapshots.delete(query.namespace(), &name).await?;
    Ok(Json(MessageResponse {
        message: format!(
            "snapshot '{name}' deleted from namespace '{}'",
            query.namespace()
        ),
    }))
}

/// Create a new sandbox from a snapshot.
#[utoipa::path(post, path = "/api/v1/snapshots/{name}/restore", tag = "snapshots",
    params(("name" = DnsLabel, Path, description = "Snapshot name")),
    request_body = RestoreRequest,
    responses(
        (status = 201, description = "Restored; `Location` names the new sandbox", body = DataEnvelope<RestoreResponse>,
            headers(("Location" = String, description = "/api/v1/sandboxes/{new_sandbox_name}?namespace={namespace}"))),
        (status = 400, description = "Missing `new_sandbox_name`, unresolved image, or unsupported backend", body = ErrorEnvelope),
        (status = 403, description = "Role, tenant quota (`QuotaExceeded`), or an image override from a registry a tenant's caller may not use (`[images] allowedRegistries`)", body = ErrorEnvelope),
        (status = 404, description = "No such snapshot in the namespace", body = ErrorEnvelope),
        (status = 409, description = "`new_sandbox_name` exists", body = ErrorEnvelope),
    ))]
pub async fn restore_snapshot(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Json(request): Json<RestoreRequest>,
) -> ServiceResult<Created<RestoreResponse>> {
    let plan = state.snapshots.restore(&principal, &name, &request).await?;
    Ok(Created {
        location: format!(
            "/api/v1/sandboxes/{}?namespace={}",
            plan.new_name, plan.namespace
        ),
        data: RestoreResponse {
            message: format!(
                "sandbox '{}' restored from snapshot '{name}'",
                plan.new_name
            ),
            name: plan.new_name,
            namespace: plan.namespace,
            source_snapshot: name,
        },
    })
}

/// Delete `fork` snapshots older than `keep_fork_for`; pause and named snapshots are kept.
#[utoipa::path(post, path = "/api/v1/snapshots/gc", tag = "snapshots",
    request_body(content = Option<GcRequest>, description = "Optional; `{}` sweeps `default` with 10m"),
    responses(
        (status = 200, description = "What was (or, with dry_run, would be) deleted", body = DataEnvelope<GcResponse>),
        (status = 400, description = "Bad `keep_fork_for`", body = ErrorEnvelope),
    ))]
pub async fn gc_snapshots(
    State(state): State<AppState>,
    principal: Principal,
    body: Bytes,
) -> ServiceResult<Json<GcResponse>> {
    let request: GcRequest = optional_json(&body)?;
    Ok(Json(state.snapshots.gc(&principal, &request).await?))
}
