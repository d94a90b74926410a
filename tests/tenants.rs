//! Tenants, access by role and tenant on every route, quotas and tenant policy, on the real
//! `sbx serve` with real sandboxes (runc, overlayfs). Needs root and the loopback registry.
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::sbxd::{self, TestNet};
use common::{Daemon, call, cli, key};
use sbx::cli::client::ClientError;
use sbx::shared::models::identity::CreateKeyRequest;
use sbx::shared::models::sandbox::{CreateSandboxRequest, ResourceLimits, SandboxStatus};
use serde_json::{Value, json};

/// An HTTP call with a token: status and JSON body.
async fn tenant(daemon: &Daemon, name: &str, spec: Value) {
    let (status, body) = call(
        daemon,
        &daemon.admin_token(),
        reqwest::Method::POST,
        "/api/v1/tenants",
        Some(json!({"name": name, "spec": spec})),
    )
    .await;
    assert_eq!(status, 201, "{body}");
}

fn create(name: &str, namespace: &str) -> CreateSandboxRequest {
    CreateSandboxRequest {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        image: Some(sbxd::busybox()),
        ..Default::default()
    }
}

#[tokio::test]
async fn tenants_are_created_read_patched_and_deleted_by_the_rules() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin_token();
    let post = |body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            call(
                daemon,
                &admin,
                reqwest::Method::POST,
                "/api/v1/tenants",
                Some(body),
            )
            .await
        }
    };
    let (status, body) = post(json!({
        "name": "acme",
        "spec": {"namespaces": ["acme-dev", "acme-prod"], "quotas": {"sandboxes": 5, "memory": "2Gi"},
                 "defaultSize": {"cpu": "500m", "memory": "128Mi"}}
    }))
    .await;
    assert_eq!(status, 201, "{body}");
    let t = &body["data"];
    assert_eq!(t["apiVersion"], "sbx.io/v1alpha1");
    assert_eq!(t["kind"], "Tenant");
    assert_eq!(t["metadata"]["name"], "acme");
    assert_eq!(t["spec"]["namespaces"], json!(["acme-dev", "acme-prod"]));
    assert_eq!(t["status"]["usage"]["sandboxes"], "0");
    assert_eq!(t["status"]["observedGeneration"], 1);

    // Every 400 of create, the existing name among them (the spec's error table).
    for (body, want, says) in [
        (
            json!({"name": "acme", "spec": {"namespaces": ["x"]}}),
            400,
            "already exists",
        ),
        (
            json!({"name": "beta", "spec": {"namespaces": ["acme-dev"]}}),
            400,
            "belongs to tenant 'acme'",
        ),
        (
            json!({"name": "beta", "spec": {"namespaces": []}}),
            400,
            "at least one",
        ),
        (json!({"name": "beta"}), 400, "spec"),
        (json!({"spec": {"namespaces": ["b"]}}), 400, "name"),
        (
            json!({"name": "Bad_Name", "spec": {"namespaces": ["b"]}}),
            400,
            "tenant name",
        ),
        (
            json!({"name": "beta", "spec": {"namespaces": ["NS!"]}}),
            400,
            "namespace",
        ),
        (
            json!({"name": "beta", "spec": {"namespaces": ["b"], "quotas": {"vcpu": "lots"}}}),
            400,
            "quotas.vcpu",
        ),
        (
            json!({"name": "beta", "spec": {"namespaces": ["b", "b"]}}),
            400,
            "twice",
        ),
    ] {
        let (status, response) = post(body.clone()).await;
        assert_eq!(status, want, "{body} -> {response}");
        let message = response["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{body} -> {message}");
    }
    let (status, _) = post(json!({"name": "beta", "spec": {"namespaces": "b"}})).await;
    assert_eq!(status, 422, "a wrong type is 422");

    // PATCH replaces whole sections; null removes one; the generation moves.
    let patch = |body: Value| {
        let (daemon, admin) = (&daemon, admin.clone());
        async move {
            call(
                daemon,
                &admin,
                reqwest::Method::PATCH,
                "/api/v1/tenants/acme",
                Some(body),
            )
            .await
        }
    };
    let (status, body) = patch(json!({"spec": {"quotas": {"sandboxes": 9}}})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["spec"]["quotas"], json!({"sandboxes": 9}));
    assert_eq!(body["data"]["spec"]["defaultSize"]["cpu"], "500m");
    assert_eq!(body["data"]["status"]["observedGeneration"], 2);
    let (status, body) = patch(json!({"spec": {"defaultSize": null}})).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["data"]["spec"].get("defaultSize").is_none(), "{body}");
    let (status, body) = patch(json!({"spec": {"namespaces": null}})).await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = call(
        &daemon,
        &admin,
        reqwest::Method::PATCH,
        "/api/v1/tenants/ghost",
        Some(json!({"spec": {}})),
    )
    .await;
    assert_eq!(status, 404);

    // Keys: a tenant role needs an existing tenant; cluster roles take none.
    let client = daemon.admin();
    for (role, tenant, namespaces, nodes, days, says) in [
        ("user", Some("ghost"), None, None, 1, "unknown tenant"),
        (
            "operator",
            Some("acme"),
            None,
            None,
            1,
            "cannot have a tenant",
        ),
        (
            "user",
            Some("acme"),
            Some(vec!["elsewhere".to_string()]),
            None,
            1,
            "not one of tenant",
        ),
        (
            "user",
            Some("acme"),
            None,
            Some(vec!["no-such-node".to_string()]),
            1,
            "unknown node",
        ),
        ("user", Some("acme"), None, None, 0, "positive"),
        (
            "operator",
            None,
            Some(vec!["acme-dev".to_string()]),
            None,
            1,
            "cluster-wide",
        ),
    ] {
        let err = client
            .create_key(&CreateKeyRequest {
                name: Some("k".into()),
                role: Some(role.into()),
                tenant: tenant.map(Into::into),
                namespaces,
                nodes,
                expires_days: Some(days),
                labels: None,
            })
            .await
            .unwrap_err();
        match err {
            ClientError::Api(e) => {
                assert_eq!(e.status, 400);
                assert!(e.message.contains(says), "{}", e.message);
            }
            other => panic!("{other:?}"),
        }
    }
    // A key narrowed to one of its tenant's namespaces sees only that one.
    let narrow = client
        .create_key(&CreateKeyRequest {
            name: Some("narrow".into()),
            role: Some("user".into()),
            tenant: Some("acme".into()),
            namespaces: Some(vec!["acme-dev".into()]),
            expires_days: Some(1),
            ..Default::default()
        })
        .await
        .unwrap()
        .token
        .unwrap();
    let narrow = daemon.client(&narrow);
    assert!(narrow.list_sandboxes(Some("acme-dev")).await.is_ok());
    assert!(narrow.list_sandboxes(Some("acme-prod")).await.is_err());
    assert_eq!(
        narrow.whoami().await.unwrap().grants,
        ["user on tenant acme"]
    );

    // DELETE: 409 while sandboxes remain, cascade deletes them; 404 after.
    client
        .create_sandbox(&create("one", "acme-dev"))
        .await
        .unwrap();
    sbxd::running(&client, "one", "acme-dev").await;
    let (status, body) = call(
        &daemon,
        &admin,
        reqwest::Method::DELETE,
        "/api/v1/tenants/acme",
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("Conflict")),
        "{body}"
    );
    let (status, body) = call(
        &daemon,
        &admin,
        reqwest::Method::DELETE,
        "/api/v1/tenants/acme?cascade=true",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["results"][0]["name"], "one");
    assert_eq!(body["data"]["results"][0]["success"], true);
    assert!(
        client
            .list_sandboxes(Some("acme-dev"))
            .await
            .unwrap()
            .is_empty()
    );
    let (status, _) = call(
        &daemon,
        &admin,
        reqwest::Method::GET,
        "/api/v1/tenants/acme",
        None,
    )
    .await;
    assert_eq!(status, 404);
    // Its namespaces are free again.
    let (status, _) = post(json!({"name": "beta", "spec": {"namespaces": ["acme-dev"]}})).await;
    assert_eq!(status, 201);
}

/// One tenant's principals against every route, in their tenant and in the other one.
#[tokio::test]
async fn every_route_answers_by_role_and_tenant_and_never_leaks_the_other_tenant() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let client = daemon.admin();
    tenant(&daemon, "alpha", json!({"namespaces": ["alpha-ns"]})).await;
    tenant(&daemon, "bravo", json!({"namespaces": ["bravo-ns"]})).await;
    for (name, ns) in [("alpha-box", "alpha-ns"), ("bravo-box", "bravo-ns")] {
        client.create_sandbox(&create(name, ns)).await.unwrap();
        sbxd::running(&client, name, ns).await;
    }
    for (sandbox, ns, snap) in [
        ("alpha-box", "alpha-ns", "alpha-snap"),
        ("bravo-box", "bravo-ns", "bravo-snap"),
    ] {
        let (status, body) = call(
            &daemon,
            &daemon.admin_token(),
            reqwest::Method::POST,
            &format!("/api/v1/sandboxes/{sandbox}/snapshot"),
            Some(json!({"snapshot_name": snap, "namespace": ns})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let mut tokens = BTreeMap::new();
    tokens.insert("admin", daemon.admin_token());
    tokens.insert("operator", key(&client, "op", "operator", None).await);
    tokens.insert("user", key(&client, "ua", "user", Some("alpha")).await);
    tokens.insert(
        "read-only",
        key(&client, "ra", "read-only", Some("alpha")).await,
    );
    tokens.insert(
        "other-user",
        key(&client, "ub", "user", Some("bravo")).await,
    );

    use reqwest::Method as M;
    // (method, path, body, expected per principal: admin, operator, user, read-only,
    // other-user). `{p}` is replaced with the principal's name so writes do not collide.
    let routes: Vec<(M, &str, Option<Value>, [u16; 5])> = vec![
        (
            M::GET,
            "/api/v1/sandboxes?namespace=alpha-ns",
            None,
            [200, 200, 200, 200, 403],
        ),
        (
            M::GET,
            "/api/v1/sandboxes/alpha-box?namespace=alpha-ns",
            None,
            [200, 200, 200, 200, 404],
        ),
        (
            M::GET,
            "/api/v1/sandboxes/alpha-box/logs?namespace=alpha-ns",
            None,
            [200, 200, 200, 200, 404],
        ),
        (
            M::GET,
            "/api/v1/sandboxes/metrics?namespace=alpha-ns",
            None,
            [200, 200, 200, 200, 403],
        ),
        (
            M::GET,
            "/api/v1/snapshots?namespace=alpha-ns",
            None,
            [200, 200, 200, 200, 403],
        ),
        (
            M::GET,
            "/api/v1/snapshots/alpha-snap?namespace=alpha-ns",
            None,
            [200, 200, 200, 200, 404],
        ),
        (
            M::POST,
            "/api/v1/sandboxes/alpha-box/exec?namespace=alpha-ns",
            Some(json!({"command": "true"})),
            [200, 200, 200, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/sandboxes/alpha-box/resume",
            Some(json!({"namespace": "alpha-ns"})),
            [200, 200, 200, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/sandboxes",
            Some(json!({"name": "new-{p}", "namespace": "alpha-ns", "image": sbxd::busybox()})),
            [201, 201, 201, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/sandboxes/alpha-box/snapshot",
            Some(json!({"snapshot_name": "snap-{p}", "namespace": "alpha-ns"})),
            [201, 201, 201, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/sandboxes/alpha-box/fork",
            Some(json!({"new_name": "fork-{p}", "namespace": "alpha-ns"})),
            [201, 201, 201, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/snapshots/alpha-snap/restore",
            Some(json!({"new_sandbox_name": "rest-{p}", "namespace": "alpha-ns"})),
            [201, 201, 201, 403, 403],
        ),
        (
            M::DELETE,
            "/api/v1/snapshots/snap-{p}?namespace=alpha-ns",
            None,
            [200, 200, 200, 403, 403],
        ),
        (
            M::DELETE,
            "/api/v1/sandboxes/fork-{p}?namespace=alpha-ns",
            None,
            [200, 200, 200, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/snapshots/gc",
            Some(json!({"namespace": "alpha-ns", "dry_run": true})),
            [200, 200, 200, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/snapshots/gc",
            Some(json!({"all_namespaces": true, "dry_run": true})),
            [200, 200, 403, 403, 403],
        ),
        (
            M::DELETE,
            "/api/v1/sandboxes?namespace=bravo-ns",
            None,
            [0, 0, 403, 403, 0],
        ),
        (
            M::POST,
            "/api/v1/sandboxes/bravo-box/exec?namespace=bravo-ns",
            Some(json!({"command": "true"})),
            [200, 200, 403, 403, 200],
        ),
        (
            M::GET,
            "/api/v1/sandboxes/bravo-box?namespace=bravo-ns",
            None,
            [200, 200, 404, 404, 200],
        ),
        (
            M::GET,
            "/api/v1/snapshots/bravo-snap?namespace=bravo-ns",
            None,
            [200, 200, 404, 404, 200],
        ),
        (
            M::GET,
            "/api/v1/sandboxes?all_namespaces=true",
            None,
            [200, 200, 200, 200, 200],
        ),
        (
            M::GET,
            "/api/v1/snapshots?all_namespaces=true",
            None,
            [200, 200, 200, 200, 200],
        ),
        (M::GET, "/api/v1/tenants", None, [200, 200, 403, 403, 403]),
        (
            M::GET,
            "/api/v1/tenants/alpha",
            None,
            [200, 200, 403, 403, 403],
        ),
        (
            M::POST,
            "/api/v1/tenants",
            Some(json!({"name": "t-{p}", "spec": {"namespaces": ["ns-{p}"]}})),
            [201, 403, 403, 403, 403],
        ),
        (
            M::PATCH,
            "/api/v1/tenants/alpha",
            Some(json!({"spec": {}})),
            [200, 403, 403, 403, 403],
        ),
        (
            M::DELETE,
            "/api/v1/tenants/bravo",
            None,
            [0, 403, 403, 403, 403],
        ),
        (M::GET, "/api/v1/keys", None, [200, 403, 403, 403, 403]),
        (
            M::GET,
            "/api/v1/auth/whoami",
            None,
            [200, 200, 200, 200, 200],
        ),
    ];
    let principals = ["admin", "operator", "user", "read-only", "other-user"];
    let mut failures = Vec::new();
    for (method, path, body, want) in &routes {
        for (i, who) in principals.iter().enumerate() {
            if want[i] == 0 {
                continue; // not run: it would destroy what the other rows need
            }
            let p = who.replace('-', "");
            let path = path.replace("{p}", &p);
            let body = body
                .as_ref()
                .map(|b| serde_json::from_str(&b.to_string().replace("{p}", &p)).unwrap());
            let asked = format!("{path} {body:?}");
            let (status, response) = call(&daemon, &tokens[who], method.clone(), &path, body).await;
            if status != want[i] {
                failures.push(format!(
                    "{who} {method} {path}: {status}, want {} — {response}",
                    want[i]
                ));
            }
            if status >= 400 {
                assert!(
                    response["error"]["code"].is_string(),
                    "{who} {path}: {response}"
                );
            }
            // Nothing of the other tenant in what they get back, beyond the names the
            // request itself gave.
            let foreign = match *who {
                "user" | "read-only" => "bravo",
                "other-user" => "alpha",
                _ => continue,
            };
            if !asked.contains(foreign) {
                assert!(
                    !response.to_string().contains(foreign),
                    "{who} {path} leaked: {response}"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The filtered lists still show the caller's own objects.
    let (_, body) = call(
        &daemon,
        &tokens["user"],
        M::GET,
        "/api/v1/sandboxes?all_namespaces=true",
        None,
    )
    .await;
    assert!(body.to_string().contains("alpha-box"), "{body}");
    client.delete_all_sandboxes("alpha-ns").await.unwrap();
    client.delete_all_sandboxes("bravo-ns").await.unwrap();
}

#[tokio::test]
async fn fifty_concurrent_creates_never_exceed_a_quota_of_ten() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin();
    tenant(
        &daemon,
        "q",
        json!({"namespaces": ["q-ns"], "quotas": {"sandboxes": 10}}),
    )
    .await;
    let user = daemon.client(&key(&admin, "q", "user", Some("q")).await);
    let creates = (0..50).map(|i| {
        let user = user.clone();
        async move { user.create_sandbox(&create(&format!("s{i}"), "q-ns")).await }
    });
    let results = futures_util::future::join_all(creates).await;
    let created = results.iter().filter(|r| r.is_ok()).count();
    let refused: Vec<&ClientError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(created, 10, "{refused:?}");
    for e in refused {
        match e {
            ClientError::Api(e) => {
                assert_eq!((e.status, e.code.as_str()), (403, "QuotaExceeded"), "{e:?}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(user.list_sandboxes(Some("q-ns")).await.unwrap().len(), 10);
    // A paused sandbox keeps its reservation; a deleted one frees it.
    let first = user.list_sandboxes(Some("q-ns")).await.unwrap()[0]
        .name
        .clone();
    sbxd::running(&user, &first, "q-ns").await;
    user.pause_sandbox(
        &first,
        &sbx::shared::models::sandbox::PauseRequest {
            namespace: Some("q-ns".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(user.create_sandbox(&create("extra", "q-ns")).await.is_err());
    user.delete_sandbox(&first, "q-ns").await.unwrap();
    user.create_sandbox(&create("extra", "q-ns"))
        .await
        .expect("a slot was freed");
    admin.delete_all_sandboxes("q-ns").await.unwrap();
}

#[tokio::test]
async fn tenant_defaults_limits_and_placement_apply_to_creates() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin();
    tenant(
        &daemon,
        "d",
        json!({
            "namespaces": ["d-ns"],
            "defaultSize": {"cpu": "250m", "memory": "96Mi"},
            "limits": {"maxSandboxSize": {"cpu": "1", "memory": "256Mi"}},
            "quotas": {"vcpu": "1", "memory": "200Mi"},
        }),
    )
    .await;
    tenant(
        &daemon,
        "net",
        json!({"namespaces": ["net-ns"], "limits": {"network": {"egressBps": "10M"}}}),
    )
    .await;
    tenant(
        &daemon,
        "disk",
        json!({"namespaces": ["disk-ns"], "quotas": {"disk": "10Gi"}}),
    )
    .await;
    tenant(
        &daemon,
        "far",
        json!({"namespaces": ["far-ns"], "nodes": ["some-other-node"]}),
    )
    .await;

    // defaultSize fills the limits a create leaves out.
    admin
        .create_sandbox(&create("sized", "d-ns"))
        .await
        .unwrap();
    sbxd::running(&admin, "sized", "d-ns").await;
    let limits = admin
        .exec_sandbox(
            "sized",
            "d-ns",
            &sbx::shared::models::sandbox::ExecRequest {
                command: Some(
                    "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us"
                        .into(),
                ),
                timeout_seconds: None,
            },
        )
        .await
        .unwrap()
        .stdout;
    assert_eq!(limits, format!("{}\n25000\n", 96 << 20));
    // maxSandboxSize: 400; the memory quota (96Mi used of 200Mi): 403 past it.
    let sized = |name: &str, memory: &str| CreateSandboxRequest {
        limits: Some(ResourceLimits {
            memory: Some(memory.into()),
            ..Default::default()
        }),
        ..create(name, "d-ns")
    };
    let status_of = |r: Result<(), ClientError>| match r {
        Ok(()) => (201, String::new()),
        Err(ClientError::Api(e)) => (e.status, e.code),
        Err(other) => panic!("{other:?}"),
    };
    let r = admin.create_sandbox(&sized("big", "512Mi")).await.map(drop);
    assert_eq!(status_of(r), (400, "BadRequest".into()));
    let r = admin
        .create_sandbox(&sized("over", "128Mi"))
        .await
        .map(drop);
    assert_eq!(status_of(r), (403, "QuotaExceeded".into()));
    let r = admin
        .create_sandbox(&sized("fits", "100Mi"))
        .await
        .map(drop);
    assert_eq!(status_of(r), (201, String::new()));
    // Limits the sbxd backend cannot enforce: 400 LimitNotEnforceable.
    for ns in ["net-ns", "disk-ns"] {
        let r = admin.create_sandbox(&create("x", ns)).await.map(drop);
        assert_eq!(status_of(r), (400, "LimitNotEnforceable".into()), "{ns}");
    }
    // A tenant whose nodes exclude this host: the sandbox stays Pending, saying why.
    admin
        .create_sandbox(&create("waits", "far-ns"))
        .await
        .unwrap();
    // The placement runs after the create's answer: wait for its word (a loaded machine
    // takes longer than an idle one), then it must hold.
    let started = std::time::Instant::now();
    let s = loop {
        let s = admin.get_sandbox("waits", "far-ns").await.unwrap();
        if !s.error_message.is_empty() || started.elapsed() > Duration::from_secs(20) {
            break s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(s.status, SandboxStatus::Pending);
    assert!(
        s.error_message.contains("some-other-node"),
        "{}",
        s.error_message
    );
    admin.delete_sandbox("waits", "far-ns").await.unwrap();
    // status.usage counts what the tenant holds.
    let (_, body) = call(
        &daemon,
        &daemon.admin_token(),
        reqwest::Method::GET,
        "/api/v1/tenants/d",
        None,
    )
    .await;
    assert_eq!(body["data"]["status"]["observedGeneration"], 1);
    admin.delete_all_sandboxes("d-ns").await.unwrap();

    // Issue 14, defect 4: a sandbox with no size for something its tenant has a quota on
    // would count as nothing against it: 400, naming the quota and the limit to give.
    tenant(
        &daemon,
        "nosize",
        json!({"namespaces": ["nosize-ns"], "quotas": {"vcpu": "2", "memory": "1Gi",
               "snapshotStorage": "4Ki"}}),
    )
    .await;
    let r = admin
        .create_sandbox(&create("bare", "nosize-ns"))
        .await
        .map(drop);
    let Err(ClientError::Api(e)) = r else {
        panic!("{r:?}")
    };
    assert_eq!(e.status, 400);
    assert!(
        e.message.contains("vcpu quota") && e.message.contains("`cpu`"),
        "{}",
        e.message
    );
    let half = CreateSandboxRequest {
        limits: Some(ResourceLimits {
            cpu: Some("500m".into()),
            ..Default::default()
        }),
        ..create("half", "nosize-ns")
    };
    let Err(ClientError::Api(e)) = admin.create_sandbox(&half).await.map(drop) else {
        panic!("a sandbox without memory limit was admitted")
    };
    assert!(e.message.contains("memory quota"), "{}", e.message);
    let sized = CreateSandboxRequest {
        limits: Some(ResourceLimits {
            cpu: Some("500m".into()),
            memory: Some("64Mi".into()),
            ..Default::default()
        }),
        ..create("src", "nosize-ns")
    };
    admin.create_sandbox(&sized).await.unwrap();
    sbxd::running(&admin, "src", "nosize-ns").await;
    // snapshotStorage is checked on every snapshot a request keeps, a fork's named one too:
    // the first snapshot (8 KiB written) fits the quota's 4 KiB (nothing stored yet), the
    // fork that would keep a second one does not; a fork that keeps none does.
    admin
        .exec_sandbox(
            "src",
            "nosize-ns",
            &sbx::shared::models::sandbox::ExecRequest {
                command: Some("dd if=/dev/urandom of=/data bs=1k count=8".into()),
                timeout_seconds: None,
            },
        )
        .await
        .unwrap();
    let post = |path: &str, body: Value| {
        let (daemon, token, path) = (&daemon, daemon.admin_token(), path.to_string());
        async move { call(daemon, &token, reqwest::Method::POST, &path, Some(body)).await }
    };
    let (status, body) = post(
        "/api/v1/sandboxes/src/snapshot",
        json!({"snapshot_name": "s1", "namespace": "nosize-ns"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = post(
        "/api/v1/sandboxes/src/fork",
        json!({"new_name": "f1", "namespace": "nosize-ns", "snapshot": "s2"}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("QuotaExceeded")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("snapshotStorage"),
        "{body}"
    );
    let (status, body) = post(
        "/api/v1/sandboxes/src/fork",
        json!({"new_name": "f2", "namespace": "nosize-ns"}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    admin.delete_all_sandboxes("nosize-ns").await.unwrap();
}

#[test]
fn the_cli_manages_tenants() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let config = tempfile::tempdir().unwrap();
    let sbx = |args: &[&str]| {
        let mut cmd = cli(config.path());
        cmd.env("SBX_SERVER", &daemon.url)
            .env("SBX_API_KEY", daemon.admin_token())
            .args(args);
        cmd
    };
    sbx(&[
        "tenant",
        "create",
        "acme",
        "-n",
        "acme-a",
        "-n",
        "acme-b",
        "--quota",
        "sandboxes=3,memory=1Gi",
        "--default-size",
        "cpu=500m",
    ])
    .assert()
    .success()
    .stdout(predicates::str::contains("Sandboxes:     0 of 3"));
    let out = sbx(&["tenant", "list"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("NAME"), "{text}");
    assert!(text.contains("acme  acme-a,acme-b  0/3"), "{text}");
    let spec = config.path().join("t.yaml");
    std::fs::write(&spec, "spec:\n  namespaces: [acme-a, acme-b, acme-c]\n").unwrap();
    sbx(&[
        "tenant",
        "update",
        "acme",
        "-f",
        spec.to_str().unwrap(),
        "--clear",
        "quotas",
    ])
    .assert()
    .success()
    .stdout(predicates::str::contains("acme-c"))
    .stdout(predicates::str::contains("0 (no quota)"));
    let out = sbx(&["tenant", "get", "acme", "-o", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["status"]["observedGeneration"], 2);
    sbx(&["tenant", "update", "acme"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("nothing to update"));
    sbx(&["tenant", "create", "bad", "--quota", "pods=1", "-n", "x"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("unknown key 'pods'"));
    // Role bindings from a YAML file, and back as YAML.
    let bindings = config.path().join("rb.yaml");
    std::fs::write(
        &bindings,
        "bindings:\n  - {group: ops, role: operator}\n  - {group: devs, role: user, tenant: acme}\ndeny_subjects: [mallory]\n",
    )
    .unwrap();
    sbx(&["role-bindings", "set", "-f", bindings.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicates::str::contains("group    devs   user      acme"))
        .stdout(predicates::str::contains("denied: mallory"));
    let out = sbx(&["role-bindings", "get", "-o", "yaml"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let back: Value = serde_yaml_ng::from_slice(&out).unwrap();
    assert_eq!(back["bindings"][1]["tenant"], "acme");
    std::fs::write(
        &bindings,
        "bindings:\n  - {group: x, role: user, tenant: nope}\n",
    )
    .unwrap();
    sbx(&["role-bindings", "set", "-f", bindings.to_str().unwrap()])
        .assert()
        .failure()
        .stderr(predicates::str::contains("unknown tenant 'nope'"));
    std::fs::write(&bindings, "bindings: []\n").unwrap();
    sbx(&["role-bindings", "set", "-f", bindings.to_str().unwrap()])
        .assert()
        .success();
    sbx(&["tenant", "delete", "acme", "--cascade", "--yes"])
        .assert()
        .success()
        .stdout(predicates::str::contains("tenant 'acme' deleted"));
    sbx(&["tenant", "get", "acme"]).assert().code(4);
}
