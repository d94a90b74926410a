//! The API against the real `sbx serve` binary (local platform, SQLite in a temporary data
//! dir), driven by the project's own client and by plain HTTP for malformed requests.
mod common;

use common::Daemon;
use reqwest::StatusCode;
use sbx::cli::client::ClientError;
use sbx::shared::models::identity::{CreateKeyRequest, PrincipalType, Role};
use serde_json::{Value, json};

fn key_request(name: &str, role: &str) -> CreateKeyRequest {
    CreateKeyRequest {
        name: Some(name.into()),
        role: Some(role.into()),
        expires_days: Some(7),
        ..Default::default()
    }
}

/// Status, code and message of a failed client call.
fn api_error<T: std::fmt::Debug>(result: Result<T, ClientError>) -> (u16, String, String) {
    match result {
        Err(ClientError::Api(e)) => (e.status, e.code, e.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn raw(
    daemon: &Daemon,
    method: reqwest::Method,
    path: &str,
    key: Option<&str>,
    body: Option<(&str, Vec<u8>)>,
) -> (StatusCode, Value) {
    let mut request = daemon
        .http()
        .request(method, format!("{}{path}", daemon.url));
    if let Some(key) = key {
        request = request.header("X-API-Key", key);
    }
    if let Some((content_type, bytes)) = body {
        request = request.header("Content-Type", content_type).body(bytes);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

fn assert_error(body: &Value, code: &str) {
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn health_routes_are_bare_and_public() {
    let daemon = Daemon::start();
    let (status, body) = raw(&daemon, reqwest::Method::GET, "/", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert!(body["message"].is_string() && body.get("data").is_none());
    let (status, body) = raw(&daemon, reqwest::Method::GET, "/health", None, None).await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({"status": "healthy"}))
    );
    let (status, body) = raw(&daemon, reqwest::Method::GET, "/readyz", None, None).await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ready"})));

    let client = daemon.client("none");
    assert_eq!(client.health().await.unwrap().status, "healthy");
}

#[tokio::test]
async fn openapi_is_served_without_auth_and_matches_the_checked_in_document() {
    let daemon = Daemon::start();
    let (status, served) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/openapi.json",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut served = served;
    // The served document is said for this deployment: its backends, its exec maximum.
    let schemas = "/components/schemas";
    let backend = served
        .pointer_mut(&format!(
            "{schemas}/CreateSandboxRequest/properties/backend"
        ))
        .and_then(Value::as_object_mut)
        .unwrap();
    assert_eq!(backend.remove("enum"), Some(json!(["sbxd", null])));
    let exec_timeout = served
        .pointer_mut(&format!("{schemas}/ExecRequest/properties/timeout_seconds"))
        .and_then(Value::as_object_mut)
        .unwrap();
    assert_eq!(exec_timeout.remove("maximum"), Some(json!(3600)));
    let stream_timeout = served
        .pointer_mut("/paths/~1api~1v1~1sandboxes~1{name}~1exec~1stream/get/parameters")
        .and_then(Value::as_array_mut)
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == "timeout_seconds")
        .and_then(|p| p["schema"].as_object_mut())
        .unwrap();
    assert_eq!(stream_timeout.remove("maximum"), Some(json!(3600)));
    // Otherwise it is the checked-in document.
    let checked_in: Value = serde_json::from_str(include_str!("../docs/openapi.json")).unwrap();
    assert_eq!(served, checked_in);
}

#[tokio::test]
async fn authentication_accepts_both_headers_and_rejects_everything_else() {
    let daemon = Daemon::start();
    let token = daemon.admin_token();
    let http = daemon.http();
    let whoami = format!("{}/api/v1/auth/whoami", daemon.url);

    let ok = http
        .get(&whoami)
        .header("X-API-Key", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let ok = http.get(&whoami).bearer_auth(&token).send().await.unwrap();
    assert_eq!(ok.status(), StatusCode::OK);
    let body: Value = ok.json().await.unwrap();
    assert_eq!(body["data"]["type"], "key");
    assert_eq!(body["data"]["grants"], json!(["admin"]));
    assert!(body["data"]["issuer"].is_null() && body["data"]["groups"].is_null());

    let (id, _) = token.split_once('_').unwrap();
    for bad in [
        None,
        Some("garbage".to_string()),
        Some(format!("{id}_{}", "0".repeat(64))),
        Some(format!("{token}x")),
    ] {
        let mut request = http.get(&whoami);
        if let Some(bad) = &bad {
            request = request.header("X-API-Key", bad);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{bad:?}");
        assert_error(&response.json().await.unwrap(), "Unauthorized");
    }
    let response = http
        .get(&whoami)
        .header("Authorization", format!("Basic {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);

    // Every protected route authenticates before anything else.
    for path in [
        "/api/v1/keys",
        "/api/v1/sandboxes",
        "/api/v1/tenants",
        "/api/v1/usage",
    ] {
        let (status, body) = raw(&daemon, reqwest::Method::GET, path, None, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert_error(&body, "Unauthorized");
    }
    assert!(
        !daemon.log_text().contains(&token),
        "a token reached the log"
    );
}

#[tokio::test]
async fn keys_are_minted_listed_used_and_revoked() {
    let daemon = Daemon::start();
    let admin = daemon.admin();

    let http = daemon.http();
    let response = http
        .post(format!("{}/api/v1/keys", daemon.url))
        .header("X-API-Key", daemon.admin_token())
        .json(&key_request("ci", "operator"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(response.headers()["location"], "/api/v1/keys/ci");
    let body: Value = response.json().await.unwrap();
    let minted = &body["data"];
    let token = minted["token"].as_str().unwrap().to_string();
    let (id, secret) = token.split_once('_').unwrap();
    assert_eq!(minted["id"], id);
    assert_eq!(secret.len(), 64);
    assert_eq!(minted["role"], "operator");
    assert!(minted["last_used"].is_null());
    let created = minted["created"].as_i64().unwrap();
    assert_eq!(minted["expires"].as_i64().unwrap(), created + 7 * 86_400);

    let operator = daemon.client(&token);
    let me = operator.whoami().await.unwrap();
    assert_eq!(me.principal_type, PrincipalType::Key);
    assert_eq!(me.subject, id);
    assert_eq!(me.grants, ["operator"]);

    // A second key with the same name; the list has no secrets and shows last_used.
    let second = admin
        .create_key(&key_request("ci", "read-only"))
        .await
        .unwrap();
    let keys = admin.list_keys().await.unwrap();
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys.iter().all(|k| k.token.is_none()));
    let listed = keys.iter().find(|k| k.id == id).unwrap();
    assert!(listed.last_used.is_some());
    let (_, raw_list) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/keys",
        Some(&daemon.admin_token()),
        None,
    )
    .await;
    let text = raw_list.to_string();
    assert!(
        !text.contains(secret) && !text.contains("sha256") && !text.contains("hash"),
        "{text}"
    );

    // Only admins manage keys.
    let (status, code, _) = api_error(operator.list_keys().await);
    assert_eq!((status, code.as_str()), (403, "Forbidden"));
    let (status, _, _) = api_error(operator.create_key(&key_request("x", "admin")).await);
    assert_eq!(status, 403);
    let (status, _, _) = api_error(operator.revoke_keys("ci").await);
    assert_eq!(status, 403);

    let mut revoked = admin.revoke_keys("ci").await.unwrap().revoked;
    revoked.sort();
    let mut expected = vec![id.to_string(), second.id.clone()];
    expected.sort();
    assert_eq!(revoked, expected);
    let (status, code, _) = api_error(operator.whoami().await);
    assert_eq!((status, code.as_str()), (401, "Unauthorized"));
    let (status, code, message) = api_error(admin.revoke_keys("ci").await);
    assert_eq!((status, code.as_str()), (404, "NotFound"));
    assert!(message.contains("'ci'"), "{message}");

    // The last unexpired admin key cannot be revoked: the service would have no admin.
    let (status, code, message) = api_error(admin.revoke_keys("bootstrap-admin").await);
    assert_eq!((status, code.as_str()), (400, "BadRequest"), "{message}");
    assert!(message.contains("no admin"), "{message}");
    admin
        .whoami()
        .await
        .expect("the first admin key still works");
    // With a second admin key it can; then that one is the last.
    let ops = admin
        .create_key(&key_request("ops", "admin"))
        .await
        .unwrap();
    let ops = daemon.client(ops.token.as_deref().unwrap());
    admin.revoke_keys("bootstrap-admin").await.unwrap();
    let (status, _, _) = api_error(ops.revoke_keys("ops").await);
    assert_eq!(status, 400);
    ops.whoami().await.expect("the last admin key still works");
}

#[tokio::test]
async fn key_creation_errors_answer_the_contract_statuses() {
    let daemon = Daemon::start();
    let admin_token = daemon.admin_token();
    let post = |body: Value| {
        let daemon = &daemon;
        let token = admin_token.clone();
        async move {
            raw(
                daemon,
                reqwest::Method::POST,
                "/api/v1/keys",
                Some(&token),
                Some(("application/json", body.to_string().into_bytes())),
            )
            .await
        }
    };
    let bad_requests = [
        (json!({"role": "admin", "expires_days": 1}), "'name'"),
        (json!({"name": "a", "expires_days": 1}), "'role'"),
        (json!({"name": "a", "role": "admin"}), "'expires_days'"),
        (
            json!({"name": "a", "role": "admin", "expires_days": 0}),
            "positive",
        ),
        (
            json!({"name": "a", "role": "admin", "expires_days": -1}),
            "positive",
        ),
        (
            json!({"name": "a", "role": "superuser", "expires_days": 1}),
            "unknown role",
        ),
        (
            json!({"name": "a", "role": "admin", "tenant": "acme", "expires_days": 1}),
            "cluster-wide",
        ),
        (
            json!({"name": "a", "role": "operator", "tenant": "acme", "expires_days": 1}),
            "cluster-wide",
        ),
        (
            json!({"name": "a", "role": "user", "tenant": "acme", "expires_days": 1}),
            "unknown tenant",
        ),
        (
            json!({"name": "a", "role": "user", "namespaces": ["Bad_NS"], "expires_days": 1}),
            "Bad_NS",
        ),
        (
            json!({"name": "a b", "role": "admin", "expires_days": 1}),
            "key name",
        ),
    ];
    for (body, needle) in bad_requests {
        let (status, response) = post(body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} -> {response}");
        assert_error(&response, "BadRequest");
        let message = response["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{needle} not in {message}");
    }

    // Wrong types and broken JSON are 422.
    for body in [
        json!({"name": "a", "role": "admin", "expires_days": "7"}).to_string(),
        json!({"name": 5, "role": "admin", "expires_days": 7}).to_string(),
        "{not json".to_string(),
    ] {
        let (status, response) = raw(
            &daemon,
            reqwest::Method::POST,
            "/api/v1/keys",
            Some(&admin_token),
            Some(("application/json", body.clone().into_bytes())),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_error(&response, "UnprocessableEntity");
    }
    // No JSON content type: 415; over 1 MiB: 413. Both in the envelope.
    let (status, response) = raw(
        &daemon,
        reqwest::Method::POST,
        "/api/v1/keys",
        Some(&admin_token),
        Some(("text/plain", b"{}".to_vec())),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_error(&response, "UnsupportedMediaType");
    let big = format!("{{\"name\": \"{}\"}}", "a".repeat(1024 * 1024 + 10));
    let (status, response) = raw(
        &daemon,
        reqwest::Method::POST,
        "/api/v1/keys",
        Some(&admin_token),
        Some(("application/json", big.into_bytes())),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_error(&response, "PayloadTooLarge");

    // Nothing was stored by any failed request.
    assert_eq!(daemon.admin().list_keys().await.unwrap().len(), 1);
}

#[tokio::test]
async fn unknown_routes_methods_and_disabled_routes_use_the_envelope() {
    let daemon = Daemon::start();
    let token = daemon.admin_token();
    let (status, body) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/nope",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "NotFound");
    let (status, body) = raw(
        &daemon,
        reqwest::Method::PUT,
        "/api/v1/keys",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_error(&body, "MethodNotAllowed");
    let (status, body) = raw(
        &daemon,
        reqwest::Method::POST,
        "/api/v1/install",
        Some(&token),
        Some(("application/json", br#"{"nodes": ["n1"]}"#.to_vec())),
    )
    .await;
    // Remote install is off: 404, in the envelope.
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "NotFound");
    // Query-string errors are 400.
    let (status, body) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/sandboxes?all_namespaces=maybe",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_error(&body, "BadRequest");
    // OIDC discovery is public and 404 while unconfigured; remote install is off: 404.
    let (status, body) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/auth/oidc",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_error(&body, "NotFound");
    let (status, _) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/install/op-1",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Usage names the missing configuration key.
    let (status, body) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/usage?from=0&to=10",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("metering.metricsUrl")
    );
}

#[tokio::test]
async fn keys_survive_a_restart_and_expired_keys_are_refused() {
    let daemon = Daemon::start();
    let admin_token = daemon.admin_token();
    let admin = daemon.admin();
    let kept = admin
        .create_key(&key_request("kept", "admin"))
        .await
        .unwrap();
    let doomed = admin
        .create_key(&key_request("doomed", "operator"))
        .await
        .unwrap();
    daemon
        .client(kept.token.as_deref().unwrap())
        .whoami()
        .await
        .unwrap();

    // Expire one key in the store while the daemon is down, as time passing would.
    let db_path = daemon.data_dir.join("sbx.db");
    let mut daemon = daemon;
    assert!(daemon.stop(), "SIGTERM should stop the daemon cleanly");
    let conn = rusqlite::Connection::open(&db_path).unwrap();
    conn.execute(
        "UPDATE api_keys SET expires = 1000 WHERE id = ?1",
        [&doomed.id],
    )
    .unwrap();
    drop(conn);
    let daemon = daemon.restart(&[]);

    // No second bootstrap key, same admin token, last_used kept.
    assert_eq!(daemon.admin_token(), admin_token);
    let keys = daemon.admin().list_keys().await.unwrap();
    assert_eq!(keys.len(), 3);
    assert!(
        keys.iter()
            .find(|k| k.id == kept.id)
            .unwrap()
            .last_used
            .is_some()
    );
    daemon
        .client(kept.token.as_deref().unwrap())
        .whoami()
        .await
        .unwrap();
    let (status, code, message) = api_error(
        daemon
            .client(doomed.token.as_deref().unwrap())
            .whoami()
            .await,
    );
    assert_eq!((status, code.as_str()), (401, "Unauthorized"));
    assert!(message.contains("expired"), "{message}");
}

#[tokio::test]
async fn production_mode_requires_tenants_for_tenant_roles() {
    let dev = Daemon::start();
    let key = dev
        .admin()
        .create_key(&key_request("dev", "user"))
        .await
        .unwrap();
    assert_eq!(key.role, Role::User);
    assert_eq!(
        dev.client(key.token.as_deref().unwrap())
            .whoami()
            .await
            .unwrap()
            .grants,
        ["user on all namespaces"]
    );

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    std::fs::write(&config, "mode = \"production\"\n").unwrap();
    let prod = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let (status, code, message) =
        api_error(prod.admin().create_key(&key_request("dev", "user")).await);
    assert_eq!((status, code.as_str()), (400, "BadRequest"));
    assert!(message.contains("tenant"), "{message}");
    assert!(
        prod.admin()
            .create_key(&key_request("ops", "operator"))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_principal_over_its_rate_gets_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    std::fs::write(&config, "[rateLimit]\nperSecond = 1\nburst = 3\n").unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let admin = daemon.admin_token();
    let other = daemon
        .admin()
        .create_key(&key_request("other", "operator"))
        .await
        .unwrap()
        .token
        .unwrap();
    // A burst of 3 (the mint took one): a few pass, then one is refused (a slow machine may
    // see one refill on the way, at 1 per second).
    let mut statuses = Vec::new();
    let mut refused = None;
    while refused.is_none() && statuses.len() < 8 {
        let response = daemon
            .http()
            .get(format!("{}/api/v1/auth/whoami", daemon.url))
            .header("X-API-Key", &admin)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(response);
        }
    }
    let passed = statuses.iter().filter(|s| **s == 200).count();
    assert!(
        (2..=4).contains(&passed) && statuses.last() == Some(&429),
        "{statuses:?}"
    );
    let refused = refused.unwrap();
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    let body: Value = refused.json().await.unwrap();
    assert_error(&body, "TooManyRequests");
    // Another principal has its own bucket; public routes are not limited.
    let (status, _) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/auth/whoami",
        Some(&other),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    for _ in 0..10 {
        let (status, _) = raw(&daemon, reqwest::Method::GET, "/health", None, None).await;
        assert_eq!(status, StatusCode::OK);
    }
    // The bucket refills at its rate.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, _) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/auth/whoami",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn every_write_is_audited_and_no_log_holds_a_token() {
    let daemon = Daemon::start_with(&["--log-format", "json"]);
    let admin_token = daemon.admin_token();
    let admin = daemon.admin();
    let minted = admin
        .create_key(&key_request("ci", "operator"))
        .await
        .unwrap();
    let minted_token = minted.token.clone().unwrap();
    // Used once, then revoked; a refused write; a read; a wrong key.
    let (status, _) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/auth/whoami",
        Some(&minted_token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = raw(
        &daemon,
        reqwest::Method::POST,
        "/api/v1/tenants",
        Some(&admin_token),
        Some(("application/json", br#"{"name": "Bad Name"}"#.to_vec())),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A refusal whose status two codes share: the outcome is the envelope's code.
    let (status, body) = raw(
        &daemon,
        reqwest::Method::POST,
        "/api/v1/tenants",
        Some(&admin_token),
        Some((
            "application/json",
            br#"{"name": "full", "spec": {"namespaces": ["full-ns"], "quotas": {"sandboxes": 0}}}"#
                .to_vec(),
        )),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = raw(
        &daemon,
        reqwest::Method::POST,
        "/api/v1/sandboxes",
        Some(&admin_token),
        Some((
            "application/json",
            br#"{"name": "one", "namespace": "full-ns", "image": "busybox"}"#.to_vec(),
        )),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = raw(
        &daemon,
        reqwest::Method::DELETE,
        "/api/v1/keys/ci",
        Some(&admin_token),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let wrong = format!("{}_{}", minted.id, "0".repeat(43));
    let (status, _) = raw(
        &daemon,
        reqwest::Method::GET,
        "/api/v1/auth/whoami",
        Some(&wrong),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let audit_file = daemon.data_dir.join("audit.jsonl");
    let mut lines: Vec<Value> = Vec::new();
    for _ in 0..100 {
        let text = std::fs::read_to_string(&audit_file).unwrap_or_default();
        lines = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= 6 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The wrong key's read is audited as a failed authentication of its address (issue 43
    // point 18), without a principal; the rest are the writes.
    let (failures, lines): (Vec<Value>, Vec<Value>) = lines
        .into_iter()
        .partition(|l| l["action"] == "authenticate");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(
        (
            &failures[0]["path"],
            &failures[0]["status"],
            &failures[0]["outcome"],
            &failures[0]["address"],
            &failures[0]["count"],
            &failures[0]["principal"]
        ),
        (
            &json!("/api/v1/auth/whoami"),
            &json!(401),
            &json!("Unauthorized"),
            &json!("127.0.0.1"),
            &json!(1),
            &json!("")
        ),
    );
    let admin_id = admin_token.split('_').next().unwrap();
    let summary: Vec<(String, String, u64, String)> = lines
        .iter()
        .map(|l| {
            assert_eq!(l["principal"], admin_id, "{l}");
            assert_eq!(l["principal_type"], "key");
            assert!(l["time"].as_str().unwrap().ends_with('Z'));
            (
                l["action"].as_str().unwrap().to_string(),
                l["path"].as_str().unwrap().to_string(),
                l["status"].as_u64().unwrap(),
                l["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected =
        |a: &str, p: &str, s: u64, o: &str| (a.to_string(), p.to_string(), s, o.to_string());
    assert_eq!(
        summary,
        [
            expected("POST /api/v1/keys", "/api/v1/keys", 201, "ok"),
            expected("POST /api/v1/tenants", "/api/v1/tenants", 400, "BadRequest"),
            expected("POST /api/v1/tenants", "/api/v1/tenants", 201, "ok"),
            expected(
                "POST /api/v1/sandboxes",
                "/api/v1/sandboxes",
                403,
                "QuotaExceeded"
            ),
            expected("DELETE /api/v1/keys/{name}", "/api/v1/keys/ci", 200, "ok"),
        ],
        "reads are not audited (but for failed authentications); every write is, with its outcome"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&audit_file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // No token, nor a secret part of one, in the audit trail or the daemon's log; the log
    // is JSON, one object per line.
    let log = daemon.log_text();
    let audit_text = std::fs::read_to_string(&audit_file).unwrap();
    for token in [&admin_token, &minted_token, &wrong] {
        let secret = token.split_once('_').unwrap().1;
        for (name, text) in [("log", &log), ("audit", &audit_text)] {
            assert!(!text.contains(secret), "a token's secret is in the {name}");
        }
    }
    let mut objects = 0;
    for line in log.lines().filter(|l| l.starts_with('{')) {
        let object: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            object["level"].is_string() && object["fields"].is_object(),
            "{line}"
        );
        objects += 1;
    }
    assert!(objects > 3, "the log is JSON lines:\n{log}");
}

/// Slow clients cannot hold the daemon: half a header, an idle connection and a body that
/// stops are each cut off once `[http]`'s time limits pass (the stalled body with a 400 in the
/// envelope), while other clients are answered meanwhile.
#[tokio::test]
async fn slow_clients_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    std::fs::write(
        &config,
        "[http]\nheaderReadTimeout = \"1s\"\nbodyReadTimeout = \"1s\"\n",
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let addr = daemon.url.trim_start_matches("http://").to_string();

    let mut half_header = TcpStream::connect(&addr).await.unwrap();
    half_header
        .write_all(b"GET /health HTTP/1.1\r\nHost: sbx\r\n")
        .await
        .unwrap();
    let idle = TcpStream::connect(&addr).await.unwrap();
    let mut stalled_body = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /api/v1/sandboxes HTTP/1.1\r\nHost: sbx\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"name\":",
        daemon.admin_token()
    );
    stalled_body.write_all(head.as_bytes()).await.unwrap();

    // Meanwhile others are served.
    let client = daemon.admin();
    client.health().await.unwrap();
    client.list_sandboxes(Some("default")).await.unwrap();

    let mut answers = Vec::new();
    for (what, mut stream) in [
        ("half a header", half_header),
        ("an idle connection", idle),
        ("a stalled body", stalled_body),
    ] {
        let mut answer = Vec::new();
        let closed = tokio::time::timeout(
            std::time::Duration::from_secs(20),
            stream.read_to_end(&mut answer),
        )
        .await;
        assert!(closed.is_ok(), "{what}: still open after 20 s");
        answers.push(String::from_utf8_lossy(&answer).into_owned());
    }
    assert!(
        answers[0].is_empty() || answers[0].starts_with("HTTP/1.1 408"),
        "{}",
        answers[0]
    );
    let stalled = &answers[2];
    assert!(stalled.starts_with("HTTP/1.1 400"), "{stalled}");
    let body: Value = serde_json::from_str(&stalled[stalled.find("\r\n\r\n").unwrap() + 4..])
        .expect("an envelope");
    assert_eq!(body["error"]["code"], "BadRequest", "{body}");
    // A header over 64 KiB: 431.
    let big = daemon
        .http()
        .get(format!("{}/health", daemon.url))
        .header("x-padding", "a".repeat(70 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    // A bad limit is refused at start-up, naming the key.
    std::fs::write(&config, "[http]\nheaderReadTimeout = \"0s\"\n").unwrap();
    let refused = std::process::Command::new(common::sbx_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("http.headerReadTimeout must be positive"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}
