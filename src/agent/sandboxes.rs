//! The sandboxes an agent runs on its node (the `sbxd` backend of the Kubernetes platform):
//! the embedded default's own sandbox manager — SQLite on the node and the sbxd runtime, the
//! code `sbx serve` runs on one host — served to `sbx serve` over the agent's authenticated
//! HTTP routes (`crate::shared::agent::SANDBOXES_PATH`). Whether a sandbox exists is the
//! cluster's record (a `SbxdSandbox`, [`super::records`]); what runs it is here.
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::AgentState;
use crate::daemon::platform::local::LocalPlatform;
use crate::daemon::platform::{
    NewSandbox, PlatformError, RestorePlan, SandboxBackend, SnapshotBackend,
};
use crate::shared::agent::{ExecCall, ForkCall, GcCall, SnapshotCall, SnapshotSource};
use crate::shared::exec_stream::{ExecStreamQuery, SUBPROTOCOL};
use crate::shared::models::snapshot::SnapshotKind;

/// An answer of a sandbox route: the value, or the platform error as an [`AgentFault`].
///
/// [`AgentFault`]: crate::shared::agent::AgentFault
fn answer<T: serde::Serialize>(outcome: Result<T, PlatformError>, ok: StatusCode) -> Response {
    match outcome {
        Ok(value) => (ok, Json(value)).into_response(),
        Err(error) => fault(&error),
    }
}

fn fault(error: &PlatformError) -> Response {
    let status =
        StatusCode::from_u16(error.agent_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if status.is_server_error() {
        tracing::warn!(%error, "a sandbox call failed");
    }
    (status, Json(error.to_fault())).into_response()
}

fn manager(state: &AgentState) -> Result<&Arc<LocalPlatform>, PlatformError> {
    state.sandboxes.as_ref().ok_or_else(|| {
        PlatformError::Unavailable(
            "this agent runs no sandboxes: start it with --data-dir on a host that can run them"
                .to_string(),
        )
    })
}

pub(super) async fn create(
    State(state): State<Arc<AgentState>>,
    Json(mut new): Json<NewSandbox>,
) -> Response {
    // The service placed it here; the node's own name check (a host name) does not apply.
    new.nodes = None;
    let outcome = match manager(&state) {
        Ok(m) => m.create_sandbox(new).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::CREATED)
}

pub(super) async fn list(State(state): State<Arc<AgentState>>) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.list_sandboxes(None).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn get(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.get_sandbox(&namespace, &name).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn delete(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.delete_sandbox(&namespace, &name).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn exec(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
    Json(call): Json<ExecCall>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => {
            m.exec_sandbox(
                &namespace,
                &name,
                &call.command,
                Duration::from_secs(call.timeout_seconds),
            )
            .await
        }
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

/// A streamed exec (the service relays its client's WebSocket here); the time limit is the
/// service's to keep.
pub(super) async fn exec_stream(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<ExecStreamQuery>,
    upgrade: axum::extract::ws::WebSocketUpgrade,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.exec_stream(&namespace, &name, &query).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(session) => upgrade
            .protocols([SUBPROTOCOL])
            .on_upgrade(move |socket| crate::shared::exec_stream::serve(socket, session, None))
            .into_response(),
        Err(error) => fault(&error),
    }
}

/// `?tail=&since=` of the logs route.
#[derive(Debug, Deserialize)]
pub(super) struct LogsQuery {
    #[serde(default = "default_tail")]
    tail: usize,
    #[serde(default)]
    since: u64,
    /// Stream the log as it grows (plain text, chunked) until the sandbox stops.
    #[serde(default)]
    follow: bool,
}

fn default_tail() -> usize {
    100
}

pub(super) async fn logs(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<LogsQuery>,
) -> Response {
    let manager = match manager(&state) {
        Ok(m) => m,
        Err(e) => return fault(&e),
    };
    if query.follow {
        return match manager
            .follow_logs(&namespace, &name, "sandbox", query.tail, query.since)
            .await
        {
            Ok(lines) => crate::shared::io::chunked_text(lines),
            Err(e) => fault(&e),
        };
    }
    let outcome = manager
        .sandbox_logs(&namespace, &name, "sandbox", query.tail, query.since)
        .await;
    answer(outcome, StatusCode::OK)
}

pub(super) async fn pause(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.pause_sandbox(&namespace, &name).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn resume(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.resume_sandbox(&namespace, &name).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

/// `?namespace=` of the metrics and snapshot list routes.
#[derive(Debug, Deserialize)]
pub(super) struct MetricsQuery {
    namespace: Option<String>,
}

pub(super) async fn metrics(
    State(state): State<Arc<AgentState>>,
    Query(query): Query<MetricsQuery>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.sandbox_metrics(query.namespace.as_deref()).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn snapshot(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
    Json(call): Json<SnapshotCall>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) if call.kind == SnapshotKind::Pause => {
            m.pause_sandbox_with_snapshot(&namespace, &name, &call.snapshot)
                .await
        }
        Ok(m) => {
            m.snapshot_sandbox(&namespace, &name, &call.snapshot, call.kind)
                .await
        }
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::CREATED)
}

pub(super) async fn fork(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
    Json(call): Json<ForkCall>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => {
            m.fork_sandbox(
                &namespace,
                &name,
                &call.new_name,
                call.snapshot.as_deref(),
                call.warm,
            )
            .await
        }
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::CREATED)
}

pub(super) async fn list_snapshots(
    State(state): State<Arc<AgentState>>,
    Query(query): Query<MetricsQuery>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => {
            m.list_snapshots(query.namespace.as_deref(), None, None)
                .await
        }
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn get_snapshot(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.get_snapshot(&namespace, &name).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn delete_snapshot(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => m.delete_snapshot(&namespace, &name).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}

pub(super) async fn snapshot_source(
    State(state): State<Arc<AgentState>>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let outcome = async {
        let record = manager(&state)?
            .sandboxes()?
            .snapshot_record(&namespace, &name)
            .await?;
        Ok(SnapshotSource {
            image: record.source.image,
            cpu_millis: record.source.cpu_millis,
            memory_bytes: record.source.memory_bytes,
            ephemeral_bytes: record.source.ephemeral_bytes,
        })
    }
    .await;
    answer(outcome, StatusCode::OK)
}

pub(super) async fn restore(
    State(state): State<Arc<AgentState>>,
    Path((_namespace, name)): Path<(String, String)>,
    Json(mut plan): Json<RestorePlan>,
) -> Response {
    // Placed here by the service, as a create.
    plan.nodes = None;
    let outcome = match manager(&state) {
        Ok(m) => m.restore_snapshot(&name, plan).await,
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::CREATED)
}

pub(super) async fn gc(State(state): State<Arc<AgentState>>, Json(call): Json<GcCall>) -> Response {
    let outcome = match manager(&state) {
        Ok(m) => {
            m.gc_snapshots(
                call.namespace.as_deref(),
                Duration::from_secs(call.keep_for_seconds),
                call.dry_run,
            )
            .await
        }
        Err(e) => Err(e),
    };
    answer(outcome, StatusCode::OK)
}
