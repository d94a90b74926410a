//! Issue 43, the policy points, black-box against the real `sbx serve` on the embedded
//! default (real sandboxes: runc, overlayfs, a network namespace of the test's own): a tenant
//! user's `cap_add` is limited to an allow-list (point 6), production refuses sandboxes
//! without user namespaces (point 8), every name and namespace is a DNS label and the list
//! cache cannot hand one caller's list to another (point 16), a restore's limits are checked
//! as a create's (point 17). Two tenants, each with a `user` key; every attack is made with a
//! tenant user's key (or, for the list cache, an unscoped one) and has a control that the
//! same request succeeds where it is allowed. Needs root and the loopback registry.
mod common;

use std::time::{Duration, Instant};

use common::sbxd::{self, TestNet};
use common::{Daemon, call, key};
use reqwest::Method as M;
use serde_json::{Value, json};

/// Two tenants, `alpha` (namespace `ns-a`) and `beta` (`ns-b`, which allows SYS_PTRACE), and
/// a `user` key of each.
struct Tenants {
    alpha: String,
    beta: String,
}

async fn tenants(daemon: &Daemon) -> Tenants {
    let admin = daemon.admin_token();
    for (name, spec) in [
        ("alpha", json!({"namespaces": ["ns-a"]})),
        (
            "beta",
            json!({"namespaces": ["ns-b"], "limits": {"allowedCapabilities": ["SYS_PTRACE"]}}),
        ),
    ] {
        let (status, body) = call(
            daemon,
            &admin,
            M::POST,
            "/api/v1/tenants",
            Some(json!({"name": name, "spec": spec})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    Tenants {
        alpha: key(&daemon.admin(), "alpha-user", "user", Some("alpha")).await,
        beta: key(&daemon.admin(), "beta-user", "user", Some("beta")).await,
    }
}

/// The create body of a busybox sandbox.
fn sandbox(name: &str, namespace: &str, extra: Value) -> Value {
    let mut body = json!({"name": name, "namespace": namespace, "image": sbxd::busybox()});
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    body
}

/// The error code and message of an enveloped error.
fn error(body: &Value) -> (&str, &str) {
    (
        body["error"]["code"].as_str().unwrap_or_default(),
        body["error"]["message"].as_str().unwrap_or_default(),
    )
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

/// The effective capability mask of a process exec'd in a sandbox (`CapEff`, hex): the
/// sandbox's process capabilities.
async fn effective_caps(daemon: &Daemon, token: &str, name: &str, namespace: &str) -> u64 {
    let path = format!("/api/v1/sandboxes/{name}/exec?namespace={namespace}");
    let (status, body) = call(
        daemon,
        token,
        M::POST,
        &path,
        Some(json!({"command": "grep CapEff /proc/self/status"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let out = body["data"]["stdout"].as_str().unwrap_or_default();
    let hex = out.trim().rsplit(['\t', ' ']).next().unwrap_or_default();
    u64::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("CapEff in {out:?}"))
}

/// Capability numbers (linux/capability.h).
const CAP_NET_BIND_SERVICE: u32 = 10;
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_SYS_ADMIN: u32 = 21;

/// Point 6. A tenant user asks for SYS_ADMIN (the capability seccomp lifts mount, unshare,
/// bpf and the rest for), NET_ADMIN, or SYS_PTRACE where its tenant does not allow it: 403
/// `Forbidden` naming the capability and the tenant setting an admin would change, and no
/// sandbox is made. Controls: the default set's NET_BIND_SERVICE for a user, SYS_PTRACE where
/// the tenant allows it, SYS_ADMIN for the admin; each of those sandboxes really holds the
/// capability (CapEff of a process in it).
#[tokio::test]
async fn a_tenant_user_gets_no_capability_outside_the_allow_list() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin_token();
    let users = tenants(&daemon).await;

    for (token, namespace, cap, tenant) in [
        (&users.alpha, "ns-a", "SYS_ADMIN", "alpha"),
        (&users.alpha, "ns-a", "cap_sys_admin", "alpha"),
        (&users.alpha, "ns-a", "NET_ADMIN", "alpha"),
        (&users.alpha, "ns-a", "SYS_PTRACE", "alpha"),
        (&users.beta, "ns-b", "SYS_ADMIN", "beta"),
    ] {
        let body = sandbox("priv", namespace, json!({"cap_add": ["CHOWN", cap]}));
        let (status, answer) = call(&daemon, token, M::POST, "/api/v1/sandboxes", Some(body)).await;
        let (code, message) = error(&answer);
        assert_eq!((status, code), (403, "Forbidden"), "{cap}: {answer}");
        let named = cap.to_ascii_uppercase();
        let named = named.trim_start_matches("CAP_");
        assert!(
            message.contains(&format!("cap_add {named} is not allowed"))
                && message.contains(&format!("tenant '{tenant}' limits.allowedCapabilities")),
            "{message}"
        );
        let (status, _) = call(
            &daemon,
            token,
            M::GET,
            &format!("/api/v1/sandboxes/priv?namespace={namespace}"),
            None,
        )
        .await;
        assert_eq!(status, 404, "a refused create made a sandbox");
    }

    // Controls: what the allow-list holds, for the users; anything, for the admin.
    for (token, name, namespace, cap, bit) in [
        (
            &users.alpha,
            "bind",
            "ns-a",
            "NET_BIND_SERVICE",
            CAP_NET_BIND_SERVICE,
        ),
        (&users.beta, "trace", "ns-b", "SYS_PTRACE", CAP_SYS_PTRACE),
        (&admin, "admin", "ns-a", "SYS_ADMIN", CAP_SYS_ADMIN),
    ] {
        let body = sandbox(name, namespace, json!({"cap_add": [cap]}));
        let (status, answer) = call(&daemon, token, M::POST, "/api/v1/sandboxes", Some(body)).await;
        assert_eq!(status, 201, "{cap}: {answer}");
        ready(&daemon, token, name, namespace).await;
        let caps = effective_caps(&daemon, token, name, namespace).await;
        assert_ne!(caps & (1 << bit), 0, "{cap} not held: {caps:#x}");
        if token != &admin {
            assert_eq!(caps & (1 << CAP_SYS_ADMIN), 0, "{caps:#x}");
            assert_eq!(caps & (1 << CAP_NET_ADMIN), 0, "{caps:#x}");
        }
    }

    // The setting takes capability names only, and never ALL.
    for bad in [json!(["ALL"]), json!(["FLY"])] {
        let (status, answer) = call(
            &daemon,
            &admin,
            M::PATCH,
            "/api/v1/tenants/alpha",
            Some(json!({"spec": {"limits": {"allowedCapabilities": bad}}})),
        )
        .await;
        assert_eq!((status, error(&answer).0), (400, "BadRequest"), "{answer}");
    }
    // A user cannot widen its own tenant's list.
    let (status, answer) = call(
        &daemon,
        &users.alpha,
        M::PATCH,
        "/api/v1/tenants/alpha",
        Some(json!({"spec": {"limits": {"allowedCapabilities": ["SYS_ADMIN"]}}})),
    )
    .await;
    assert_eq!((status, error(&answer).0), (403, "Forbidden"), "{answer}");
    // Once the admin adds it, the same user's create goes through.
    let (status, answer) = call(
        &daemon,
        &admin,
        M::PATCH,
        "/api/v1/tenants/alpha",
        Some(json!({"spec": {"namespaces": ["ns-a"], "limits": {"allowedCapabilities": ["NET_ADMIN"]}}})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let body = sandbox("netadm", "ns-a", json!({"cap_add": ["NET_ADMIN"]}));
    let (status, answer) = call(
        &daemon,
        &users.alpha,
        M::POST,
        "/api/v1/sandboxes",
        Some(body),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
}

/// Point 8. `sbx serve --mode production` with `[runtime] userNamespace = false` (sandboxes
/// whose root is the host's root) does not start: it exits non-zero, naming the setting.
/// Controls: the same file in development mode starts, and production mode without it starts.
#[tokio::test]
async fn production_refuses_sandboxes_without_a_user_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    std::fs::write(&config, "[runtime]\nuserNamespace = false\n").unwrap();
    let config = config.to_str().unwrap();
    let stderr = common::serve_refused(
        &[
            "--listen",
            "127.0.0.1:0",
            "--mode",
            "production",
            "--config",
            config,
        ],
        &dir.path().join("data"),
    );
    assert!(
        stderr.contains("[runtime] userNamespace = false") && stderr.contains("production mode"),
        "{stderr}"
    );

    let development = Daemon::start_with(&["--config", config]);
    assert!(development.pid() > 0);
    let production = Daemon::start_with(&["--mode", "production"]);
    assert!(production.pid() > 0);
}

/// Point 16. Names that are no DNS label, in the path, the query and the body, are 400
/// `BadRequest` before any lookup: `?namespace=%00ns-a`, a NUL or an upper-case name in the
/// path, a body namespace with a NUL. The list attack: an unscoped principal (the admin, an
/// operator) lists `?namespace=%00ns-a`; the cache of list
/// answers was keyed by strings, `"\0" + namespaces` standing for "the namespaces a caller
/// sees", so that answer (every namespace's sandboxes) was served for a second to tenant
/// alpha's user listing all its namespaces. Now the request is refused and the cache keyed by
/// an enum: alpha's user, listing right after, sees its own sandbox only. Control: the
/// well-formed list of `ns-a` answers it, and an admin's list of all namespaces both.
#[tokio::test]
async fn names_are_dns_labels_and_a_list_never_shows_another_tenant() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin_token();
    let users = tenants(&daemon).await;
    let operator = key(&daemon.admin(), "ops", "operator", None).await;
    for (token, name, namespace) in [(&users.alpha, "a1", "ns-a"), (&users.beta, "b1", "ns-b")] {
        let (status, body) = call(
            &daemon,
            token,
            M::POST,
            "/api/v1/sandboxes",
            Some(sandbox(name, namespace, json!({}))),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }

    let names = |body: &Value| -> Vec<String> {
        let mut names: Vec<String> = body["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .map(|s| {
                format!(
                    "{}/{}",
                    s["namespace"].as_str().unwrap(),
                    s["name"].as_str().unwrap()
                )
            })
            .collect();
        names.sort();
        names
    };
    // The attack and the victim's list, within the same second, a few times over.
    for _ in 0..5 {
        for token in [&admin, &operator] {
            let (status, body) = call(
                &daemon,
                token,
                M::GET,
                "/api/v1/sandboxes?namespace=%00ns-a",
                None,
            )
            .await;
            let (code, message) = error(&body);
            assert_eq!((status, code), (400, "BadRequest"), "{body}");
            assert!(message.contains("namespace"), "{message}");
        }
        let (status, body) = call(
            &daemon,
            &users.alpha,
            M::GET,
            "/api/v1/sandboxes?all_namespaces=true",
            None,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(names(&body), ["ns-a/a1"], "alpha's user saw another tenant");
    }
    let (status, body) = call(
        &daemon,
        &users.alpha,
        M::GET,
        "/api/v1/sandboxes?namespace=ns-a",
        None,
    )
    .await;
    assert_eq!((status, names(&body)), (200, vec!["ns-a/a1".to_string()]));
    let (status, body) = call(
        &daemon,
        &admin,
        M::GET,
        "/api/v1/sandboxes?all_namespaces=true",
        None,
    )
    .await;
    assert_eq!(
        (status, names(&body)),
        (200, vec!["ns-a/a1".to_string(), "ns-b/b1".to_string()])
    );

    // Names in paths, queries and bodies, from the tenant user and the admin alike.
    for token in [&users.alpha, &admin] {
        for (method, path, body) in [
            (M::GET, "/api/v1/sandboxes/a%001?namespace=ns-a", None),
            (M::GET, "/api/v1/sandboxes/A1?namespace=ns-a", None),
            (M::DELETE, "/api/v1/sandboxes/a1%2F..?namespace=ns-a", None),
            (M::GET, "/api/v1/sandboxes/a1/logs?namespace=ns-a%00", None),
            (M::GET, "/api/v1/snapshots/Snap?namespace=ns-a", None),
            (
                M::GET,
                "/api/v1/snapshots?namespace=ns-a&sandbox=%00a1",
                None,
            ),
            (M::GET, "/api/v1/tenants/alpha%00", None),
            (M::GET, "/api/v1/usage?from=0&to=1&tenant=alpha%00", None),
            (
                M::POST,
                "/api/v1/sandboxes/a1/pause",
                Some(json!({"namespace": "\u{0}ns-a"})),
            ),
            (
                M::POST,
                "/api/v1/sandboxes/a1/fork",
                Some(json!({"new_name": "a2", "namespace": "NS-A"})),
            ),
            (
                M::POST,
                "/api/v1/sandboxes/a1/snapshot",
                Some(json!({"snapshot_name": "s", "namespace": "ns-a\n"})),
            ),
            (
                M::POST,
                "/api/v1/snapshots/s/restore",
                Some(json!({"new_sandbox_name": "r", "namespace": "\u{0}ns-a"})),
            ),
        ] {
            let (status, answer) = call(&daemon, token, method.clone(), path, body).await;
            assert_eq!(
                (status, error(&answer).0),
                (400, "BadRequest"),
                "{method} {path}: {answer}"
            );
        }
    }
    // Control: the well-formed names still reach their objects.
    let (status, body) = call(
        &daemon,
        &users.alpha,
        M::GET,
        "/api/v1/sandboxes/a1?namespace=ns-a",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = call(
        &daemon,
        &users.alpha,
        M::GET,
        "/api/v1/sandboxes/b1?namespace=ns-b",
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");
}

/// Point 17. A restore asks for `memory: 1Mi` (below the smallest a sandbox starts with),
/// or `cpu: 0`: the same 400 and message as a create with those limits, and no sandbox is
/// made. Control: the same restore with `memory: 64Mi` is 201 and the sandbox runs.
#[tokio::test]
async fn a_restore_gets_the_limit_checks_of_a_create() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let users = tenants(&daemon).await;
    let user = &users.alpha;
    let (status, body) = call(
        &daemon,
        user,
        M::POST,
        "/api/v1/sandboxes",
        Some(sandbox("src", "ns-a", json!({}))),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    ready(&daemon, user, "src", "ns-a").await;
    let (status, body) = call(
        &daemon,
        user,
        M::POST,
        "/api/v1/sandboxes/src/snapshot",
        Some(json!({"snapshot_name": "snap", "namespace": "ns-a"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    for limits in [
        json!({"memory": "1Mi"}),
        json!({"cpu": "0"}),
        json!({"ephemeral-storage": "0"}),
    ] {
        let (status, created) = call(
            &daemon,
            user,
            M::POST,
            "/api/v1/sandboxes",
            Some(sandbox("small", "ns-a", json!({"limits": limits}))),
        )
        .await;
        assert_eq!(
            (status, error(&created).0),
            (400, "BadRequest"),
            "{created}"
        );
        let (status, restored) = call(
            &daemon,
            user,
            M::POST,
            "/api/v1/snapshots/snap/restore",
            Some(json!({"new_sandbox_name": "small", "namespace": "ns-a",
                        "overrides": {"limits": limits}})),
        )
        .await;
        assert_eq!(
            (status, error(&restored).0),
            (400, "BadRequest"),
            "{restored}"
        );
        assert_eq!(error(&restored).1, error(&created).1, "{limits}");
        let (status, _) = call(
            &daemon,
            user,
            M::GET,
            "/api/v1/sandboxes/small?namespace=ns-a",
            None,
        )
        .await;
        assert_eq!(status, 404, "a refused restore made a sandbox");
    }

    let (status, body) = call(
        &daemon,
        user,
        M::POST,
        "/api/v1/snapshots/snap/restore",
        Some(json!({"new_sandbox_name": "big", "namespace": "ns-a",
                    "overrides": {"limits": {"memory": "64Mi"}}})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    ready(&daemon, user, "big", "ns-a").await;
}
