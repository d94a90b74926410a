//! Node routes on the local platform (this host is the only node): storage pools, with a real
//! XFS disk pool on a loop file, and dedication of the host to a tenant with real sandboxes.
//! Needs root, xfsprogs and the loopback registry.
mod common;

use std::time::{Duration, Instant};

use common::pools::XfsPool;
use common::sbxd::{self, TestNet};
use common::{Daemon, call, cli, key};
use sbx::shared::models::sandbox::{CreateSandboxRequest, SandboxStatus};
use serde_json::{Value, json};

fn hostname() -> String {
    nix::unistd::gethostname().unwrap().into_string().unwrap()
}

#[tokio::test]
async fn storage_reports_the_xfs_pool_and_the_missing_thin_pool() {
    let pool = XfsPool::new();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sbx.toml");
    std::fs::write(
        &config,
        format!(
            "[nodes]\ndiskPoolPath = \"{}\"\n",
            pool.mount_point.display()
        ),
    )
    .unwrap();
    let daemon = Daemon::start_with(&["--config", config.to_str().unwrap()]);
    let (status, body) = call(
        &daemon,
        &daemon.admin_token(),
        reqwest::Method::GET,
        "/api/v1/nodes/storage",
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let entry = &body["data"][hostname()];
    let disks = &entry["k7d_disks"];
    assert_eq!(
        disks["path"],
        pool.mount_point.display().to_string(),
        "{body}"
    );
    let size = disks["size_bytes"].as_u64().unwrap();
    assert!((250 << 20..=320 << 20).contains(&size), "{disks}");
    assert!(disks["used_bytes"].as_u64().unwrap() + disks["avail_bytes"].as_u64().unwrap() <= size);
    assert!(disks["used_percent"].as_f64().unwrap() < 50.0);
    // No LVM thin pool on this host: an error entry for that field only.
    assert!(
        entry["kata_thinpool"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("thin-pool")),
        "{entry}"
    );

    // Without the pool mounted: an error entry naming the path.
    let daemon = Daemon::start();
    let (_, body) = call(
        &daemon,
        &daemon.admin_token(),
        reqwest::Method::GET,
        "/api/v1/nodes/storage",
        None,
    )
    .await;
    let error = body["data"][hostname()]["k7d_disks"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("/var/lib/k7d/disks"), "{body}");
}

#[tokio::test]
async fn dedicating_the_host_keeps_other_tenants_sandboxes_pending() {
    let net = TestNet::new();
    let daemon = sbxd::daemon(&net, "");
    let admin = daemon.admin();
    let token = daemon.admin_token();
    let node = hostname();
    for (name, ns) in [("own", "own-ns"), ("other", "other-ns")] {
        let (status, body) = call(
            &daemon,
            &token,
            reqwest::Method::POST,
            "/api/v1/tenants",
            Some(json!({"name": name, "spec": {"namespaces": [ns]}})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let dedicate = |node: &str, body: Value| {
        let (daemon, token) = (&daemon, token.clone());
        let path = format!("/api/v1/nodes/{node}/dedicate");
        async move { call(daemon, &token, reqwest::Method::POST, &path, Some(body)).await }
    };
    assert_eq!(dedicate(&node, json!({})).await.0, 400);
    assert_eq!(
        dedicate("no-such-node", json!({"tenant": "own"})).await.0,
        404
    );
    assert_eq!(dedicate(&node, json!({"tenant": "ghost"})).await.0, 404);
    let (status, body) = dedicate(&node, json!({"tenant": "own"})).await;
    assert_eq!(status, 200, "{body}");
    let (_, tenant) = call(
        &daemon,
        &token,
        reqwest::Method::GET,
        "/api/v1/tenants/own",
        None,
    )
    .await;
    assert_eq!(tenant["data"]["spec"]["nodes"], json!([node]));

    let create = |name: &str, ns: &str| CreateSandboxRequest {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        image: Some(sbxd::busybox()),
        ..Default::default()
    };
    admin
        .create_sandbox(&create("mine", "own-ns"))
        .await
        .unwrap();
    admin
        .create_sandbox(&create("theirs", "other-ns"))
        .await
        .unwrap();
    admin
        .create_sandbox(&create("nobodys", "default"))
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let s = admin.get_sandbox("mine", "own-ns").await.unwrap();
        if s.status == SandboxStatus::Running {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (name, ns) in [("theirs", "other-ns"), ("nobodys", "default")] {
        let s = admin.get_sandbox(name, ns).await.unwrap();
        assert_eq!(s.status, SandboxStatus::Pending, "{s:?}");
        assert!(s.error_message.contains("no node to run on"), "{s:?}");
    }

    // Undedicate reverses it: new sandboxes of other tenants run again.
    let (status, body) = call(
        &daemon,
        &token,
        reqwest::Method::POST,
        &format!("/api/v1/nodes/{node}/undedicate"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (_, tenant) = call(
        &daemon,
        &token,
        reqwest::Method::GET,
        "/api/v1/tenants/own",
        None,
    )
    .await;
    assert!(tenant["data"]["spec"].get("nodes").is_none(), "{tenant}");
    assert_eq!(
        call(
            &daemon,
            &token,
            reqwest::Method::POST,
            "/api/v1/nodes/no-such-node/undedicate",
            None
        )
        .await
        .0,
        404
    );
    admin
        .create_sandbox(&create("later", "other-ns"))
        .await
        .unwrap();
    let started = Instant::now();
    loop {
        let s = admin.get_sandbox("later", "other-ns").await.unwrap();
        if s.status == SandboxStatus::Running {
            break;
        }
        assert!(
            s.status == SandboxStatus::Pending && started.elapsed() < Duration::from_secs(60),
            "{s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The CLI, and a user may not dedicate. Dedicating a node another tenant has takes it
    // out of that tenant's spec.nodes (issue 14, defect 5).
    assert_eq!(dedicate(&node, json!({"tenant": "own"})).await.0, 200);
    let config = tempfile::tempdir().unwrap();
    cli(config.path())
        .env("SBX_SERVER", &daemon.url)
        .env("SBX_API_KEY", &token)
        .args(["node", "dedicate", &node, "--tenant", "other"])
        .assert()
        .success()
        .stdout(predicates::str::contains("dedicated to tenant 'other'"));
    for (tenant, nodes) in [("own", Value::Null), ("other", json!([node]))] {
        let (_, body) = call(
            &daemon,
            &token,
            reqwest::Method::GET,
            &format!("/api/v1/tenants/{tenant}"),
            None,
        )
        .await;
        assert_eq!(body["data"]["spec"]["nodes"], nodes, "{tenant}: {body}");
    }
    cli(config.path())
        .env("SBX_SERVER", &daemon.url)
        .env("SBX_API_KEY", &token)
        .args(["node", "storage"])
        .assert()
        .success()
        .stdout(predicates::str::contains("K7D DISKS"));
    cli(config.path())
        .env("SBX_SERVER", &daemon.url)
        .env("SBX_API_KEY", &token)
        .args(["node", "undedicate", &node])
        .assert()
        .success();
    let user = key(&admin, "u", "user", Some("own")).await;
    assert_eq!(dedicate_as(&daemon, &user, &node).await, 403);
    for ns in ["own-ns", "other-ns", "default"] {
        admin.delete_all_sandboxes(ns).await.unwrap();
    }
}

async fn dedicate_as(daemon: &Daemon, token: &str, node: &str) -> u16 {
    call(
        daemon,
        token,
        reqwest::Method::POST,
        &format!("/api/v1/nodes/{node}/dedicate"),
        Some(json!({"tenant": "own"})),
    )
    .await
    .0
}
