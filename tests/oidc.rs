//! OIDC bearer tokens and role bindings against the real `sbx serve`: RS256 and ES256 tokens
//! signed here with keys made by `openssl`, their JWKS and discovery document served on
//! loopback by a real HTTP server, key rotation, every rejection, and role bindings with
//! `deny_subjects` and the last-admin guard.
mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::Daemon;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A signing key made by openssl: its encoding key and its public JWK.
struct SigningKey {
    kid: String,
    alg: Algorithm,
    key: EncodingKey,
    jwk: Jwk,
}

fn openssl_key(dir: &Path, kid: &str, alg: Algorithm) -> SigningKey {
    let path = dir.join(format!("{kid}.pem"));
    let args: &[&str] = match alg {
        Algorithm::RS256 => &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
        Algorithm::ES256 => &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
        other => panic!("no key for {other:?}"),
    };
    let status = Command::new("openssl")
        .arg("genpkey")
        .args(args)
        .arg("-out")
        .arg(&path)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl genpkey");
    let pem = std::fs::read(&path).unwrap();
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem).unwrap(),
        _ => EncodingKey::from_ec_pem(&pem).unwrap(),
    };
    let mut jwk = Jwk::from_encoding_key(&key, alg).unwrap();
    jwk.common.key_id = Some(kid.to_string());
    SigningKey {
        kid: kid.to_string(),
        alg,
        key,
        jwk,
    }
}

/// A discovery document and JWKS on loopback; `keys` can change while it runs.
async fn issuer(keys: Arc<Mutex<JwkSet>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
            axum::routing::get(move || {
                let d = discovery.clone();
                async move { axum::Json(d) }
            }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || {
                let set = keys.lock().unwrap().clone();
                async move { axum::Json(set) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn now() -> i64 {
    sbx::shared::timestamp::now_unix()
}

fn token(key: &SigningKey, claims: Value) -> String {
    let mut header = Header::new(key.alg);
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, &claims, &key.key).unwrap()
}

async fn get(daemon: &Daemon, bearer: &str, path: &str) -> (u16, Value) {
    let response = daemon
        .http()
        .get(format!("{}{path}", daemon.url))
        .bearer_auth(bearer)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn put_bindings(daemon: &Daemon, bearer: &str, document: Value) -> (u16, Value) {
    let response = daemon
        .http()
        .put(format!("{}/api/v1/role-bindings", daemon.url))
        .bearer_auth(bearer)
        .json(&document)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn oidc_tokens_and_role_bindings() {
    let keys_dir = tempfile::tempdir().unwrap();
    let rsa = openssl_key(keys_dir.path(), "rsa-1", Algorithm::RS256);
    let ec = openssl_key(keys_dir.path(), "ec-1", Algorithm::ES256);
    let set = Arc::new(Mutex::new(JwkSet {
        keys: vec![rsa.jwk.clone(), ec.jwk.clone()],
    }));
    let url = issuer(set.clone()).await;
    let config = keys_dir.path().join("sbx.toml");
    std::fs::write(
        &config,
        format!("[oidc]\nissuer = \"{url}\"\nclientId = \"sbx-cli\"\naudience = \"sbx\"\n"),
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let admin = daemon.admin_token();

    // Discovery, without credentials.
    let response = daemon
        .http()
        .get(format!("{}/api/v1/auth/oidc", daemon.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["data"],
        json!({"issuer": url, "client_id": "sbx-cli", "audience": "sbx"})
    );

    let (status, body) = get(&daemon, &admin, "/api/v1/tenants").await;
    assert_eq!(status, 200, "{body}");
    let response = daemon
        .http()
        .post(format!("{}/api/v1/tenants", daemon.url))
        .bearer_auth(&admin)
        .json(&json!({"name": "acme", "spec": {"namespaces": ["acme"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);

    let bindings = json!({
        "bindings": [
            {"group": "platform", "role": "operator"},
            {"group": "acme-devs", "role": "user", "tenant": "acme"},
            {"user": "alice", "role": "read-only", "tenant": "acme"},
            {"subject": "root-sub", "role": "admin"},
        ],
        "deny_subjects": [],
    });
    let (status, body) = put_bindings(&daemon, &admin, bindings.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], bindings);
    let (status, body) = get(&daemon, &admin, "/api/v1/role-bindings").await;
    assert_eq!((status, &body["data"]), (200, &bindings));

    let claims = |sub: &str, user: &str, groups: &[&str]| {
        json!({
            "iss": url, "aud": "sbx", "sub": sub, "preferred_username": user,
            "groups": groups, "iat": now(), "exp": now() + 600,
        })
    };
    // RS256: bindings combine as the highest cluster role plus the highest role per tenant.
    let alice = token(
        &rsa,
        claims("sub-alice", "alice", &["acme-devs", "platform"]),
    );
    let (status, body) = get(&daemon, &alice, "/api/v1/auth/whoami").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["data"],
        json!({
            "type": "oidc", "subject": "sub-alice",
            "grants": ["operator", "user on tenant acme"],
            "issuer": url, "groups": ["acme-devs", "platform"],
        })
    );
    assert_eq!(get(&daemon, &alice, "/api/v1/tenants").await.0, 200);
    assert_eq!(get(&daemon, &alice, "/api/v1/keys").await.0, 403);
    // ES256; a read-only identity.
    let bob = token(&ec, claims("sub-bob", "alice", &[]));
    let (status, body) = get(&daemon, &bob, "/api/v1/auth/whoami").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["grants"], json!(["read-only on tenant acme"]));
    assert_eq!(get(&daemon, &bob, "/api/v1/tenants").await.0, 403);
    assert_eq!(
        get(&daemon, &bob, "/api/v1/sandboxes?namespace=acme")
            .await
            .0,
        200
    );
    assert_eq!(
        get(&daemon, &bob, "/api/v1/sandboxes?namespace=default")
            .await
            .0,
        403
    );
    // An identity no binding matches is authenticated and may do nothing else.
    let nobody = token(&rsa, claims("sub-x", "x", &["elsewhere"]));
    let (status, body) = get(&daemon, &nobody, "/api/v1/auth/whoami").await;
    assert_eq!((status, &body["data"]["grants"]), (200, &json!([])));
    assert_eq!(get(&daemon, &nobody, "/api/v1/sandboxes").await.0, 403);

    // Every rejection is 401 with the reason.
    let mut expired = claims("sub-alice", "alice", &[]);
    expired["exp"] = json!(now() - 3600);
    let mut early = claims("sub-alice", "alice", &[]);
    early["nbf"] = json!(now() + 3600);
    let mut wrong_aud = claims("sub-alice", "alice", &[]);
    wrong_aud["aud"] = json!("someone-else");
    let mut wrong_iss = claims("sub-alice", "alice", &[]);
    wrong_iss["iss"] = json!("http://127.0.0.1:1");
    let mut no_sub = claims("sub-alice", "alice", &[]);
    no_sub.as_object_mut().unwrap().remove("sub");
    let stranger = openssl_key(keys_dir.path(), "rsa-stranger", Algorithm::RS256);
    let mut forged = openssl_key(keys_dir.path(), "rsa-1-forged", Algorithm::RS256);
    forged.kid = "rsa-1".into();
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims("sub-alice", "alice", &[]),
        &EncodingKey::from_secret(b"shared"),
    )
    .unwrap();
    for (what, bearer, says) in [
        ("expired", token(&rsa, expired), "expired"),
        ("nbf in the future", token(&rsa, early), "not valid yet"),
        ("wrong audience", token(&rsa, wrong_aud), "audience"),
        ("wrong issuer", token(&ec, wrong_iss), "issuer"),
        ("no sub", token(&rsa, no_sub), "sub"),
        (
            "unknown kid",
            token(&stranger, claims("s", "s", &[])),
            "unknown key",
        ),
        (
            "forged signature",
            token(&forged, claims("s", "s", &[])),
            "signature",
        ),
        ("HS256", hs, "not accepted"),
        ("garbage", "a.b.c".to_string(), "invalid bearer token"),
    ] {
        let (status, body) = get(&daemon, &bearer, "/api/v1/auth/whoami").await;
        assert_eq!(status, 401, "{what}: {body}");
        assert_eq!(body["error"]["code"], "Unauthorized", "{what}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{what}: {message}");
    }

    // Key rotation: a key published after the first fetch is picked up by its kid.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let rotated = openssl_key(keys_dir.path(), "rsa-2", Algorithm::RS256);
    set.lock().unwrap().keys.push(rotated.jwk.clone());
    let carol = token(&rotated, claims("sub-carol", "carol", &["platform"]));
    let (status, body) = get(&daemon, &carol, "/api/v1/auth/whoami").await;
    assert_eq!(status, 200, "rotated key: {body}");

    // deny_subjects holds from the very next request, by sub or username.
    let mut denied = bindings.clone();
    denied["deny_subjects"] = json!(["alice"]);
    assert_eq!(put_bindings(&daemon, &admin, denied).await.0, 200);
    let (status, body) = get(&daemon, &alice, "/api/v1/auth/whoami").await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("Forbidden"))
    );
    assert_eq!(get(&daemon, &carol, "/api/v1/auth/whoami").await.0, 200);
    assert_eq!(put_bindings(&daemon, &admin, bindings.clone()).await.0, 200);
    assert_eq!(get(&daemon, &alice, "/api/v1/auth/whoami").await.0, 200);

    // Every 400 of PUT.
    for (what, binding, says) in [
        (
            "unknown tenant",
            json!({"group": "g", "role": "user", "tenant": "ghost"}),
            "unknown tenant",
        ),
        (
            "cluster role with a tenant",
            json!({"group": "g", "role": "operator", "tenant": "acme"}),
            "cluster-wide",
        ),
        (
            "tenant role without one",
            json!({"group": "g", "role": "user"}),
            "needs a `tenant`",
        ),
        (
            "two matchers",
            json!({"group": "g", "user": "u", "role": "admin"}),
            "2 matchers",
        ),
        ("no matcher", json!({"role": "admin"}), "one matcher"),
        (
            "unknown role",
            json!({"group": "g", "role": "root"}),
            "root",
        ),
        (
            "duplicate",
            json!({"group": "platform", "role": "admin"}),
            "duplicate matcher",
        ),
    ] {
        let mut document = bindings.clone();
        document["bindings"].as_array_mut().unwrap().push(binding);
        let (status, body) = put_bindings(&daemon, &admin, document).await;
        assert_eq!(status, 400, "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{what}: {message}");
    }
    // Only an admin reads or writes them.
    assert_eq!(get(&daemon, &bob, "/api/v1/role-bindings").await.0, 403);
    assert_eq!(put_bindings(&daemon, &carol, bindings.clone()).await.0, 403);

    // The last-admin guard: once the admin key is revoked (by an OIDC admin), a document
    // without an admin binding is refused.
    let root = token(&ec, claims("root-sub", "root", &[]));
    let response = daemon
        .http()
        .delete(format!("{}/api/v1/keys/bootstrap-admin", daemon.url))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let without_admin = json!({"bindings": [{"group": "platform", "role": "operator"}]});
    let (status, body) = put_bindings(&daemon, &root, without_admin).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no admin")
    );
    assert_eq!(put_bindings(&daemon, &root, bindings).await.0, 200);
}

#[tokio::test]
async fn a_jwt_without_oidc_configured_is_401_and_discovery_404() {
    let daemon = Daemon::start();
    let (status, body) = get(&daemon, "aaa.bbb.ccc", "/api/v1/auth/whoami").await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("OIDC is not configured")
    );
    let response = daemon
        .http()
        .get(format!("{}/api/v1/auth/oidc", daemon.url))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
}

/// Issue 43 point 20: a `user` binding matches the `email` fallback only when the issuer has
/// verified the address. Anyone may register `admin@acme.example` at an issuer that does not
/// check it: unverified, the same token gets no grant at all.
#[tokio::test]
async fn an_unverified_email_matches_no_user_binding() {
    let keys_dir = tempfile::tempdir().unwrap();
    let rsa = openssl_key(keys_dir.path(), "rsa-1", Algorithm::RS256);
    let set = Arc::new(Mutex::new(JwkSet {
        keys: vec![rsa.jwk.clone()],
    }));
    let url = issuer(set).await;
    let config = keys_dir.path().join("sbx.toml");
    std::fs::write(
        &config,
        format!("[oidc]\nissuer = \"{url}\"\nclientId = \"sbx\"\n"),
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let admin = daemon.admin_token();
    let bindings = json!({
        "bindings": [{"user": "admin@acme.example", "role": "operator"}],
        "deny_subjects": [],
    });
    assert_eq!(put_bindings(&daemon, &admin, bindings).await.0, 200);
    // No preferred_username: the email is the fallback.
    let claims = |verified: Value| {
        let mut claims = json!({
            "iss": url, "aud": "sbx", "sub": "sub-mallory", "email": "admin@acme.example",
            "iat": now(), "exp": now() + 600,
        });
        if !verified.is_null() {
            claims["email_verified"] = verified;
        }
        claims
    };
    for (what, verified) in [
        ("email_verified absent", Value::Null),
        ("email_verified false", json!(false)),
        ("email_verified \"false\"", json!("false")),
    ] {
        let bearer = token(&rsa, claims(verified));
        let (status, body) = get(&daemon, &bearer, "/api/v1/auth/whoami").await;
        assert_eq!(status, 200, "{what}: {body}");
        assert_eq!(body["data"]["grants"], json!([]), "{what}");
        let (status, body) = get(&daemon, &bearer, "/api/v1/tenants").await;
        assert_eq!(status, 403, "{what}: {body}");
    }
    // The control: the same address, verified, is the bound user.
    let verified = token(&rsa, claims(json!(true)));
    let (status, body) = get(&daemon, &verified, "/api/v1/auth/whoami").await;
    assert_eq!(
        (status, &body["data"]["grants"]),
        (200, &json!(["operator"]))
    );
    assert_eq!(get(&daemon, &verified, "/api/v1/tenants").await.0, 200);
}
