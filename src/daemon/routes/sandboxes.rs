//! `/api/v1/sandboxes`: the sandbox lifecycle, exec, logs, metrics, pause/resume, fork and
//! snapshot-of-a-sandbox routes. Their runtime lands with the sbxd issue; until then each
//! answers 501 `NotImplemented` after authentication and body checks.
use axum::Router;
use axum::routing::{get, post};

use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Created, Json, Path, Query};
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::models::sandbox::{
    CreateSandboxRequest, CreateSandboxResponse, CreateSnapshotRequest, CreateSnapshotResponse,
    DeleteAllResponse, ExecRequest, ExecResponse, ForkRequest, ForkResponse, LogsQuery,
    LogsResponse, PauseRequest, ResumeRequest, Sandbox, SandboxListQuery, SandboxMetrics,
};
use crate::shared::models::{MessageResponse, NamespaceQuery};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/sandboxes",
            get(list_sandboxes)
                .post(create_sandbox)
                .delete(delete_all_sandboxes),
        )
        .route("/api/v1/sandboxes/metrics", get(sandbox_metrics))
        .route(
            "/api/v1/sandboxes/{name}",
            get(get_sandbox).delete(delete_sandbox),
        )
        .route("/api/v1/sandboxes/{name}/exec", post(exec_in_sandbox))
        .route("/api/v1/sandboxes/{name}/logs", get(sandbox_logs))
        .route("/api/v1/sandboxes/{name}/pause", post(pause_sandbox))
        .route("/api/v1/sandboxes/{name}/resume", post(resume_sandbox))
        .route("/api/v1/sandboxes/{name}/fork", post(fork_sandbox))
        .route("/api/v1/sandboxes/{name}/snapshot", post(snapshot_sandbox))
}

fn pending(what: &str) -> ServiceError {
    ServiceError::not_implemented(what)
}

/// Create a sandbox.
#[utoipa::path(post, path = "/api/v1/sandboxes", tag = "sandboxes",
    request_body = CreateSandboxRequest,
    responses(
        (status = 201, description = "Created; `Location` names the sandbox", body = DataEnvelope<CreateSandboxResponse>,
            headers(("Location" = String, description = "/api/v1/sandboxes/{name}?namespace={namespace}"))),
        (status = 400, description = "Validation failed: invalid limits, bad env file, name exists, …", body = ErrorEnvelope),
        (status = 403, description = "Role or tenant quota (`QuotaExceeded`)", body = ErrorEnvelope),
    ))]
pub async fn create_sandbox(
    _principal: Principal,
    Json(_request): Json<CreateSandboxRequest>,
) -> ServiceResult<Created<CreateSandboxResponse>> {
    Err(pending("sandbox create"))
}

/// List sandboxes of a namespace.
#[utoipa::path(get, path = "/api/v1/sandboxes", tag = "sandboxes", params(SandboxListQuery),
    responses((status = 200, description = "Sandbox records", body = DataEnvelope<Vec<Sandbox>>)))]
pub async fn list_sandboxes(
    _principal: Principal,
    Query(_query): Query<SandboxListQuery>,
) -> ServiceResult<Json<Vec<Sandbox>>> {
    Err(pending("sandbox list"))
}

/// Get one sandbox.
#[utoipa::path(get, path = "/api/v1/sandboxes/{name}", tag = "sandboxes",
    params(("name" = String, Path, description = "Sandbox name"), NamespaceQuery),
    responses(
        (status = 200, description = "The sandbox record", body = DataEnvelope<Sandbox>),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn get_sandbox(
    _principal: Principal,
    Path(_name): Path<String>,
    Query(_query): Query<NamespaceQuery>,
) -> ServiceResult<Json<Sandbox>> {
    Err(pending("sandbox get"))
}

/// Delete one sandbox. Irreversible.
#[utoipa::path(delete, path = "/api/v1/sandboxes/{name}", tag = "sandboxes",
    params(("name" = String, Path, description = "Sandbox name"), NamespaceQuery),
    responses(
        (status = 200, description = "Deleted", body = DataEnvelope<MessageResponse>),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn delete_sandbox(
    _principal: Principal,
    Path(_name): Path<String>,
    Query(_query): Query<NamespaceQuery>,
) -> ServiceResult<Json<MessageResponse>> {
    Err(pending("sandbox delete"))
}

/// Delete every sandbox of a namespace. Irreversible.
#[utoipa::path(delete, path = "/api/v1/sandboxes", tag = "sandboxes", params(NamespaceQuery),
    responses((status = 200, description = "Per-sandbox results", body = DataEnvelope<DeleteAllResponse>)))]
pub async fn delete_all_sandboxes(
    _principal: Principal,
    Query(_query): Query<NamespaceQuery>,
) -> ServiceResult<Json<DeleteAllResponse>> {
    Err(pending("sandbox delete-all"))
}

/// Run a shell command in a sandbox. A failing command is still a result, with its exit code.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/exec", tag = "sandboxes",
    params(("name" = String, Path, description = "Sandbox name"), NamespaceQuery),
    request_body = ExecRequest,
    responses(
        (status = 200, description = "Exit code, stdout, stderr, duration", body = DataEnvelope<ExecResponse>),
        (status = 400, description = "Missing `command`", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn exec_in_sandbox(
    _principal: Principal,
    Path(_name): Path<String>,
    Query(_query): Query<NamespaceQuery>,
    Json(_request): Json<ExecRequest>,
) -> ServiceResult<Json<ExecResponse>> {
    Err(pending("sandbox exec"))
}

/// A snapshot of a sandbox's logs (no live follow).
#[utoipa::path(get, path = "/api/v1/sandboxes/{name}/logs", tag = "sandboxes",
    params(("name" = String, Path, description = "Sandbox name"), LogsQuery),
    responses(
        (status = 200, description = "Log text", body = DataEnvelope<LogsResponse>),
        (status = 404, description = "No sandbox of this name in the namespace", body = ErrorEnvelope),
    ))]
pub async fn sandbox_logs(
    _principal: Principal,
    Path(_name): Path<String>,
    Query(_query): Query<LogsQuery>,
) -> ServiceResult<Json<LogsResponse>> {
    Err(pending("sandbox logs"))
}

/// Pause a sandbox, optionally with a `pause` snapshot of its root.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/pause", tag = "sandboxes",
    params(("name" = String, Path, description = "Sandbox name")),
    request_body(content = Option<PauseRequest>, description = "Optional: namespace and snapshot name"),
    responses(
        (status = 200, description = "Paused", body = DataEnvelope<MessageResponse>),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn pause_sandbox(
    _principal: Principal,
    Path(_name): Path<String>,
) -> ServiceResult<Json<MessageResponse>> {
    Err(pending("sandbox pause"))
}

/// Resume a paused sandbox.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/resume", tag = "sandboxes",
    params(("name" = String, Path, description = "Sandbox name")),
    request_body(content = Option<ResumeRequest>, description = "Optional: namespace"),
    responses(
        (status = 200, description = "Resumed", body = DataEnvelope<MessageResponse>),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn resume_sandbox(
    _principal: Principal,
    Path(_name): Path<String>,
) -> ServiceResult<Json<MessageResponse>> {
    Err(pending("sandbox resume"))
}

/// Clone a sandbox into a new one (kql disk clone; sbxd copy-on-write, `warm` keeps memory).
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/fork", tag = "sandboxes",
    params(("name" = String, Path, description = "Source sandbox")),
    request_body = ForkRequest,
    responses(
        (status = 201, description = "Forked; `Location` names the new sandbox", body = DataEnvelope<ForkResponse>,
            headers(("Location" = String, description = "/api/v1/sandboxes/{new_name}?namespace={namespace}"))),
        (status = 400, description = "Missing `new_name`, or the backend cannot fork", body = ErrorEnvelope),
        (status = 404, description = "Source sandbox or its root volume missing", body = ErrorEnvelope),
        (status = 409, description = "`new_name` exists in the namespace", body = ErrorEnvelope),
    ))]
pub async fn fork_sandbox(
    _principal: Principal,
    Path(_name): Path<String>,
    Json(_request): Json<ForkRequest>,
) -> ServiceResult<Created<ForkResponse>> {
    Err(pending("sandbox fork"))
}

/// Take a `named` snapshot of a running sandbox without pausing it.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/snapshot", tag = "sandboxes",
    params(("name" = String, Path, description = "Sandbox name")),
    request_body = CreateSnapshotRequest,
    responses(
        (status = 201, description = "Snapshot taken; `Location` names it", body = DataEnvelope<CreateSnapshotResponse>,
            headers(("Location" = String, description = "/api/v1/snapshots/{name}?namespace={namespace}"))),
        (status = 400, description = "Missing `snapshot_name`", body = ErrorEnvelope),
        (status = 409, description = "The snapshot name exists in the namespace", body = ErrorEnvelope),
    ))]
pub async fn snapshot_sandbox(
    _principal: Principal,
    Path(_name): Path<String>,
    Json(_request): Json<CreateSnapshotRequest>,
) -> ServiceResult<Created<CreateSnapshotResponse>> {
    Err(pending("sandbox snapshot"))
}

/// CPU and memory use per sandbox of a namespace.
#[utoipa::path(get, path = "/api/v1/sandboxes/metrics", tag = "sandboxes", params(NamespaceQuery),
    responses((status = 200, description = "Metrics records", body = DataEnvelope<Vec<SandboxMetrics>>)))]
pub async fn sandbox_metrics(
    _principal: Principal,
    Query(_query): Query<NamespaceQuery>,
) -> ServiceResult<Json<Vec<SandboxMetrics>>> {
    Err(pending("sandbox metrics"))
}
