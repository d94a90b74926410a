//! `sbx agent`: the per-node agent of the Kubernetes platform (a DaemonSet, `deploy/agent.yaml`).
//! It reports what only the node can see — its storage pools — to `sbx serve`, and runs the
//! node's sandboxes of the `sbxd` backend ([`sandboxes`], with their cluster records kept by
//! [`records`]), over HTTP on the node's address. Every call must carry a ServiceAccount token
//! for the audience [`AUDIENCE`] of one of the allowed service accounts, checked with a
//! TokenReview ([`auth`]); nothing on the agent answers without one, and a client address
//! that sends too many tokens to review is refused (429) without a review. It listens on the
//! node's internal address (`deploy/agent.yaml`), over TLS with the certificate `sbx serve`
//! made for the agents ([`crate::shared::tls`]) when given one, completing the handshake only
//! with clients presenting the replicas' certificate.
//!
//! A room of its own: it runs the embedded default's sandbox manager (the local platform's
//! sandboxes over the sbxd runtime) and writes the Kubernetes platform's records of them; it
//! never uses the services, the routes or the CLI.
pub mod auth;
pub mod host;
pub mod install;
pub mod records;
mod sandboxes;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::daemon::platform::local::{LocalPlatform, RuntimeSettings};
use crate::runtime::storage::Pools;
use crate::shared::agent::{
    AUDIENCE, GC_PATH, METRICS_PATH, SANDBOXES_PATH, SNAPSHOTS_PATH, STORAGE_PATH,
};
use crate::shared::envelope::{ErrorBody, ErrorEnvelope};

/// What the agent serves and whom it answers.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// The node this agent runs on (for its log).
    pub node: String,
    /// Where its storage pools are.
    pub pools: Pools,
    /// Service accounts allowed to call, as `NAMESPACE/NAME`.
    pub callers: Vec<String>,
    /// Where `tls.crt` and `tls.key` are (HTTPS); `None`: plain HTTP.
    pub tls_dir: Option<std::path::PathBuf>,
    /// Tokens reviewed per client address and minute at most.
    pub reviews_per_minute: u32,
    /// The sandboxes of the `sbxd` backend, when this agent runs them.
    pub runtime: Option<RuntimeSetup>,
}

/// Where and how the agent runs sandboxes.
#[derive(Debug, Clone)]
pub struct RuntimeSetup {
    /// The node-local state: database, images, sandboxes, snapshot layers.
    pub data_dir: std::path::PathBuf,
    /// The sbxd runtime's and its network's settings.
    pub settings: RuntimeSettings,
    /// Registries reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Registries that may be on private addresses (`[images] privateRegistries`).
    pub private_registries: Vec<String>,
    /// The agent's namespace and Pod (its heartbeat Lease's place and holder).
    pub namespace: String,
    /// The agent's Pod.
    pub pod: String,
}

pub(crate) struct AgentState {
    pools: Pools,
    reviewer: auth::TokenReviewer,
    sandboxes: Option<Arc<LocalPlatform>>,
}

/// Serves until SIGTERM or SIGINT.
pub async fn run(config: AgentConfig) -> Result<()> {
    host::close_on_exec_container_root();
    let tls = match &config.tls_dir {
        Some(dir) => Some(server_tls(dir)?),
        None => {
            tracing::warn!(
                "no --tls-dir: serving plain HTTP (the service's token crosses the network in clear)"
            );
            None
        }
    };
    let per_minute = std::num::NonZeroU32::new(config.reviews_per_minute)
        .context("--reviews-per-minute must be at least 1")?;
    let client = host::kube_client().await?;
    let sandboxes = match &config.runtime {
        Some(setup) => Some(start_sandboxes(&client, &config.node, setup).await?),
        None => None,
    };
    let state = Arc::new(AgentState {
        pools: config.pools.clone(),
        reviewer: auth::TokenReviewer::new(client, AUDIENCE, &config.callers, per_minute),
        sandboxes,
    });
    let drain = state.sandboxes.clone();
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listen on {}", config.listen))?;
    tracing::info!(
        node = %config.node,
        address = %listener.local_addr()?,
        callers = ?config.callers,
        tls = tls.is_some(),
        "sbx agent listening"
    );
    crate::daemon::listener::serve(
        listener,
        app(state),
        HEADER_READ_TIMEOUT,
        tls,
        crate::shared::signals::terminated(),
    )
    .await;
    if let Some(sandboxes) = drain {
        crate::daemon::platform::Platform::shutdown(&*sandboxes).await;
    }
    Ok(())
}

/// How long a client may take to send a request's header (and to do the TLS handshake), and
/// how long an idle connection stays open (the service's clients drop theirs sooner).
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The server side of the agent's TLS: `dir/tls.crt` and `dir/tls.key`, and only clients
/// presenting a certificate for client authentication of the CA `dir/ca.crt` (the
/// replicas'): nobody else gets as far as a token check. Read through the container's root
/// once the agent entered the host (where the Pod's mounts are not).
fn server_tls(dir: &std::path::Path) -> Result<Arc<rustls::ServerConfig>> {
    let dir = match std::env::var_os(host::CONTAINER_ROOT_ENV) {
        Some(root) => std::path::Path::new(&root).join(dir.strip_prefix("/").unwrap_or(dir)),
        None => dir.to_path_buf(),
    };
    let read = |file: &str| {
        let path = dir.join(file);
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))
    };
    let pair = crate::shared::tls::Pair {
        cert_pem: read("tls.crt")?,
        key_pem: read("tls.key")?,
    };
    let ca = read("ca.crt")?;
    crate::shared::tls::server_config(&pair, Some(&ca))
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))
}

/// Opens the node's sandbox state, starts the runtime (a runtime that cannot start leaves the
/// sandbox routes answering 503 with the reason) and the records' sync.
async fn start_sandboxes(
    client: &kube::Client,
    node: &str,
    setup: &RuntimeSetup,
) -> Result<Arc<LocalPlatform>> {
    let mut platform = LocalPlatform::open(&setup.data_dir, setup.insecure_registries.clone())
        .with_context(|| format!("open the sandbox state at {}", setup.data_dir.display()))?;
    platform
        .image_store()
        .set_private_registries(setup.private_registries.clone());
    platform.start_runtime(setup.settings.clone()).await;
    let platform = Arc::new(platform);
    tokio::spawn(records::run(
        client.clone(),
        platform.clone(),
        records::Identity {
            node: node.to_string(),
            namespace: setup.namespace.clone(),
            pod: setup.pod.clone(),
        },
    ));
    Ok(platform)
}

fn app(state: Arc<AgentState>) -> Router {
    let one = format!("{SANDBOXES_PATH}/{{namespace}}/{{name}}");
    let snapshot = format!("{SNAPSHOTS_PATH}/{{namespace}}/{{name}}");
    Router::new()
        .route(STORAGE_PATH, get(storage))
        .route(SANDBOXES_PATH, post(sandboxes::create).get(sandboxes::list))
        .route(&one, get(sandboxes::get).delete(sandboxes::delete))
        .route(&format!("{one}/exec"), post(sandboxes::exec))
        .route(&format!("{one}/exec/stream"), get(sandboxes::exec_stream))
        .route(&format!("{one}/logs"), get(sandboxes::logs))
        .route(&format!("{one}/pause"), post(sandboxes::pause))
        .route(&format!("{one}/resume"), post(sandboxes::resume))
        .route(&format!("{one}/snapshot"), post(sandboxes::snapshot))
        .route(&format!("{one}/fork"), post(sandboxes::fork))
        .route(METRICS_PATH, get(sandboxes::metrics))
        .route(SNAPSHOTS_PATH, get(sandboxes::list_snapshots))
        .route(
            &snapshot,
            get(sandboxes::get_snapshot).delete(sandboxes::delete_snapshot),
        )
        .route(
            &format!("{snapshot}/source"),
            get(sandboxes::snapshot_source),
        )
        .route(&format!("{snapshot}/restore"), post(sandboxes::restore))
        .route(GC_PATH, post(sandboxes::gc))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "NotFound", "no such route") })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .with_state(state)
}

/// Every route, the unknown ones too, needs an accepted token.
async fn authenticate(
    State(state): State<Arc<AgentState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return error(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "a bearer token is required",
        );
    };
    match state.reviewer.review(token, peer.ip()).await {
        Ok(()) => next.run(request).await,
        Err(auth::Refused::Limited(wait)) => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "RateLimited",
                "too many tokens to review from this address",
            );
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds.max(1)),
            );
            response
        }
        Err(auth::Refused::Denied(why)) => error(StatusCode::UNAUTHORIZED, "Unauthorized", &why),
        Err(auth::Refused::Unavailable(why)) => {
            tracing::warn!(error = %why, "cannot review a caller's token");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "the token could not be checked: the Kubernetes API is unavailable",
            )
        }
    }
}

async fn storage(State(state): State<Arc<AgentState>>) -> Response {
    Json(state.pools.entry().await).into_response()
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = ErrorEnvelope {
        error: ErrorBody {
            code: code.into(),
            message: message.into(),
        },
    };
    (status, Json(body)).into_response()
}
