//! `/api/v1/sandboxes`: the sandbox lifecycle, exec, logs, metrics, pause/resume, fork and
//! snapshot-of-a-sandbox routes.
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Extension, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;

use crate::daemon::audit::AuditNamespace;
use crate::daemon::auth::Principal;
use crate::daemon::error::{ServiceError, ServiceResult};
use crate::daemon::extract::{Created, Json, Path, Query, optional_json};
use crate::daemon::ratelimit::Kind;
use crate::daemon::services::tenants::Need;
use crate::daemon::state::AppState;
use crate::shared::envelope::{DataEnvelope, ErrorEnvelope};
use crate::shared::exec_stream::{ExecStreamQuery, MAX_CLIENT_MESSAGE, SUBPROTOCOL};
use crate::shared::models::formats::DnsLabel;
use crate::shared::models::sandbox::{
    CreateSandboxRequest, CreateSandboxResponse, CreateSnapshotRequest, CreateSnapshotResponse,
    DeleteAllResponse, ExecRequest, ExecResponse, ForkRequest, ForkResponse, LogsQuery,
    LogsResponse, PauseRequest, ResumeRequest, Sandbox, SandboxListQuery, SandboxMetrics,
    SandboxPatch,
};
use crate::shared::models::{DEFAULT_NAMESPACE, MessageResponse, NamespaceQuery};

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
            get(get_sandbox).delete(delete_sandbox).patch(patch_sandbox),
        )
        .route("/api/v1/sandboxes/{name}/exec", post(exec_in_sandbox))
        .route("/api/v1/sandboxes/{name}/exec/stream", get(exec_stream))
        .route("/api/v1/sandboxes/{name}/logs", get(sandbox_logs))
        .route("/api/v1/sandboxes/{name}/pause", post(pause_sandbox))
        .route("/api/v1/sandboxes/{name}/resume", post(resume_sandbox))
        .route("/api/v1/sandboxes/{name}/fork", post(fork_sandbox))
        .route("/api/v1/sandboxes/{name}/snapshot", post(snapshot_sandbox))
}

/// 404, worded as for a sandbox that does not exist, unless the caller may read there.
async fn require_read(
    state: &AppState,
    principal: &Principal,
    namespace: &str,
    name: &str,
) -> ServiceResult<()> {
    state
        .tenants
        .require_read(principal, namespace, || {
            format!("sandbox '{name}' not found in namespace '{namespace}'")
        })
        .await
}

fn location(name: &str, namespace: &str) -> String {
    format!("/api/v1/sandboxes/{name}?namespace={namespace}")
}

/// Create a sandbox.
#[utoipa::path(post, path = "/api/v1/sandboxes", tag = "sandboxes",
    request_body = CreateSandboxRequest,
    responses(
        (status = 201, description = "Created; `Location` names the sandbox", body = DataEnvelope<CreateSandboxResponse>,
            headers(("Location" = String, description = "/api/v1/sandboxes/{name}?namespace={namespace}"))),
        (status = 400, description = "Validation failed: invalid limits, bad env file, name exists, …", body = ErrorEnvelope),
        (status = 403, description = "Role, tenant quota (`QuotaExceeded`), an `env_file` named by a principal that is not operator or admin, a `cap_add` or an image registry a tenant's caller may not use (`[images] allowedRegistries`)", body = ErrorEnvelope),
    ))]
pub async fn create_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Json(request): Json<CreateSandboxRequest>,
) -> ServiceResult<Created<CreateSandboxResponse>> {
    let new = state.sandboxes.create(&principal, &request).await?;
    Ok(Created {
        location: location(&new.name, &new.namespace),
        data: CreateSandboxResponse {
            name: new.name,
            namespace: new.namespace,
            image: new.image,
        },
    })
}

/// List sandboxes of a namespace.
#[utoipa::path(get, path = "/api/v1/sandboxes", tag = "sandboxes", params(SandboxListQuery),
    responses(
        (status = 200, description = "Sandbox records", body = DataEnvelope<Vec<Sandbox>>),
        (status = 400, description = "A `label_selector` it cannot read", body = ErrorEnvelope),
    ))]
pub async fn list_sandboxes(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<SandboxListQuery>,
) -> ServiceResult<Response> {
    let namespace =
        (!query.all_namespaces).then(|| query.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE));
    let selector = query.label_selector.as_deref();
    let body = match (namespace, selector) {
        (Some(ns), selector) => {
            state.tenants.require(&principal, ns, Need::Read).await?;
            match selector {
                Some(s) => state.sandboxes.list_selected(Some(ns), None, s).await?,
                None => state.sandboxes.list_envelope(Some(ns)).await?,
            }
        }
        (None, selector) => {
            let access = state.tenants.access(&principal).await?;
            // Only the namespaces the caller may see: never another tenant's names.
            let visible = (!access.everywhere()).then(|| access.namespaces());
            match (selector, &visible) {
                (Some(s), visible) => {
                    state
                        .sandboxes
                        .list_selected(None, visible.as_deref(), s)
                        .await?
                }
                (None, None) => state.sandboxes.list_envelope(None).await?,
                (None, Some(visible)) => state.sandboxes.list_envelope_within(visible).await?,
            }
        }
    };
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// Get one sandbox.
#[utoipa::path(get, path = "/api/v1/sandboxes/{name}", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), NamespaceQuery),
    responses(
        (status = 200, description = "The sandbox record", body = DataEnvelope<Sandbox>),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn get_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<NamespaceQuery>,
) -> ServiceResult<Json<Sandbox>> {
    require_read(&state, &principal, query.namespace(), &name).await?;
    Ok(Json(state.sandboxes.get(query.namespace(), &name).await?))
}

/// Change a sandbox's lifetime (sbx extension).
///
/// `ttl_seconds` deletes it that many seconds from now; `idle_timeout_seconds` pauses it once
/// no exec, stream or file transfer happened for that long (a resume starts a new period).
/// An absent field is kept, `null` removes the setting. Both at least 10 seconds; the TTL at
/// most, and never without, the tenant's `limits.maxTtlSeconds` when it sets one.
#[utoipa::path(patch, path = "/api/v1/sandboxes/{name}", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), NamespaceQuery),
    request_body = SandboxPatch,
    responses(
        (status = 200, description = "The sandbox record with its new lifetime", body = DataEnvelope<Sandbox>),
        (status = 400, description = "A value below 10 s, above or removing the tenant's maximum TTL", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn patch_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<NamespaceQuery>,
    Json(patch): Json<SandboxPatch>,
) -> ServiceResult<Json<Sandbox>> {
    state
        .tenants
        .require_write(&principal, query.namespace())
        .await?;
    Ok(Json(
        state
            .sandboxes
            .patch(query.namespace(), &name, &patch)
            .await?,
    ))
}

/// Delete one sandbox. Irreversible.
#[utoipa::path(delete, path = "/api/v1/sandboxes/{name}", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), NamespaceQuery),
    responses(
        (status = 200, description = "Deleted", body = DataEnvelope<MessageResponse>),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
    ))]
pub async fn delete_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<NamespaceQuery>,
) -> ServiceResult<Json<MessageResponse>> {
    state
        .tenants
        .require_write(&principal, query.namespace())
        .await?;
    state.sandboxes.delete(query.namespace(), &name).await?;
    Ok(Json(MessageResponse {
        message: format!(
            "sandbox '{name}' deleted from namespace '{}'",
            query.namespace()
        ),
    }))
}

/// Delete every sandbox of a namespace. Irreversible.
#[utoipa::path(delete, path = "/api/v1/sandboxes", tag = "sandboxes", params(NamespaceQuery),
    responses((status = 200, description = "Per-sandbox results", body = DataEnvelope<DeleteAllResponse>)))]
pub async fn delete_all_sandboxes(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<NamespaceQuery>,
) -> ServiceResult<Json<DeleteAllResponse>> {
    state
        .tenants
        .require_write(&principal, query.namespace())
        .await?;
    Ok(Json(state.sandboxes.delete_all(query.namespace()).await?))
}

/// Run a shell command in a sandbox. A failing command is still a result, with its exit code.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/exec", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), NamespaceQuery),
    request_body = ExecRequest,
    responses(
        (status = 200, description = "Exit code, stdout, stderr, duration", body = DataEnvelope<ExecResponse>),
        (status = 400, description = "Missing `command`, or `timeout_seconds` out of range", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is paused or has failed", body = ErrorEnvelope),
    ))]
pub async fn exec_in_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<NamespaceQuery>,
    Json(request): Json<ExecRequest>,
) -> ServiceResult<Json<ExecResponse>> {
    state
        .tenants
        .require_write(&principal, query.namespace())
        .await?;
    let command = request
        .require_command()
        .map_err(ServiceError::bad_request)?;
    let _slot = super::tenant_slot(&state, query.namespace(), Kind::Exec).await?;
    Ok(Json(
        state
            .sandboxes
            .exec(query.namespace(), &name, command, request.timeout_seconds)
            .await?,
    ))
}

/// Run a command with its input and output streamed over a WebSocket (sbx extension).
///
/// The subprotocol is `v1.exec.sbx.io`. Every message is binary: a channel byte, then the
/// payload. Client →
/// server: `0` stdin bytes, `4` resize `{"cols","rows"}`, `5` a signal name (`INT`, `TERM`,
/// `HUP`, `QUIT`, `KILL`, `USR1`, `USR2`, `WINCH`), `255` `[0]` stdin ends. Server → client:
/// `1` stdout, `2` stderr (with `tty`, all output is on stdout), then `3` the status
/// (`{"exit_code": N}`, with `"timed_out": true` at the time limit, or `{"error": {"code",
/// "message"}}`), then a close. A client that leaves first ends the command.
#[utoipa::path(get, path = "/api/v1/sandboxes/{name}/exec/stream", tag = "sandboxes",
    params(
        ("name" = DnsLabel, Path, description = "Sandbox name"),
        ExecStreamQuery,
        ("Connection" = String, Header, description = "`Upgrade`", pattern = "^Upgrade$"),
        ("Upgrade" = String, Header, description = "`websocket`", pattern = "^websocket$"),
        ("Sec-WebSocket-Version" = String, Header, description = "`13`", pattern = "^13$"),
        ("Sec-WebSocket-Key" = String, Header, description = "The client's nonce: 16 bytes in base64", pattern = "^[A-Za-z0-9+/]{21}[AQgw]==$"),
        ("Sec-WebSocket-Protocol" = String, Header, description = "`v1.exec.sbx.io`", pattern = "^v1\\.exec\\.sbx\\.io$"),
    ),
    responses(
        (status = 101, description = "Switching to the WebSocket of the command's streams"),
        (status = 400, description = "Not a WebSocket upgrade, missing `command`, bad `cols`/`rows` or `timeout_seconds`", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is paused or has failed", body = ErrorEnvelope),
    ))]
pub async fn exec_stream(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<ExecStreamQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> ServiceResult<Response> {
    let namespace = query.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    state.tenants.require_write(&principal, namespace).await?;
    let upgrade = upgrade.map_err(|e| {
        ServiceError::bad_request(format!(
            "this route is a WebSocket (subprotocol {SUBPROTOCOL}); {}",
            e.body_text().to_lowercase()
        ))
    })?;
    let slot = super::tenant_slot(&state, namespace, Kind::ExecStream).await?;
    let (session, timeout) = state
        .sandboxes
        .exec_stream(namespace, &name, &query)
        .await?;
    Ok(upgrade
        .protocols([SUBPROTOCOL])
        // A client message (and frame) is at most this long: a longer one is refused by its
        // header, before its payload is read, and closes the stream with 1009.
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| async move {
            // The tenant's slot is held for as long as the stream is open.
            let _slot = slot;
            crate::shared::exec_stream::serve(socket, session, timeout).await
        })
        .into_response())
}

/// A snapshot of a sandbox's logs, or with `follow=true` the log as it grows.
#[utoipa::path(get, path = "/api/v1/sandboxes/{name}/logs", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name"), LogsQuery),
    responses(
        (status = 200, description = "Log text: one JSON snapshot, or with `follow=true` plain text streamed (chunked) from the last `tail` lines until the sandbox stops or the client leaves",
            content((DataEnvelope<LogsResponse> = "application/json"), (String = "text/plain"))),
        (status = 404, description = "No sandbox of this name in the namespace, or no such container in it", body = ErrorEnvelope),
    ))]
pub async fn sandbox_logs(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Query(query): Query<LogsQuery>,
) -> ServiceResult<Response> {
    let namespace = query.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    require_read(&state, &principal, namespace, &name).await?;
    if query.follow {
        let slot = super::tenant_slot(&state, namespace, Kind::LogFollow).await?;
        let chunks = state
            .sandboxes
            .follow_logs(namespace, &name, &query.container, query.tail, query.since)
            .await?;
        return Ok(crate::shared::io::chunked_text(held(chunks, slot)));
    }
    let logs = state
        .sandboxes
        .logs(namespace, &name, &query.container, query.tail, query.since)
        .await?;
    Ok(Json(LogsResponse { logs }).into_response())
}

/// Pause a sandbox, optionally with a `pause` snapshot of its root.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/pause", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name")),
    request_body(content = Option<PauseRequest>, description = "Optional: namespace and snapshot name"),
    responses(
        (status = 200, description = "Paused", body = DataEnvelope<MessageResponse>),
        (status = 400, description = "Invalid snapshot name", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is not running, or the snapshot name is taken", body = ErrorEnvelope),
    ))]
pub async fn pause_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    body: Bytes,
) -> ServiceResult<(Extension<AuditNamespace>, Json<MessageResponse>)> {
    let request: PauseRequest = optional_json(&body)?;
    let namespace = request.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    state.tenants.require_write(&principal, namespace).await?;
    state
        .snapshots
        .pause(namespace, &name, request.snapshot.as_deref())
        .await?;
    let message = match &request.snapshot {
        Some(snapshot) => format!("sandbox '{name}' paused; snapshot '{snapshot}' taken"),
        None => format!("sandbox '{name}' paused"),
    };
    Ok((
        Extension(AuditNamespace(namespace.to_string())),
        Json(MessageResponse { message }),
    ))
}

/// Resume a paused sandbox.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/resume", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name")),
    request_body(content = Option<ResumeRequest>, description = "Optional: namespace"),
    responses(
        (status = 200, description = "Resumed", body = DataEnvelope<MessageResponse>),
        (status = 400, description = "Not a sandbox name or namespace", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
        (status = 409, description = "The sandbox is neither paused nor running", body = ErrorEnvelope),
    ))]
pub async fn resume_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    body: Bytes,
) -> ServiceResult<(Extension<AuditNamespace>, Json<MessageResponse>)> {
    let request: ResumeRequest = optional_json(&body)?;
    let namespace = request.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
    state.tenants.require_write(&principal, namespace).await?;
    state.sandboxes.resume(namespace, &name).await?;
    Ok((
        Extension(AuditNamespace(namespace.to_string())),
        Json(MessageResponse {
            message: format!("sandbox '{name}' resumed"),
        }),
    ))
}

/// The chunks of `chunks`, through a channel whose feeder holds `slot` until either end goes
/// (the client leaving drops the receiver at once, an idle log included).
fn held(
    mut chunks: tokio::sync::mpsc::Receiver<Bytes>,
    slot: crate::daemon::ratelimit::Slot,
) -> tokio::sync::mpsc::Receiver<Bytes> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        let _slot = slot;
        loop {
            tokio::select! {
                chunk = chunks.recv() => match chunk {
                    Some(chunk) => {
                        if tx.send(chunk).await.is_err() {
                            return;
                        }
                    }
                    None => return,
                },
                () = tx.closed() => return,
            }
        }
    });
    rx
}

/// Clone a sandbox into a new one (kql disk clone; sbxd copy-on-write, `warm` keeps memory).
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/fork", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Source sandbox")),
    request_body = ForkRequest,
    responses(
        (status = 201, description = "Forked; `Location` names the new sandbox", body = DataEnvelope<ForkResponse>,
            headers(("Location" = String, description = "/api/v1/sandboxes/{new_name}?namespace={namespace}"))),
        (status = 400, description = "Missing `new_name`, or the backend cannot fork", body = ErrorEnvelope),
        (status = 404, description = "Source sandbox or its root volume missing", body = ErrorEnvelope),
        (status = 409, description = "`new_name` exists in the namespace", body = ErrorEnvelope),
    ))]
pub async fn fork_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Json(request): Json<ForkRequest>,
) -> ServiceResult<Created<ForkResponse>> {
    let (new_name, namespace) = state.snapshots.fork(&principal, &name, &request).await?;
    Ok(Created {
        location: location(&new_name, &namespace),
        data: ForkResponse {
            message: format!("sandbox '{name}' forked into '{new_name}'"),
            name: new_name,
            namespace,
            source: name,
        },
    })
}

/// Take a `named` snapshot of a running sandbox without pausing it.
#[utoipa::path(post, path = "/api/v1/sandboxes/{name}/snapshot", tag = "sandboxes",
    params(("name" = DnsLabel, Path, description = "Sandbox name")),
    request_body = CreateSnapshotRequest,
    responses(
        (status = 201, description = "Snapshot taken; `Location` names it", body = DataEnvelope<CreateSnapshotResponse>,
            headers(("Location" = String, description = "/api/v1/snapshots/{name}?namespace={namespace}"))),
        (status = 400, description = "Missing `snapshot_name`", body = ErrorEnvelope),
        (status = 404, description = "No such sandbox", body = ErrorEnvelope),
        (status = 409, description = "The snapshot name exists in the namespace", body = ErrorEnvelope),
    ))]
pub async fn snapshot_sandbox(
    State(state): State<AppState>,
    principal: Principal,
    Path(name): Path<String>,
    Json(request): Json<CreateSnapshotRequest>,
) -> ServiceResult<Created<CreateSnapshotResponse>> {
    let (snapshot, namespace) = state
        .snapshots
        .snapshot(&principal, &name, &request)
        .await?;
    Ok(Created {
        location: format!("/api/v1/snapshots/{snapshot}?namespace={namespace}"),
        data: CreateSnapshotResponse {
            name: snapshot,
            namespace,
            source_sandbox: name,
        },
    })
}

/// CPU and memory use per sandbox of a namespace.
#[utoipa::path(get, path = "/api/v1/sandboxes/metrics", tag = "sandboxes", params(NamespaceQuery),
    responses((status = 200, description = "Metrics records", body = DataEnvelope<Vec<SandboxMetrics>>)))]
pub async fn sandbox_metrics(
    State(state): State<AppState>,
    principal: Principal,
    Query(query): Query<NamespaceQuery>,
) -> ServiceResult<Json<Vec<SandboxMetrics>>> {
    state
        .tenants
        .require(&principal, query.namespace(), Need::Read)
        .await?;
    Ok(Json(state.sandboxes.metrics(query.namespace()).await?))
}
