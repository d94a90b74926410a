//! The HTTP surface: one router per resource, assembled by [`app`] apart from the listener so
//! tests can drive it without a socket.
pub mod files;
pub mod health;
pub mod identity;
pub mod images;
pub mod install;
pub mod keys;
pub mod names;
pub mod nodes;
pub mod sandboxes;
pub mod snapshots;
pub mod tenants;
pub mod usage;

use axum::Router;
use axum::body::to_bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, StatusCode, Uri, header};
use axum::middleware;
use axum::response::Response;
use axum::routing::get;
use tower_http::timeout::RequestBodyTimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::daemon::error::{ServiceError, envelope_response};
use crate::daemon::openapi;
use crate::daemon::state::AppState;
use crate::daemon::{audit, auth};
use crate::shared::envelope::ErrorCode;
use crate::shared::paths::OPENAPI_PATH;

/// Largest accepted request body.
pub const BODY_LIMIT_BYTES: usize = 1024 * 1024;

/// The whole application.
pub fn app(state: AppState) -> Router {
    let protected = Router::new()
        .merge(keys::router())
        .merge(identity::router())
        .merge(sandboxes::router())
        .merge(files::router())
        .merge(snapshots::router())
        .merge(tenants::router())
        .merge(nodes::router())
        .merge(usage::router())
        .merge(install::router())
        .merge(images::router())
        .route("/metrics", get(usage::metrics))
        // Inside authentication and the audit: a request passed to the replica holding its
        // tenant's quota Lease is refused here as anywhere, and audited on both replicas.
        .route_layer(middleware::from_fn(crate::daemon::forward::to_holder))
        // Before a request is forwarded or handled: a malformed name in its path or query
        // is a 400 here, never a lookup.
        .route_layer(middleware::from_fn(names::check))
        // Inside authentication: the audit knows who.
        .route_layer(middleware::from_fn_with_state(state.clone(), audit::audit))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::authenticate,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), observe));
    let public = Router::new()
        .route("/", get(health::root))
        .route("/health", get(health::health))
        .route("/readyz", get(health::readyz))
        .route(OPENAPI_PATH, get(openapi::serve))
        .merge(identity::public_router())
        .route_layer(middleware::from_fn_with_state(state.clone(), observe));
    Router::new()
        .merge(public)
        .merge(protected)
        .fallback(unknown_route)
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        // A client that stops sending mid-body gets a 400, not a task held forever.
        .layer(RequestBodyTimeoutLayer::new(
            state.config.http.body_read_timeout,
        ))
        .layer(middleware::map_response(envelope_errors))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .with_state(state)
}

/// A slot for one more request of `kind` in `namespace`, counted against the tenant owning
/// it (a namespace no tenant owns counts on its own): 429 with `Retry-After` at its cap.
/// Checked after access, so a caller learns nothing of a tenant it cannot reach.
pub(crate) async fn tenant_slot(
    state: &AppState,
    namespace: &str,
    kind: crate::daemon::ratelimit::Kind,
) -> crate::daemon::error::ServiceResult<crate::daemon::ratelimit::Slot> {
    let holder = match state.tenants.owner(namespace).await? {
        Some(owner) => format!("tenant '{}'", owner.name),
        None => format!("namespace '{namespace}'"),
    };
    state.rate_limits.slot(kind, &holder)
}

/// The request log's span: method, path and version — never the query, which can hold
/// credentials (a streamed exec's command, its environment).
fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    tracing::info_span!(
        "request",
        method = %request.method(),
        path = %request.uri().path(),
        version = ?request.version(),
    )
}

/// Counts every routed request and its latency by method, route template and status (a
/// route layer: the template is known once the route matched).
async fn observe(
    axum::extract::State(state): axum::extract::State<AppState>,
    request: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().as_str().to_string();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let response = next.run(request).await;
    state.metering.observe_request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

async fn unknown_route(method: Method, uri: Uri) -> ServiceError {
    ServiceError::not_found(format!("no route for {method} {}", uri.path()))
}

/// Rewrites error responses that axum produced itself (405, plain-text rejections) into the
/// envelope, so every API error has the same shape.
async fn envelope_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let allow = response.headers().get(header::ALLOW).cloned();
    let text = to_bytes(response.into_body(), 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = match (status, text.is_empty()) {
        (StatusCode::METHOD_NOT_ALLOWED, _) => match &allow {
            Some(allow) => format!(
                "method not allowed on this route; allowed: {}",
                allow.to_str().unwrap_or("")
            ),
            None => "method not allowed on this route".to_string(),
        },
        (_, false) => text,
        (_, true) => status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_string(),
    };
    let code = ErrorCode::for_status(status.as_u16());
    let mut rewritten = envelope_response(status, code, message);
    if let Some(allow) = allow {
        rewritten.headers_mut().insert(header::ALLOW, allow);
    }
    rewritten
}

#[cfg(test)]
mod tests {
    //! Router tests without a socket: the app is driven with `oneshot`.
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use serde_json::Value;
    use tower::ServiceExt;

    use super::*;
    use crate::daemon::config::Config;
    use crate::daemon::platform::local::LocalPlatform;

    async fn state() -> (tempfile::TempDir, AppState) {
        let dir = tempfile::tempdir().unwrap();
        let platform = Arc::new(LocalPlatform::open(dir.path(), vec![]).unwrap());
        let state = AppState::new(Config::for_data_dir(dir.path()), platform);
        state.keys.reload().await.unwrap();
        (dir, state)
    }

    async fn call(state: &AppState, request: Request<Body>) -> (StatusCode, Value) {
        let response = app(state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn health_is_bare_and_errors_are_enveloped() {
        let (_dir, state) = state().await;
        let (status, body) =
            call(&state, Request::get("/health").body(Body::empty()).unwrap()).await;
        assert_eq!(
            (status, body["status"].as_str()),
            (StatusCode::OK, Some("healthy"))
        );

        let (status, body) = call(
            &state,
            Request::get("/nowhere").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body["error"]["code"], "NotFound");

        let (status, body) = call(
            &state,
            Request::delete("/health").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(body["error"]["code"], "MethodNotAllowed");

        let (status, body) = call(
            &state,
            Request::get("/api/v1/keys").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["code"], "Unauthorized");
    }

    #[tokio::test]
    async fn a_minted_key_authorizes_the_routes_its_role_allows() {
        let (_dir, state) = state().await;
        let request = crate::shared::models::identity::CreateKeyRequest {
            name: Some("t".into()),
            role: Some("operator".into()),
            expires_days: Some(1),
            ..Default::default()
        };
        let token = state.keys.create(&request).await.unwrap().token.unwrap();
        let get = |path: &str| {
            Request::get(path)
                .header("x-api-key", &token)
                .body(Body::empty())
                .unwrap()
        };
        let (status, body) = call(&state, get("/api/v1/auth/whoami")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["data"]["grants"][0], "operator");
        let (status, body) = call(&state, get("/api/v1/keys")).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(body["error"]["code"], "Forbidden");
        let (status, body) = call(&state, get("/api/v1/tenants")).await;
        assert_eq!(status, StatusCode::OK, "operators may read tenants: {body}");
        assert_eq!(body["data"], serde_json::json!([]));
    }
}
