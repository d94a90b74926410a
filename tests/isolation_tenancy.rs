//! Issue 43 point 20, black-box against the real `sbx serve`: what development mode and
//! tenant administration must not let slip between tenants. An unscoped tenant-role key
//! (which reaches every namespace) is refused once a tenant exists; `GET /api/v1/images`
//! shows a tenant's caller only the images its own sandboxes run; a namespace changes
//! tenants only while it holds no sandbox and no snapshot. (The OIDC `email` fallback is in
//! `tests/oidc.rs::an_unverified_email_matches_no_user_binding`.) The second test runs real
//! sandboxes: it needs root and the loopback registry.
mod common;

use std::time::{Duration, Instant};

use common::sbxd::{self, TestNet};
use common::{Daemon, call, key};
use reqwest::Method as M;
use serde_json::{Value, json};

fn error(body: &Value) -> (&str, &str) {
    (
        body["error"]["code"].as_str().unwrap_or_default(),
        body["error"]["message"].as_str().unwrap_or_default(),
    )
}

async fn mint(daemon: &Daemon, role: &str, tenant: Option<&str>) -> (u16, Value) {
    let mut body = json!({"name": format!("k-{role}"), "role": role, "expires_days": 1});
    if let Some(tenant) = tenant {
        body["tenant"] = json!(tenant);
    }
    call(
        daemon,
        &daemon.admin_token(),
        M::POST,
        "/api/v1/keys",
        Some(body),
    )
    .await
}

async fn create_tenant(daemon: &Daemon, name: &str, namespaces: &[&str]) -> (u16, Value) {
    call(
        daemon,
        &daemon.admin_token(),
        M::POST,
        "/api/v1/tenants",
        Some(json!({"name": name, "spec": {"namespaces": namespaces}})),
    )
    .await
}

async fn move_namespaces(daemon: &Daemon, tenant: &str, namespaces: &[&str]) -> (u16, Value) {
    call(
        daemon,
        &daemon.admin_token(),
        M::PATCH,
        &format!("/api/v1/tenants/{tenant}"),
        Some(json!({"spec": {"namespaces": namespaces}})),
    )
    .await
}

#[tokio::test]
async fn development_mode_refuses_unscoped_keys_once_a_tenant_exists() {
    let daemon = Daemon::start();
    // Before any tenant: the contract's development-mode key, unscoped.
    let (status, body) = mint(&daemon, "user", None).await;
    assert_eq!(status, 201, "{body}");
    let early = body["data"]["token"].as_str().unwrap().to_string();
    let (status, body) = call(&daemon, &early, M::GET, "/api/v1/auth/whoami", None).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["grants"], json!(["user on all namespaces"]));

    let (status, body) = create_tenant(&daemon, "acme", &["acme"]).await;
    assert_eq!(status, 201, "{body}");
    for role in ["user", "read-only"] {
        let (status, body) = mint(&daemon, role, None).await;
        assert_eq!(status, 400, "{role}: {body}");
        let (code, message) = error(&body);
        assert_eq!(code, "BadRequest");
        assert!(
            message.contains("give 'tenant' (acme)")
                && message.contains("every tenant's namespaces"),
            "{role}: {message}"
        );
        // The same role with a tenant is fine.
        let (status, body) = mint(&daemon, role, Some("acme")).await;
        assert_eq!(status, 201, "{role}: {body}");
    }
    let (status, body) = call(&daemon, &daemon.admin_token(), M::GET, "/api/v1/keys", None).await;
    assert_eq!(status, 200);
    let unscoped = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["role"] != "admin" && k["tenant"].is_null())
        .count();
    assert_eq!(unscoped, 1, "only the early key is unscoped: {body}");

    // The key minted before the tenant is named at every start.
    let data_dir = daemon.data_dir.clone();
    let daemon = daemon.restart(&[]);
    assert_eq!(daemon.data_dir, data_dir);
    let warned = daemon.log.lock().unwrap().iter().any(|l| {
        l.contains("unscoped development-mode keys reach every tenant's namespaces")
            && l.contains("k-user")
    });
    assert!(warned, "{:?}", daemon.log.lock().unwrap());
}

/// Waits until a sandbox is Running and Ready (2 minutes at most).
async fn ready(daemon: &Daemon, token: &str, name: &str, namespace: &str) {
    let started = Instant::now();
    loop {
        let path = format!("/api/v1/sandboxes/{name}?namespace={namespace}");
        let (status, body) = call(daemon, token, M::GET, &path, None).await;
        assert_eq!(status, 200, "{body}");
        if body["data"]["status"] == "Running" && body["data"]["ready"] == "True" {
            return;
        }
        assert_ne!(body["data"]["status"], "Failed", "{body}");
        assert!(started.elapsed() < Duration::from_secs(120), "{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deletes a sandbox and waits until it is gone.
async fn delete_sandbox(daemon: &Daemon, name: &str, namespace: &str) {
    let admin = daemon.admin_token();
    let path = format!("/api/v1/sandboxes/{name}?namespace={namespace}");
    let (status, body) = call(daemon, &admin, M::DELETE, &path, None).await;
    assert_eq!(status, 200, "{body}");
    let started = Instant::now();
    while call(daemon, &admin, M::GET, &path, None).await.0 != 404 {
        assert!(started.elapsed() < Duration::from_secs(60), "{name} stays");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn image_refs(daemon: &Daemon, token: &str) -> Vec<String> {
    let (status, body) = call(daemon, token, M::GET, "/api/v1/images", None).await;
    assert_eq!(status, 200, "{body}");
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["reference"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn images_and_namespaces_stay_with_their_tenant() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin_token();
    assert_eq!(create_tenant(&daemon, "alpha", &["ns-a"]).await.0, 201);
    assert_eq!(create_tenant(&daemon, "beta", &["ns-b"]).await.0, 201);
    let alpha = key(&daemon.admin(), "alpha-user", "user", Some("alpha")).await;
    let beta = key(&daemon.admin(), "beta-user", "user", Some("beta")).await;
    let image = sbxd::busybox();
    let (status, body) = call(
        &daemon,
        &alpha,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "web", "namespace": "ns-a", "image": image})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    ready(&daemon, &alpha, "web", "ns-a").await;

    // What alpha pulled tells what alpha runs: beta does not see it, alpha and the admin do.
    assert_eq!(image_refs(&daemon, &alpha).await, vec![image.clone()]);
    assert_eq!(image_refs(&daemon, &beta).await, Vec::<String>::new());
    assert_eq!(image_refs(&daemon, &admin).await, vec![image.clone()]);

    // ns-a holds a sandbox: it may not leave alpha (and so not become beta's).
    let (status, body) = move_namespaces(&daemon, "alpha", &["ns-a2"]).await;
    assert_eq!(status, 409, "{body}");
    let (code, message) = error(&body);
    assert_eq!(code, "Conflict");
    assert!(
        message.contains("namespace 'ns-a' holds 1 sandbox(es) and 0 snapshot(s)"),
        "{message}"
    );
    let (_, tenant) = call(&daemon, &admin, M::GET, "/api/v1/tenants/alpha", None).await;
    assert_eq!(
        tenant["data"]["spec"]["namespaces"],
        json!(["ns-a"]),
        "unchanged"
    );

    // A snapshot alone keeps it too: restored elsewhere, it would hand over alpha's files.
    let (status, body) = call(
        &daemon,
        &alpha,
        M::POST,
        "/api/v1/sandboxes/web/snapshot",
        Some(json!({"snapshot_name": "keep", "namespace": "ns-a"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    // A restore's image override is a pull too: only from an allowed registry (point 14).
    let (status, body) = call(
        &daemon,
        &alpha,
        M::POST,
        "/api/v1/snapshots/keep/restore",
        Some(json!({
            "new_sandbox_name": "copy", "namespace": "ns-a",
            "overrides": {"image": "quay.io/someone/tool:1"},
        })),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        error(&body).1.contains("[images] allowedRegistries"),
        "{body}"
    );
    delete_sandbox(&daemon, "web", "ns-a").await;
    let (status, body) = move_namespaces(&daemon, "alpha", &["ns-a2"]).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        error(&body).1.contains("0 sandbox(es) and 1 snapshot(s)"),
        "{body}"
    );

    // Empty, it moves: out of alpha, then into beta.
    let (status, body) = call(
        &daemon,
        &admin,
        M::DELETE,
        "/api/v1/snapshots/keep?namespace=ns-a",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = move_namespaces(&daemon, "alpha", &["ns-a2"]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = move_namespaces(&daemon, "beta", &["ns-b", "ns-a"]).await;
    assert_eq!(status, 200, "{body}");

    // Joining: a namespace with an operator's sandbox in it is not handed to a tenant.
    let (status, body) = call(
        &daemon,
        &admin,
        M::POST,
        "/api/v1/sandboxes",
        Some(json!({"name": "loose", "namespace": "free", "image": image})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = create_tenant(&daemon, "gamma", &["free"]).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        error(&body).1.contains("cannot join tenant 'gamma'"),
        "{body}"
    );
    let (status, body) = move_namespaces(&daemon, "beta", &["ns-b", "ns-a", "free"]).await;
    assert_eq!(status, 409, "{body}");
    delete_sandbox(&daemon, "loose", "free").await;
    let (status, body) = create_tenant(&daemon, "gamma", &["free"]).await;
    assert_eq!(status, 201, "{body}");
}
