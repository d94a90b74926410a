//! TLS between sbx's own components (issue 43, point 19), without a cluster: the replicas'
//! internal listener admits only a client presenting the replicas' certificate of the
//! internal CA (plain HTTP, no certificate, another CA's certificate and the agents'
//! certificate are all refused at the handshake, before any request is read); a request
//! passed to the replica holding a quota Lease reaches it over that TLS, and is never sent to
//! a holder that advertises plain HTTP or presents another certificate; and a real
//! `sbx agent` process listens on the one address it is given, serves only TLS with the
//! agents' certificate to clients with the replicas' certificate, and refuses (429,
//! without a TokenReview) a client address that sends more tokens to review than its bound.
//! The agent's Kubernetes API is a stand-in on loopback that answers TokenReviews and counts
//! them: the agent under test is the real binary. The cluster tests (tests/kubernetes,
//! `replicas::passed_requests_go_over_internal_tls`) run the same with real replicas.
use std::net::SocketAddr;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use sbx::daemon::error::PassTo;
use sbx::shared::tls::{self, AGENT_NAME, Generated, REPLICA_NAME};

/// Serves `app` with the daemon's listener on a loopback port, over TLS with `config`; the
/// port. Stops when the test's runtime ends.
async fn serve(app: Router, config: Option<Arc<rustls::ServerConfig>>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(sbx::daemon::listener::serve(
        listener,
        app,
        Duration::from_secs(5),
        config,
        std::future::pending(),
    ));
    addr
}

/// A client trusting `ca` for `name`, presenting `identity`.
fn client(ca: &str, name: &str, identity: Option<&tls::Pair>) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls::client_config(ca, name, identity).unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The error chain of a failed call, as one line.
fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn replica_server(g: &Generated) -> Arc<rustls::ServerConfig> {
    tls::server_config(&g.replica, Some(&g.ca_pem)).unwrap()
}

#[tokio::test]
async fn the_internal_listener_admits_only_replicas() {
    let ours = tls::generate().unwrap();
    let theirs = tls::generate().unwrap();
    let app = Router::new().route(
        "/whoami",
        get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }),
    );
    let addr = serve(app, Some(replica_server(&ours))).await;
    let url = format!("https://{addr}/whoami");

    // A replica: both certificates check, and the request is served (with its peer).
    let answer = client(&ours.ca_pem, REPLICA_NAME, Some(&ours.replica))
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "127.0.0.1");

    // Plain HTTP: the connection is closed before any answer (no HTTP response at all).
    let plain = reqwest::Client::new()
        .get(format!("http://{addr}/whoami"))
        .send()
        .await
        .unwrap_err();
    assert!(plain.status().is_none(), "{}", chain(&plain));

    // TLS without a client certificate, with another CA's replica certificate, or with the
    // agents' certificate (signed by our CA, but not for client authentication): refused at
    // the handshake.
    for (identity, why) in [
        (None, "CertificateRequired"),
        (Some(&theirs.replica), "UnknownCA"),
        (Some(&ours.agent), "UnsupportedCertificate"),
    ] {
        let refused = client(&ours.ca_pem, REPLICA_NAME, identity)
            .get(&url)
            .send()
            .await
            .unwrap_err();
        let text = chain(&refused);
        assert!(text.contains(why), "{text}");
    }

    // And a replica does not talk to a server presenting another CA's certificate, nor to
    // one of our CA's for another name (an agent posing as a replica).
    for (server, why) in [
        (replica_server(&theirs), "UnknownIssuer"),
        (
            tls::server_config(&ours.agent, None).unwrap(),
            "certificate not valid for name \"sbx-internal\"",
        ),
    ] {
        let app = Router::new().route("/whoami", get(|| async { "impostor" }));
        let impostor = serve(app, Some(server)).await;
        let refused = client(&ours.ca_pem, REPLICA_NAME, Some(&ours.replica))
            .get(format!("https://{impostor}/whoami"))
            .send()
            .await
            .unwrap_err();
        let text = chain(&refused);
        assert!(text.contains(why), "{text}");
    }
}

/// A replica's create route: answers `who` when it handles the request, or names the
/// holder it must be passed to (as a quota check that finds the Lease held elsewhere does).
fn replica_app(who: &'static str, holder: Option<String>, seen: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/api/v1/sandboxes",
            post(move |headers: axum::http::HeaderMap| {
                let holder = holder.clone();
                let seen = seen.clone();
                async move {
                    seen.fetch_add(1, Ordering::SeqCst);
                    let key = headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    match holder {
                        Some(url) if sbx::daemon::forward::may_pass() => {
                            let mut response = StatusCode::CONFLICT.into_response();
                            response.extensions_mut().insert(PassTo(url));
                            response
                        }
                        _ => (StatusCode::CREATED, format!("{who} with {key}")).into_response(),
                    }
                }
            }),
        )
        .route_layer(axum::middleware::from_fn(sbx::daemon::forward::to_holder))
}

#[tokio::test]
async fn a_passed_request_reaches_its_holder_over_tls_only() {
    let ours = tls::generate().unwrap();
    let theirs = tls::generate().unwrap();
    sbx::daemon::forward::pass_over_tls(&ours).unwrap();

    // The holder: the replicas' internal listener.
    let at_holder = Arc::new(AtomicUsize::new(0));
    let holder = serve(
        replica_app("holder", None, at_holder.clone()),
        Some(replica_server(&ours)),
    )
    .await;
    // A replica whose Lease check names the holder; clients reach it on its plain API port.
    let passing = Arc::new(AtomicUsize::new(0));
    let entry = serve(
        replica_app("entry", Some(format!("https://{holder}")), passing.clone()),
        None,
    )
    .await;
    let create = |addr: SocketAddr| async move {
        let answer = reqwest::Client::new()
            .post(format!("http://{addr}/api/v1/sandboxes"))
            .bearer_auth("sbx_client_key")
            .body("{}")
            .send()
            .await
            .unwrap();
        (answer.status(), answer.text().await.unwrap())
    };
    let (status, body) = create(entry).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::CREATED, "holder with Bearer sbx_client_key")
    );
    assert_eq!(at_holder.load(Ordering::SeqCst), 1);

    // A holder that advertises plain HTTP is not sent the client's key: checked here.
    let plain_holder_seen = Arc::new(AtomicUsize::new(0));
    let plain_holder = serve(
        replica_app("plain holder", None, plain_holder_seen.clone()),
        None,
    )
    .await;
    let entry = serve(
        replica_app(
            "entry",
            Some(format!("http://{plain_holder}")),
            Arc::new(AtomicUsize::new(0)),
        ),
        None,
    )
    .await;
    let (status, body) = create(entry).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::CREATED, "entry with Bearer sbx_client_key")
    );
    assert_eq!(plain_holder_seen.load(Ordering::SeqCst), 0);

    // A "holder" presenting another CA's certificate gets nothing either: checked here.
    let impostor_seen = Arc::new(AtomicUsize::new(0));
    let impostor = serve(
        replica_app("impostor", None, impostor_seen.clone()),
        Some(replica_server(&theirs)),
    )
    .await;
    let entry = serve(
        replica_app(
            "entry",
            Some(format!("https://{impostor}")),
            Arc::new(AtomicUsize::new(0)),
        ),
        None,
    )
    .await;
    let (status, body) = create(entry).await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::CREATED, "entry with Bearer sbx_client_key")
    );
    assert_eq!(impostor_seen.load(Ordering::SeqCst), 0);
}

/// An `sbx agent` process, killed on drop.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The service's token in the stand-in API server's TokenReviews.
const GOOD_TOKEN: &str = "the-service-token";

/// A stand-in Kubernetes API that answers TokenReviews (only [`GOOD_TOKEN`] is a token of
/// `sbx-system/sbx` for the agents' audience) and counts them.
async fn api_server(reviews: Arc<AtomicUsize>) -> SocketAddr {
    let app = Router::new().route(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        post(move |body: axum::Json<serde_json::Value>| {
            let reviews = reviews.clone();
            async move {
                reviews.fetch_add(1, Ordering::SeqCst);
                let good = body["spec"]["token"] == GOOD_TOKEN;
                let status = if good {
                    serde_json::json!({"authenticated": true, "audiences": ["sbx-agent"],
                        "user": {"username": "system:serviceaccount:sbx-system:sbx"}})
                } else {
                    serde_json::json!({"authenticated": false, "error": "invalid token"})
                };
                (
                    StatusCode::CREATED,
                    axum::Json(serde_json::json!({
                        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "metadata": {}, "spec": body["spec"], "status": status})),
                )
            }
        }),
    );
    serve(app, None).await
}

#[tokio::test]
async fn the_agent_serves_tls_only_and_limits_token_reviews_per_address() {
    let ours = tls::generate().unwrap();
    let theirs = tls::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tls_dir = dir.path().join("tls");
    std::fs::create_dir(&tls_dir).unwrap();
    std::fs::write(tls_dir.join("tls.crt"), &ours.agent.cert_pem).unwrap();
    std::fs::write(tls_dir.join("tls.key"), &ours.agent.key_pem).unwrap();
    std::fs::write(tls_dir.join("ca.crt"), &ours.ca_pem).unwrap();
    let reviews = Arc::new(AtomicUsize::new(0));
    let api = api_server(reviews.clone()).await;
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://{api}\n\
             users:\n- name: u\n  user:\n    token: agent-token\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
             current-context: c\n"
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    const PER_MINUTE: usize = 5;
    let _agent = Agent(
        Command::new(env!("CARGO_BIN_EXE_sbx"))
            // As deploy/agent.yaml: every address, narrowed to the node's internal one.
            .args(["agent", "--listen", &format!("0.0.0.0:{port}")])
            .args(["--listen-ip", "127.0.0.1"])
            .args(["--node-name", "test-node", "--caller", "sbx-system/sbx"])
            .arg("--tls-dir")
            .arg(&tls_dir)
            .args(["--reviews-per-minute", &PER_MINUTE.to_string()])
            .arg("--disk-pool")
            .arg(dir.path().join("no-pool"))
            .env("KUBECONFIG", &kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the agent never listened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Only there: another of the host's addresses (127.0.0.2 is loopback too) is refused.
    let elsewhere = std::net::TcpStream::connect(("127.0.0.2", port)).unwrap_err();
    assert_eq!(
        elsewhere.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{elsewhere}"
    );
    let url = format!("https://127.0.0.1:{port}/v1/storage");
    let service = client(&ours.ca_pem, AGENT_NAME, Some(&ours.replica));

    // Plain HTTP, a client trusting another CA or expecting a replica there, or one without
    // the replicas' certificate: no call gets through, no token is sent or reviewed (the
    // handshake fails first).
    let plain = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/v1/storage"))
        .bearer_auth(GOOD_TOKEN)
        .send()
        .await
        .unwrap_err();
    assert!(plain.status().is_none(), "{}", chain(&plain));
    for (other, why) in [
        (
            client(&theirs.ca_pem, AGENT_NAME, Some(&ours.replica)),
            "UnknownIssuer",
        ),
        (
            client(&ours.ca_pem, REPLICA_NAME, Some(&ours.replica)),
            "certificate not valid for name \"sbx-internal\"",
        ),
        // The agent admits only the replicas: no client certificate, another CA's, or an
        // agent's own are refused at the handshake, before any token is looked at.
        (
            client(&ours.ca_pem, AGENT_NAME, None),
            "CertificateRequired",
        ),
        (
            client(&ours.ca_pem, AGENT_NAME, Some(&theirs.replica)),
            "UnknownCA",
        ),
        (
            client(&ours.ca_pem, AGENT_NAME, Some(&ours.agent)),
            "UnsupportedCertificate",
        ),
    ] {
        let refused = other
            .get(&url)
            .bearer_auth(GOOD_TOKEN)
            .send()
            .await
            .unwrap_err();
        let text = chain(&refused);
        assert!(text.contains(why), "{text}");
    }
    assert_eq!(reviews.load(Ordering::SeqCst), 0);

    // The service: over TLS, its token reviewed once and accepted.
    let answer = service
        .get(&url)
        .bearer_auth(GOOD_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
    assert_eq!(reviews.load(Ordering::SeqCst), 1);

    // An attacker's stream of made-up tokens from one address: each of the first
    // PER_MINUTE costs a review and is refused (401); then 429, with no review.
    let mut statuses = Vec::new();
    for i in 0..3 * PER_MINUTE {
        let answer = service
            .get(&url)
            .bearer_auth(format!("made-up-{i}"))
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let retry_after = answer.headers().get("retry-after").cloned();
        let body: serde_json::Value = answer.json().await.unwrap();
        if status == 429 {
            assert_eq!(body["error"]["code"], "RateLimited", "{body}");
            assert!(retry_after.is_some(), "429 without Retry-After");
        } else {
            assert_eq!(status, 401, "{body}");
        }
        statuses.push(status.as_u16());
    }
    let refused = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(
        &statuses[..PER_MINUTE - 1],
        &[401; PER_MINUTE - 1][..],
        "{statuses:?}"
    );
    assert!(limited > 0, "never limited: {statuses:?}");
    // Exactly the refused ones were reviewed (and the service's one before them).
    assert_eq!(reviews.load(Ordering::SeqCst), 1 + refused, "{statuses:?}");

    // The service's token, accepted before, still works from that same address.
    let answer = service
        .get(&url)
        .bearer_auth(GOOD_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(reviews.load(Ordering::SeqCst), 1 + refused);
}
