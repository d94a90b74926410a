//! `sbx agent`: the per-node agent of the Kubernetes platform (a DaemonSet, `deploy/agent.yaml`).
//! It reports what only the node can see — its storage pools — to `sbx serve`, over HTTP on
//! the node's address. Every call must carry a ServiceAccount token for the audience
//! [`AUDIENCE`] of one of the allowed service accounts, checked with a TokenReview
//! ([`auth`]); nothing on the agent answers without one.
//!
//! A room of its own: it uses the sbxd runtime (`crate::runtime`) and the shared wire types,
//! never the daemon or the CLI.
pub mod auth;
pub mod install;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use crate::runtime::storage::Pools;
use crate::shared::agent::{AUDIENCE, STORAGE_PATH};
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
}

struct AgentState {
    pools: Pools,
    reviewer: auth::TokenReviewer,
}

/// Serves until SIGTERM or SIGINT.
pub async fn run(config: AgentConfig) -> Result<()> {
    let client = kube::Client::try_default().await.context(
        "no Kubernetes API to check callers' tokens with (in-cluster config or KUBECONFIG)",
    )?;
    let state = Arc::new(AgentState {
        pools: config.pools.clone(),
        reviewer: auth::TokenReviewer::new(client, AUDIENCE, &config.callers),
    });
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listen on {}", config.listen))?;
    tracing::info!(
        node = %config.node,
        address = %listener.local_addr()?,
        callers = ?config.callers,
        "sbx agent listening"
    );
    axum::serve(listener, app(state))
        .with_graceful_shutdown(crate::shared::signals::terminated())
        .await
        .context("serve")?;
    Ok(())
}

fn app(state: Arc<AgentState>) -> Router {
    Router::new()
        .route(STORAGE_PATH, get(storage))
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
    match state.reviewer.review(token).await {
        Ok(()) => next.run(request).await,
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
