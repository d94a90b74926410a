//! Passing a request to the replica whose lock it needs. On Kubernetes a replica keeps a
//! tenant's quota Lease between checks (`platform/kubernetes/lease.rs`); a create of that
//! tenant on another replica would wait for the Lease and write it twice. Instead its quota
//! check answers [`PlatformError::Elsewhere`](crate::daemon::platform::PlatformError) with the
//! holder's URL, and this route layer sends the request, as the client sent it (its own
//! credentials: the holder authenticates and authorises it again), to the holder and answers
//! with the holder's answer. A request is passed at most [`MAX_HOPS`] times (it carries the
//! count in [`PASSED_HEADER`]): one passed to a replica that gave the Lease up meanwhile may
//! go on to the Lease's new holder once, then it waits for the Lease where it is. A holder
//! that cannot be reached is not asked for [`UNREACHABLE_FOR`]: the request is carried out
//! here, under the Lease (which its holder gives up within a few seconds, however busy).
//!
//! The passed request carries the client's key, so with `[kubernetes] internalTls` (on in
//! production) it goes only to an `https` URL — the holder's internal listener — over TLS
//! with both sides' certificates checked against the internal CA ([`pass_over_tls`]); a
//! holder advertising a plain URL is not asked, the request is carried out here.
//!
//! The URL is read from the Lease, in `kube-system`: whoever may write sbx's Leases there
//! (sbx's own service account, cluster administrators) could send the clients' requests
//! elsewhere, as they could already lift every quota; grant nobody else `update` on Leases
//! in `kube-system`.
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::daemon::error::{PassTo, ServiceError};
use crate::daemon::routes::BODY_LIMIT_BYTES;
use crate::shared::envelope::ErrorCode;

/// The header of a request one replica passed to another: how many times it was passed.
pub const PASSED_HEADER: &str = "x-sbx-passed";

/// How many times a request may be passed on.
const MAX_HOPS: u8 = 2;

/// The routes (POST) whose requests take a tenant's quota check.
const CHECKED: [&str; 5] = [
    "/api/v1/sandboxes",
    "/api/v1/sandboxes/{name}/fork",
    "/api/v1/sandboxes/{name}/snapshot",
    "/api/v1/sandboxes/{name}/pause",
    "/api/v1/snapshots/{name}/restore",
];

tokio::task_local! {
    /// Whether the request being handled may be passed to another replica.
    static PASSABLE: bool;
}

/// Whether the request this task handles may be passed to the replica holding the lock it
/// needs (it came from a client, through [`to_holder`]).
pub fn may_pass() -> bool {
    PASSABLE.try_with(|p| *p).unwrap_or(false)
}

/// The replicas' client for each other and the scheme of the URLs it is for: set by
/// [`pass_over_tls`], else plain HTTP.
static PEERS: OnceLock<(reqwest::Client, &'static str)> = OnceLock::new();

fn peers_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(1))
        .pool_idle_timeout(Duration::from_secs(30))
}

fn peers() -> &'static (reqwest::Client, &'static str) {
    PEERS.get_or_init(|| {
        let client = peers_builder().build().unwrap_or_default();
        (client, "http")
    })
}

/// Passes requests only to `https` URLs from now on, presenting the replicas' certificate of
/// `tls` and accepting only a holder presenting it too. Called once, at start-up, before
/// any request.
pub fn pass_over_tls(tls: &crate::shared::tls::Generated) -> Result<(), String> {
    let config = crate::shared::tls::client_config(
        &tls.ca_pem,
        crate::shared::tls::REPLICA_NAME,
        Some(&tls.replica),
    )?;
    let client = peers_builder()
        .tls_backend_preconfigured(config)
        .build()
        .map_err(|e| format!("a client of the other replicas: {e}"))?;
    PEERS
        .set((client, "https"))
        .map_err(|_| "the replicas' client was already made".to_string())
}

/// Replicas that could not be reached, and when: not asked again for [`UNREACHABLE_FOR`].
static UNREACHABLE: LazyLock<Mutex<HashMap<String, Instant>>> = LazyLock::new(Default::default);

/// How long a replica that could not be reached is not asked again.
const UNREACHABLE_FOR: Duration = Duration::from_secs(30);

/// How long a passed request may take in all, its answer included: a holder that took the
/// request and hangs is answered for with a 503 then (the request may have been carried out).
const PASS_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether the replica at `url` could not be reached lately.
fn unreachable(url: &str) -> bool {
    let mut failed = UNREACHABLE.lock().unwrap_or_else(|e| e.into_inner());
    failed.retain(|_, at| at.elapsed() < UNREACHABLE_FOR);
    failed.contains_key(url)
}

/// Hop-by-hop headers, and those the client recomputes.
const NOT_PASSED: [header::HeaderName; 7] = [
    header::HOST,
    header::CONTENT_LENGTH,
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::UPGRADE,
    header::EXPECT,
];

/// The route layer: a request of a [`CHECKED`] route whose handler answers with [`PassTo`]
/// is answered by that replica.
pub async fn to_holder(request: Request, next: Next) -> Response {
    let checked = request.method() == Method::POST
        && request
            .extensions()
            .get::<MatchedPath>()
            .is_some_and(|p| CHECKED.contains(&p.as_str()));
    if !checked {
        return next.run(request).await;
    }
    // A count that does not parse is never passed on.
    let hops = request
        .headers()
        .get(PASSED_HEADER)
        .map_or(Some(0), |v| v.to_str().ok()?.parse::<u8>().ok())
        .unwrap_or(MAX_HOPS);
    let passable = hops < MAX_HOPS;
    let (parts, body) = request.into_parts();
    let body = match to_bytes(body, BODY_LIMIT_BYTES).await {
        Ok(body) => body,
        Err(e) => return unreadable(&e).into_response(),
    };
    let again = |parts: &Parts| Request::from_parts(parts.clone(), Body::from(body.clone()));
    let response = PASSABLE
        .scope(passable, next.clone().run(again(&parts)))
        .await;
    let Some(PassTo(url)) = response.extensions().get::<PassTo>().cloned() else {
        return response;
    };
    let scheme = peers().1;
    if !url.starts_with(&format!("{scheme}://")) {
        tracing::warn!(%url, "the replica holding a quota Lease advertises no {scheme} URL: checking here");
        return PASSABLE.scope(false, next.run(again(&parts))).await;
    }
    if unreachable(&url) {
        return PASSABLE.scope(false, next.run(again(&parts))).await;
    }
    match pass(&url, &parts, body.clone(), hops + 1).await {
        Ok(response) => response,
        Err(e) if e.is_connect() => {
            tracing::warn!(%url, error = %e, "the replica holding a quota Lease cannot be reached: checking here");
            UNREACHABLE
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(url, Instant::now());
            PASSABLE.scope(false, next.run(again(&parts))).await
        }
        Err(e) => ServiceError {
            internal: Some(format!("passing {} to {url}: {e}", parts.uri.path())),
            ..ServiceError::new(
                ErrorCode::ServiceUnavailable,
                "the replica checking this tenant's quota did not answer; \
                 the request may have been carried out",
            )
        }
        .into_response(),
    }
}

/// The answer to a body that could not be read: 413 over the limit, else 400.
fn unreadable(e: &axum::Error) -> ServiceError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return ServiceError::new(
                ErrorCode::PayloadTooLarge,
                format!("the request body is larger than {BODY_LIMIT_BYTES} bytes"),
            );
        }
        source = s.source();
    }
    ServiceError::bad_request(format!("the request body could not be read: {e}"))
}

/// Sends the request to the replica at `url`; its answer as this replica's.
async fn pass(
    url: &str,
    parts: &Parts,
    body: axum::body::Bytes,
    hops: u8,
) -> reqwest::Result<Response> {
    let target = format!(
        "{url}{}",
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut headers = parts.headers.clone();
    for name in &NOT_PASSED {
        headers.remove(name);
    }
    headers.insert(PASSED_HEADER, HeaderValue::from(u16::from(hops)));
    tracing::debug!(%target, "passing a request to the replica holding its quota Lease");
    let answer = peers()
        .0
        .request(parts.method.clone(), target)
        .headers(headers)
        .body(body)
        .timeout(PASS_TIMEOUT)
        .send()
        .await?;
    let status = answer.status();
    let mut headers = answer.headers().clone();
    for name in &NOT_PASSED {
        headers.remove(name);
    }
    let bytes = answer.bytes().await?;
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}
